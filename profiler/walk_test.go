package profiler

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/djx-bpf/djx-bpf/heapwalk"
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
	w := &walker{layout: &heapwalk.Layout{}, mem: m, probes: []probe{
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
