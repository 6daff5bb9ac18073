package objindex

import "sort"

// blocks is a sorted sequence of entries cut into blocks of at most
// maxBlock, with the first start of each block in a flat array: a two-level
// B+-tree. A search is a binary search over the block minima and then over
// one block; an insertion shifts at most one block. radix keeps its
// objects larger than a bucket in one; on its own it was the benchmarked
// alternative to radix (see there for the numbers).
type blocks struct {
	mins []uint64  // mins[i] == blks[i][0].start
	blks [][]entry // non-empty, sorted, ascending across blocks
	n    int
}

const maxBlock = 256

func newBlocks() *blocks { return &blocks{} }

func (t *blocks) len() int { return t.n }

// locate returns the index of the last block whose first start is ≤ addr,
// or -1.
func (t *blocks) locate(addr uint64) int {
	lo, hi := 0, len(t.mins)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if t.mins[m] <= addr {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo - 1
}

func (t *blocks) containing(addr uint64) *entry {
	i := t.locate(addr)
	if i < 0 {
		return nil
	}
	b := t.blks[i]
	if e := &b[floor(b, addr)]; e.contains(addr) {
		return e
	}
	return nil
}

func (t *blocks) find(start uint64) *entry {
	i := t.locate(start)
	if i < 0 {
		return nil
	}
	b := t.blks[i]
	if e := &b[floor(b, start)]; e.start == start {
		return e
	}
	return nil
}

func (t *blocks) insert(e entry) {
	t.n++
	if len(t.blks) == 0 {
		b := make([]entry, 1, maxBlock+1)
		b[0] = e
		t.blks, t.mins = append(t.blks, b), append(t.mins, e.start)
		return
	}
	i := max(t.locate(e.start), 0)
	b := t.blks[i]
	j := floor(b, e.start) + 1
	b = append(b, entry{})
	copy(b[j+1:], b[j:])
	b[j] = e
	t.blks[i], t.mins[i] = b, b[0].start
	if len(b) <= maxBlock {
		return
	}
	// Split in half; the new block gets its own backing array.
	h := len(b) / 2
	nb := make([]entry, len(b)-h, maxBlock+1)
	copy(nb, b[h:])
	clear(b[h:])
	t.blks[i] = b[:h]
	t.blks = append(t.blks, nil)
	copy(t.blks[i+2:], t.blks[i+1:])
	t.blks[i+1] = nb
	t.mins = append(t.mins, 0)
	copy(t.mins[i+2:], t.mins[i+1:])
	t.mins[i+1] = nb[0].start
}

func (t *blocks) remove(start uint64) (entry, bool) {
	i := t.locate(start)
	if i < 0 {
		return entry{}, false
	}
	b := t.blks[i]
	j := floor(b, start)
	if b[j].start != start {
		return entry{}, false
	}
	e := b[j]
	b = append(b[:j], b[j+1:]...)
	t.n--
	t.fix(i, b)
	return e, true
}

// fix stores block i after a deletion: drops it if empty, merges it into its
// successor if both are small, so that blocks stay at least a quarter full.
func (t *blocks) fix(i int, b []entry) {
	if len(b) == 0 {
		t.blks = append(t.blks[:i], t.blks[i+1:]...)
		t.mins = append(t.mins[:i], t.mins[i+1:]...)
		return
	}
	t.blks[i], t.mins[i] = b, b[0].start
	if len(b) < maxBlock/4 && i+1 < len(t.blks) && len(b)+len(t.blks[i+1]) <= maxBlock/2 {
		t.blks[i] = append(b, t.blks[i+1]...)
		t.blks = append(t.blks[:i+1], t.blks[i+2:]...)
		t.mins = append(t.mins[:i+1], t.mins[i+2:]...)
	}
}

func (t *blocks) extract(lo, last uint64, sel func(*entry) bool, out []entry) []entry {
	i := max(t.locate(lo), 0)
	for i < len(t.blks) && t.mins[i] <= last {
		b := t.blks[i]
		j := sort.Search(len(b), func(j int) bool { return b[j].start >= lo })
		keep := b[:j]
		for ; j < len(b); j++ {
			e := &b[j]
			if e.start <= last && (sel == nil || sel(e)) {
				out = append(out, *e)
				t.n--
			} else {
				keep = append(keep, *e)
			}
		}
		clear(b[len(keep):])
		n := len(t.blks)
		t.fix(i, keep)
		if len(t.blks) == n {
			i++
		}
	}
	return out
}

func (t *blocks) each(f func(*entry) bool) {
	for _, b := range t.blks {
		for j := range b {
			if !f(&b[j]) {
				return
			}
		}
	}
}
