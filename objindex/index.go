// Package objindex maps addresses to the live Java objects that contain them.
//
// Each profiled JVM has one Index. The loader inserts objects as the agent
// reports sampled allocations, removes them when they are freed, resolves every
// sampled data address with Lookup, and relocates objects with ApplyMoves at
// the end of each GC from the copies (memmove src→dst) observed during it.
//
// Live objects never overlap, so the index answers a lookup with a
// predecessor search: the object with the greatest start ≤ addr contains addr
// or nothing does. An insertion that overlaps existing objects proves them dead
// (their memory was reused), so it removes them first.
//
// The index is a two-level radix table of 64 KiB address buckets holding
// sorted slices (radix.go, which also records the benchmarks that chose it
// over a B+-tree).
//
// An Index is not safe for concurrent use; the caller serializes access.
package objindex

import (
	"iter"
	"math"
	"sort"
)

// ID is the caller's handle for an object, typically an index into its own
// table of allocation sites and types.
type ID uint32

// Object is a live object: the address range [Start, Start+Size) and its ID.
type Object struct {
	Start, Size uint64
	ID          ID
}

// End returns the first address past the object (saturating at 2^64-1).
func (o Object) End() uint64 {
	if e := o.Start + o.Size; e >= o.Start {
		return e
	}
	return math.MaxUint64
}

// Move is one copy of Len bytes from Src to Dst observed during a GC.
type Move struct{ Src, Dst, Len uint64 }

// MoveStats summarizes one ApplyMoves batch.
type MoveStats struct {
	Moves     int // moves in the batch
	Moved     int // distinct objects relocated at least once
	Chained   int // further relocations of objects already moved in this batch
	Unmatched int // moves whose source range held no object start
	// Evicted counts objects that were not moved in this batch and were
	// overwritten by a copy's destination: they were dead, or were moved by a
	// copy that was not observed, so their entry was stale either way.
	Evicted int
	// Collisions counts objects moved in this batch that a later move in the
	// batch overwrote. A GC never overwrites live data, so a nonzero count
	// means lost or misordered copy events.
	Collisions int
}

// entry is one stored object. The size is at least 1 and start+size-1 does
// not overflow, so last() is always the object's final byte. moved marks
// objects relocated by the ApplyMoves batch in progress; it lives in what
// would otherwise be padding.
type entry struct {
	start, size uint64
	id          ID
	moved       bool
}

func (e *entry) last() uint64           { return e.start + e.size - 1 }
func (e *entry) contains(a uint64) bool { return a >= e.start && a-e.start < e.size }
func (e *entry) object() Object         { return Object{Start: e.start, Size: e.size, ID: e.id} }

// clampSize makes size ≥ 1 and keeps start+size-1 from overflowing.
func clampSize(start, size uint64) uint64 {
	if size == 0 {
		return 1
	}
	if start > 0 && size-1 > math.MaxUint64-start {
		return math.MaxUint64 - start + 1
	}
	return size
}

// rangeLast returns the last byte of [start, start+n) for n ≥ 1, saturating.
func rangeLast(start, n uint64) uint64 {
	if n-1 > math.MaxUint64-start {
		return math.MaxUint64
	}
	return start + n - 1
}

// store is the ordered container behind an Index. Implementations hold
// non-overlapping entries keyed by start; pointers they return stay valid only
// until the next mutation.
type store interface {
	len() int
	// containing returns the entry whose range contains addr, or nil.
	containing(addr uint64) *entry
	// find returns the entry starting exactly at start, or nil.
	find(start uint64) *entry
	// insert adds e, which must not overlap any stored entry.
	insert(e entry)
	remove(start uint64) (entry, bool)
	// extract removes the entries with lo ≤ start ≤ last for which sel
	// (nil: all) returns true, appends them to out in start order, and
	// returns out.
	extract(lo, last uint64, sel func(*entry) bool, out []entry) []entry
	// each calls f on the entries in start order until f returns false.
	each(f func(*entry) bool)
}

// Index maps addresses to live objects. The zero value is not usable; call New.
type Index struct {
	s       store
	onEvict func(Object)
	onMove  func(Object)

	// Scratch reused across ApplyMoves batches.
	buf, gone []entry
	starts    []uint64
	// overwritten selects, during ApplyMoves, the objects a copy destroys:
	// those not moved in this batch, and moved ones that an object in buf
	// lands on (buf is sorted by start and its ranges are disjoint). Built
	// once so that each move does not allocate a closure.
	overwritten func(*entry) bool
}

// New returns an empty Index.
func New() *Index { return &Index{s: newRadix()} }

// OnEvict registers f to be called with every object the index drops on its
// own: objects overlapped by an Insert and objects overwritten during
// ApplyMoves (not objects removed by Remove). Pass nil to unregister.
func (x *Index) OnEvict(f func(Object)) { x.onEvict = f }

// OnMove sets a function called, at the end of ApplyMoves, once for every
// object the batch moved, with its final place.
func (x *Index) OnMove(f func(Object)) { x.onMove = f }

// Len returns the number of live objects.
func (x *Index) Len() int { return x.s.len() }

// Insert records a new object [start, start+size) with the given id and
// returns how many existing objects it overlapped: their memory was reused,
// so they are dead and removed (and reported to OnEvict). A zero size is
// treated as 1 so that the object still owns its start address.
func (x *Index) Insert(start, size uint64, id ID) int {
	e := entry{start: start, size: clampSize(start, size), id: id}
	n := 0
	if x.s.len() > 0 {
		x.gone = x.evict(e.start, e.last(), nil, x.gone[:0])
		n = len(x.gone)
		x.report(x.gone)
	}
	x.s.insert(e)
	return n
}

// Remove drops the object starting exactly at start and reports whether there
// was one.
func (x *Index) Remove(start uint64) bool {
	_, ok := x.s.remove(start)
	return ok
}

// Lookup returns the object containing addr.
func (x *Index) Lookup(addr uint64) (Object, bool) {
	if e := x.s.containing(addr); e != nil {
		return e.object(), true
	}
	return Object{}, false
}

// All iterates over the live objects in address order. The index must not be
// modified during the iteration.
func (x *Index) All() iter.Seq[Object] {
	return func(yield func(Object) bool) {
		x.s.each(func(e *entry) bool { return yield(e.object()) })
	}
}

// evict removes the entries overlapping [lo, last] for which sel (nil: all)
// returns true and appends them to out.
func (x *Index) evict(lo, last uint64, sel func(*entry) bool, out []entry) []entry {
	// Only the object containing lo can start before lo and still overlap.
	if e := x.s.containing(lo); e != nil && e.start < lo && (sel == nil || sel(e)) {
		out = append(out, *e)
		x.s.remove(e.start)
	}
	return x.s.extract(lo, last, sel, out)
}

func (x *Index) report(gone []entry) {
	if x.onEvict == nil {
		return
	}
	for i := range gone {
		x.onEvict(gone[i].object())
	}
}

// ApplyMoves relocates objects by the copies one GC made, given in the order
// they happened. Each move relocates, by Dst−Src, every object whose start
// currently lies in [Src, Src+Len) — objects move whole, and one copy may
// carry a run of adjacent objects. Applying the moves in order means an
// object's final position follows its own sequence of copies: after A→B then
// B→C the object from A ends at C, while an object that sat at B and was
// copied away before B was overwritten keeps its own destination.
//
// A copy's destination overwrites memory, so objects not yet moved in this
// batch that overlap the destination range (or the moved objects' new
// ranges) are dropped as Evicted. Objects already moved in this batch are
// live and are only dropped if a moved object lands on them (Collisions);
// this keeps later chunks of a large object copied in pieces from erasing
// the object that the first chunk moved. Overlapping source and destination
// ranges (sliding compaction) work because a move's objects are lifted out
// before its destination is cleared. Objects no move covers stay put.
func (x *Index) ApplyMoves(moves []Move) MoveStats {
	st := MoveStats{Moves: len(moves)}
	x.starts = x.starts[:0]
	for _, m := range moves {
		if m.Len == 0 {
			st.Unmatched++
			continue
		}
		buf := x.s.extract(m.Src, rangeLast(m.Src, m.Len), nil, x.buf[:0])
		x.buf = buf
		dlast := rangeLast(m.Dst, m.Len)
		if len(buf) == 0 {
			st.Unmatched++
			x.gone = x.evict(m.Dst, dlast, notMoved, x.gone[:0])
			st.Evicted += len(x.gone)
			x.report(x.gone)
			continue
		}
		delta := m.Dst - m.Src
		for i := range buf {
			e := &buf[i]
			e.start += delta
			e.size = clampSize(e.start, e.size)
			dlast = max(dlast, e.last())
		}
		// Drop what the copy overwrote: objects not moved in this batch
		// anywhere in the destination, moved ones only where an arriving
		// object lands.
		if x.overwritten == nil {
			x.overwritten = func(o *entry) bool {
				if !o.moved {
					return true
				}
				b := x.buf
				i := sort.Search(len(b), func(i int) bool { return b[i].last() >= o.start })
				return i < len(b) && b[i].start <= o.last()
			}
		}
		x.gone = x.evict(m.Dst, dlast, x.overwritten, x.gone[:0])
		for i := range x.gone {
			if x.gone[i].moved {
				st.Collisions++
			} else {
				st.Evicted++
			}
		}
		x.report(x.gone)
		for _, e := range buf {
			if e.moved {
				st.Chained++
			} else {
				st.Moved++
			}
			e.moved = true
			x.s.insert(e)
			x.starts = append(x.starts, e.start)
		}
	}
	// Every moved object's final start is in starts; clear the batch marks.
	for _, s := range x.starts {
		if e := x.s.find(s); e != nil && e.moved {
			e.moved = false
			if x.onMove != nil {
				x.onMove(e.object())
			}
		}
	}
	return st
}

func notMoved(e *entry) bool { return !e.moved }
