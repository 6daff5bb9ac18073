package join

import (
	"errors"
	"strings"
	"testing"

	"github.com/djx-bpf/djx-bpf/hotspot/vmcode"
	"github.com/djx-bpf/djx-bpf/loader"
	"github.com/djx-bpf/djx-bpf/naming/bpfstack"
	"github.com/djx-bpf/djx-bpf/sources/agentwire"
	"github.com/djx-bpf/djx-bpf/sources/sample"
)

// fakeCode is a code cache of two nmethods (scanA inlined in run at
// 0x7000, main's at 0x8000), the interpreter at 0x9000 and a runtime stub
// at 0xA000.
type fakeCode struct{}

var errFake = errors.New("fake: no such code")

func (fakeCode) Frames(pc uint64) ([]vmcode.Frame, vmcode.Blob, error) {
	switch {
	case pc >= 0x7000 && pc < 0x7100:
		return []vmcode.Frame{{Class: "Hot", Name: "scanA", Line: 27}, {Class: "Hot", Name: "run", Line: 55}},
			vmcode.Blob{Start: 0x7000, Kind: vmcode.KindNMethod}, nil
	case pc >= 0x8000 && pc < 0x8100:
		return []vmcode.Frame{{Class: "Hot", Name: "main", Line: 30}}, vmcode.Blob{Start: 0x8000, Kind: vmcode.KindNMethod}, nil
	case pc >= 0xA000 && pc < 0xA100:
		return nil, vmcode.Blob{Start: 0xA000, Kind: vmcode.KindStub}, nil
	}
	return nil, vmcode.Blob{}, errFake
}

func (fakeCode) Blob(pc uint64) (vmcode.Blob, error) {
	if pc >= 0x9000 && pc < 0xA000 {
		return vmcode.Blob{Start: 0x9000, Kind: vmcode.KindInterpreter}, nil
	}
	return vmcode.Blob{}, errFake
}

func (fakeCode) InterpretedFrame(method, bcp uint64) (vmcode.Frame, error) {
	if method != 0x55 {
		return vmcode.Frame{}, errFake
	}
	return vmcode.Frame{Class: "Hot", Name: "main", Line: int(bcp)}, nil
}

func (fakeCode) Heaps() ([]vmcode.Heap, error) { return nil, errFake }
func (fakeCode) Offsets() vmcode.Offsets       { return vmcode.Offsets{} }

func bsample(t, addr, ip uint64, end uint16, frames ...sample.RawFrame) *sample.Sample {
	s := tsample(t, addr, ip, 5)
	s.Stack = &sample.Stack{End: end, Frames: frames}
	return s
}

// With BPF stacks each sample's path is its own stack, named as it
// arrives: no signal asked, none borrowed; a cut walk ends its path with
// the reason, one without Java frames keeps its leaf.
func TestBPFStacksNamePaths(t *testing.T) {
	j := exactJVM(1)
	j.OnBatch(batch(100, hello(100), method(7, "LHot;", "make", 12)))
	j.UseBPFStacks(bpfstack.New(fakeCode{}))
	j.OnBatch(batch(120, alloc(110, 0x1000_0000, 1<<20, "[J", agentwire.Frame{Method: 7})))
	compiled := sample.RawFrame{Blob: 0x7000 | loader.FrameSized, A: 0x7010}
	j.OnSample(bsample(1000, 0x1000_0008, 0x7010, loader.UnwindEntry, compiled, sample.RawFrame{Blob: 0x8000 | loader.FrameSized, A: 0x8020}), sample.PageFaults)
	j.OnSample(bsample(2000, 0x1000_0008, 0x7010, loader.UnwindEntry, compiled, sample.RawFrame{Blob: 0x9000 | loader.FrameFP, A: 0x55, B: 31}), sample.PageFaults)
	j.OnSample(bsample(3000, 0x1000_0008, 0x7010, loader.UnwindDepth, compiled), sample.PageFaults)
	j.OnSample(bsample(4000, 0x1000_0008, 0x7010, loader.UnwindEntry, compiled, sample.RawFrame{Blob: 0x9000 | loader.FrameFP, A: 0x66, B: 1}), sample.PageFaults)
	j.OnSample(bsample(5000, 0x1000_0008, 0x3010, loader.UnwindNoJava, sample.RawFrame{Blob: loader.FrameNative, A: 0x3010}), sample.PageFaults)
	j.Drain(true)
	got := pathSamples(j.Report()[0].Accesses)
	for k, v := range map[string]uint64{
		"Hot.scanA:27 <- Hot.run:55 <- Hot.main:30":                                 1,
		"Hot.scanA:27 <- Hot.run:55 <- Hot.main:31":                                 1,
		"Hot.scanA:27 <- Hot.run:55 <- [stack cut: deeper than the unwinder walks]": 1,
		"Hot.scanA:27 <- Hot.run:55 <- [stack cut: unreadable frame]":               1,
		"[unknown code] <- [no Java stack: no Java frames]":                         1,
	} {
		if got[k] != v {
			t.Errorf("path %q: %d samples, want %d (all: %v)", k, got[k], v, got)
		}
	}
	s := j.stats
	if s.SamplesBPFStack != 4 || s.SamplesBPFComplete != 2 || s.SamplesStackBorrowed != 0 || len(s.BPFStackEnds) != 3 {
		t.Errorf("stats %+v", s)
	}
	// The frame that could not be named is in a note, with why.
	notes := j.AgentNotes()
	if len(notes) != 1 || !strings.Contains(notes[0], "1 frames of stacks unwound in BPF") || !strings.Contains(notes[0], "fake: no such code") {
		t.Errorf("notes %q", notes)
	}
}

// An ALLOC_RAW's frames are named as it arrives, by the resolver, with
// the interpreter's top frame named from its slot (a call site: no
// sampled frame); allocations with the same named stack share a site,
// and a walk the resolver cannot finish ends with the reason.
func TestRawAllocsNamed(t *testing.T) {
	j := exactJVM(1)
	j.OnBatch(batch(100, hello(100)))
	j.UseBPFStacks(bpfstack.New(fakeCode{}))
	raw := func(tm, addr uint64, fs ...agentwire.RawFrame) *agentwire.AllocRaw {
		return &agentwire.AllocRaw{Time: tm, Addr: addr, Size: 1 << 20, TypeSig: "[J", Frames: fs, End: uint32(loader.UnwindEntry)}
	}
	stub := agentwire.RawFrame{Blob: 0xA000 | loader.FrameSized, A: 0xA010} // a runtime stub: no frame
	compiled := agentwire.RawFrame{Blob: 0x7000 | loader.FrameSized, A: 0x7010}
	interp := agentwire.RawFrame{Blob: 0x9000 | loader.FrameFP, A: 0x55, B: 31}
	j.OnBatch(batch(200,
		raw(110, 0x1000_0000, stub, compiled, agentwire.RawFrame{Blob: 0x8000 | loader.FrameSized, A: 0x8020}),
		raw(120, 0x1010_0000, stub, compiled, agentwire.RawFrame{Blob: 0x8000 | loader.FrameSized, A: 0x8020}),
		raw(130, 0x1020_0000, interp),
		raw(140, 0x1030_0000, compiled, agentwire.RawFrame{Blob: 0x9000 | loader.FrameFP, A: 0x66, B: 1})))
	j.Drain(true)
	got := map[string]uint64{}
	for _, o := range j.Report() {
		got[strings.Join(o.AllocPath, " <- ")] += o.Objects
	}
	for k, v := range map[string]uint64{
		"Hot.scanA:27 <- Hot.run:55 <- Hot.main:30": 2,
		"Hot.main:31": 1,
		"Hot.scanA:27 <- Hot.run:55 <- [stack cut: unreadable frame]": 1,
	} {
		if got[k] != v {
			t.Errorf("site %q: %d objects, want %d (all: %v)", k, got[k], v, got)
		}
	}
	if j.stats.AllocsTracked != 4 {
		t.Errorf("%d allocations tracked, want 4", j.stats.AllocsTracked)
	}
}
