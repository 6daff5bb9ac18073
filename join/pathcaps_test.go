package join

import (
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/djx-bpf/djx-bpf/hotspot/vmcode"
	"github.com/djx-bpf/djx-bpf/jvmsym"
	"github.com/djx-bpf/djx-bpf/loader"
	"github.com/djx-bpf/djx-bpf/naming/bpfstack"
	"github.com/djx-bpf/djx-bpf/report"
	"github.com/djx-bpf/djx-bpf/sources/agentwire"
	"github.com/djx-bpf/djx-bpf/sources/sample"
)

// longNamesCode is a code cache of two nmethods, ping at 0x7000 and pong
// at 0x8000, whose names are nameLen bytes long, as javac lets a program
// name its methods (up to 65,535).
type longNamesCode struct{ ping, pong string }

func newLongNamesCode(nameLen int) longNamesCode {
	return longNamesCode{"p" + strings.Repeat("i", nameLen-1), "p" + strings.Repeat("o", nameLen-1)}
}

func (c longNamesCode) Frames(pc uint64) ([]vmcode.Frame, vmcode.Blob, error) {
	switch pc &^ 0xfff {
	case 0x7000:
		return []vmcode.Frame{{Class: "LongNames", Name: c.ping, Line: 33}}, vmcode.Blob{Start: 0x7000, Kind: vmcode.KindNMethod}, nil
	case 0x8000:
		return []vmcode.Frame{{Class: "LongNames", Name: c.pong, Line: 40}}, vmcode.Blob{Start: 0x8000, Kind: vmcode.KindNMethod}, nil
	}
	return nil, vmcode.Blob{}, errFake
}
func (c longNamesCode) Blob(pc uint64) (vmcode.Blob, error) { _, b, err := c.Frames(pc); return b, err }
func (longNamesCode) InterpretedFrame(method, bcp uint64) (vmcode.Frame, error) {
	return vmcode.Frame{}, errFake
}
func (longNamesCode) Heaps() ([]vmcode.Heap, error) { return nil, errFake }
func (longNamesCode) Offsets() vmcode.Offsets       { return vmcode.Offsets{} }

// randomStack is depth frames of ping and pong in a random order: every
// sample a path of its own.
func randomStack(r *rand.Rand, depth int) []sample.RawFrame {
	fs := make([]sample.RawFrame, depth)
	for i := range fs {
		blob := uint64(0x7000)
		if r.IntN(2) == 1 {
			blob = 0x8000
		}
		fs[i] = sample.RawFrame{Blob: blob | loader.FrameSized, A: blob + 0x10}
	}
	return fs
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// Two methods with long names calling each other at random: each sample
// and each allocation stack is a new path of long names. The names are
// cut and kept once, the paths by the names' ids, and what the join keeps
// stays small; root kept a fresh copy of every name of every frame of
// every sample, and the key of each path joined them all.
func TestLongNamesKeptOnce(t *testing.T) {
	const depth, samples = 20, 200
	code := newLongNamesCode(8 << 10)
	j := exactJVM(1)
	j.OnBatch(batch(100, hello(100)))
	j.UseBPFStacks(bpfstack.New(code))
	rng := rand.New(rand.NewPCG(1, 2))
	var raws []agentwire.Record
	for i := range 50 {
		var fs []agentwire.RawFrame
		for _, f := range randomStack(rng, depth) {
			fs = append(fs, agentwire.RawFrame{Blob: f.Blob, A: f.A})
		}
		raws = append(raws, &agentwire.AllocRaw{Time: 110 + uint64(i), Addr: 0x1000_0000 + uint64(i)<<20, Size: 1 << 20, TypeSig: "[J", Frames: fs, End: uint32(loader.UnwindEntry)})
	}
	before := heapInUse()
	j.OnBatch(batch(200, raws...))
	for i := range samples {
		s := bsample(1000+uint64(i), 0x1000_0008+uint64(i%50)<<20, 0x7010, loader.UnwindEntry, randomStack(rng, depth)...)
		j.OnSample(s, sample.PageFaults)
	}
	j.Drain(true)
	grown := heapInUse() - min(before, heapInUse())
	objs := j.Report()
	runtime.KeepAlive(j)
	// 200 paths of 20 frames and 50 sites: a few hundred KiB. Copies of
	// the names would be 200 × 20 × 8 KiB for the paths and as much for
	// their keys.
	if grown > 8<<20 {
		t.Errorf("the join holds %d MiB more after %d samples of %d frames", grown>>20, samples, depth)
	}
	if n := j.names.Len(); n > 4 {
		t.Errorf("%d names interned, want the two frames' (and NamesFull)", n)
	}
	paths := 0
	for _, o := range objs {
		for _, a := range o.Accesses {
			paths++
			for _, f := range a.Path {
				if len(f) > jvmsym.MaxName || !strings.HasSuffix(f, jvmsym.NameCut) {
					t.Fatalf("frame %.40q… of %d bytes, want it cut to %d ending in %q", f, len(f), jvmsym.MaxName, jvmsym.NameCut)
				}
			}
		}
		for _, f := range o.AllocPath {
			if len(f) > jvmsym.MaxName {
				t.Fatalf("allocation frame of %d bytes", len(f))
			}
		}
	}
	if paths != samples || len(objs) != 50 {
		t.Errorf("%d paths in %d objects, want %d distinct paths in 50", paths, len(objs), samples)
	}
}

// A set keeps at most maxSetPaths paths and the sets together at most
// maxAccessBytes; past them samples count on one placeholder path, and
// the report says how many.
func TestAccessSetCaps(t *testing.T) {
	defer func(n, b int) { maxSetPaths, maxAccessBytes = n, b }(maxSetPaths, maxAccessBytes)
	maxSetPaths = 10
	code := newLongNamesCode(100)
	j := exactJVM(1)
	j.OnBatch(batch(100, hello(100)))
	j.UseBPFStacks(bpfstack.New(code))
	j.OnBatch(batch(120, alloc(110, 0x1000_0000, 1<<20, "[J", agentwire.Frame{Method: 7})))
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 50 {
		j.OnSample(bsample(1000+uint64(i), 0x1000_0008, 0x7010, loader.UnwindEntry, randomStack(rng, 30)...), sample.PageFaults)
	}
	j.Drain(true)
	acc := j.Report()[0].Accesses
	got := pathSamples(acc)
	if len(acc) != maxSetPaths+1 || got[pathsCutName] != 40 {
		t.Errorf("%d paths, %d samples on %q; want %d and 40", len(acc), got[pathsCutName], pathsCutName, maxSetPaths+1)
	}
	// Each sample counts on the object's paths and on its data type's.
	if n := capsCut(j.Stats(), "samples on paths past 10 of one"); n != 2*40 {
		t.Errorf("caps_cut %v", j.Stats().CapsCut)
	}

	maxSetPaths, maxAccessBytes = 1<<15, 64<<10
	j = exactJVM(1)
	j.OnBatch(batch(100, hello(100)))
	j.UseBPFStacks(bpfstack.New(code))
	for i := range 2000 {
		j.OnSample(bsample(1000+uint64(i), 0, 0x7010, loader.UnwindEntry, randomStack(rng, 30)...), sample.PageFaults)
	}
	j.Drain(true)
	if j.accessBytes > maxAccessBytes || capsCut(j.Stats(), "MiB of access paths") == 0 {
		t.Errorf("access sets hold %d bytes, budget %d; caps_cut %v", j.accessBytes, maxAccessBytes, j.Stats().CapsCut)
	}
	var total uint64
	for _, a := range j.Remainder() {
		total += a.Samples
	}
	if total != 2000 {
		t.Errorf("%d samples in the remainder, want all 2000", total)
	}
}

// capsCut is the count of the caps_cut reason containing what.
func capsCut(st report.Stats, what string) uint64 {
	for k, v := range st.CapsCut {
		if strings.Contains(k, what) {
			return v
		}
	}
	return 0
}

// A path deeper than maxPathFrames is cut, ending in a placeholder frame,
// and counted.
func TestPathDepthCap(t *testing.T) {
	j := exactJVM(1)
	fr := make([]pathFrame, 1000)
	for i := range fr {
		fr[i] = pathFrame{method: uint64(i), bci: 1}
	}
	fr = j.capPath(fr)
	if len(fr) != maxPathFrames || fr[len(fr)-1].name != depthCutName || fr[len(fr)-1].id == 0 {
		t.Errorf("%d frames, last %+v", len(fr), fr[len(fr)-1])
	}
	if capsCut(j.Stats(), "access paths cut at") != 1 {
		t.Errorf("caps_cut %v", j.Stats().CapsCut)
	}
}

// Samples waiting for the agent's watermark hold at most maxPendingBytes:
// past it the oldest are judged at once, and counted; none is lost.
func TestPendingBytesCap(t *testing.T) {
	defer func(b int) { maxPendingBytes = b }(maxPendingBytes)
	maxPendingBytes = 256 << 10
	j := exactJVM(1)
	j.OnBatch(batch(100, hello(100)))
	j.UseBPFStacks(bpfstack.New(newLongNamesCode(100)))
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range 3000 {
		j.OnSample(bsample(1000+uint64(i), 0, 0x7010, loader.UnwindEntry, randomStack(rng, 100)...), sample.PageFaults)
		if j.pendingSize > maxPendingBytes+pendingBytes(&j.queue[len(j.queue)-1]) {
			t.Fatalf("%d bytes of samples waiting, budget %d", j.pendingSize, maxPendingBytes)
		}
	}
	if capsCut(j.Stats(), "waiting samples past") == 0 {
		t.Errorf("caps_cut %v", j.Stats().CapsCut)
	}
	j.Drain(true)
	if j.pendingSize != 0 || j.stats.Samples != 3000 {
		t.Errorf("%d bytes left waiting, %d samples", j.pendingSize, j.stats.Samples)
	}
	var total uint64
	for _, a := range j.Remainder() {
		total += a.Samples
	}
	if total != 3000 {
		t.Errorf("%d samples judged, want 3000", total)
	}
}
