package htmlreport

import (
	"fmt"
	"sort"
	"strings"

	"github.com/djx-bpf/djx-bpf/report"
)

// The page's data: what the JavaScript renders, built from the reports in
// Go so that the page shows the table's wording (sites, header, stats) and
// the script only lays it out. Field names are short where they repeat
// (paths).

type page struct {
	Title string    `json:"title"`
	Views []view    `json:"views"`
	Scan  *scanInfo `json:"scan,omitempty"`
}

// view is one JVM's report, or the merge of several.
type view struct {
	Label   string `json:"label"`
	Header  string `json:"header"`
	Samples uint64 `json:"samples"`
	// Attributed counts the samples in tracked objects: the objects'
	// shares are of it.
	Attributed uint64   `json:"attributed"`
	Objects    []object `json:"objects"`
	// Quiet objects had no samples; More ones had, past Options.Top: their
	// samples stand as one frame in the whole profile's flame graph.
	Quiet         int        `json:"quiet"`
	More          int        `json:"more"`
	MoreSamples   uint64     `json:"more_samples"`
	DataTypes     []dataType `json:"data_types"`
	MoreDataTypes int        `json:"more_data_types"`
	NamedShare    float64    `json:"named_share"`
	Regions       []region   `json:"regions"`
	Stats         []string   `json:"stats"`
	Notes         []string   `json:"notes"`
}

type object struct {
	Rank         int                 `json:"rank"`
	Type         string              `json:"type"`
	Site         string              `json:"site"` // as the table's ALLOCATION SITE
	Origin       string              `json:"origin"`
	Held         bool                `json:"held"`
	Holder       []string            `json:"holder"`     // root first
	AllocPath    []string            `json:"alloc_path"` // innermost first
	OtherRoots   int                 `json:"other_roots"`
	Objects      uint64              `json:"objects"`
	EstObjects   float64             `json:"est_objects"`
	Bytes        uint64              `json:"bytes"`
	BytesText    string              `json:"bytes_text"`
	Retained     uint64              `json:"retained"`
	RetainedText string              `json:"retained_text"`
	Samples      uint64              `json:"samples"`
	EstSamples   float64             `json:"est_samples"`
	Share        float64             `json:"share"`
	Fields       []report.FieldShare `json:"fields"`
	Paths        []path              `json:"paths"`
	AllocSite    string              `json:"alloc_site"` // the innermost allocation frame (JSON's site)
}

// path is one access path, innermost frame first.
type path struct {
	Frames   []string `json:"f"`
	Samples  uint64   `json:"n"`
	DataType string   `json:"t,omitempty"`
}

type dataType struct {
	Type    string  `json:"type"`
	Field   string  `json:"field"` // "[]" array elements, "-" the whole object
	Samples uint64  `json:"samples"`
	Share   float64 `json:"share"` // of in-heap samples
	Paths   []path  `json:"paths"`
}

// region is the remainder's samples of one where: "thread stack",
// "heap (untracked object)", ...
type region struct {
	Where   string  `json:"where"`
	Samples uint64  `json:"samples"`
	Share   float64 `json:"share"` // of all samples
	Paths   []path  `json:"paths"`
}

type scanInfo struct {
	Line    string   `json:"line"`
	Skipped []string `json:"skipped"`
	Stats   []string `json:"stats"`
	Notes   []string `json:"notes"`
}

// newView builds the view of r.
func newView(label string, r *report.Report, opt Options) view {
	v := view{
		Label: label, Header: report.HeaderText(r), Samples: r.Stats.Samples, Attributed: r.Stats.Attributed,
		NamedShare: r.Stats.NamedShare(), Stats: report.StatsLines(r), Notes: r.Notes,
	}
	var shown []*report.Object
	for i := range r.Objects {
		switch o := &r.Objects[i]; {
		case o.Samples == 0:
			v.Quiet++
		case opt.Top > 0 && len(shown) >= opt.Top:
			v.More++
			v.MoreSamples += o.Samples
		default:
			shown = append(shown, o)
		}
	}
	sites := report.SiteTexts(shown, 0)
	v.Objects = make([]object, len(shown))
	for i, o := range shown {
		v.Objects[i] = newObject(i+1, o, sites[i], opt.MaxPaths)
	}
	ds := r.DataTypes
	if opt.Top > 0 && len(ds) > opt.Top {
		ds, v.MoreDataTypes = ds[:opt.Top], len(ds)-opt.Top
	}
	v.DataTypes = make([]dataType, len(ds))
	for i := range ds {
		d := &ds[i]
		v.DataTypes[i] = dataType{Type: d.Type, Field: fieldText(d), Samples: d.Samples, Share: d.Share, Paths: paths(d.Accesses, opt.MaxPaths)}
	}
	v.Regions = regions(r, opt.MaxPaths)
	return v
}

func newObject(rank int, o *report.Object, site string, maxPaths int) object {
	retained := ""
	if o.RetainedBytes > 0 {
		retained = report.Bytes(o.RetainedBytes)
	}
	return object{
		Rank: rank, Type: o.Type, Site: site, Origin: o.Origin, Held: o.Held(), Holder: o.Holder, AllocPath: o.AllocPath,
		OtherRoots: o.OtherRoots, Objects: o.Objects, EstObjects: o.EstObjects, Bytes: o.Bytes, BytesText: report.Bytes(o.Bytes),
		Retained: o.RetainedBytes, RetainedText: retained, Samples: o.Samples, EstSamples: o.EstSamples, Share: o.Share,
		Fields: o.Fields, Paths: paths(o.Accesses, maxPaths), AllocSite: o.Site,
	}
}

// fieldText is the table's FIELD column: the field, "[]" for array
// elements, "-" for a whole object.
func fieldText(d *report.DataType) string {
	switch {
	case d.Field != "":
		return d.Field
	case strings.HasSuffix(d.Type, "]"):
		return "[]"
	}
	return "-"
}

// paths keeps the first max access paths (most sampled first, as Finish
// orders them); the others add up in one path, so that the flame graph's
// totals stay those of the report.
func paths(as []report.Access, max int) []path {
	out := make([]path, 0, min(len(as), max+1))
	var rest uint64
	for i, a := range as {
		if i >= max {
			rest += a.Samples
			continue
		}
		out = append(out, path{Frames: a.Path, Samples: a.Samples, DataType: a.DataType})
	}
	if rest > 0 {
		out = append(out, path{Frames: []string{fmt.Sprintf("[%d more paths]", len(as)-max)}, Samples: rest})
	}
	return out
}

// regions groups the remainder by where, most sampled first, as the
// table's "not in a tracked object" does.
func regions(r *report.Report, maxPaths int) []region {
	var (
		out = []region{} // the script reads [], never null
		acc [][]report.Access
		idx = make(map[string]int)
	)
	for _, a := range r.Remainder { // most sampled first (Finish)
		i, ok := idx[a.Where]
		if !ok {
			i = len(out)
			idx[a.Where] = i
			out = append(out, region{Where: a.Where})
			acc = append(acc, nil)
		}
		out[i].Samples += a.Samples
		acc[i] = append(acc[i], a)
	}
	for i := range out {
		out[i].Paths = paths(acc[i], maxPaths)
		if r.Stats.Samples > 0 {
			out[i].Share = float64(out[i].Samples) / float64(r.Stats.Samples)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Samples > out[j].Samples })
	return out
}
