package heapwalk

import (
	"cmp"
	"math"
	"slices"
)

// What else reaches a row. The first root to reach an object names it;
// the walk also keeps the references from other roots' objects to
// objects found before (cross references), so that a row can say how
// many other roots reach it, and how many bytes only its own chain
// holds (retained). Telling a reference from another root from one of
// the same root costs one lookup: each heap page remembers the root
// whose objects were found on it.

// rootPages holds, for each heap page, the root chain (a chain of one
// hop) of the objects found on it: 0 none yet, mixedRoot several.
type rootPages = pages[uint32]

const mixedRoot = math.MaxUint32

// crossRef is a reference from an object of chain from to an object
// found before, at heap offset off (in words).
type crossRef struct{ from, off uint32 }

// extraRef is a root's Others, n, at its object's heap offset off.
type extraRef struct{ n, off uint32 }

// maxOtherRoots caps the other roots a row counts.
const maxOtherRoots = 64

// mark notes that the object at a was found from chain from's root.
func (w *walker) mark(a uint64, from uint32) {
	root := w.chainRoot[from]
	if root == 0 {
		return
	}
	if s := w.rootPg.at(a, true); s != nil && *s != root {
		if *s == 0 {
			*s = root
		} else {
			*s = mixedRoot
		}
	}
}

// seen notes a reference from an object of chain from to the object at
// a, found before: kept when a's page may hold another root's objects.
func (w *walker) seen(a uint64, from uint32) {
	root := w.chainRoot[from]
	if root == 0 {
		return
	}
	if s := w.rootPg.at(a, false); s != nil && *s == root {
		return
	}
	off := (a - w.lo) >> 3
	if off > math.MaxUint32 {
		return
	}
	c := crossRef{from, uint32(off)}
	if n := len(w.cross); n > 0 && w.cross[n-1] == c {
		return
	}
	if len(w.cross) >= w.cfg.MaxCross {
		w.stats.CrossCapped = true
		return
	}
	w.cross = append(w.cross, c)
}

// rootChain is the chain of the root an edge's objects belong to.
func (w *walker) rootChain(e *edge) uint32 {
	if e.chain != 0 {
		return e.chain
	}
	if !e.hasExt {
		e.ext = w.extend(0, e.hop)
		e.hasExt = true
	}
	return e.ext
}

// noteLarge keeps a large object's place, for cross references to it.
func (w *walker) noteLarge(row uint32, a, size uint64) {
	if len(w.large) < w.cfg.MaxRuns {
		w.large = append(w.large, run{a, uint32(min(size>>3, maxRunWords)), row})
	}
}

// rowAt is the index in Rows of the object at a, or -1.
func (w *walker) rowAt(res *Result, a uint64) int {
	i, ok := slices.BinarySearchFunc(w.large, a, func(r run, a uint64) int { return cmp.Compare(r.start, a) })
	if ok {
		return int(w.large[i].row) - 1
	}
	row, _ := res.Lookup(a)
	return row
}

// reach fills the rows' OtherRoots and Retained from the cross
// references.
func (w *walker) reach(res *Result) {
	slices.SortFunc(w.large, byStart)
	n := len(w.chains)
	var edges [][2]uint32 // (from chain, to chain) of different roots
	for _, c := range w.cross {
		row := w.rowAt(res, w.lo+uint64(c.off)<<3)
		if row < 0 {
			continue
		}
		to := uint32(res.Rows[row].Chain)
		if int(to) < n && int(c.from) < n && w.chainRoot[to] != w.chainRoot[c.from] && to != 0 {
			edges = append(edges, [2]uint32{c.from, to})
		}
	}
	w.cross = nil
	slices.SortFunc(edges, func(a, b [2]uint32) int {
		if a[0] != b[0] {
			return int(a[0]) - int(b[0])
		}
		return int(a[1]) - int(b[1])
	})
	edges = slices.Compact(edges)
	res.Stats.CrossEdges = len(edges)
	other := w.otherRoots(edges)
	extra := w.extraRoots(res)
	var retained []uint64
	if !w.stats.CrossCapped {
		retained = w.retained(res, edges)
	}
	perChain := make([]int32, n)
	for _, r := range res.Rows {
		perChain[r.Chain]++
	}
	for i := range res.Rows {
		c := res.Rows[i].Chain
		res.Rows[i].OtherRoots = min(len(other[c])+extra[c], maxOtherRoots)
		if retained != nil && perChain[c] == 1 {
			res.Rows[i].Retained = retained[c]
		}
	}
}

// extraRoots is, for each chain, the roots the caller did not list that
// hold an object of it or of a chain above it (Root.Others).
func (w *walker) extraRoots(res *Result) []int {
	n := len(w.chains)
	out := make([]int, n)
	for _, x := range w.extras {
		if row := w.rowAt(res, w.lo+uint64(x.off)<<3); row >= 0 {
			if c := res.Rows[row].Chain; int(c) < n {
				out[c] = max(out[c], int(x.n))
			}
		}
	}
	w.extras = nil
	for c := 1; c < n; c++ {
		out[c] = min(out[c]+out[w.chains[c].parent], maxOtherRoots)
	}
	return out
}

// otherRoots is, for each chain, the roots other than its own that
// reach it or a chain above it (at most maxOtherRoots).
func (w *walker) otherRoots(edges [][2]uint32) [][]uint32 {
	n := len(w.chains)
	own := make([][]uint32, n)
	for _, e := range edges {
		r := w.chainRoot[e[0]]
		if s := own[e[1]]; len(s) < maxOtherRoots && !slices.Contains(s, r) {
			own[e[1]] = append(s, r)
		}
	}
	// A chain's parent has a lower id: one pass in id order.
	out := make([][]uint32, n)
	for c := 1; c < n; c++ {
		p := out[w.chains[c].parent]
		if len(own[c]) == 0 {
			out[c] = p
			continue
		}
		s := slices.Clone(p)
		for _, r := range own[c] {
			if len(s) < maxOtherRoots && !slices.Contains(s, r) && r != w.chainRoot[c] {
				s = append(s, r)
			}
		}
		out[c] = s
	}
	return out
}
