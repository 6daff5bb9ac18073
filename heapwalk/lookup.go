package heapwalk

import (
	"slices"
	"sort"
)

// run is a range of consecutive small objects of one row.
type run struct {
	start uint64 // address
	words uint32 // length in 8-byte words
	row   uint32
}

const (
	maxRunWords = 1<<32 - 1
	pageShift   = 12
	// maxPagesPerObject caps the pages one object votes for.
	maxPagesPerObject = 256
)

// vote is a page's running majority (Boyer-Moore) of the rows of the
// small objects on it that the runs had no room for.
type vote struct {
	row   uint32
	votes int32
}

// record adds a small object to the address lookup: it extends its
// row's latest run when it follows it, else starts a run; past the
// runs' cap its page votes for its row instead.
func (w *walker) record(row uint32, a, size uint64) {
	r := &w.rows[row]
	words := size >> 3
	if r.lastRun >= 0 {
		ru := &w.runs[r.lastRun]
		if ru.start+uint64(ru.words)<<3 == a && uint64(ru.words)+words <= maxRunWords {
			ru.words += uint32(words)
			return
		}
	}
	if len(w.runs) < w.cfg.MaxRuns {
		r.lastRun = int32(len(w.runs))
		w.runs = append(w.runs, run{a, uint32(words), row})
		return
	}
	w.stats.LookupApprox++
	for p, i := a>>pageShift, 0; p <= (a+size-1)>>pageShift && i < maxPagesPerObject; p, i = p+1, i+1 {
		v, ok := w.pages[p]
		if !ok && len(w.pages) >= w.cfg.MaxPages {
			if i == 0 {
				w.stats.LookupLost++
			}
			return
		}
		switch {
		case v.votes == 0:
			v = vote{row, 1}
		case v.row == row:
			v.votes++
		default:
			v.votes--
		}
		w.pages[p] = v
	}
}

// finishRuns sorts the runs by address and merges neighbours of one row.
func finishRuns(runs []run) []run {
	slices.SortFunc(runs, func(a, b run) int {
		switch {
		case a.start < b.start:
			return -1
		case a.start > b.start:
			return 1
		}
		return 0
	})
	out := runs[:0]
	for _, r := range runs {
		if n := len(out); n > 0 {
			p := &out[n-1]
			if p.row == r.row && p.start+uint64(p.words)<<3 == r.start && uint64(p.words)+uint64(r.words) <= maxRunWords {
				p.words += r.words
				continue
			}
		}
		out = append(out, r)
	}
	return slices.Clip(out)
}

// Lookup names the small object (under MinSize) at addr, or inside it:
// the index of its row in Rows, and whether that is exact. An inexact
// answer comes from the majority row of addr's page, for objects found
// after the lookup's runs were full (Stats.LookupApprox). It returns -1
// when the walk found no small object there.
func (r *Result) Lookup(addr uint64) (row int, exact bool) {
	i := sort.Search(len(r.runs), func(i int) bool { return r.runs[i].start > addr }) - 1
	if i >= 0 {
		ru := r.runs[i]
		if addr-ru.start < uint64(ru.words)<<3 {
			return int(ru.row) - 1, true
		}
	}
	if v, ok := r.pages[addr>>pageShift]; ok && v.votes > 0 {
		return int(v.row) - 1, false
	}
	return -1, false
}
