package join

import (
	"testing"

	"github.com/djx-bpf/djx-bpf/sources/agentwire"
	"github.com/djx-bpf/djx-bpf/sources/sample"
)

// Each window reports its own samples and allocations: after
// ResetWindow the counts start again from zero, the object stays tracked
// (a sample on it in the next window is still charged to it), and the
// access paths of past windows are gone, so that 1,000 windows keep no
// more than one.
func TestResetWindowCountsOneWindow(t *testing.T) {
	j := exactJVM(1)
	j.OnBatch(batch(100, hello(100), method(7, "LHot;", "make", 12),
		alloc(140, 0x1000_0000, 4096, "[J", agentwire.Frame{Method: 7, BCI: 3})))
	now := uint64(200)
	for w := range 1000 {
		for i := range 3 {
			now += 10
			j.OnSample(fault(now, 0x1000_0010+uint64(i)*8), sample.PageFaults)
		}
		now += 10
		j.OnBatch(batch(now))
		objs := j.Report()
		if len(objs) != 1 || objs[0].Samples != 3 {
			t.Fatalf("window %d: objects %+v, want the one object with this window's 3 samples", w, objs)
		}
		if want := uint64(0); w > 0 && objs[0].Objects != want {
			t.Fatalf("window %d: %d objects allocated, want %d (the allocation was in window 0)", w, objs[0].Objects, want)
		}
		if st := j.Stats(); st.Attributed != 3 {
			t.Fatalf("window %d: %d attributed, want 3", w, st.Attributed)
		}
		j.ResetWindow()
		if s := j.sites[0]; s.accesses != nil || s.samples != 0 || len(j.remainder) != 0 {
			t.Fatalf("window %d: reset kept %d paths, %d samples, %d remainder paths", w, len(s.accesses), s.samples, len(j.remainder))
		}
	}
	if j.LiveObjects() != 1 {
		t.Errorf("%d live objects after 1000 windows, want the one still tracked", j.LiveObjects())
	}
}

// A census site describes the heap found at attach: its object count
// stays in every window's report.
func TestResetWindowKeepsCensusCounts(t *testing.T) {
	j := exactJVM(1)
	s := &site{typeSig: "[J", census: agentwire.CensusAttach, objects: 2, bytes: 8192, samples: 5}
	j.sites = append(j.sites, s)
	j.ResetWindow()
	if s.objects != 2 || s.bytes != 8192 || s.samples != 0 {
		t.Errorf("census site after reset: %d objects, %d bytes, %d samples; want 2, 8192, 0", s.objects, s.bytes, s.samples)
	}
}
