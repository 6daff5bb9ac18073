package bpfstack

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/djx-bpf/djx-bpf/hotspot/vmcode"
	"github.com/djx-bpf/djx-bpf/loader"
	"github.com/djx-bpf/djx-bpf/safety/procfs"
	"github.com/djx-bpf/djx-bpf/sources/sample"
)

// The code map answers from each JDK's fixture what the agent's JIT code
// records answered: a return address in an nmethod is its inlining
// chain, named; the interpreter and an adapter are stubs by their blob's
// name; a pc outside the code heaps is no code, and costs no read.
func TestCodeMapFixture(t *testing.T) {
	for _, jdk := range jdks {
		code, fx := fixtureCode(t, jdk)
		m := New(code).CodeMap()
		for id, pc := range fx.Truth.ChainPCs {
			b, err := code.Blob(pc)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 2 {
				hit, ok := m.Lookup(pc)
				if !ok || !slices.Equal(hit.Named, fx.Truth.Chain) || hit.Stub != "" || hit.Frames != nil || hit.Method != b.Method {
					t.Errorf("%s nmethod %d, lookup %d: %+v %v, want %v", jdk, id, i, hit, ok, fx.Truth.Chain)
				}
				if hit.Start != b.CodeBegin || hit.Start+hit.Size != b.CodeEnd || pc < hit.Start || pc-hit.Start >= hit.Size {
					t.Errorf("%s nmethod %d: code %#x+%d, blob %+v", jdk, id, hit.Start, hit.Size, b)
				}
			}
		}
		if st := m.Stats(); st.Cached != uint64(len(fx.Truth.ChainPCs)) || st.Errors != 0 || st.Misses != 0 {
			t.Errorf("%s: stats %+v", jdk, st)
		}
		for what, pc := range map[string]uint64{"interpreter": fx.Truth.Interp, "adapter": fx.Truth.Adapter} {
			b, err := code.Blob(pc)
			if err != nil {
				t.Fatal(err)
			}
			hit, ok := m.Lookup(pc)
			if !ok || hit.Stub != b.Name || hit.Stub == "" || hit.Named != nil || !m.Contains(pc) {
				t.Errorf("%s %s: %+v %v, want stub %q", jdk, what, hit, ok, b.Name)
			}
		}
		if hit, ok := m.Lookup(fx.Truth.Interp); !ok || hit.Stub != "Interpreter" {
			t.Errorf("%s: interpreter named %q", jdk, hit.Stub)
		}
		reads := code.Stats().Reads
		for _, pc := range []uint64{0, 0x1000, fx.Base, ^uint64(0)} {
			if _, ok := m.Lookup(pc); ok || m.Contains(pc) {
				t.Errorf("%s: %#x is code", jdk, pc)
			}
		}
		if n := code.Stats().Reads - reads; n != 0 {
			t.Errorf("%s: %d reads for pcs outside the code cache", jdk, n)
		}
	}
}

// fakeBlobs is a code cache of one heap (0x10000-0x20000) whose blobs the
// test sets: a lookup returns the blob and frames at its pc, or err.
type fakeBlobs struct {
	blob     vmcode.Blob
	frames   []vmcode.Frame
	err      error
	heapsErr error
	calls    int
	heapsAsk int
}

func (f *fakeBlobs) Frames(pc uint64) ([]vmcode.Frame, vmcode.Blob, error) {
	f.calls++
	if f.err != nil {
		return nil, f.blob, f.err
	}
	if pc < f.blob.Start || pc >= f.blob.End {
		return nil, vmcode.Blob{}, fmt.Errorf("%w: %#x", vmcode.ErrNotCode, pc)
	}
	return f.frames, f.blob, nil
}
func (f *fakeBlobs) Blob(pc uint64) (vmcode.Blob, error) {
	_, b, err := f.Frames(pc)
	return b, err
}
func (f *fakeBlobs) InterpretedFrame(method, bcp uint64) (vmcode.Frame, error) {
	return vmcode.Frame{}, errors.New("no")
}
func (f *fakeBlobs) Heaps() ([]vmcode.Heap, error) {
	f.heapsAsk++
	if f.heapsErr != nil {
		return nil, f.heapsErr
	}
	return []vmcode.Heap{{Start: 0x10000, End: 0x20000, Low: 0x10000, High: 0x18000}}, nil
}
func (f *fakeBlobs) Offsets() vmcode.Offsets { return vmcode.Offsets{} }

// A blob freed and reused holds another compile id: the cache never
// names the new code by the old one's frames, even at the same pc.
func TestCodeMapReusedBlob(t *testing.T) {
	f := &fakeBlobs{
		blob:   vmcode.Blob{Start: 0x10000, End: 0x10400, CodeBegin: 0x10100, CodeEnd: 0x10300, Kind: vmcode.KindNMethod, Method: 0x800, CompileID: 7},
		frames: []vmcode.Frame{{Class: "A", Name: "old", Line: 3}},
	}
	m := NewCodeMap(f)
	if hit, ok := m.Lookup(0x10110); !ok || !slices.Equal(hit.Named, []string{"A.old:3"}) {
		t.Fatalf("old code: %+v %v", hit, ok)
	}
	f.blob.CompileID, f.blob.Method = 8, 0x900
	f.frames = []vmcode.Frame{{Class: "B", Name: "new", Line: 9}, {Class: "B", Name: "caller", Line: 1}}
	if hit, ok := m.Lookup(0x10110); !ok || !slices.Equal(hit.Named, []string{"B.new:9", "B.caller:1"}) || hit.Method != 0x900 {
		t.Errorf("reused blob named %+v %v, want the new code's frames", hit, ok)
	}
	if m.Stats().Cached != 0 {
		t.Errorf("stats %+v: a reused blob came from the cache", m.Stats())
	}
	// The same code again: from the cache (the header is still read).
	calls := f.calls
	if _, ok := m.Lookup(0x10110); !ok || m.Stats().Cached != 1 || f.calls != calls+1 {
		t.Errorf("stats %+v, %d reads: want one header read and a cached hit", m.Stats(), f.calls-calls)
	}
	// A pc in the blob's header: the whole blob, the root method.
	if hit, ok := m.Lookup(0x10008); !ok || hit.Start != 0x10000 || hit.Size != 0x400 {
		t.Errorf("pc in the header: %+v %v", hit, ok)
	}
}

// Hostile or changing memory: vmcode's errors are misses, counted, never
// a panic; a free block is not code; the cache stays bounded; a failed
// read of the heaps is tried again, but not at every lookup.
func TestCodeMapFailures(t *testing.T) {
	f := &fakeBlobs{blob: vmcode.Blob{Start: 0x10000, End: 0x10400, CodeBegin: 0x10000, CodeEnd: 0x10400, Kind: vmcode.KindStub}}
	m := NewCodeMap(f)
	if hit, ok := m.Lookup(0x10010); !ok || hit.Stub != "stub" {
		t.Errorf("unnamed stub: %+v %v", hit, ok)
	}
	if _, ok := m.Lookup(0x11000); ok || m.Stats().Misses != 1 {
		t.Errorf("free block found, stats %+v", m.Stats())
	}
	f.err = fmt.Errorf("%w: segment map hops before the heap's start", vmcode.ErrMalformed)
	if _, ok := m.Lookup(0x10010); ok || m.Stats().Errors != 1 || !errors.Is(m.LastError(), vmcode.ErrMalformed) {
		t.Errorf("malformed blob found, stats %+v, last error %v", m.Stats(), m.LastError())
	}
	f.err = fmt.Errorf("frames at 0x10010: read pid 9: %w", procfs.ErrNoProcess)
	if _, ok := m.Lookup(0x10010); ok || m.Stats().Errors != 1 || m.Stats().Gone != 1 {
		t.Errorf("a JVM gone is an error: stats %+v", m.Stats())
	}
	f.err = nil
	f.blob.Kind = vmcode.KindNMethod
	for i := range maxMapHits + 10 {
		f.blob.CompileID = int64(i)
		if _, ok := m.Lookup(0x10010); !ok {
			t.Fatal("lookup failed")
		}
	}
	if len(m.named) > maxMapHits {
		t.Errorf("%d cached hits, bound %d", len(m.named), maxMapHits)
	}
	// An nmethod vmcode gives no frames for still names the path's leaf.
	if hit, _ := m.Lookup(0x10010); len(hit.Named) != 1 {
		t.Errorf("nmethod without frames: %+v", hit)
	}

	g := &fakeBlobs{heapsErr: errors.New("CodeCache::_heaps is null")}
	m = NewCodeMap(g)
	for range 3 * heapRetry {
		if m.Contains(0x10010) {
			t.Fatal("code without heaps")
		}
	}
	if g.heapsAsk < 2 || g.heapsAsk > 4 {
		t.Errorf("heaps asked %d times in %d lookups", g.heapsAsk, 3*heapRetry)
	}
	g.heapsErr = nil
	for range heapRetry + 1 {
		m.Contains(0x10010)
	}
	if !m.Contains(0x10010) {
		t.Error("heaps never read again")
	}
}

// A frame read after the JVM exited ends its path as unreadable, but is
// counted apart and is not the last error: the note about unnamed frames
// is for frames a live JVM could not name.
func TestResolveAfterExit(t *testing.T) {
	f := &fakeBlobs{err: fmt.Errorf("frames at 0x10010: read pid 9: %w", procfs.ErrNoProcess)}
	r := New(f)
	p := r.Resolve(&sample.Stack{End: loader.UnwindEntry, Frames: []sample.RawFrame{{Blob: 0x10000 | loader.FrameSized, A: 0x10010, B: 3}}}, Sample{IP: 0x10010})
	if p.Missing != "unreadable frame" || r.Stats().Failed != 1 || r.Stats().Gone != 1 || r.LastError() != nil {
		t.Errorf("missing %q, stats %+v, last error %v", p.Missing, r.Stats(), r.LastError())
	}
}
