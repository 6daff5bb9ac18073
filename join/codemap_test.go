package join

import (
	"encoding/hex"
	"fmt"
	"testing"

	"github.com/djx-bpf/djx-bpf/hotspot/heap"
	"github.com/djx-bpf/djx-bpf/hotspot/vmcode"
	"github.com/djx-bpf/djx-bpf/loader"
	"github.com/djx-bpf/djx-bpf/naming/bpfstack"
	"github.com/djx-bpf/djx-bpf/sources/agentwire"
	"github.com/djx-bpf/djx-bpf/sources/sample"
)

// cacheCode is a code cache read from a JVM (bpfstack.Code) holding the
// blobs the test sets, in one code heap at 0x7f00_0000_0000.
type cacheCode struct {
	blobs  []vmcode.Blob
	frames map[uint64][]vmcode.Frame // by blob start
}

func (c *cacheCode) blob(pc uint64) (vmcode.Blob, error) {
	for _, b := range c.blobs {
		if pc >= b.Start && pc < b.End {
			return b, nil
		}
	}
	return vmcode.Blob{}, fmt.Errorf("%w: %#x", vmcode.ErrNotCode, pc)
}

func (c *cacheCode) Frames(pc uint64) ([]vmcode.Frame, vmcode.Blob, error) {
	b, err := c.blob(pc)
	if err != nil || b.Kind != vmcode.KindNMethod {
		return nil, b, err
	}
	return c.frames[b.Start], b, nil
}

func (c *cacheCode) Blob(pc uint64) (vmcode.Blob, error) { return c.blob(pc) }
func (c *cacheCode) InterpretedFrame(method, bcp uint64) (vmcode.Frame, error) {
	return vmcode.Frame{}, errFake
}
func (c *cacheCode) Heaps() ([]vmcode.Heap, error) {
	return []vmcode.Heap{{Start: 0x7f00_0000_0000, End: 0x7f00_1000_0000, Low: 0x7f00_0000_0000, High: 0x7f00_0100_0000}}, nil
}
func (c *cacheCode) Offsets() vmcode.Offsets { return vmcode.Offsets{} }

// With BPF stacks the agent sends no JIT code records; an allocation in
// compiled code is still named by the klass store past the sample's
// bytes: the code map reads the blob from the code cache.
func TestTypesFromTheCodeCache(t *testing.T) {
	code, _ := hex.DecodeString("48c700010000004c8bd04983c210c74008284f04004489600cc5fdefc0c4c179d602" + "c3909090909090909090909090909090")
	const blob, obj = 0x7f00_0000_1000, 0x7_1000_0000
	mem := &fakeMem{start: blob, code: code}
	j := newJVM(1)
	j.codeMem = mem
	j.heap, j.heapKnown = heap.Info{Ranges: []heap.Range{{Start: 0x7_0000_0000, End: 0x8_0000_0000}}}, true
	j.OnBatch(batch(10, hello(1), &agentwire.TypesInfo{OK: true, Fields: true, OopBytes: 4, OopShift: 3, KlassBytes: 4},
		&agentwire.Class{Klass: 0x8_0004_4f28, Narrow: 0x44f28, Sig: "Ljava/lang/Long;", Fields: []agentwire.Field{{Offset: 16, Name: "value", Sig: "J"}}}))
	j.UseBPFStacks(bpfstack.New(&cacheCode{blobs: []vmcode.Blob{{Start: blob - 0x100, End: blob + 0x100, CodeBegin: blob, CodeEnd: blob + uint64(len(code)),
		Kind: vmcode.KindNMethod, Method: 0x800, CompileID: 3}}}))
	s := &sample.Sample{Time: 20, Flags: sample.FlagAtOK, HdrOK: 1 << 10}
	copy(s.At[:], code)
	s.Regs[16], s.Regs[10] = blob, obj
	j.OnSample(s, sample.Decode)
	j.OnBatch(batch(100))
	j.Drain(true)
	if st := j.stats; st.InHeap != 1 || st.TypedByAllocation != 1 || st.TypeUnknown != 0 || st.JITCode != 0 {
		t.Fatalf("in heap %d, by allocation %d, unknown %d, JIT code records %d", st.InHeap, st.TypedByAllocation, st.TypeUnknown, st.JITCode)
	}
	if mem.reads != 1 {
		t.Errorf("%d reads of the code, want 1", mem.reads)
	}
}

// With BPF stacks a store from JIT code is judged once and one from libc
// again, as with the agent's code records: the code map knows JIT code
// by the code heaps alone.
func TestRetryFromTheCodeCache(t *testing.T) {
	const ms = 1_000_000
	const jit, arr = 0x7f00_0000_1000, 0x7_2000_0000
	j := newJVM(1)
	j.heap, j.heapKnown = heap.Info{Ranges: []heap.Range{{Start: 0x7_0000_0000, End: 0x8_0000_0000}}}, true
	j.OnBatch(batch(1*ms, hello(1)))
	j.UseBPFStacks(bpfstack.New(&cacheCode{}))
	at := func(tm, ip, rdi uint64) *sample.Sample {
		s := &sample.Sample{Time: tm, Flags: sample.FlagAtOK}
		copy(s.At[:], []byte{0xf3, 0xaa}) // rep stosb
		s.Regs[16], s.Regs[14] = ip, rdi
		return s
	}
	j.OnSample(at(2*ms, 0x7fff_0000_0000, arr+0x800), sample.Decode)
	j.OnSample(at(2*ms+2, jit+0x10, arr+0xa00), sample.Decode)
	j.OnBatch(batch(100*ms, alloc(3*ms, arr, 1<<20, "[J")))
	j.Drain(true)
	if st := j.stats; st.InHeap != 2 || st.Rejudged != 1 || st.Attributed != 1 {
		t.Fatalf("in heap %d, rejudged %d, attributed %d; want 2, 1, 1", st.InHeap, st.Rejudged, st.Attributed)
	}
}

// A BPF stack without Java frames at a pc in the code cache keeps the
// leaf the code cache names, read as the sample arrives: the compiled
// method's frames at the access, or a stub's name.
func TestLeafFromTheCodeCache(t *testing.T) {
	cc := &cacheCode{
		blobs: []vmcode.Blob{
			{Start: 0x7f00_0000_1000, End: 0x7f00_0000_1400, CodeBegin: 0x7f00_0000_1100, CodeEnd: 0x7f00_0000_1300, Kind: vmcode.KindNMethod, Method: 0x800, CompileID: 9},
			{Start: 0x7f00_0000_2000, End: 0x7f00_0000_3000, CodeBegin: 0x7f00_0000_2100, CodeEnd: 0x7f00_0000_3000, Kind: vmcode.KindStub, Name: "StubRoutines (1)"},
		},
		frames: map[uint64][]vmcode.Frame{0x7f00_0000_1000: {{Class: "Hot", Name: "get", Line: 4}, {Class: "Hot", Name: "scan", Line: 12}}},
	}
	j := exactJVM(1)
	j.OnBatch(batch(100, hello(100), method(7, "LHot;", "make", 12)))
	j.UseBPFStacks(bpfstack.New(cc))
	j.OnBatch(batch(120, alloc(110, 0x1000_0000, 1<<20, "[J", agentwire.Frame{Method: 7})))
	j.OnSample(bsample(1000, 0x1000_0008, 0x7f00_0000_1110, loader.UnwindPrologue), sample.PageFaults)
	j.OnSample(bsample(2000, 0x1000_0008, 0x7f00_0000_2200, loader.UnwindNoJava), sample.PageFaults)
	j.OnSample(bsample(3000, 0x1000_0008, 0x7f00_0000_0010, loader.UnwindNoJava), sample.PageFaults) // a free block
	// The code is freed before the samples are judged: they were named
	// as they arrived.
	cc.blobs = nil
	j.Drain(true)
	got := pathSamples(j.Report()[0].Accesses)
	for k, v := range map[string]uint64{
		"Hot.get:4 <- Hot.scan:12 <- [no Java stack: in a method's prologue]": 1,
		"[StubRoutines (1)] <- [no Java stack: no Java frames]":               1,
		"[unknown code] <- [no Java stack: no Java frames]":                   1,
	} {
		if got[k] != v {
			t.Errorf("path %q: %d samples, want %d (all: %v)", k, got[k], v, got)
		}
	}
}
