package join

import (
	"testing"

	"github.com/djx-bpf/djx-bpf/sources/agentwire"
	"github.com/djx-bpf/djx-bpf/sources/sample"
)

func tagged(t, addr, size, tag uint64, method uint64) *agentwire.Alloc {
	a := alloc(t, addr, size, "[J", agentwire.Frame{Method: method})
	a.Tag = tag
	return a
}

// A compacting GC slides A from 0x2000 down to 0x1000 and B from 0x3000
// into A's old place. Whatever order the rescan lists them in, and even
// when B's entry comes in a record before A's, both objects survive with
// their new addresses.
func TestRescanSlidingCompaction(t *testing.T) {
	moves := map[string][][]agentwire.TagAddr{
		"A first":      {{{Tag: 1, Addr: 0x1000}, {Tag: 2, Addr: 0x2000}}},
		"B first":      {{{Tag: 2, Addr: 0x2000}, {Tag: 1, Addr: 0x1000}}},
		"two records":  {{{Tag: 2, Addr: 0x2000}}, {{Tag: 1, Addr: 0x1000}}},
		"B then empty": {{{Tag: 2, Addr: 0x2000}}, {{Tag: 1, Addr: 0x1000}}, {}},
	}
	for name, recs := range moves {
		t.Run(name, func(t *testing.T) {
			j := exactJVM(1)
			j.rescan = true
			j.OnBatch(batch(5, hello(1), method(1, "LA;", "a", 1), method(2, "LB;", "b", 2),
				tagged(2, 0x2000, 4096, 1, 1), tagged(3, 0x3000, 4096, 2, 2)))
			j.OnBatch(batch(20, &agentwire.GCStart{Time: 10}, &agentwire.GCFinish{Time: 20}))
			var rs []agentwire.Record
			for _, objs := range recs {
				rs = append(rs, &agentwire.Reconcile{Time: 21, Objects: objs})
			}
			j.OnBatch(batch(30, rs...))
			j.OnSample(fault(40, 0x1010), sample.PageFaults) // A's new place
			j.OnSample(fault(41, 0x2010), sample.PageFaults) // B's new place
			j.OnSample(fault(42, 0x3010), sample.PageFaults) // free now
			j.OnBatch(batch(100))
			j.Drain(true)
			got := map[string]uint64{}
			for _, o := range j.Report() {
				got[o.Site] = o.Samples
			}
			if got["A.a:1"] != 1 || got["B.b:2"] != 1 || j.stats.Attributed != 2 {
				t.Fatalf("samples by site %v (attributed %d): want A and B one each", got, j.stats.Attributed)
			}
			if j.stats.MovesMissed != 2 {
				t.Errorf("moves found by the rescan %d, want 2", j.stats.MovesMissed)
			}
		})
	}
}

// A GC moves A from 0x2000 to 0x8000, and its rescan comes only after a
// new object B has been allocated over A's old place (the agent skipped the
// rescan: another GC began). A is not dead: the rescan that comes later
// places it, and a sample at its new place is charged to it.
func TestRescanLateAfterReuse(t *testing.T) {
	j := exactJVM(1)
	j.rescan = true
	j.OnBatch(batch(5, hello(1), method(1, "LA;", "a", 1), method(2, "LB;", "b", 2),
		tagged(2, 0x2000, 4096, 1, 1)))
	j.OnBatch(batch(20, &agentwire.GCStart{Time: 10}, &agentwire.GCFinish{Time: 20}))
	j.OnBatch(batch(30, tagged(21, 0x2000, 4096, 2, 2),
		&agentwire.GCStart{Time: 22}, &agentwire.GCFinish{Time: 25},
		&agentwire.Reconcile{Time: 27, Objects: []agentwire.TagAddr{{Tag: 1, Addr: 0x8000}}}))
	j.OnSample(fault(40, 0x8010), sample.PageFaults) // A's new place
	j.OnSample(fault(41, 0x2010), sample.PageFaults) // B
	j.OnBatch(batch(100))
	j.Drain(true)
	got := map[string]uint64{}
	for _, o := range j.Report() {
		got[o.Site] = o.Samples
	}
	if got["A.a:1"] != 1 || got["B.b:2"] != 1 {
		t.Fatalf("samples by site %v: want A and B one each", got)
	}
}
