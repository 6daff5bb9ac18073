package join

import (
	"fmt"
	"strings"
	"testing"

	"github.com/djx-bpf/djx-bpf/hotspot/heap"
	"github.com/djx-bpf/djx-bpf/report"
	"github.com/djx-bpf/djx-bpf/sources/agentwire"
	"github.com/djx-bpf/djx-bpf/sources/sample"
)

// runs is a StructureIndex of address runs, each one object of 32 bytes.
type runs []struct {
	start uint64
	row   int
}

func (r runs) Lookup(addr, _ uint64) int {
	for _, x := range r {
		if addr >= x.start && addr < x.start+32 {
			return x.row
		}
	}
	return -1
}

// A heap walk's samples wait for it; then a sample in a small object is
// charged to its data structure, one in a large object to that object, and
// one elsewhere stays untracked.
func TestHeapWalkStructures(t *testing.T) {
	j := exactJVM(1)
	j.heap, j.heapKnown = heap.Info{Ranges: []heap.Range{{Start: 0x5000_0000, End: 0x8000_0000}}}, true
	j.OnBatch(batch(100, hello(10)))
	j.BeginHeapWalk(120)
	j.OnSample(fault(150, 0x5000_0008), sample.PageFaults) // a tree node
	j.OnSample(fault(160, 0x5000_0028), sample.PageFaults) // another
	j.OnSample(fault(170, 0x6000_0100), sample.PageFaults) // the table
	j.OnSample(fault(180, 0x7000_0000), sample.PageFaults) // nothing the walk saw
	j.SamplesComplete(1 << 40)
	j.OnBatch(batch(500))
	if j.stats.Attributed != 0 {
		t.Fatalf("samples judged before the walk ended: %+v", j.stats)
	}
	j.OnHeapWalk(&HeapWalk{Start: 120, End: 400,
		Paths: []agentwire.CensusPath{{ID: 1, Hop: "Service.tree (static)"}, {ID: 2, Parent: 1, Hop: "java.util.TreeMap.root"},
			{ID: 3, Parent: 2, Hop: "java.util.TreeMap$Entry.left"}, {ID: 4, Hop: "Service.table (static)"}},
		Objects: []agentwire.Census{{Time: 120, Addr: 0x6000_0000, Size: 1 << 20, Path: 4, TypeSig: "[J"}},
		Rows: []StructureRow{{TypeSig: "Ljava/util/TreeMap$Entry;", Path: 3, Objects: 1000, Bytes: 40000, OtherRoots: 2, Retained: 90000},
			{TypeSig: "[J", Path: 4, OtherRoots: 1, Retained: 1 << 20}},
		Index:   runs{{0x5000_0000, 0}, {0x5000_0020, 0}},
		Visited: 1001, Bytes: 40000 + 1<<20})
	j.Drain(true)
	if j.stats.Attributed != 3 || j.stats.StructureSamples != 2 || j.stats.InHeap != 4 {
		t.Fatalf("stats %+v", j.stats)
	}
	byHolder := map[string]report.Object{}
	for _, o := range j.Report() {
		byHolder[report.HolderText(o.Holder, 0)] = o
	}
	tree := byHolder["Service.tree (static) → java.util.TreeMap.root → java.util.TreeMap$Entry.left"]
	if tree.Origin != report.OriginStructure || tree.Objects != 1000 || tree.Bytes != 40000 || tree.Samples != 2 || tree.Type != "java.util.TreeMap$Entry" ||
		tree.OtherRoots != 2 || tree.RetainedBytes != 90000 {
		t.Errorf("tree row %+v", tree)
	}
	if tab := byHolder["Service.table (static)"]; tab.Origin != report.OriginCensus || tab.Samples != 1 || tab.Objects != 1 ||
		tab.OtherRoots != 1 || tab.RetainedBytes != 1<<20 {
		t.Errorf("table %+v", tab)
	}
	if hot := j.HotAddrs(); len(hot) != 4 || hot[0] != 0x5000_0008 || hot[3] != 0x7000_0000 {
		t.Errorf("hot addresses %#x, want the 4 in-heap samples'", hot)
	}
	var st report.Stats
	j.CensusStats(&st, func(string, ...any) {})
	if st.WalkObjects != 1001 || st.WalkStructures != 2 || st.WalkMs != 280e-6 {
		t.Errorf("walk stats %+v", st.CensusStats)
	}
}

// A walk that never ends holds the samples only until the profile ends,
// and says so.
func TestHeapWalkUnfinished(t *testing.T) {
	j := exactJVM(1)
	j.OnBatch(batch(100, hello(10)))
	j.BeginHeapWalk(120)
	j.OnSample(fault(150, 0x5000_0008), sample.PageFaults)
	j.SamplesComplete(1 << 40)
	j.Drain(true)
	if j.stats.Samples != 1 {
		t.Fatalf("stats %+v", j.stats)
	}
	var notes []string
	var st report.Stats
	j.CensusStats(&st, func(f string, _ ...any) { notes = append(notes, f) })
	if len(notes) != 1 {
		t.Errorf("notes %q", notes)
	}
}

// A second walk (after a GC moved the heap) replaces the first: the table
// is tracked at its new address only, the rows count the second walk's
// objects, and the samples charged before stay charged.
func TestHeapWalkReplaced(t *testing.T) {
	j := exactJVM(1)
	j.heap, j.heapKnown = heap.Info{Ranges: []heap.Range{{Start: 0x5000_0000, End: 0x8000_0000}}}, true
	j.OnBatch(batch(100, hello(10)))
	paths := []agentwire.CensusPath{{ID: 1, Hop: "Service.tree (static)"}, {ID: 2, Hop: "Service.table (static)"}}
	walk := func(start, table uint64, nodes uint64, idx runs) *HeapWalk {
		return &HeapWalk{Start: start, End: start + 10, Paths: paths,
			Objects: []agentwire.Census{{Time: start, Addr: table, Size: 1 << 20, Path: 2, TypeSig: "[J"}},
			Rows:    []StructureRow{{TypeSig: "Ljava/util/TreeMap$Entry;", Path: 1, Objects: nodes, Bytes: nodes * 40}},
			Index:   idx}
	}
	first := walk(110, 0x6000_0000, 1000, runs{{0x5000_0000, 0}})
	first.Rows[0].OtherRoots, first.Rows[0].Retained = 3, 1<<30
	j.OnHeapWalk(first)
	j.OnSample(fault(150, 0x6000_0100), sample.PageFaults)
	j.OnSample(fault(160, 0x5000_0008), sample.PageFaults)
	j.SamplesComplete(1 << 40)
	j.OnBatch(batch(300))
	j.OnHeapWalk(walk(310, 0x7000_0000, 900, runs{{0x5800_0000, 0}}))
	j.OnSample(fault(350, 0x6000_0100), sample.PageFaults) // where the table was
	j.OnSample(fault(360, 0x7000_0100), sample.PageFaults) // where it is
	j.OnSample(fault(370, 0x5000_0008), sample.PageFaults) // a node no longer there
	j.OnSample(fault(380, 0x5800_0008), sample.PageFaults) // one there now
	j.OnBatch(batch(1 << 40))
	j.Drain(true)
	byHolder := map[string]report.Object{}
	for _, o := range j.Report() {
		byHolder[report.HolderText(o.Holder, 0)] = o
	}
	if tab := byHolder["Service.table (static)"]; tab.Objects != 1 || tab.Bytes != 1<<20 || tab.Samples != 2 {
		t.Errorf("table %+v, want 1 object with the samples at its old and new addresses", tab)
	}
	if tree := byHolder["Service.tree (static)"]; tree.Objects != 900 || tree.Bytes != 900*40 || tree.Samples != 2 || tree.OtherRoots != 0 || tree.RetainedBytes != 0 {
		t.Errorf("tree %+v, want the second walk's 900 nodes and 2 samples, and what it says of reach (nothing)", tree)
	}
	if j.stats.Attributed != 4 || j.stats.CensusObjects != 2 {
		t.Errorf("stats: %d attributed, %d census objects", j.stats.Attributed, j.stats.CensusObjects)
	}
}

// A walk that could not read the heap (the JVM exited) leaves the last
// walk's objects and rows as they were, and says why.
func TestHeapWalkFailedKeepsLast(t *testing.T) {
	j := exactJVM(1)
	j.OnBatch(batch(100, hello(10)))
	j.OnHeapWalk(&HeapWalk{Start: 110, End: 120, Paths: []agentwire.CensusPath{{ID: 1, Hop: "Service.tree (static)"}},
		Rows: []StructureRow{{TypeSig: "Ljava/util/TreeMap$Entry;", Path: 1, Objects: 1000, Bytes: 40000}}, Index: runs{}})
	j.BeginHeapWalk(200)
	j.OnHeapWalk(&HeapWalk{Start: 200, End: 210, Failed: true, Note: "failed: read pid 1: no such process"})
	var notes []string
	var st report.Stats
	j.CensusStats(&st, func(f string, a ...any) { notes = append(notes, fmt.Sprintf(f, a...)) })
	if r := j.Report(); len(r) != 1 || r[0].Objects != 1000 || len(notes) != 1 || !strings.Contains(notes[0], "no such process") {
		t.Errorf("report %+v, notes %q: want the first walk's row and the failure noted", r, notes)
	}
}
