package join

import (
	"testing"

	"github.com/djx-bpf/djx-bpf/hotspot/heap"

	"github.com/djx-bpf/djx-bpf/sources/agentwire"
	"github.com/djx-bpf/djx-bpf/sources/sample"
)

// A concurrent collector moves A from 0x2000 to 0x8000 after its pause;
// the rescan after that pause still reads the old place, the one after the
// next pause the new one. The sample on A's new copy in between waits for
// that rescan and is charged to A; the one in no object is judged
// untracked once lateHold has passed, as it would have been at once.
func TestLateMoveRejoined(t *testing.T) {
	j := exactJVM(1)
	j.rescan, j.lateMoves = true, true
	j.heap, j.heapKnown = heap.Info{GC: "Z", Ranges: []heap.Range{{Start: 0x1000, End: 0x10000}}}, true
	j.OnBatch(batch(5, hello(1), method(1, "LA;", "a", 1), tagged(2, 0x2000, 4096, 1, 1)))
	j.OnBatch(batch(22, &agentwire.GCStart{Time: 10}, &agentwire.GCFinish{Time: 20},
		&agentwire.Reconcile{Time: 21}))
	j.OnSample(fault(30, 0x8010), sample.PageFaults) // A's new copy, not yet known
	j.OnSample(fault(31, 0x9010), sample.PageFaults) // no tracked object
	j.OnBatch(batch(50, &agentwire.GCStart{Time: 40}, &agentwire.GCFinish{Time: 41},
		&agentwire.Reconcile{Time: 42, Objects: []agentwire.TagAddr{{Tag: 1, Addr: 0x8000}}}))
	if j.stats.Attributed != 1 || j.stats.MovedLate != 1 || len(j.lateQ)-j.lateH != 1 {
		t.Fatalf("after the rescan: attributed %d, moved late %d, waiting %d; want 1, 1, 1",
			j.stats.Attributed, j.stats.MovedLate, len(j.lateQ)-j.lateH)
	}
	j.OnBatch(batch(31 + lateHold + 1))
	if len(j.lateQ)-j.lateH != 0 {
		t.Fatalf("%d samples still waiting past lateHold", len(j.lateQ)-j.lateH)
	}
	got := map[string]uint64{}
	for _, o := range j.Report() {
		got[o.Site] = o.Samples
	}
	if got["A.a:1"] != 1 || j.stats.Attributed != 1 {
		t.Fatalf("samples by site %v (attributed %d): want A one", got, j.stats.Attributed)
	}
	var untracked uint64
	for _, a := range j.remainder {
		untracked += a.samples
	}
	if untracked != 1 {
		t.Errorf("remainder %d samples, want the one in no object", untracked)
	}
}

// A waiting sample whose object start the sampling program read is not
// charged to a moved object that starts elsewhere.
func TestLateMoveNeedsItsObject(t *testing.T) {
	j := exactJVM(1)
	j.rescan, j.lateMoves = true, true
	j.heap, j.heapKnown = heap.Info{GC: "Z", Ranges: []heap.Range{{Start: 0x1000, End: 0x10000}}}, true
	j.OnBatch(batch(5, hello(1), method(1, "LA;", "a", 1), tagged(2, 0x2000, 4096, 1, 1)))
	p := pending{time: 30, stime: 30, addr: 0x8010, obj: 0x8008, located: true}
	j.attribute(&p)
	j.OnBatch(batch(50, &agentwire.GCStart{Time: 40}, &agentwire.GCFinish{Time: 41},
		&agentwire.Reconcile{Time: 42, Objects: []agentwire.TagAddr{{Tag: 1, Addr: 0x8000}}}))
	if j.stats.Attributed != 0 || len(j.lateQ)-j.lateH != 1 {
		t.Fatalf("attributed %d, waiting %d: want 0, 1", j.stats.Attributed, len(j.lateQ)-j.lateH)
	}
}

// Held samples take at most a quarter of the bytes pending samples may
// hold: past it, a sample in no object is judged at once.
func TestLateMoveBounded(t *testing.T) {
	j := exactJVM(1)
	j.rescan, j.lateMoves = true, true
	j.heap, j.heapKnown = heap.Info{GC: "Z", Ranges: []heap.Range{{Start: 0x1000, End: 0x10000}}}, true
	j.OnBatch(batch(5, hello(1)))
	j.pendingSize = maxPendingBytes / 4
	p := pending{time: 30, stime: 30, addr: 0x8010}
	j.attribute(&p)
	if len(j.lateQ)-j.lateH != 0 || len(j.remainder) != 1 {
		t.Fatalf("waiting %d, remainder rows %d: want 0, 1", len(j.lateQ)-j.lateH, len(j.remainder))
	}
}
