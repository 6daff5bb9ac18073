package heapwalk

import (
	"cmp"
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
	runSeg      = 1 << 16 // runs are kept in segments while the walk grows them
	pageShift   = 12
	// pageRows rows are kept per heap page once the runs are full.
	pageRows = 4
	// maxPagesPerObject caps the pages one object is entered on.
	maxPagesPerObject = 256
	pagesPerBlock     = 1 << (blockShift - pageShift)
)

// pageRow is one row on a page, with the bytes its objects have there.
type pageRow struct {
	row   uint32
	bytes uint32
}

// pageSet is one page's rows; dropped says a row did not fit, so a
// class found among them may be another row's.
type pageSet struct {
	rows    [pageRows]pageRow
	dropped bool
}

// pages is a table of one T per heap page, its blocks (a MiB of pages)
// allocated as they are first written, at most maxBlocks of them.
type pages[T any] struct {
	lo        uint64
	top       []int32 // per MiB of the heap span: block index + 1
	blocks    [][pagesPerBlock]T
	maxBlocks int
}

func newPages[T any](lo, hi uint64, maxBlocks int) *pages[T] {
	n := (hi - lo + 1<<blockShift - 1) >> blockShift
	return &pages[T]{lo: lo, top: make([]int32, n), maxBlocks: max(1, maxBlocks)}
}

// at returns the entry of the page holding a; nil when a's block is not
// there and (alloc false, or the table is full) cannot be made.
func (p *pages[T]) at(a uint64, alloc bool) *T {
	if p == nil || a < p.lo {
		return nil
	}
	off := a - p.lo
	t := off >> blockShift
	if t >= uint64(len(p.top)) {
		return nil
	}
	bi := p.top[t]
	if bi == 0 {
		if !alloc || len(p.blocks) >= p.maxBlocks {
			return nil
		}
		p.blocks = append(p.blocks, [pagesPerBlock]T{})
		bi = int32(len(p.blocks))
		p.top[t] = bi
	}
	return &p.blocks[bi-1][(off>>pageShift)&(pagesPerBlock-1)]
}

// pageTable holds, for each heap page with small objects that did not
// fit in the runs, the rows with the most bytes on it: an approximate
// lookup of bounded size, exact when the caller knows the object's
// class and no two of the page's rows share it.
type pageTable = pages[pageSet]

func newPageTable(lo, hi uint64, maxPages int) *pageTable {
	return newPages[pageSet](lo, hi, maxPages/pagesPerBlock)
}

// byStart orders runs by address.
func byStart(a, b run) int { return cmp.Compare(a.start, b.start) }

// add enters bytes of row on the page: a row already there grows, a new
// one takes an empty place or the smallest one's if it has more.
func (ps *pageSet) add(row uint32, bytes uint32) {
	pr := &ps.rows
	small := 0
	for i := range pr {
		switch {
		case pr[i].row == row:
			pr[i].bytes = uint32(min(uint64(pr[i].bytes)+uint64(bytes), 1<<32-1))
			return
		case pr[i].row == 0:
			pr[i] = pageRow{row, bytes}
			return
		case pr[i].bytes < pr[small].bytes:
			small = i
		}
	}
	ps.dropped = true
	if bytes > pr[small].bytes {
		pr[small] = pageRow{row, bytes}
	}
}

// record adds a small object to the address lookup: it extends its
// row's latest run when it follows it, else starts a run; past the
// runs' cap it enters its row on its pages instead.
func (w *walker) record(row uint32, a, size uint64) {
	r := &w.rows[row]
	words := size >> 3
	if r.lastRun >= 0 {
		ru := w.run(int(r.lastRun))
		if ru.start+uint64(ru.words)<<3 == a && uint64(ru.words)+words <= maxRunWords {
			ru.words += uint32(words)
			return
		}
	}
	if w.nRuns < w.cfg.MaxRuns {
		if w.nRuns%runSeg == 0 {
			w.runSegs = append(w.runSegs, make([]run, 0, runSeg))
		}
		seg := &w.runSegs[len(w.runSegs)-1]
		*seg = append(*seg, run{a, uint32(words), row})
		r.lastRun = int32(w.nRuns)
		w.nRuns++
		return
	}
	w.stats.LookupApprox++
	end := a + size
	for p, i := a&^(1<<pageShift-1), 0; p < end && i < maxPagesPerObject; p, i = p+1<<pageShift, i+1 {
		pr := w.pages.at(p, true)
		if pr == nil {
			w.stats.LookupLost++
			return
		}
		pr.add(row, uint32(min(end, p+1<<pageShift)-max(a, p)))
	}
}

func (w *walker) run(i int) *run { return &w.runSegs[i/runSeg][i%runSeg] }

// finishRuns gathers the runs, sorts them by address and merges
// neighbours of one row. The sort is a radix sort on the runs' heap
// offsets: millions of runs sort in a few passes over memory, where a
// comparison sort took a third of a walk.
func (w *walker) finishRuns() []run {
	runs := radixRuns(w.runSegs, w.nRuns, w.lo)
	w.runSegs = nil
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

// radixRuns sorts the n runs held in segs by start (each at least lo)
// into a new slice: first by the MiB of heap they start in (a pass that
// writes to as many places as the heap has MiB, which the caches hold),
// then each MiB's runs in place by their word in it (two passes over
// what fits in a cache). The first pass lets each segment go once it is
// copied.
func radixRuns(segs [][]run, n int, lo uint64) []run {
	var top uint64
	for _, s := range segs {
		for _, r := range s {
			top = max(top, r.start-lo)
		}
	}
	blocks := int(top>>blockShift) + 1
	count := make([]int, blocks+1)
	for _, s := range segs {
		for _, r := range s {
			count[(r.start-lo)>>blockShift+1]++
		}
	}
	for i := 1; i <= blocks; i++ {
		count[i] += count[i-1]
	}
	at := slices.Clone(count[:blocks])
	dst := make([]run, n)
	for i, s := range segs {
		for _, r := range s {
			b := (r.start - lo) >> blockShift
			dst[at[b]] = r
			at[b]++
		}
		segs[i] = nil
	}
	// Within a MiB: words 0 to 1<<17, in digits of 9 and 8 bits.
	const lowBits, hiBits = 9, blockShift - 3 - 9
	var scratch []run
	var c0 [1 << lowBits]int32
	var c1 [1 << hiBits]int32
	for b := 0; b < blocks; b++ {
		part := dst[count[b]:count[b+1]]
		if len(part) < 64 {
			slices.SortFunc(part, byStart)
			continue
		}
		if cap(scratch) < len(part) {
			scratch = make([]run, len(part)+len(part)/2)
		}
		tmp := scratch[:len(part)]
		clear(c0[:])
		clear(c1[:])
		for _, r := range part {
			w := (r.start - lo) >> 3
			c0[w&(1<<lowBits-1)]++
			c1[(w>>lowBits)&(1<<hiBits-1)]++
		}
		var s0, s1 int32
		for i, c := range c0 {
			c0[i] = s0
			s0 += c
		}
		for i, c := range c1 {
			c1[i] = s1
			s1 += c
		}
		for _, r := range part {
			d := ((r.start - lo) >> 3) & (1<<lowBits - 1)
			tmp[c0[d]] = r
			c0[d]++
		}
		for _, r := range tmp {
			d := ((r.start - lo) >> (3 + lowBits)) & (1<<hiBits - 1)
			part[c1[d]] = r
			c1[d]++
		}
	}
	return dst
}

// Lookup names the small object (under MinSize) at addr, or holding
// addr: the index of its row in Rows, and whether that is exact. An
// inexact answer is the row with the most bytes on addr's page among
// the objects found after the exact runs were full (Stats.LookupApprox);
// LookupClass does better when the object's class is known. It returns
// -1 when the walk found no small object there.
func (r *Result) Lookup(addr uint64) (row int, exact bool) { return r.LookupClass(addr, 0) }

// LookupClass is Lookup for an object whose Klass* the caller read
// from its header (klass): among the rows on an approximate page, the
// one of that class if only one is, exact if no row was dropped from
// the page.
func (r *Result) LookupClass(addr, klass uint64) (row int, exact bool) {
	i := sort.Search(len(r.runs), func(i int) bool { return r.runs[i].start > addr }) - 1
	if i >= 0 {
		ru := r.runs[i]
		if addr-ru.start < uint64(ru.words)<<3 {
			return int(ru.row) - 1, true
		}
	}
	ps := r.pages.at(addr, false)
	if ps == nil {
		return -1, false
	}
	pr := &ps.rows
	best, match, matches := -1, -1, 0
	for i, p := range pr {
		if p.row == 0 {
			continue
		}
		if best < 0 || p.bytes > pr[best].bytes {
			best = i
		}
		if klass != 0 && r.Rows[p.row-1].Klass == klass {
			match = int(p.row) - 1
			matches++
		}
	}
	switch {
	case matches == 1:
		return match, !ps.dropped
	case best >= 0:
		return int(pr[best].row) - 1, false
	}
	return -1, false
}
