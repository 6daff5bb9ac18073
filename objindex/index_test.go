package objindex

import (
	"math"
	"math/rand"
	"slices"
	"testing"
)

// stores lists the candidate structures; every test runs against each.
var stores = []struct {
	name string
	new  func() store
}{
	{"radix", func() store { return newRadix() }},
	{"blocks", func() store { return newBlocks() }},
}

func forEachStore(t *testing.T, f func(t *testing.T, newIndex func() *Index)) {
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			f(t, func() *Index { return &Index{s: s.new()} })
		})
	}
}

func mustLookup(t *testing.T, x *Index, addr uint64, want Object, wantOK bool) {
	t.Helper()
	got, ok := x.Lookup(addr)
	if ok != wantOK || got != want {
		t.Errorf("Lookup(%#x) = %+v, %v; want %+v, %v", addr, got, ok, want, wantOK)
	}
}

func TestLookupBounds(t *testing.T) {
	forEachStore(t, func(t *testing.T, newIndex func() *Index) {
		x := newIndex()
		mustLookup(t, x, 0, Object{}, false)
		a := Object{Start: 0x1000, Size: 0x400, ID: 1}
		big := Object{Start: 0x7f00_0000_8000, Size: 3 << 30, ID: 2} // spans chunks
		x.Insert(a.Start, a.Size, a.ID)
		x.Insert(big.Start, big.Size, big.ID)
		for _, o := range []Object{a, big} {
			mustLookup(t, x, o.Start-1, Object{}, false)
			mustLookup(t, x, o.Start, o, true)
			mustLookup(t, x, o.Start+o.Size/2, o, true)
			mustLookup(t, x, o.End()-1, o, true)
			mustLookup(t, x, o.End(), Object{}, false)
		}
		if x.Len() != 2 {
			t.Errorf("Len = %d, want 2", x.Len())
		}
	})
}

func TestZeroSizeOwnsStart(t *testing.T) {
	forEachStore(t, func(t *testing.T, newIndex func() *Index) {
		x := newIndex()
		x.Insert(100, 0, 7)
		mustLookup(t, x, 100, Object{Start: 100, Size: 1, ID: 7}, true)
		mustLookup(t, x, 101, Object{}, false)
		if !x.Remove(100) || x.Len() != 0 {
			t.Errorf("Remove(100) failed, Len = %d", x.Len())
		}
	})
}

func TestTopOfAddressSpace(t *testing.T) {
	forEachStore(t, func(t *testing.T, newIndex func() *Index) {
		x := newIndex()
		x.Insert(math.MaxUint64-10, 100, 1) // clamped to the last byte
		o := Object{Start: math.MaxUint64 - 10, Size: 11, ID: 1}
		mustLookup(t, x, math.MaxUint64, o, true)
		mustLookup(t, x, math.MaxUint64-11, Object{}, false)
		x.Insert(0, 16, 2)
		mustLookup(t, x, 0, Object{Start: 0, Size: 16, ID: 2}, true)
		st := x.ApplyMoves([]Move{{Src: math.MaxUint64 - 10, Dst: 1 << 20, Len: math.MaxUint64}})
		if st.Moved != 1 {
			t.Errorf("stats %+v, want 1 moved", st)
		}
		mustLookup(t, x, 1<<20, Object{Start: 1 << 20, Size: 11, ID: 1}, true)
	})
}

func TestInsertEvictsOverlaps(t *testing.T) {
	forEachStore(t, func(t *testing.T, newIndex func() *Index) {
		x := newIndex()
		var gone []ID
		x.OnEvict(func(o Object) { gone = append(gone, o.ID) })
		x.Insert(0, 100, 1)
		x.Insert(100, 100, 2) // adjacent: no overlap
		x.Insert(200, 100, 3)
		x.Insert(300, 100, 4)
		if n := x.Insert(150, 151, 5); n != 3 { // tail of 2 … first byte of 4
			t.Errorf("Insert overlapping = %d evicted, want 3", n)
		}
		slices.Sort(gone)
		if !slices.Equal(gone, []ID{2, 3, 4}) {
			t.Errorf("evicted %v, want [2 3 4]", gone)
		}
		mustLookup(t, x, 99, Object{Start: 0, Size: 100, ID: 1}, true)
		mustLookup(t, x, 149, Object{}, false)
		mustLookup(t, x, 300, Object{Start: 150, Size: 151, ID: 5}, true)
		mustLookup(t, x, 301, Object{}, false)
		if n := x.Insert(150, 10, 6); n != 1 { // same start replaces
			t.Errorf("Insert at same start = %d evicted, want 1", n)
		}
		if x.Len() != 2 {
			t.Errorf("Len = %d, want 2", x.Len())
		}
	})
}

func TestRemove(t *testing.T) {
	forEachStore(t, func(t *testing.T, newIndex func() *Index) {
		x := newIndex()
		x.Insert(1000, 100, 1)
		x.Insert(1<<20, 1<<20, 2) // big
		if x.Remove(1001) || x.Remove(999) || x.Remove(5) {
			t.Error("Remove at a non-start address succeeded")
		}
		if !x.Remove(1000) || x.Remove(1000) {
			t.Error("Remove(1000) twice: want true, false")
		}
		if !x.Remove(1<<20) || x.Len() != 0 {
			t.Errorf("Remove big failed, Len = %d", x.Len())
		}
		mustLookup(t, x, 1<<20+5, Object{}, false)
	})
}

func TestAllInOrder(t *testing.T) {
	forEachStore(t, func(t *testing.T, newIndex func() *Index) {
		x := newIndex()
		want := []Object{
			{0x10, 8, 1}, {0x20000, 1 << 20, 2}, {0x200000, 16, 3},
			{1 << 40, 1 << 17, 4}, {1<<40 + 1<<17, 64, 5}, {1 << 55, 64, 6}, {1<<55 + 64, 1 << 20, 7},
		}
		for _, i := range rand.New(rand.NewSource(1)).Perm(len(want)) {
			x.Insert(want[i].Start, want[i].Size, want[i].ID)
		}
		got := slices.Collect(x.All())
		if !slices.Equal(got, want) {
			t.Errorf("All = %v\nwant  %v", got, want)
		}
		n := 0
		for range x.All() {
			if n++; n == 3 {
				break
			}
		}
	})
}

// moveCase runs one ApplyMoves batch on objects and checks where they end.
type moveCase struct {
	name  string
	objs  []Object
	moves []Move
	want  []Object
	stats MoveStats
}

var moveCases = []moveCase{{
	name:  "single",
	objs:  []Object{{0x1000, 0x100, 1}, {0x5000, 0x100, 2}},
	moves: []Move{{Src: 0x1000, Dst: 0x9000, Len: 0x100}},
	want:  []Object{{0x5000, 0x100, 2}, {0x9000, 0x100, 1}},
	stats: MoveStats{Moves: 1, Moved: 1},
}, {
	name:  "run of adjacent objects",
	objs:  []Object{{0x1000, 0x100, 1}, {0x1100, 0x80, 2}, {0x1200, 0x100, 3}, {0x1300, 0x10, 4}},
	moves: []Move{{Src: 0x1000, Dst: 0x8000, Len: 0x300}},
	want:  []Object{{0x1300, 0x10, 4}, {0x8000, 0x100, 1}, {0x8100, 0x80, 2}, {0x8200, 0x100, 3}},
	stats: MoveStats{Moves: 1, Moved: 3},
}, {
	// A→B then B→C: the object from A follows both copies; the object that
	// was at B is overwritten (dead) before anything moves it.
	name:  "chain",
	objs:  []Object{{0xA000, 0x100, 1}, {0xB000, 0x100, 2}},
	moves: []Move{{Src: 0xA000, Dst: 0xB000, Len: 0x100}, {Src: 0xB000, Dst: 0xC000, Len: 0x100}},
	want:  []Object{{0xC000, 0x100, 1}},
	stats: MoveStats{Moves: 2, Moved: 1, Chained: 1, Evicted: 1},
}, {
	// B→C first, then A→B: each object keeps its own destination.
	name:  "vacate then fill",
	objs:  []Object{{0xA000, 0x100, 1}, {0xB000, 0x100, 2}},
	moves: []Move{{Src: 0xB000, Dst: 0xC000, Len: 0x100}, {Src: 0xA000, Dst: 0xB000, Len: 0x100}},
	want:  []Object{{0xB000, 0x100, 1}, {0xC000, 0x100, 2}},
	stats: MoveStats{Moves: 2, Moved: 2},
}, {
	// Sliding compaction: each run moves down over the old range of the
	// previous one and over its own.
	name: "sliding compaction",
	objs: []Object{{0x1000, 0x100, 1}, {0x1180, 0x100, 2}, {0x1280, 0x80, 3}, {0x1400, 0x200, 4}},
	moves: []Move{
		{Src: 0x1000, Dst: 0x0F00, Len: 0x100},
		{Src: 0x1180, Dst: 0x1000, Len: 0x180},
		{Src: 0x1400, Dst: 0x1180, Len: 0x200},
	},
	want:  []Object{{0x0F00, 0x100, 1}, {0x1000, 0x100, 2}, {0x1100, 0x80, 3}, {0x1180, 0x200, 4}},
	stats: MoveStats{Moves: 3, Moved: 4},
}, {
	name:  "overlapping memmove upwards",
	objs:  []Object{{0x1000, 0x100, 1}, {0x1100, 0x100, 2}},
	moves: []Move{{Src: 0x1000, Dst: 0x1080, Len: 0x200}},
	want:  []Object{{0x1080, 0x100, 1}, {0x1180, 0x100, 2}},
	stats: MoveStats{Moves: 1, Moved: 2},
}, {
	name:  "unmatched copy evicts stale object at destination",
	objs:  []Object{{0x1000, 0x100, 1}, {0x2000, 0x100, 2}},
	moves: []Move{{Src: 0x1010, Dst: 0x1F80, Len: 0x100}, {Src: 0x5000, Dst: 0x6000, Len: 0}},
	want:  []Object{{0x1000, 0x100, 1}},
	stats: MoveStats{Moves: 2, Unmatched: 2, Evicted: 1},
}, {
	// A large array copied in chunks: later chunks match no start and must
	// not erase the object the first chunk moved.
	name: "chunked copy",
	objs: []Object{{0x10000, 0x30000, 1}, {0x40000, 0x100, 2}},
	moves: []Move{
		{Src: 0x10000, Dst: 0x100000, Len: 0x10000},
		{Src: 0x20000, Dst: 0x110000, Len: 0x10000},
		{Src: 0x30000, Dst: 0x120000, Len: 0x10000},
	},
	want:  []Object{{0x40000, 0x100, 2}, {0x100000, 0x30000, 1}},
	stats: MoveStats{Moves: 3, Moved: 1, Unmatched: 2},
}, {
	name:  "moved object evicts stale tail beyond the copy",
	objs:  []Object{{0x1000, 0x1000, 1}, {0x9800, 0x100, 2}},
	moves: []Move{{Src: 0x1000, Dst: 0x9000, Len: 0x10}},
	want:  []Object{{0x9000, 0x1000, 1}},
	stats: MoveStats{Moves: 1, Moved: 1, Evicted: 1},
}, {
	name:  "collision between moved objects",
	objs:  []Object{{0x1000, 0x100, 1}, {0x2000, 0x100, 2}},
	moves: []Move{{Src: 0x1000, Dst: 0x5000, Len: 0x100}, {Src: 0x2000, Dst: 0x5080, Len: 0x100}},
	want:  []Object{{0x5080, 0x100, 2}},
	stats: MoveStats{Moves: 2, Moved: 2, Collisions: 1},
}, {
	name:  "big object across buckets",
	objs:  []Object{{0x7f00_0000_0000, 5 << 20, 1}, {0x7f00_0050_0000, 64, 2}},
	moves: []Move{{Src: 0x7f00_0000_0000, Dst: 0x7f10_0000_0000, Len: 5<<20 + 64}},
	want:  []Object{{0x7f10_0000_0000, 5 << 20, 1}, {0x7f10_0050_0000, 64, 2}},
	stats: MoveStats{Moves: 1, Moved: 2},
}}

func TestApplyMoves(t *testing.T) {
	forEachStore(t, func(t *testing.T, newIndex func() *Index) {
		for _, c := range moveCases {
			t.Run(c.name, func(t *testing.T) {
				x := newIndex()
				for _, o := range c.objs {
					x.Insert(o.Start, o.Size, o.ID)
				}
				if st := x.ApplyMoves(c.moves); st != c.stats {
					t.Errorf("stats = %+v, want %+v", st, c.stats)
				}
				if got := slices.Collect(x.All()); !slices.Equal(got, c.want) {
					t.Errorf("after moves: %v\nwant %v", got, c.want)
				}
				for _, o := range c.want {
					mustLookup(t, x, o.Start, o, true)
					mustLookup(t, x, o.End()-1, o, true)
				}
				// Batch marks are cleared: the next batch evicts normally.
				if len(c.want) > 0 {
					o := c.want[0]
					st := x.ApplyMoves([]Move{{Src: 1, Dst: o.Start, Len: 1}})
					if st.Evicted != 1 {
						t.Errorf("second batch: %+v, want 1 evicted", st)
					}
				}
			})
		}
	})
}

func TestOnMoveReportsFinalPlaces(t *testing.T) {
	x := New()
	x.Insert(0x1000, 0x100, 1)
	x.Insert(0x2000, 0x100, 2)
	x.Insert(0x3000, 0x100, 3)
	got := map[ID]uint64{}
	x.OnMove(func(o Object) { got[o.ID] = o.Start })
	// 1 moves twice (chain), 2 once, 3 stays.
	x.ApplyMoves([]Move{{Src: 0x1000, Dst: 0x5000, Len: 0x100}, {Src: 0x2000, Dst: 0x6000, Len: 0x100}, {Src: 0x5000, Dst: 0x7000, Len: 0x100}})
	if len(got) != 2 || got[1] != 0x7000 || got[2] != 0x6000 {
		t.Fatalf("OnMove reported %v, want 1 at 0x7000 and 2 at 0x6000 once each", got)
	}
}
