package report

import (
	"strings"
)

// The texts below are what WriteTable prints, for renderers that lay the
// report out themselves (htmlreport): one wording for every format.

// HeaderText is the line WriteTable starts with (what was profiled, how,
// and what the census and heap walk found), without its newline.
func HeaderText(r *Report) string {
	var b strings.Builder
	writeHeader(&b, r)
	return strings.TrimSuffix(b.String(), "\n")
}

// StatsLines are the statistics lines WriteTable ends with (samples and
// how they were named, allocations, cost, stacks), without the notes.
func StatsLines(r *Report) []string {
	var b strings.Builder
	writeStats(&b, r)
	return strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
}

// SiteTexts is the ALLOCATION SITE column WriteTable shows for objs:
// holder chains cut to depth hops (0: all), rows of one type that would
// print alike told apart, and how many other roots reach a held object.
func SiteTexts(objs []*Object, depth int) []string {
	sites := siteTexts(objs, depth, func(i int) string { return objs[i].Type })
	for i, o := range objs {
		sites[i] += otherRootsText(o)
	}
	return sites
}
