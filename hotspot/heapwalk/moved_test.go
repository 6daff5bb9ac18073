package heapwalk

import (
	"strings"
	"testing"
)

// youngGC is a target in which a young collection runs just before the
// walk reads a span from trigger: it copies the table elsewhere,
// rewrites the reference to it, and a new array of the same class takes
// its old place, holding the database's rows (as a JVM allocating in
// the space a collection emptied does).
type youngGC struct {
	*fakeMem
	ran     bool
	trigger uint64
	gc      func()
}

func (m *youngGC) ReadVector(dst []byte, spans []Span) (int, error) {
	for _, s := range spans {
		if !m.ran && s.Addr == m.trigger {
			m.ran = true
			m.gc()
		}
	}
	return m.fakeMem.ReadVector(dst, spans)
}

// movedScene is a heap, its layout, and where the test moves things.
type movedScene struct {
	s *synth
	l *Layout
	// The table, its referrer the bag and the slot there, the second
	// item, and the class Pool whose statics hold the bag and the item.
	table, bag, slot, second, pool uint64
	// move is a young collection that moves the table.
	move func()
}

// newMovedScene: Pool's two statics hold a bag, whose table holds the
// pool's items, and a second item; DB's static holds the rows three
// objects deep, so that a table read at its old address would reach
// them first.
func newMovedScene(t *testing.T) *movedScene {
	s := newSynth(t, "jdk17", true, true)
	_, itemSize := s.fields(0)
	item := s.class("app/Item", 0, itemSize+8, nil, 0)
	row := s.class("app/Row", 0, itemSize+8, nil, 0)
	objs := s.arrayClass("[Ljava/lang/Object;", true, 2)
	bf, size := s.fields(1)
	bag := s.class("app/Bag", 0, size, bf, 0)
	hf, hsize := s.fields(1)
	holder := s.class("app/Holder", 0, hsize, hf, 0)
	pool := s.class("app/Pool", 0, 16, nil, 2)
	db := s.class("app/DB", 0, 16, nil, 1)

	b := s.obj(bag)
	table := s.array(objs, 8)
	for i := range 8 {
		s.elem(table, i, s.obj(item))
	}
	s.ref(b, bf[0], table)
	s.setStatic(pool, 0, b)
	second := s.obj(item)
	s.setStatic(pool, 1, second)

	rows := s.array(objs, 16)
	for i := range 16 {
		s.elem(rows, i, s.obj(row))
	}
	h1, h2 := s.obj(holder), s.obj(holder)
	s.ref(h1, hf[0], h2)
	s.ref(h2, hf[0], rows)
	s.setStatic(db, 0, h1)
	l := s.finish()
	slot := b + uint64(bf[0])
	move := func() {
		n := s.arrays[objs].hdr + 8*4
		buf := make([]byte, n)
		s.m.read(buf, table)
		moved := s.heapTop
		s.heapTop += (n + 7) &^ 7
		s.m.write(moved, buf)
		s.slot(slot, moved)
		// The new array in the table's place holds the rows.
		s.m.write(table, make([]byte, n))
		s.put64(table, 1)
		s.setKlass(table, objs)
		s.m.put32(table+s.hdr, 8)
		for i := range 8 {
			v := s.m.get32(rows + s.arrays[objs].hdr + uint64(i)*4)
			s.m.put32(table+s.arrays[objs].hdr+uint64(i)*4, v)
		}
		s.m.put32(s.gcCount, s.m.get32(s.gcCount)+1)
	}
	return &movedScene{s: s, l: l, table: table, bag: b, slot: slot, second: second, pool: pool, move: move}
}

// TestWalkDropsMovedAfterGC: an object found before a young collection
// that moved it is not read at its old address, where another object
// now is; the rows stay named by their own holder. The collection runs
// as the walk reads the table (its batch is read again after it), and
// as it reads an object of the batch after the bag's (the table waits
// in the queue).
func TestWalkDropsMovedAfterGC(t *testing.T) {
	for _, at := range []string{"the table's read", "the next batch's read"} {
		t.Run(at, func(t *testing.T) {
			sc := newMovedScene(t)
			trigger := sc.table
			if at == "the next batch's read" {
				trigger = sc.second
			}
			m := &youngGC{fakeMem: sc.s.m, trigger: trigger, gc: sc.move}
			res, err := Walk(t.Context(), sc.l, m, Config{Batch: 1, MaxCopy: 1})
			if err != nil {
				t.Fatal(err)
			}
			if !m.ran {
				t.Fatal("the collection did not run")
			}
			var rows uint64
			for _, r := range res.Rows {
				if r.Class != "app.Row" {
					continue
				}
				chain := res.ChainString(r.Chain)
				rows += r.Count
				if !strings.HasPrefix(chain, "app.DB") {
					t.Errorf("%d rows named by %q, want by DB's static", r.Count, chain)
				}
			}
			if rows != 16 || res.Stats.Stale == 0 {
				t.Errorf("%d rows found, %d stale objects: want 16 rows, and the moved table counted", rows, res.Stats.Stale)
			}
		})
	}
}

// TestWalkFullGCKeepsUnmoved: a full collection compacts the heap, and
// moves the slots the walk read its references from with their objects:
// after it, a slot's old address holds another object's bytes and says
// nothing of whether the object it held moved. The collection runs while
// the bag's table waits in the queue, and slides the bag (and its slot)
// away, another object's bytes taking its place, and leaves the table
// where it is (as Parallel's compaction leaves its dense prefix). The
// table is visited there, and its items stay named by the pool: with the
// slot checked, the table was dropped and its items lost, or named by a
// local that holds the table too, walked after the statics.
func TestWalkFullGCKeepsUnmoved(t *testing.T) {
	for _, full := range []bool{true, false} {
		name := "full"
		if !full {
			name = "young"
		}
		t.Run(name, func(t *testing.T) {
			sc := newMovedScene(t)
			s := sc.s
			m := &youngGC{fakeMem: s.m, trigger: sc.second}
			m.gc = func() {
				size := s.sizes[s.klassOf(sc.bag)]
				buf := make([]byte, size)
				s.m.read(buf, sc.bag)
				moved := s.heapTop
				s.heapTop += (size + 7) &^ 7
				s.m.write(moved, buf)
				s.setStatic(sc.pool, 0, moved)
				s.m.write(sc.bag, make([]byte, size))
				s.slot(sc.slot, sc.second)
				s.m.put32(s.gcCount, s.m.get32(s.gcCount)+1)
				if full {
					s.m.put32(s.gcFull, s.m.get32(s.gcFull)+1)
				}
			}
			roots := []Root{{Addr: sc.table, Hop: "app.Main.main:local", Rank: 2}}
			res, err := Walk(t.Context(), sc.l, m, Config{Batch: 1, MaxCopy: 1, Roots: roots})
			if err != nil {
				t.Fatal(err)
			}
			if !m.ran {
				t.Fatal("the collection did not run")
			}
			if !res.GC.Overlapped || res.GC.Full != full {
				t.Errorf("GC check %+v: want it overlapped, full %v", res.GC, full)
			}
			var items uint64
			for _, r := range res.Rows {
				if r.Class == "app.Item" && strings.HasPrefix(res.ChainString(r.Chain), "app.Pool") && strings.Contains(res.ChainString(r.Chain), "[]") {
					items += r.Count
				}
			}
			if full && (items != 8 || res.Stats.Stale != 0) {
				dumpRows(t, res)
				t.Errorf("%d items named by the pool's table, %d stale objects: want 8, and none dropped", items, res.Stats.Stale)
			}
			// A young collection moves no object whose slot moved but
			// a young one, that moved too: the table is dropped.
			if !full && (items != 0 || res.Stats.Stale == 0) {
				dumpRows(t, res)
				t.Errorf("%d items named by the pool's table, %d stale objects: want the table dropped", items, res.Stats.Stale)
			}
		})
	}
}
