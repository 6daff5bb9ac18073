package walkplan

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/djx-bpf/djx-bpf/hotspot/heapwalk"
)

// pagesMem is a target's memory of 4 KiB pages, readable span by span
// and in vectors; a read stops at the first page it lacks.
type pagesMem struct {
	pages   map[uint64][]byte
	vectors int
}

func (m *pagesMem) ReadAt(p []byte, off int64) (int, error) {
	a := uint64(off)
	pg, ok := m.pages[a&^4095]
	if !ok || int(a&4095)+len(p) > len(pg) {
		return 0, errors.New("unmapped")
	}
	return copy(p, pg[a&4095:]), nil
}

func (m *pagesMem) ReadVector(dst []byte, spans []heapwalk.Span) (int, error) {
	m.vectors++
	done := 0
	for _, s := range spans {
		n, err := m.ReadAt(dst[done:done+s.Len], int64(s.Addr))
		done += n
		if err != nil {
			return done, err
		}
	}
	return done, nil
}

// A check after a GC reads its probes in one vector, and those past an
// unreadable one alone: a probe counts as moved when its klass word is
// another, or it cannot be read.
func TestWalkMoved(t *testing.T) {
	m := &pagesMem{pages: map[uint64][]byte{0x1000: make([]byte, 4096), 0x3000: make([]byte, 4096)}}
	put := func(a, klass uint64) { binary.LittleEndian.PutUint64(m.pages[a&^4095][a&4095+8:], klass) }
	put(0x1000, 0xAA)
	put(0x1010, 0xBB)
	put(0x3000, 0xCC)
	w := &Walker{Layout: &heapwalk.Layout{}, Mem: m, probes: []probe{
		{0x1000, 0xAA}, // still there
		{0x1010, 0xAB}, // another class now
		{0x2000, 0xAA}, // unmapped: gone
		{0x3000, 0xCC}, // still there, read alone after the gap
	}}
	moved, all := w.moved()
	if moved != 2 || all != 4 || m.vectors != 1 {
		t.Errorf("moved %d of %d in %d vectors, want 2 of 4 in 1", moved, all, m.vectors)
	}
}

// A window's cut restarts the join's counters: the counts since the last
// walk carry over it, and more samples attributed than counted in the
// heap since the walk (attributed later) is no sign of unnamed objects.
func TestWalkRebaseAtCut(t *testing.T) {
	stale, heap, attr := uint64(20), uint64(1000), uint64(900)
	counts := func() (uint64, uint64, uint64) { return stale, heap, attr }
	w := &Walker{staleAt: 15, heapAt: 950, attrAt: 890}
	w.Rebase(counts, func() { stale, heap, attr = 0, 0, 0 })
	if ds, dh, da := stale-w.staleAt, heap-w.heapAt, attr-w.attrAt; ds != 5 || dh != 50 || da != 10 {
		t.Fatalf("after the cut: %d stale, %d in heap, %d attributed since the walk, want 5, 50, 10", ds, dh, da)
	}
	stale, heap, attr = 3, 100, 40
	if ds, dh, da := stale-w.staleAt, heap-w.heapAt, attr-w.attrAt; ds != 8 || dh != 150 || da != 50 {
		t.Errorf("later: %d stale, %d in heap, %d attributed since the walk, want 8, 150, 50", ds, dh, da)
	}
	if unnamed(250, 260) || unnamed(250, 240) || !unnamed(250, 100) || unnamed(100, 0) {
		t.Error("unnamed: want true only for 200 or more in-heap samples, over a quarter of them not attributed")
	}
}

// A launched JVM's walk adds no large objects to the object table: the
// agent tracked them from their allocation, by their sites (GcHot's hot
// arrays went to "allocated before attach" when it did); an attached
// JVM's walk adds them, named by their chains.
func TestWalkCensusLaunched(t *testing.T) {
	large := []heapwalk.Object{{Addr: 0x4000_0000, Size: 256 << 10, Class: "long[]"}, {Addr: 0x4010_0000, Size: 1 << 20, Class: "byte[]"}}
	for _, launched := range []bool{false, true} {
		w := New()
		w.Launched = launched // as the session plans a launched JVM's walk (TestPlanLaunchWalk)
		w.paths.res = &heapwalk.Result{}
		got := w.census(7, large)
		if want := map[bool]int{false: 2, true: 0}[launched]; len(got) != want {
			t.Errorf("launched %v: %d census objects, want %d", launched, len(got), want)
		}
		for i, c := range got {
			if c.Addr != large[i].Addr || c.Size != large[i].Size || c.TypeSig != typeSig(large[i].Class) || c.Time != 7 {
				t.Errorf("census object %d is %+v, want %+v", i, c, large[i])
			}
		}
	}
}
