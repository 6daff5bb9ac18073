package objindex

import (
	"fmt"
	"math/rand"
	"slices"
	"sort"
	"testing"
)

// ref is the reference model: an unsorted slice searched linearly, with the
// ApplyMoves rules spelled out literally.
type ref struct{ objs []refObj }

type refObj struct {
	start, size uint64
	id          ID
	moved       bool
}

func (o refObj) last() uint64                  { return o.start + o.size - 1 }
func (o refObj) overlaps(lo, last uint64) bool { return o.start <= last && lo <= o.last() }
func (o refObj) object() Object                { return Object{Start: o.start, Size: o.size, ID: o.id} }

// drop removes the objects for which f is true and returns them.
func (r *ref) drop(f func(refObj) bool) []refObj {
	var gone []refObj
	keep := r.objs[:0]
	for _, o := range r.objs {
		if f(o) {
			gone = append(gone, o)
		} else {
			keep = append(keep, o)
		}
	}
	r.objs = keep
	return gone
}

func (r *ref) insert(start, size uint64, id ID) []refObj {
	o := refObj{start: start, size: clampSize(start, size), id: id}
	gone := r.drop(func(p refObj) bool { return p.overlaps(o.start, o.last()) })
	r.objs = append(r.objs, o)
	return gone
}

func (r *ref) remove(start uint64) bool {
	return len(r.drop(func(p refObj) bool { return p.start == start })) > 0
}

func (r *ref) lookup(addr uint64) (Object, bool) {
	for _, o := range r.objs {
		if o.overlaps(addr, addr) {
			return o.object(), true
		}
	}
	return Object{}, false
}

func (r *ref) applyMoves(moves []Move) (MoveStats, []refObj) {
	st := MoveStats{Moves: len(moves)}
	var evicted []refObj
	for _, m := range moves {
		if m.Len == 0 {
			st.Unmatched++
			continue
		}
		slast, dlast := rangeLast(m.Src, m.Len), rangeLast(m.Dst, m.Len)
		moving := r.drop(func(o refObj) bool { return o.start >= m.Src && o.start <= slast })
		if len(moving) == 0 {
			st.Unmatched++
		}
		for i := range moving {
			moving[i].start += m.Dst - m.Src
			moving[i].size = clampSize(moving[i].start, moving[i].size)
			dlast = max(dlast, moving[i].last())
		}
		gone := r.drop(func(o refObj) bool {
			if !o.overlaps(m.Dst, dlast) {
				return false
			}
			if !o.moved {
				return true
			}
			for _, n := range moving {
				if o.overlaps(n.start, n.last()) {
					return true
				}
			}
			return false
		})
		for _, o := range gone {
			if o.moved {
				st.Collisions++
			} else {
				st.Evicted++
			}
		}
		evicted = append(evicted, gone...)
		for _, o := range moving {
			if o.moved {
				st.Chained++
			} else {
				st.Moved++
			}
			o.moved = true
			r.objs = append(r.objs, o)
		}
	}
	for i := range r.objs {
		r.objs[i].moved = false
	}
	return st, evicted
}

func (r *ref) sorted() []Object {
	var out []Object
	for _, o := range r.objs {
		out = append(out, o.object())
	}
	slices.SortFunc(out, func(a, b Object) int { return cmpU64(a.Start, b.Start) })
	return out
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func ids(objs []Object) []ID {
	var out []ID
	for _, o := range objs {
		out = append(out, o.ID)
	}
	slices.Sort(out)
	return out
}

func refIDs(objs []refObj) []ID {
	var out []ID
	for _, o := range objs {
		out = append(out, o.id)
	}
	slices.Sort(out)
	return out
}

// gen draws operations over a region small enough that objects collide
// often, with sizes around the radix bucket size so both bucket and big
// objects, and objects crossing bucket boundaries, occur.
type gen struct {
	rng        *rand.Rand
	base, span uint64
	grow       int // extra weight of inserts, out of 20
}

func (g *gen) addr() uint64 { return g.base + uint64(g.rng.Int63n(int64(g.span))) }

func (g *gen) size() uint64 {
	switch g.rng.Intn(10) {
	case 0:
		return 0
	case 1, 2:
		return uint64(g.rng.Intn(3*bucketSize)) + 1
	case 3:
		return uint64(bucketSize - 8 + g.rng.Intn(16))
	}
	return uint64(16 + g.rng.Intn(4096))
}

// batch builds a GC-like batch from the model's current objects.
func (g *gen) batch(r *ref) []Move {
	objs := r.sorted()
	var moves []Move
	switch k := g.rng.Intn(6); {
	case k == 0 || len(objs) == 0: // random copies
		for range g.rng.Intn(8) {
			moves = append(moves, Move{Src: g.addr(), Dst: g.addr(), Len: g.size()})
		}
	case k == 1: // sliding compaction: runs of adjacent objects slide down
		cur := objs[0].Start - uint64(g.rng.Intn(4096))
		for i := 0; i < len(objs); {
			j := i + 1 + g.rng.Intn(4)
			j = min(j, len(objs))
			src := objs[i].Start
			n := objs[j-1].End() - src
			if g.rng.Intn(4) == 0 { // the run may include the gap after it
				n += uint64(g.rng.Intn(64))
			}
			moves = append(moves, Move{Src: src, Dst: cur, Len: n})
			cur += n
			i = j
		}
	case k == 2: // chains: A→B→C…, with B sometimes holding another object
		o := objs[g.rng.Intn(len(objs))]
		src := o.Start
		for range 1 + g.rng.Intn(4) {
			dst := g.addr()
			if g.rng.Intn(2) == 0 {
				dst = objs[g.rng.Intn(len(objs))].Start
			}
			moves = append(moves, Move{Src: src, Dst: dst, Len: o.Size})
			src = dst
		}
	case k == 3: // a large object copied in chunks
		o := objs[g.rng.Intn(len(objs))]
		dst := g.addr()
		step := max(o.Size/uint64(1+g.rng.Intn(4)), 1)
		for off := uint64(0); off < o.Size; off += step {
			moves = append(moves, Move{Src: o.Start + off, Dst: dst + off, Len: min(step, o.Size-off)})
		}
	default: // evacuation: random objects, alone or in runs, to fresh space
		dst := g.addr()
		for range 1 + g.rng.Intn(8) {
			i := g.rng.Intn(len(objs))
			j := min(i+1+g.rng.Intn(3), len(objs))
			n := objs[j-1].End() - objs[i].Start
			moves = append(moves, Move{Src: objs[i].Start, Dst: dst, Len: n})
			dst += n + uint64(g.rng.Intn(2))*uint64(g.rng.Intn(256))
		}
	}
	return moves
}

func TestAgainstReference(t *testing.T) {
	bases := []uint64{0, 1<<lowBits - 1<<19, 0x7f12_3456_0000, 1 << 56}
	forEachStore(t, func(t *testing.T, newIndex func() *Index) {
		for seed := int64(1); seed <= 40; seed++ {
			base := bases[seed%int64(len(bases))]
			t.Run(fmt.Sprint(seed), func(t *testing.T) {
				checkAgainstReference(t, newIndex(), &gen{rng: rand.New(rand.NewSource(seed)), base: base, span: 1 << 20}, 3000)
			})
		}
	})
}

// TestAgainstReferenceDense grows thousands of objects so that blocks split
// and merge.
func TestAgainstReferenceDense(t *testing.T) {
	forEachStore(t, func(t *testing.T, newIndex func() *Index) {
		for seed := int64(1); seed <= 3; seed++ {
			t.Run(fmt.Sprint(seed), func(t *testing.T) {
				g := &gen{rng: rand.New(rand.NewSource(seed)), base: 0x7f00_0000_0000, span: 256 << 20, grow: 30}
				checkAgainstReference(t, newIndex(), g, 4000)
			})
		}
	})
}

func checkAgainstReference(t *testing.T, x *Index, g *gen, steps int) {
	var r ref
	var evicted []Object
	x.OnEvict(func(o Object) { evicted = append(evicted, o) })
	id := ID(0)
	for step := range steps {
		evicted = evicted[:0]
		var wantGone []refObj
		switch op := g.rng.Intn(20 + g.grow); {
		case op < 9+g.grow || len(r.objs) < 5:
			id++
			start, size := g.addr(), g.size()
			n := x.Insert(start, size, id)
			wantGone = r.insert(start, size, id)
			if n != len(wantGone) {
				t.Fatalf("step %d: Insert(%#x, %d) evicted %d, want %d", step, start, size, n, len(wantGone))
			}
		case op < 13+g.grow:
			start := g.addr()
			if g.rng.Intn(4) > 0 {
				start = r.objs[g.rng.Intn(len(r.objs))].start
			}
			if got, want := x.Remove(start), r.remove(start); got != want {
				t.Fatalf("step %d: Remove(%#x) = %v, want %v", step, start, got, want)
			}
		case op < 19+g.grow:
			for range 20 {
				a := g.addr()
				if o := r.objs[g.rng.Intn(len(r.objs))]; g.rng.Intn(2) == 0 {
					a = o.start + []uint64{0, o.size - 1, o.size, o.size / 2, ^uint64(0)}[g.rng.Intn(5)]
				}
				got, ok := x.Lookup(a)
				want, wantOK := r.lookup(a)
				if got != want || ok != wantOK {
					t.Fatalf("step %d: Lookup(%#x) = %+v, %v; want %+v, %v", step, a, got, ok, want, wantOK)
				}
			}
		default:
			moves := g.batch(&r)
			st := x.ApplyMoves(moves)
			var want MoveStats
			want, wantGone = r.applyMoves(moves)
			if st != want {
				t.Fatalf("step %d: ApplyMoves(%x) = %+v, want %+v", step, moves, st, want)
			}
		}
		if !slices.Equal(ids(evicted), refIDs(wantGone)) {
			t.Fatalf("step %d: evicted %v, want %v", step, ids(evicted), refIDs(wantGone))
		}
		if x.Len() != len(r.objs) {
			t.Fatalf("step %d: Len = %d, want %d", step, x.Len(), len(r.objs))
		}
		if step%50 == 0 || step == steps-1 {
			got, want := slices.Collect(x.All()), r.sorted()
			if !slices.Equal(got, want) {
				t.Fatalf("step %d: contents\n%v\nwant\n%v", step, got, want)
			}
			if !sort.SliceIsSorted(got, func(i, j int) bool { return got[i].Start < got[j].Start }) {
				t.Fatalf("step %d: All not sorted", step)
			}
		}
	}
}
