package vmcode

import (
	"encoding/binary"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/djx-bpf/djx-bpf/internal/testenv"
)

// queries runs every query of a fixture's truth on s, ignoring answers:
// the hostile tests only ask that each returns.
func queries(s *Symbolizer, tr *truth) {
	for _, e := range tr.Code {
		s.Frames(e.CodeBegin)
		s.Frames((e.CodeBegin + e.CodeEnd) / 2)
		s.PCs(e.CodeBegin)
	}
	for _, pc := range tr.ChainPCs {
		s.Frames(pc)
	}
	for _, m := range tr.Methods {
		s.Method(m)
		s.InterpretedFrame(m, m+64)
	}
	s.Frames(tr.Interp)
	s.Blob(tr.Adapter)
	s.Heaps()
}

// mutated returns the fixture's memory with the bytes at the fuzzer's
// positions overwritten.
func mutated(fx *fixture, edits []byte) *fixture {
	out := &fixture{Segments: make([]segment, len(fx.Segments))}
	total := 0
	for i, s := range fx.Segments {
		out.Segments[i] = segment{s.Addr, slices.Clone(s.Data)}
		total += len(s.Data)
	}
	for i := 0; i+4 <= len(edits); i += 4 {
		pos := int(binary.LittleEndian.Uint16(edits[i:])) * 7 % total
		for j := range out.Segments {
			if d := out.Segments[j].Data; pos < len(d) {
				d[pos] = edits[i+2]
				if edits[i+3]&1 != 0 && pos+1 < len(d) {
					d[pos+1] = edits[i+3]
				}
				break
			} else {
				pos -= len(d)
			}
		}
	}
	return out
}

// FuzzForgedMemory replays the JDK 17 and 25 fixtures with bytes of the
// target's memory forged: headers, segment maps, PcDescs, scopes,
// Symbols. Every query must return, in bounded time, without panicking.
func FuzzForgedMemory(f *testing.F) {
	f.Add([]byte{1, 0, 0xFF, 0xFF}, false)
	f.Add([]byte{0x10, 0x20, 0x7F, 0x01, 0x33, 0x01, 0xC0, 0xC1}, true)
	s17, fx17 := fixtureSymbolizer(f, "jdk17")
	s25, fx25 := fixtureSymbolizer(f, "jdk25")
	f.Fuzz(func(t *testing.T, edits []byte, jdk25 bool) {
		fx, tab := fx17, s17
		if jdk25 {
			fx, tab = fx25, s25
		}
		s := newSymbolizer(tab.l, mutated(fx, edits))
		s.bias = tab.bias
		queries(s, fx.Truth)
	})
}

// TestForgedLoops: a segment map, scope chain and line table built to
// loop or run on end in errors, promptly.
func TestForgedLoops(t *testing.T) {
	s, fx := fixtureSymbolizer(t, "jdk17")
	tr := fx.Truth
	h, err := s.Heaps()
	if err != nil {
		t.Fatal(err)
	}
	// Every segment map byte 1: each hop goes back one segment, to the
	// heap's start, past the hop cap.
	forged := mutated(fx, nil)
	for i := range forged.Segments {
		sg := &forged.Segments[i]
		for _, hp := range h {
			if sg.Addr >= hp.Segmap && sg.Addr < hp.Segmap+hp.SegmapLen {
				for j := range sg.Data {
					sg.Data[j] = 1
				}
			}
		}
	}
	s2, _ := fixtureSymbolizer(t, "jdk17")
	s2.mem = forged
	testenv.Within(t, 5*time.Second, "forged segment map", func() {
		for _, e := range tr.Code {
			if _, err := s2.Blob(e.CodeBegin); err == nil {
				t.Errorf("%#x: a blob through a forged segment map", e.CodeBegin)
			} else if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrNotCode) {
				t.Errorf("%#x: %v", e.CodeBegin, err)
			}
		}
	})
	// A pc outside every code heap.
	if _, err := s.Blob(0x1000); !errors.Is(err, ErrNotCode) {
		t.Errorf("pc 0x1000: %v", err)
	}
	if _, err := s.Method(0x1234); !errors.Is(err, ErrMalformed) {
		t.Errorf("Method* 0x1234: %v", err)
	}
	if _, err := s.InterpretedFrame(tr.Methods["outer"], 0x10000); !errors.Is(err, ErrMalformed) {
		t.Errorf("bcp outside the bytecodes: %v", err)
	}
}

// TestForgedPcDescWidth: a vmStructs table may give PcDesc::_pc_offset a
// 1-byte type at the last byte of a PcDesc, which the layout's check
// allows; the PcDescs are read as int32s, so PCs and Frames must refuse
// the table rather than read past the last entry.
func TestForgedPcDescWidth(t *testing.T) {
	for _, jdk := range []string{"jdk17", "jdk25"} {
		s, fx := fixtureSymbolizer(t, jdk)
		l := *s.l
		l.pcOffset = field{off: l.pcDescSize - 1, width: 1}
		if err := l.check(); err != nil {
			t.Fatalf("%s: the forged layout is refused by check: %v", jdk, err)
		}
		forged := newSymbolizer(&l, fx)
		forged.bias = s.bias
		for _, e := range fx.Truth.Code {
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("%s: PCs(%#x) panicked: %v", jdk, e.CodeBegin, r)
					}
				}()
				if pcs, err := forged.PCs(e.CodeBegin); len(pcs) != 0 {
					t.Errorf("%s: PCs(%#x) = %d pcs (%v) from a table it cannot read", jdk, e.CodeBegin, len(pcs), err)
				}
				forged.Frames((e.CodeBegin + e.CodeEnd) / 2)
			}()
		}
	}
}
