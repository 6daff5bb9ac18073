package join

import (
	"slices"
	"testing"

	"github.com/djx-bpf/djx-bpf/report"
	"github.com/djx-bpf/djx-bpf/sources/agentwire"
	"github.com/djx-bpf/djx-bpf/sources/sample"
)

func censusPath(id, parent uint32, hop string) *agentwire.CensusPath {
	return &agentwire.CensusPath{ID: id, Parent: parent, Hop: hop}
}

// A census's objects meet the samples taken from its start on, although its
// records arrive later than the watermark of the batches between; they
// are named by their holder chains, and one already tracked is not
// tracked twice.
func TestJoinCensus(t *testing.T) {
	j := exactJVM(1)
	j.OnBatch(batch(100, hello(10), &agentwire.CensusStart{Time: 100, Kind: agentwire.CensusAttach},
		alloc(90, 0x9000_0000, 4096, "[J", agentwire.Frame{Method: 1})))
	j.OnSample(fault(150, 0x5000_0040), sample.PageFaults) // in the map's value
	j.OnSample(fault(160, 0x6000_0100), sample.PageFaults) // in main's local
	j.OnSample(fault(170, 0x9000_0010), sample.PageFaults) // the sampled allocation
	j.SamplesComplete(1 << 40)
	// A batch with a later watermark but no census yet: the join waits.
	j.OnBatch(batch(400))
	if j.stats.Attributed != 0 {
		t.Fatalf("samples judged before the census ended: %+v", j.stats)
	}
	j.OnBatch(batch(500,
		censusPath(1, 0, "RealService.index (static)"), censusPath(2, 1, "java.util.HashMap.table"),
		censusPath(3, 2, "[]"), censusPath(4, 3, "java.util.HashMap$Node.value"),
		censusPath(5, 0, `RealService.main:54 local #5 (thread "main")`),
		&agentwire.Census{Time: 100, Addr: 0x5000_0000, Size: 65552, Tag: 11, Path: 4, Kind: agentwire.CensusAttach, TypeSig: "[J"},
		&agentwire.Census{Time: 100, Addr: 0x5100_0000, Size: 65552, Tag: 12, Path: 4, Kind: agentwire.CensusAttach, TypeSig: "[J"},
		&agentwire.Census{Time: 100, Addr: 0x6000_0000, Size: 16 << 20, Tag: 13, Path: 5, Kind: agentwire.CensusAttach, TypeSig: "[J"},
		&agentwire.Census{Time: 100, Addr: 0x9000_0000, Size: 4096, Tag: 14, Path: 0, Kind: agentwire.CensusAttach, TypeSig: "[J"},
		&agentwire.CensusEnd{Time: 450, Kind: agentwire.CensusAttach, Status: agentwire.CensusHolders, Objects: 4, HeapWalkNanos: 2e6, HolderWalkNanos: 9e6, PauseMaxNanos: 9e6, HeapWalkPasses: 1}))
	j.Drain(true)
	if j.stats.Attributed != 3 || j.stats.CensusObjects != 3 || j.stats.CensusDuplicates != 1 {
		t.Fatalf("stats %+v", j.stats)
	}
	byHolder := map[string]report.Object{}
	for _, o := range j.Report() {
		byHolder[report.HolderText(o.Holder, 0)] = o
	}
	m := byHolder["RealService.index (static) → java.util.HashMap.table → [] → java.util.HashMap$Node.value"]
	if m.Origin != report.OriginCensus || m.Site != "[allocated before attach]" || m.Objects != 2 || m.Samples != 1 || m.EstSamples != 1 || m.Type != "long[]" {
		t.Errorf("map values %+v", m)
	}
	if l := byHolder[`RealService.main:54 local #5 (thread "main")`]; l.Samples != 1 || l.Objects != 1 {
		t.Errorf("main's local %+v", l)
	}
	if a := byHolder[""]; a.Origin != report.OriginAllocation || a.Samples != 1 {
		t.Errorf("the sampled allocation %+v", a)
	}
	var st report.Stats
	var notes []string
	j.CensusStats(&st, func(f string, a ...any) { notes = append(notes, f) })
	if st.CensusPauseMs != 11 || st.CensusPauseMaxMs != 9 || st.CensusHolders != "all" || st.CensusMs != 350e-6 || len(notes) != 0 {
		t.Errorf("census stats %+v, notes %q", st, notes)
	}
}

// A census that passed its budget, or dropped its holders, says so.
func TestCensusNotes(t *testing.T) {
	for _, tc := range []struct {
		status  agentwire.CensusStatus
		holders string
	}{
		{agentwire.CensusOverBudget, "none"},
		{agentwire.CensusHoldersSkipped, "skipped"},
		{agentwire.CensusHoldersPartial, "partial"},
		{agentwire.CensusPartial | agentwire.CensusHoldersSkipped, "skipped"},
	} {
		j := exactJVM(1)
		j.OnBatch(batch(100, hello(10), &agentwire.CensusStart{Time: 20}, &agentwire.CensusEnd{Time: 90, Status: tc.status, Kind: agentwire.CensusAttach}))
		var st report.Stats
		var notes []string
		j.CensusStats(&st, func(f string, a ...any) { notes = append(notes, f) })
		if st.CensusHolders != tc.holders || len(notes) != 1 || st.CensusPartial != (tc.status&agentwire.CensusPartial != 0) {
			t.Errorf("status %#x: holders %q, notes %q", tc.status, st.CensusHolders, notes)
		}
		if j.censusHold != 0 {
			t.Errorf("status %#x: the join still waits", tc.status)
		}
	}
}

// A corrupt stream cannot make a holder chain loop or run on.
func TestHolderChainBounded(t *testing.T) {
	j := exactJVM(1)
	j.OnBatch(batch(10, hello(1), censusPath(1, 2, "a"), censusPath(2, 1, "b"), censusPath(3, 0, "root"), censusPath(4, 3, "x")))
	if got := j.holderChain(4); !slices.Equal(got, []string{"root", "x"}) {
		t.Errorf("chain 4 = %q", got)
	}
	if got := j.holderChain(2); len(got) > 2 {
		t.Errorf("cyclic chain = %q", got)
	}
	if got := j.holderChain(99); got != nil {
		t.Errorf("unknown chain = %q", got)
	}
}

// G1's filler arrays (JDK 21+) are dead space the census can walk over:
// they are counted, never tracked, and a sample in one stays unattributed.
func TestCensusSkipsFillers(t *testing.T) {
	j := exactJVM(1)
	j.OnBatch(batch(100, hello(10), &agentwire.CensusStart{Time: 100, Kind: agentwire.CensusAttach}))
	j.OnSample(fault(150, 0x5000_0040), sample.PageFaults)
	j.SamplesComplete(1 << 40)
	j.OnBatch(batch(500,
		&agentwire.Census{Time: 100, Addr: 0x5000_0000, Size: 1 << 20, Kind: agentwire.CensusAttach, TypeSig: "[Ljdk/internal/vm/FillerElement;"},
		&agentwire.Census{Time: 100, Addr: 0x5800_0000, Size: 4096, Kind: agentwire.CensusAttach, TypeSig: "Ljdk/internal/vm/FillerObject;"},
		&agentwire.CensusEnd{Time: 450, Kind: agentwire.CensusAttach, Status: agentwire.CensusHolders, Objects: 2, HeapWalkPasses: 1}))
	j.Drain(true)
	if j.stats.CensusFillers != 2 || j.stats.CensusObjects != 0 || j.stats.Attributed != 0 || len(j.Report()) != 0 {
		t.Fatalf("fillers tracked: stats %+v, report %+v", j.stats, j.Report())
	}
}

// Under JDK 17's ZGC a census after a GC reports an object the sampler
// tracks at another view than its allocation's: the same object, not one
// the sampler missed (GcHot's hot arrays went to "[missed by the heap
// sampler]", 0.14 of their samples left on their site).
func TestJoinCensusZGCViews(t *testing.T) {
	const off = 0x5000_0000
	j := exactJVM(1)
	j.canon = func(a uint64) (uint64, bool) {
		for _, b := range []uint64{1 << 42, 1 << 43, 1 << 44} {
			if a >= b && a-b < 32<<30 {
				return a - b + 1<<42, true
			}
		}
		return a, false
	}
	j.OnBatch(batch(100, hello(10), alloc(90, 1<<43|off, 1<<20, "[J", agentwire.Frame{Method: 1}),
		&agentwire.CensusStart{Time: 100, Kind: agentwire.CensusAttach},
		&agentwire.Census{Time: 100, Addr: 1<<44 | off, Size: 1 << 20, Tag: 11, Kind: agentwire.CensusAttach, TypeSig: "[J"},
		&agentwire.CensusEnd{Time: 150, Kind: agentwire.CensusAttach, Objects: 1}))
	j.Drain(true)
	if j.stats.CensusObjects != 0 || j.stats.CensusDuplicates != 1 {
		t.Fatalf("a tracked object reported at another view: %d census objects, %d duplicates; want 0, 1", j.stats.CensusObjects, j.stats.CensusDuplicates)
	}
}
