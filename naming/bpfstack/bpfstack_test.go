package bpfstack

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"syscall"
	"testing"

	"github.com/djx-bpf/djx-bpf/hotspot/vmcode"
	"github.com/djx-bpf/djx-bpf/hotspot/vmstructs"
	"github.com/djx-bpf/djx-bpf/loader"
	"github.com/djx-bpf/djx-bpf/sources/sample"
)

// fixture is the part of vmcode's fixtures (hotspot/vmcode/testdata, a Hot JVM's
// memory as the symbolizer read it) that these tests use.
type fixture struct {
	Release string
	Base    uint64
	Truth   struct {
		Methods  map[string]uint64
		Interp   uint64
		Adapter  uint64
		ChainPCs map[int64]uint64
		Chain    []string
		Parked   struct {
			Method, BCP uint64
			Line        int
		}
	}
	Segments []struct {
		Addr uint64
		Data []byte
	}
	bias uint64 // the vmcode fixture's libjvm base minus vmstructs'
}

// ReadAt replays the recorded memory. The vmstructs table comes from
// another run of the same libjvm: a read at one of its statics that the
// recording lacks is moved by the difference of their bases.
func (f *fixture) ReadAt(p []byte, off int64) (int, error) {
	if n, err := f.read(p, uint64(off)); err == nil {
		return n, nil
	}
	return f.read(p, uint64(off)+f.bias)
}

func (f *fixture) read(p []byte, a uint64) (int, error) {
	i := sort.Search(len(f.Segments), func(i int) bool {
		return f.Segments[i].Addr+uint64(len(f.Segments[i].Data)) > a
	})
	if i == len(f.Segments) || f.Segments[i].Addr > a {
		return 0, syscall.EFAULT
	}
	s := f.Segments[i]
	n := copy(p, s.Data[a-s.Addr:])
	if n < len(p) {
		return n, syscall.EFAULT
	}
	return n, nil
}

// fixtureCode replays vmcode's fixture of jdk through a vmcode.Symbolizer.
func fixtureCode(t *testing.T, jdk string) (*vmcode.Symbolizer, *fixture) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "hotspot", "vmcode", "testdata", jdk+".json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	var fx fixture
	if err := json.NewDecoder(zr).Decode(&fx); err != nil {
		t.Fatal(err)
	}
	tab, err := vmstructs.ReadFixture(filepath.Join("..", "..", "hotspot", "vmstructs", "testdata", jdk+".json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	if tab.Release != fx.Release {
		t.Fatalf("vmstructs fixture is %s, vmcode's %s", tab.Release, fx.Release)
	}
	fx.bias = fx.Base - tab.Base
	s, err := vmcode.New(tab, &fx)
	if err != nil {
		t.Fatal(err)
	}
	return s, &fx
}

func names(fs []vmcode.Frame) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.String())
	}
	return out
}

var jdks = []string{"jdk17", "jdk25"}

// Target gives the unwinder each JDK's code heaps and CodeBlob offsets:
// code begin a pointer on JDK 17, an int offset on JDK 25.
func TestTarget(t *testing.T) {
	for _, jdk := range jdks {
		code, _ := fixtureCode(t, jdk)
		heaps, l, err := New(code).Target()
		if err != nil {
			t.Fatalf("%s: %v", jdk, err)
		}
		if len(heaps) == 0 || len(heaps) > loader.MaxCodeHeaps {
			t.Errorf("%s: %d heaps", jdk, len(heaps))
		}
		for _, h := range heaps {
			if h.Low == 0 || h.High <= h.Low || h.Segmap == 0 || h.SegmapLen != (h.High-h.Low)>>h.Log2SegmentSize {
				t.Errorf("%s: heap %+v", jdk, h)
			}
		}
		if l.HeapBlockSize == 0 || l.FrameSize == 0 || l.FrameComplete == 0 || l.CodeBegin == 0 || l.CompileID == 0 || l.CodeIsOffset != (jdk == "jdk25") {
			t.Errorf("%s: layout %+v", jdk, l)
		}
	}
}

// A compiled frame at a return address resolves to its inlining chain,
// and a walk that returned into native code is whole.
func TestResolveCompiled(t *testing.T) {
	for _, jdk := range jdks {
		code, fx := fixtureCode(t, jdk)
		r := New(code)
		for id, pc := range fx.Truth.ChainPCs {
			b, err := code.Blob(pc)
			if err != nil {
				t.Fatal(err)
			}
			st := &sample.Stack{End: loader.UnwindEntry, Frames: []sample.RawFrame{
				{Blob: loader.FrameNative, A: 0x7f0000001000},
				{Blob: b.Start | loader.FrameSized, A: pc},
			}}
			p := r.Resolve(st, Sample{IP: 0x7f0000001000})
			if got := names(p.Frames); !slices.Equal(got, fx.Truth.Chain) || p.Missing != "" || p.NativePC != 0x7f0000001000 {
				t.Errorf("%s nmethod %d: %v (missing %q, native %#x), want %v", jdk, id, got, p.Missing, p.NativePC, fx.Truth.Chain)
			}
		}
		if s := r.Stats(); s.Stacks == 0 || s.Complete != s.Stacks || s.Failed != 0 || s.Cached != 0 {
			t.Errorf("%s: stats %+v", jdk, s)
		}
	}
}

// A compiled frame that BPF saw with its nmethod's compile id is named
// from the cache the second time; under another compile id (a blob freed
// and reused) it is read again.
func TestResolveCache(t *testing.T) {
	for _, jdk := range jdks {
		code, fx := fixtureCode(t, jdk)
		r := New(code)
		for id, pc := range fx.Truth.ChainPCs {
			b, err := code.Blob(pc)
			if err != nil {
				t.Fatal(err)
			}
			for i, frameID := range []uint64{uint64(id), uint64(id), uint64(id) + 1} {
				st := &sample.Stack{End: loader.UnwindEntry, Frames: []sample.RawFrame{{Blob: b.Start | loader.FrameSized, A: pc, B: frameID}}}
				before := r.Stats().Cached
				p := r.Resolve(st, Sample{IP: 1})
				if got := names(p.Frames); !slices.Equal(got, fx.Truth.Chain) {
					t.Errorf("%s nmethod %d, query %d: %v, want %v", jdk, id, i, got, fx.Truth.Chain)
				}
				if cached := r.Stats().Cached > before; cached != (i == 1) {
					t.Errorf("%s nmethod %d, query %d (compile id %d): cached %v", jdk, id, i, frameID, cached)
				}
			}
		}
	}
}

// An interpreter frame is named from its Method* and bcp, as jstack
// named it; the top frame's bcp comes from r13 when it is valid.
func TestResolveInterpreted(t *testing.T) {
	for _, jdk := range jdks {
		code, fx := fixtureCode(t, jdk)
		pk := fx.Truth.Parked
		b, err := code.Blob(fx.Truth.Interp)
		if err != nil || b.Kind != vmcode.KindInterpreter {
			t.Fatalf("%s: interpreter blob %+v, %v", jdk, b, err)
		}
		r := New(code)
		for _, c := range []struct {
			name     string
			slot, pc uint64
			r13      uint64
		}{{"slot", pk.BCP, fx.Truth.Interp, 0}, {"r13", 1, fx.Truth.Interp, pk.BCP}, {"stale r13", pk.BCP, fx.Truth.Interp, 8}} {
			st := &sample.Stack{End: loader.UnwindEntry, Frames: []sample.RawFrame{{Blob: b.Start | loader.FrameFP, A: pk.Method, B: c.slot}}}
			p := r.Resolve(st, Sample{IP: c.pc, R13: c.r13})
			if len(p.Frames) != 1 || p.Frames[0].Line != pk.Line || p.Frames[0].Method != pk.Method || p.Missing != "" {
				t.Errorf("%s %s: %v missing %q, want one frame at line %d", jdk, c.name, names(p.Frames), p.Missing, pk.Line)
			}
		}
	}
}

// Stubs give no frames; an unnamed frame or a cut walk ends the path
// with the reason.
func TestResolveStubsAndFailures(t *testing.T) {
	for _, jdk := range jdks {
		code, fx := fixtureCode(t, jdk)
		r := New(code)
		ab, err := code.Blob(fx.Truth.Adapter)
		if err != nil {
			t.Fatal(err)
		}
		var pc uint64
		for _, p := range fx.Truth.ChainPCs {
			pc = p
		}
		nb, _ := code.Blob(pc)
		st := &sample.Stack{End: loader.UnwindDepth, Frames: []sample.RawFrame{
			{Blob: ab.Start | loader.FrameFP, A: 1, B: 2},
			{Blob: nb.Start | loader.FrameSized, A: pc},
		}}
		p := r.Resolve(st, Sample{IP: fx.Truth.Adapter})
		if !slices.Equal(names(p.Frames), fx.Truth.Chain) || p.Missing != endReason(loader.UnwindDepth) || p.Missing == "" {
			t.Errorf("%s: adapter then chain: %v missing %q", jdk, names(p.Frames), p.Missing)
		}
		st = &sample.Stack{End: loader.UnwindEntry, Frames: []sample.RawFrame{
			{Blob: nb.Start | loader.FrameSized, A: pc},
			{Blob: 0x1000 | loader.FrameSized, A: 0x1008},
			{Blob: nb.Start | loader.FrameSized, A: pc},
		}}
		p = r.Resolve(st, Sample{IP: 1})
		if !slices.Equal(names(p.Frames), fx.Truth.Chain) || p.Missing != "unreadable frame" || r.Stats().Failed != 1 {
			t.Errorf("%s: unreadable frame: %v missing %q, stats %+v", jdk, names(p.Frames), p.Missing, r.Stats())
		}
		p = r.Resolve(&sample.Stack{End: loader.UnwindNoJava, Frames: []sample.RawFrame{{Blob: loader.FrameNative, A: 5}}}, Sample{IP: 5})
		if len(p.Frames) != 0 || p.NativePC != 5 || p.Missing != "no Java frames" {
			t.Errorf("%s: native only: %+v", jdk, p)
		}
	}
}
