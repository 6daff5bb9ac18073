package join

import (
	"math/rand"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/djx-bpf/djx-bpf/sources/agentwire"
)

// TestQueueLateFreesHeap: FREEs stamped before a million queued ALLOCs go
// to the heap of late records, each in O(log n): the queued ALLOCs are not
// moved (their slots keep their addresses), the heap holds its invariant,
// and the records come out by (time, arrival).
func TestQueueLateFreesHeap(t *testing.T) {
	allocs, late := lateFreeStream(1_000_000, 4000)
	j := newJVM(1)
	j.OnBatch(allocs)
	first, n := &j.agentQ[j.agentH], len(j.agentQ)-j.agentH
	j.OnBatch(late)
	if &j.agentQ[j.agentH] != first || len(j.agentQ)-j.agentH != n {
		t.Fatalf("the queued ALLOCs were moved or added to: %d now, %d before", len(j.agentQ)-j.agentH, n)
	}
	if len(j.agentLate) != 4000 || j.queuedLen() != n+4000 {
		t.Fatalf("late heap holds %d, queue %d: want the 4000 FREEs in the heap", len(j.agentLate), j.queuedLen())
	}
	checkHeap(t, j.agentLate)
	var prev *timedRec
	for j.queuedLen() > 0 {
		p := *j.peekTimed()
		if r := j.popTimed(); r != p.rec {
			t.Fatal("popTimed did not return what peekTimed showed")
		}
		if prev != nil && !prev.before(&p) {
			t.Fatalf("(%d, %d) came out after (%d, %d)", p.time, p.seq, prev.time, prev.seq)
		}
		prev = &p
	}
	if j.queuedSize != 0 {
		t.Errorf("%d queued bytes counted in an empty queue", j.queuedSize)
	}
}

func checkHeap(t *testing.T, h recHeap) {
	t.Helper()
	for i := 1; i < len(h); i++ {
		if h[i].before(&h[(i-1)/2]) {
			t.Fatalf("heap invariant broken at %d", i)
		}
	}
}

// TestQueueOrderAsSortedInsert: for streams whose in-order records come in
// time order and whose late records (FREE, RECONCILE, CENSUS) may precede
// them, with ties and drains between batches, the queue gives records in
// the order the sorted insert it replaces gave them.
func TestQueueOrderAsSortedInsert(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	ops := make([]byte, 600)
	for round := 0; round < 200; round++ {
		rng.Read(ops)
		checkQueueOrder(t, ops)
	}
}

// FuzzQueueOrder is TestQueueOrderAsSortedInsert on the fuzzer's streams.
func FuzzQueueOrder(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 200, 5, 250, 7, 255, 0})
	f.Fuzz(func(t *testing.T, ops []byte) { checkQueueOrder(t, ops) })
}

// checkQueueOrder runs the stream ops describes, byte pairs (kind, arg),
// through the queue and through the sorted insert it replaced, and
// compares the records each gives.
func checkQueueOrder(t *testing.T, ops []byte) {
	t.Helper()
	j := newJVM(1)
	var ref []timedRec // the sorted insert: after every record of time ≤ t
	var got, want []agentwire.Record
	tail := uint64(100)
	for step := 0; step+1 < len(ops); step += 2 {
		kind, arg := ops[step]%10, uint64(ops[step+1])
		r := &agentwire.Free{Tag: uint64(step)}
		var at uint64
		switch {
		case kind < 5: // in order (ALLOC, INTERVAL)
			tail += arg % 3
			at = tail
			ref = append(ref, timedRec{time: at, rec: r})
		case kind < 9: // late, often tied with queued records
			at = tail - arg%min(tail, 20)
			i := sort.Search(len(ref), func(i int) bool { return ref[i].time > at })
			ref = append(ref[:i], append([]timedRec{{time: at, rec: r}}, ref[i:]...)...)
		default: // drain up to a horizon
			h := tail - arg%10
			for len(ref) > 0 && ref[0].time <= h {
				want = append(want, ref[0].rec)
				ref = ref[1:]
			}
			for p := j.peekTimed(); p != nil && p.time <= h; p = j.peekTimed() {
				got = append(got, j.popTimed())
			}
			continue
		}
		j.queueTimed(at, r)
	}
	for _, tr := range ref {
		want = append(want, tr.rec)
	}
	checkHeap(t, j.agentLate)
	for j.queuedLen() > 0 {
		got = append(got, j.popTimed())
	}
	if len(got) != len(want) {
		t.Fatalf("%d records out, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("record %d is FREE %d, want FREE %d", i, got[i].(*agentwire.Free).Tag, want[i].(*agentwire.Free).Tag)
		}
	}
}

// TestCapsReconcileQueued: RECONCILE and INTERVAL records wait in the
// queue too, and count against its cap.
func TestCapsReconcileQueued(t *testing.T) {
	defer func(q int) { maxQueued = q }(maxQueued)
	maxQueued = 10
	j := newJVM(1)
	wm := uint64(10 * time.Second)
	recs := []agentwire.Record{hello(1)}
	for i := uint64(0); i < 20; i++ {
		recs = append(recs, &agentwire.Reconcile{Time: wm + 1 + i}, &agentwire.Interval{Time: wm + 1 + i, Interval: 4096})
	}
	j.OnBatch(batch(wm, recs...))
	if n := j.queuedLen(); n != 10 {
		t.Errorf("%d records queued, cap 10", n)
	}
	if note := j.capNote(); !strings.Contains(note, "30 records past 10 queued") {
		t.Errorf("note %q", note)
	}
	if st := j.Stats(); st.RecordsDroppedCount != 30 {
		t.Errorf("records_dropped_count %d, want 30", st.RecordsDroppedCount)
	}
}

// TestCapsQueueBytes: RECONCILEs listing many objects, stamped ahead of
// the watermark, stop at the queue's byte budget whatever their number.
func TestCapsQueueBytes(t *testing.T) {
	defer func(b int) { maxQueuedBytes = b }(maxQueuedBytes)
	maxQueuedBytes = 1 << 20
	j := newJVM(1)
	wm := uint64(10 * time.Second)
	objs := make([]agentwire.TagAddr, 16<<10) // 256 KiB each
	for i := uint64(0); i < 16; i++ {
		j.OnBatch(batch(wm, &agentwire.Reconcile{Time: wm + 1 + i, Objects: objs}))
	}
	if j.queuedSize > maxQueuedBytes+queuedBytes(&agentwire.Reconcile{Objects: objs}) || j.queuedLen() != 4 {
		t.Errorf("%d records of %d bytes queued, budget %d", j.queuedLen(), j.queuedSize, maxQueuedBytes)
	}
	if st := j.Stats(); st.RecordsDroppedBytes != 12 || !strings.Contains(j.capNote(), "12 records past 1 MiB queued") {
		t.Errorf("records_dropped_bytes %d, note %q", st.RecordsDroppedBytes, j.capNote())
	}
	j.Drain(true)
	if j.queuedSize != 0 {
		t.Errorf("%d bytes counted in an empty queue", j.queuedSize)
	}
}
