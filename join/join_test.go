package join

import (
	"math"
	"testing"

	"github.com/djx-bpf/djx-bpf/hotspot/heap"
	"github.com/djx-bpf/djx-bpf/sources/agentwire"
	"github.com/djx-bpf/djx-bpf/sources/sample"
)

func TestCaptureWeight(t *testing.T) {
	// p = 1 - e^(-s/I): s = I gives 1/0.632.
	if w := captureWeight(1024, 1024); math.Abs(w-1/(1-math.Exp(-1))) > 1e-9 {
		t.Errorf("weight(1024, 1024) = %v", w)
	}
	if w := captureWeight(8<<20, 256); w != 1 {
		t.Errorf("large object weight %v, want 1", w)
	}
	if w := captureWeight(100, 0); w != 1 {
		t.Errorf("no interval: weight %v, want 1", w)
	}
}

func hello(t uint64) *agentwire.Hello {
	return &agentwire.Hello{ProtoVersion: 1, Interval: 1024, MinSize: 1024, Monotonic: t, VMName: "VM", VMVersion: "17"}
}

func method(id uint64, class, name string, line int32) *agentwire.Method {
	return &agentwire.Method{ID: id, ClassSig: class, Name: name, Lines: []agentwire.LineEntry{{Start: 0, Line: line}}}
}

func alloc(t, addr, size uint64, typ string, frames ...agentwire.Frame) *agentwire.Alloc {
	return &agentwire.Alloc{Time: t, Addr: addr, Size: size, TypeSig: typ, Frames: frames}
}

func fault(t, addr uint64) *sample.Sample { return &sample.Sample{Time: t, Addr: addr} }

// exactJVM judges page-fault samples at their own time, so that the tests
// can use them as exact-address samples.
func exactJVM(pid int) *JVM {
	j := newJVM(pid)
	j.faultGrace = 0
	return j
}

// A first-touch fault precedes the allocation record of the object whose
// zeroing caused it; it is still charged to that object.
func TestJoinPageFaultBeforeAllocRecord(t *testing.T) {
	j := newJVM(1)
	j.OnBatch(batch(1_000_000, hello(1)))
	j.OnSample(fault(2_000_000, 0x5000_1000), sample.PageFaults)
	j.OnBatch(batch(2_500_000, alloc(2_400_000, 0x5000_0000, 1<<20, "[J", agentwire.Frame{Method: 1})))
	j.RelocComplete(1 << 40)
	j.OnBatch(batch(1 << 40))
	if j.stats.Attributed != 1 {
		t.Fatalf("fault before its allocation record not attributed: %+v", j.stats)
	}
}

func batch(wm uint64, recs ...agentwire.Record) *agentwire.Batch {
	return &agentwire.Batch{Watermark: wm, Records: recs}
}

func TestJoinWaitsForWatermark(t *testing.T) {
	j := exactJVM(1)
	j.OnBatch(batch(100, hello(100), method(7, "LHot;", "make", 12), method(8, "LHot;", "main", 30)))
	// Sampled at 150 on an object whose allocation (at 140) the agent has
	// not sent yet: it must wait, not be lost.
	j.OnSample(fault(150, 0x1000_0010), sample.PageFaults)
	if j.stats.Attributed != 0 || len(j.queue)-j.head != 1 {
		t.Fatalf("sample attributed before the watermark passed it: %+v", j.stats)
	}
	j.OnBatch(batch(200, alloc(140, 0x1000_0000, 4096, "[J", agentwire.Frame{Method: 7, BCI: 3}, agentwire.Frame{Method: 8, BCI: 9})))
	if j.stats.Attributed != 1 {
		t.Fatalf("sample not attributed once the watermark passed: %+v", j.stats)
	}
	// Before the agent's first record nothing can be joined.
	j2 := exactJVM(2)
	j2.OnSample(fault(50, 0x1000), sample.PageFaults)
	if j2.stats.Unjoined != 1 || j2.stats.Samples != 0 {
		t.Fatalf("early sample: %+v", j2.stats)
	}

	objs := j.Report()
	if len(objs) != 1 {
		t.Fatalf("objects %+v", objs)
	}
	o := objs[0]
	if o.Type != "long[]" || o.Site != "Hot.make:12" || len(o.AllocPath) != 2 || o.AllocPath[1] != "Hot.main:30" {
		t.Errorf("object %+v", o)
	}
	if o.Samples != 1 || o.Objects != 1 || o.Bytes != 4096 {
		t.Errorf("counts %+v", o)
	}
	want := 1 / (1 - math.Exp(-4)) // 4096 bytes at interval 1024
	if math.Abs(o.EstSamples-want) > 1e-6 || math.Abs(o.EstObjects-want) > 1e-6 {
		t.Errorf("estimates %v %v, want %v", o.EstSamples, o.EstObjects, want)
	}
}

// A sample that reaches the join after the agent's watermark has passed it
// (the loader read the ring buffer late) is still judged against the heap of
// its time: the horizon waits for the sample stream too.
func TestJoinWaitsForSampleStream(t *testing.T) {
	j := exactJVM(1)
	j.sampleStream = true
	j.OnBatch(batch(10, hello(1), alloc(2, 0x2000, 4096, "[B", agentwire.Frame{Method: 1})))
	j.SamplesComplete(12)
	// The memory is reused at 20; the agent's stream is complete to 100.
	j.OnBatch(batch(100, alloc(20, 0x2000, 4096, "[I", agentwire.Frame{Method: 2})))
	if j.drained > 12 {
		t.Fatalf("horizon %d ran past the sample stream (12)", j.drained)
	}
	j.OnSample(fault(15, 0x2100), sample.PageFaults) // taken on the old object
	j.SamplesComplete(90)
	j.OnSample(fault(95, 0x2100), sample.PageFaults) // and one on the new
	j.Drain(true)
	got := map[string]uint64{}
	for _, o := range j.Report() {
		got[o.Type] = o.Samples
	}
	if got["byte[]"] != 1 || got["int[]"] != 1 || j.stats.Late != 0 {
		t.Errorf("samples by type %v, late %d: want one each, none late", got, j.stats.Late)
	}

	// Without the sample stream's bound, the first sample comes too late.
	k := exactJVM(1)
	k.OnBatch(batch(10, hello(1), alloc(2, 0x2000, 4096, "[B", agentwire.Frame{Method: 1})))
	k.OnBatch(batch(100, alloc(20, 0x2000, 4096, "[I", agentwire.Frame{Method: 2})))
	k.OnSample(fault(15, 0x2100), sample.PageFaults)
	k.Drain(true)
	if k.stats.Late != 1 || k.stats.LateMaxMs <= 0 {
		t.Errorf("late %d (max %v ms): want the sample counted late", k.stats.Late, k.stats.LateMaxMs)
	}
}

func TestJoinReuseChargesNewObject(t *testing.T) {
	j := exactJVM(1)
	j.OnBatch(batch(10, hello(1),
		alloc(2, 0x2000, 2048, "[B", agentwire.Frame{Method: 1}),
		// Memory reused by a new object at another site.
		alloc(5, 0x2000, 4096, "[I", agentwire.Frame{Method: 2}),
	))
	j.OnSample(fault(8, 0x2100), sample.PageFaults)
	j.Drain(true)
	for _, o := range j.Report() {
		want := uint64(0)
		if o.Type == "int[]" {
			want = 1
		}
		if o.Samples != want {
			t.Errorf("%s got %d samples, want %d", o.Type, o.Samples, want)
		}
	}
	if got := len(j.free); got != 1 {
		t.Errorf("evicted object's id not recycled: free %d", got)
	}
}

func TestJoinMergesBCIsOfOneLine(t *testing.T) {
	j := newJVM(1)
	j.OnBatch(batch(10, hello(1), method(1, "LA;", "f", 5),
		alloc(2, 0x1000, 2048, "[B", agentwire.Frame{Method: 1, BCI: 1}),
		alloc(3, 0x9000, 2048, "[B", agentwire.Frame{Method: 1, BCI: 2})))
	if objs := j.Report(); len(objs) != 1 || objs[0].Objects != 2 {
		t.Fatalf("same line, two bcis: %+v", objs)
	}
}

func TestJoinDecodeAndHeap(t *testing.T) {
	j := newJVM(1)
	j.heap, j.heapKnown = heap.Info{Ranges: []heap.Range{{Start: 0x7000_0000, End: 0x8000_0000}}}, true
	j.OnBatch(batch(10, hello(1), alloc(2, 0x7000_1000, 1<<20, "[J", agentwire.Frame{Method: 1})))
	// mov 0x10(%rax,%rcx,8),%rdx with rax = 0x70001000, rcx = 3.
	s := &sample.Sample{Time: 5, Flags: sample.FlagAtOK}
	copy(s.At[:], []byte{0x48, 0x8b, 0x54, 0xc8, 0x10, 0x90, 0x90, 0x90})
	s.Regs[10] = 0x7000_1000 // rax
	s.Regs[11] = 3           // rcx
	s.Regs[16] = 0x40_0000   // rip
	j.OnSample(s, sample.Decode)
	// No memory operand, no bytes before: no address.
	n := &sample.Sample{Time: 6, Flags: sample.FlagAtOK}
	copy(n.At[:], []byte{0x90, 0x90})
	j.OnSample(n, sample.Decode)
	j.Drain(true)
	st := j.stats
	if st.Samples != 2 || st.WithAddress != 1 || st.DecodedAtIP != 1 || st.InHeap != 1 || st.Attributed != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// A GC's copies apply at its end, in time order with allocations and
// samples, however the three streams interleave on arrival.
func TestJoinAppliesGCMovesInTimeOrder(t *testing.T) {
	j := exactJVM(1)
	j.OnBatch(batch(5, hello(1), method(1, "LA;", "a", 1), method(2, "LB;", "b", 2)))
	j.OnGCBegin(30) // the relocation stream is attached
	j.OnCopy(0x1000, 0x9000, 4096)
	// Samples arrive before the allocation stream has caught up.
	j.OnSample(fault(20, 0x1010), sample.PageFaults) // before the GC: old place
	j.OnSample(fault(50, 0x9010), sample.PageFaults) // after the GC: new place
	j.OnSample(fault(70, 0x1010), sample.PageFaults) // after B reused the old place
	j.OnBatch(batch(100,
		alloc(10, 0x1000, 4096, "[J", agentwire.Frame{Method: 1}),
		alloc(60, 0x1000, 4096, "[D", agentwire.Frame{Method: 2})))
	if j.stats.Attributed != 0 {
		t.Fatalf("attributed %d samples while a GC was still open", j.stats.Attributed)
	}
	j.OnGCEnd(40)
	j.RelocComplete(100)
	got := map[string]uint64{}
	for _, o := range j.Report() {
		got[o.Type] = o.Samples
	}
	if got["long[]"] != 2 || got["double[]"] != 1 {
		t.Fatalf("samples per type %v, want long[] 2 (before and after its move), double[] 1", got)
	}
	if j.stats.GCs != 1 || j.stats.Relocations != 1 {
		t.Errorf("stats %+v", j.stats)
	}
}

// Under JDK 17's ZGC the heap is mapped three times: a sample through one
// view lands in an object the agent reported at another.
func TestJoinZGCViews(t *testing.T) {
	const off, views = 0x1000, 32 << 30
	canon := func(a uint64) (uint64, bool) {
		for _, b := range []uint64{1 << 42, 1 << 43, 1 << 44} {
			if a >= b && a-b < views {
				return a - b + 1<<42, true
			}
		}
		return a, false
	}
	j := newJVM(1)
	j.canon = canon
	var rs []heap.Range
	for _, b := range []uint64{1 << 42, 1 << 43, 1 << 44} {
		rs = append(rs, heap.Range{Start: b, End: b + views})
	}
	j.heap, j.heapKnown = heap.Info{GC: "Z", Ranges: rs}, true
	// Reported at Marked1, sampled at Remapped.
	j.OnBatch(batch(10, hello(1), alloc(2, 1<<43|off, 1<<20, "[J", agentwire.Frame{Method: 1})))
	s := &sample.Sample{Time: 5, Flags: sample.FlagAtOK}
	copy(s.At[:], []byte{0x48, 0x8b, 0x54, 0xc8, 0x10, 0x90, 0x90, 0x90})
	s.Regs[10] = 1<<44 | off // rax
	s.Regs[11] = 3           // rcx
	s.Regs[16] = 0x40_0000   // rip
	j.OnSample(s, sample.Decode)
	j.Drain(true)
	if st := j.stats; st.InHeap != 1 || st.Attributed != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// Under ZGC, C2 tests each reference it loads against the thread's bad
// mask (`test r10, 0x38(%r15)`) right after the load: a sample there is
// the load's (`mov 0x10(%rbx), r10`), not the JavaThread's (in malloc'd
// memory: JDK 17's TreeMap lookups went 30% to "native (malloc)").
func TestJoinZGCBarrierLookBack(t *testing.T) {
	const off, views = 0x1000, 32 << 30
	j := newJVM(1)
	j.canon = func(a uint64) (uint64, bool) {
		for _, b := range []uint64{1 << 42, 1 << 43, 1 << 44} {
			if a >= b && a-b < views {
				return a - b + 1<<42, true
			}
		}
		return a, false
	}
	var rs []heap.Range
	for _, b := range []uint64{1 << 42, 1 << 43, 1 << 44} {
		rs = append(rs, heap.Range{Start: b, End: b + views})
	}
	j.heap, j.heapKnown = heap.Info{GC: "Z", Ranges: rs}, true
	j.OnBatch(batch(10, hello(1), alloc(2, 1<<43|off, 1<<20, "[J", agentwire.Frame{Method: 1})))
	s := &sample.Sample{Time: 5, Flags: sample.FlagAtOK | sample.FlagBeforeOK}
	for i := range s.Before {
		s.Before[i] = 0x90
	}
	copy(s.Before[len(s.Before)-4:], []byte{0x4c, 0x8b, 0x53, 0x10})      // mov 0x10(%rbx),%r10
	copy(s.At[:], []byte{0x4d, 0x85, 0x57, 0x38, 0x90, 0x90, 0x90, 0x90}) // test %r10,0x38(%r15)
	s.Regs[0] = 0x5555_0000_0000                                          // r15: the JavaThread
	s.Regs[5] = 1<<44 | off                                               // rbx
	s.Regs[16] = 0x40_0000                                                // rip
	j.OnSample(s, sample.Decode)
	// A load that overwrote its base (`mov 0x18(%r10),%r10`, p = p.left)
	// leaves no address: not the thread's either.
	s2 := *s
	s2.Time = 6
	copy(s2.Before[len(s2.Before)-4:], []byte{0x4d, 0x8b, 0x52, 0x18})
	j.OnSample(&s2, sample.Decode)
	// Register arithmetic after a register move: no memory operand.
	s3 := *s
	s3.Time = 7
	copy(s3.Before[len(s3.Before)-4:], []byte{0x90, 0x4d, 0x89, 0xd3}) // nop; mov %r10,%r11
	copy(s3.At[:], []byte{0x4d, 0x01, 0xd3, 0x90})                     // add %r10,%r11
	j.OnSample(&s3, sample.Decode)
	j.Drain(true)
	if st := j.stats; st.InHeap != 1 || st.Attributed != 1 || st.WithAddress != 1 {
		t.Fatalf("stats %+v: want the first sample in the object, the others without an address", st)
	}
	if st := j.stats; st.UndecodedBaseClobbered != 1 || st.UndecodedNoMemory != 1 || st.UndecodedNoBoundary+st.UndecodedIndexClobber+st.UndecodedNotLoad+st.UndecodedNoBytes+st.UndecodedUncomputable != 0 {
		t.Fatalf("stats %+v: want one sample without an address by a clobbered base, one by no memory operand", st)
	}
}

// The timer lands just after the load that stalled: when the access at
// ip is outside the heap (C2 reads the thread's handle of its
// java.lang.Thread, `mov 0x2f8(%r15),%rax`, right after a table load in a
// random-index loop) and a heap load ends at ip, the sample is the heap
// load's. JDK 17's ServiceTruth put 22-70% of its array loads in
// "native (malloc)" so.
func TestJoinNonHeapAtIPLooksBack(t *testing.T) {
	const heapStart, obj = 0x7_0000_0000, 0x7_0010_0000
	j := newJVM(1)
	j.heap, j.heapKnown = heap.Info{GC: "G1", Ranges: []heap.Range{{Start: heapStart, End: heapStart + 1<<30}}}, true
	j.OnBatch(batch(10, hello(1), alloc(2, obj, 1<<20, "[J", agentwire.Frame{Method: 1})))
	mk := func(tm uint64, r8 uint64) *sample.Sample {
		s := &sample.Sample{Time: tm, Flags: sample.FlagAtOK | sample.FlagBeforeOK}
		for i := range s.Before {
			s.Before[i] = 0x90
		}
		copy(s.Before[len(s.Before)-5:], []byte{0x4f, 0x03, 0x54, 0xd8, 0x10}) // add 0x10(%r8,%r11,8),%r10
		copy(s.At[:], []byte{0x49, 0x8b, 0x87, 0xf8, 0x02, 0x00, 0x00, 0x90})  // mov 0x2f8(%r15),%rax
		s.Regs[0] = 0x5555_0000_0000                                           // r15: the JavaThread
		s.Regs[9] = r8                                                         // r8: the array
		s.Regs[6] = 100                                                        // r11: the index
		s.Regs[16] = 0x40_0000                                                 // rip
		return s
	}
	j.OnSample(mk(5, obj), sample.Decode)
	// A load ending at ip outside the heap too: the access at ip stays.
	j.OnSample(mk(6, 0x5555_1000_0000), sample.Decode)
	j.Drain(true)
	st := j.stats
	if st.WithAddress != 2 || st.InHeap != 1 || st.Attributed != 1 || st.DecodedLookBack != 1 || st.DecodedAtIP != 1 {
		t.Fatalf("stats %+v: want the first sample in the array (look-back), the second at ip", st)
	}
}
