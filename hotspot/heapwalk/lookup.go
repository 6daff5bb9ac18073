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
		ru := w.runs.at(r.lastRun)
		if ru.start+uint64(ru.words)<<3 == a && uint64(ru.words)+words <= maxRunWords {
			ru.words += uint32(words)
			return
		}
	}
	if w.runs.n < w.cfg.MaxRuns {
		if h, ok := w.runs.add(run{a, uint32(words), row}); ok {
			r.lastRun = h
			return
		}
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

// runChunk is the runs of one chunk of a runStore.
const runChunk = 256

// runStore keeps the lookup's runs while the walk records them, by the
// MiB of heap each starts in, in chunks of that MiB's own: sorting them
// at the end is then a sort of each MiB's runs in place, and the walk
// never holds a second copy of them all (millions of runs, a fresh
// page of memory for every 256).
type runStore struct {
	lo     uint64
	top    []int32   // per MiB of the heap span: 1 + its index in blocks, 0 none
	blocks [][]int32 // per MiB used: its chunks, indices in chunks
	chunks [][]run
	slab   []run // where the next chunks are cut from
	n      int
}

func newRunStore(lo, hi uint64) *runStore {
	return &runStore{lo: lo, top: make([]int32, (hi-lo+1<<blockShift-1)>>blockShift)}
}

// add keeps r and returns its handle for at; false when r starts
// outside the span.
func (s *runStore) add(r run) (int64, bool) {
	b := (r.start - s.lo) >> blockShift
	if r.start < s.lo || b >= uint64(len(s.top)) {
		return 0, false
	}
	bi := s.top[b]
	if bi == 0 {
		s.blocks = append(s.blocks, nil)
		bi = int32(len(s.blocks))
		s.top[b] = bi
	}
	cs := &s.blocks[bi-1]
	if len(*cs) == 0 || len(s.chunks[(*cs)[len(*cs)-1]]) == runChunk {
		if len(s.slab) == 0 {
			s.slab = make([]run, 16*runChunk)
		}
		s.chunks = append(s.chunks, s.slab[:0:runChunk])
		s.slab = s.slab[runChunk:]
		*cs = append(*cs, int32(len(s.chunks)-1))
	}
	ci := (*cs)[len(*cs)-1]
	s.chunks[ci] = append(s.chunks[ci], r)
	s.n++
	return int64(ci)*runChunk + int64(len(s.chunks[ci])-1), true
}

// at is the run of handle h.
func (s *runStore) at(h int64) *run { return &s.chunks[h/runChunk][h%runChunk] }

// runList is the lookup's runs sorted by address, in segments.
type runList struct {
	segs  [][]run
	first []uint64 // each segment's first start
	n     int
}

// find is the last run starting at or before addr.
func (l *runList) find(addr uint64) (run, bool) {
	i := sort.Search(len(l.first), func(i int) bool { return l.first[i] > addr }) - 1
	if i < 0 {
		return run{}, false
	}
	seg := l.segs[i]
	j := sort.Search(len(seg), func(j int) bool { return seg[j].start > addr }) - 1
	return seg[j], true
}

// finishRuns sorts the runs by address, a MiB of heap at a time in
// place, and merges neighbours of one row, also across MiBs.
func (w *walker) finishRuns() runList {
	s := w.runs
	var l runList
	var part, scratch []run
	var prev *run
	for _, bi := range s.top {
		if bi == 0 {
			continue
		}
		cs := s.blocks[bi-1]
		part = part[:0]
		for _, ci := range cs {
			part = append(part, s.chunks[ci]...)
			s.chunks[ci] = s.chunks[ci][:0]
		}
		scratch = sortBlock(part, scratch, s.lo)
		k := 0 // the chunk of cs written to
		for _, r := range part {
			if prev != nil && prev.row == r.row && prev.start+uint64(prev.words)<<3 == r.start && uint64(prev.words)+uint64(r.words) <= maxRunWords {
				prev.words += r.words
				continue
			}
			c := &s.chunks[cs[k]]
			if len(*c) == runChunk {
				k++
				c = &s.chunks[cs[k]]
			}
			*c = append(*c, r)
			prev = &(*c)[len(*c)-1]
		}
		for _, ci := range cs {
			if c := s.chunks[ci]; len(c) > 0 {
				l.segs = append(l.segs, c)
				l.first = append(l.first, c[0].start)
				l.n += len(c)
			}
		}
	}
	w.runs = nil
	return l
}

// sortBlock sorts the runs of one MiB of heap by start (lo is the heap
// span's, MiB aligned with the blocks), by radix on their word in the
// MiB in digits of 9 and 8 bits (two passes over what fits in a cache),
// through scratch, which it returns grown as needed.
func sortBlock(part, scratch []run, lo uint64) []run {
	if len(part) < 64 {
		slices.SortFunc(part, byStart)
		return scratch
	}
	const lowBits, hiBits = 9, blockShift - 3 - 9
	if cap(scratch) < len(part) {
		scratch = make([]run, len(part)+len(part)/2)
	}
	tmp := scratch[:len(part)]
	var c0 [1 << lowBits]int32
	var c1 [1 << hiBits]int32
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
	return scratch
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
	if ru, ok := r.runs.find(addr); ok && addr-ru.start < uint64(ru.words)<<3 {
		return int(ru.row) - 1, true
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
