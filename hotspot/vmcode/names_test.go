package vmcode

import (
	"encoding/binary"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/djx-bpf/djx-bpf/jvmsym"
)

// symbolAt is a Symbol of body at addr, laid out as l says.
func symbolAt(l *layout, addr uint64, body string) segment {
	d := make([]byte, l.vm.Symbol.Body+uint64(len(body)))
	binary.LittleEndian.PutUint16(d[l.vm.Symbol.Length:], uint16(len(body)))
	copy(d[l.vm.Symbol.Body:], body)
	return segment{addr, d}
}

// A 60,000-byte method name (javac takes them) is read and kept only to
// jvmsym.MaxName bytes, marked as cut: root kept and joined 60 KiB of it
// for every frame of every sample.
func TestLongSymbolCut(t *testing.T) {
	fs, _ := fixtureSymbolizer(t, "jdk17")
	const addr = 0x7f0000001000
	long := "é" + strings.Repeat("a", 60000)
	short := "get"
	mem := &fixture{Segments: []segment{symbolAt(fs.l, addr, long), symbolAt(fs.l, addr+0x10000, short)}}
	s := newSymbolizer(fs.l, mem)
	r := newReader(s.mem)
	got, err := s.symbol(r, addr, "name")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) > jvmsym.MaxName || !strings.HasSuffix(got, jvmsym.NameCut) || !strings.HasPrefix(got, "éaaa") || !utf8.ValidString(got) {
		t.Errorf("a 60,000-byte name kept as %d bytes, %q…", len(got), got[:min(len(got), 16)])
	}
	if r.bytes > 2*jvmsym.MaxName {
		t.Errorf("read %d bytes of a 60,000-byte name", r.bytes)
	}
	if s.stats.NamesCut != 1 {
		t.Errorf("NamesCut = %d", s.stats.NamesCut)
	}
	if got, err := s.symbol(r, addr+0x10000, "name"); err != nil || got != short {
		t.Errorf("a short name: %q, %v", got, err)
	}
}

// The blob cache counts what grows inside its entries and stays within its
// budget: frames cached in an nmethod keep their names alive.
func TestLRUGrowEvicts(t *testing.T) {
	c := newLRU[int](1000, func(n int) int { return n })
	for k := range 5 {
		c.put(k, 100)
	}
	c.grow(4, 800)
	if c.used > 1000 {
		t.Errorf("%d bytes held, budget 1000", c.used)
	}
	if _, ok := c.get(4); !ok {
		t.Error("the entry that grew was dropped")
	}
	if c.len() != 2 {
		t.Errorf("%d entries left, want 2", c.len())
	}
}
