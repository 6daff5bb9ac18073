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

// movedScene: Pool's two statics hold a bag, whose table holds the
// pool's items, and a second item; DB's static holds the rows three
// objects deep, so that a table read at its old address would reach
// them first. It returns the scene, the table, its referrer's slot and
// the second item.
func movedScene(t *testing.T) (s *synth, l *Layout, table, slot, second uint64, move func()) {
	s = newSynth(t, "jdk17", true, true)
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
	table = s.array(objs, 8)
	for i := range 8 {
		s.elem(table, i, s.obj(item))
	}
	s.ref(b, bf[0], table)
	s.setStatic(pool, 0, b)
	second = s.obj(item)
	s.setStatic(pool, 1, second)

	rows := s.array(objs, 16)
	for i := range 16 {
		s.elem(rows, i, s.obj(row))
	}
	h1, h2 := s.obj(holder), s.obj(holder)
	s.ref(h1, hf[0], h2)
	s.ref(h2, hf[0], rows)
	s.setStatic(db, 0, h1)
	l = s.finish()
	slot = b + uint64(bf[0])
	move = func() {
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
	return s, l, table, slot, second, move
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
			s, l, table, _, second, move := movedScene(t)
			trigger := table
			if at == "the next batch's read" {
				trigger = second
			}
			m := &youngGC{fakeMem: s.m, trigger: trigger, gc: move}
			res, err := Walk(t.Context(), l, m, Config{Batch: 1, MaxCopy: 1})
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
