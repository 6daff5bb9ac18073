package walkplan

import "github.com/djx-bpf/djx-bpf/join"

// Counts are the join's counters a walk's checks start from: the samples
// that met a walk's moved objects (stale), and the in-heap samples and
// those attributed.
type Counts func() (stale, heap, attr uint64)

// CountsOf are j's counters.
func CountsOf(j *join.JVM) Counts {
	return func() (uint64, uint64, uint64) {
		heap, attr := j.HeapSamples()
		return j.StructureStale(), heap, attr
	}
}

// Mark notes the counts when the join took a walk's result: the checks
// count from there.
func (w *Walker) Mark(c Counts) {
	w.staleAt, w.heapAt, w.attrAt = c()
}

// Stale says the samples since the last walk call for another: many met
// objects a GC moved, by their headers (the surest sign), or many met
// objects it did not find (Unnamed).
func (w *Walker) Stale(c Counts) bool {
	stale, heap, attr := c()
	return stale-w.staleAt >= staleSamples || unnamed(heap-w.heapAt, attr-w.attrAt)
}

// Unnamed says many of the in-heap samples since the last walk met
// objects it did not find: a program that keeps building its data (a
// copy-on-write B-tree's new pages, a growing map), which another walk
// names once they are reachable.
func (w *Walker) Unnamed(c Counts) bool {
	_, heap, attr := c()
	// A sample is counted in the heap when it comes and attributed when
	// the join charges it, later: more may have been attributed than
	// counted since the walk, which is no sign of unnamed objects.
	return unnamed(heap-w.heapAt, attr-w.attrAt)
}

// unnamed says whether many of dh in-heap samples, da of them (or more)
// attributed, met objects no walk found.
func unnamed(dh, da uint64) bool {
	return dh >= unnamedMin && da < dh && (dh-da)*unnamedShare > dh
}

// A walk again when one in unnamedShare of at least unnamedMin in-heap
// samples since the last walk met objects it did not find.
const (
	unnamedMin   = 200
	unnamedShare = 4
)

// Rebase keeps the counts since the last walk across a window's cut,
// reset, which restarts the join's counters (c) from 0: without it, the
// counts since the walk wrap around and a cut starts another walk.
func (w *Walker) Rebase(c Counts, reset func()) {
	stale, heap, attr := c()
	reset()
	s, h, a := c()
	// Unsigned arithmetic: now - at stays the count since the walk.
	w.staleAt -= stale - s
	w.heapAt -= heap - h
	w.attrAt -= attr - a
}
