package join

import (
	"testing"

	"github.com/djx-bpf/djx-bpf/hotspot/heap"
	"github.com/djx-bpf/djx-bpf/report"
	"github.com/djx-bpf/djx-bpf/sources/agentwire"
	"github.com/djx-bpf/djx-bpf/sources/sample"
)

// Samples outside the heap in a direct buffer's memory are charged to the
// buffer, by its holder chain, as off-heap; a pool's chunks of one type and
// chain fold into one row; samples elsewhere stay in the remainder.
func TestOffHeapOwners(t *testing.T) {
	const slab, pool = 0x7f00_0000_0000, 0x7f10_0000_0000
	j := exactJVM(1)
	j.heap, j.heapKnown = heap.Info{Ranges: []heap.Range{{Start: 0x5000_0000, End: 0x8000_0000}}}, true
	j.OnBatch(batch(100, hello(10)))
	j.BeginHeapWalk(120)
	for i, a := range []uint64{slab, slab + 32<<20, slab + 64<<20 - 1, // the slab
		pool + 8, pool + 1<<20 + 8, // two chunks of the pool
		slab + 64<<20, // just past the slab
		0x5000_0008,   // in the heap
	} {
		j.OnSample(fault(150+uint64(i), a), sample.PageFaults)
	}
	j.SamplesComplete(1 << 40)
	j.OnBatch(batch(500))
	j.OnHeapWalk(&HeapWalk{Start: 120, End: 400,
		Paths: []agentwire.CensusPath{{ID: 1, Hop: "Cache.slab (static)"}, {ID: 2, Hop: "Pool.chunks (static)"}, {ID: 3, Parent: 2, Hop: "[]"}},
		OffHeap: []OffHeapOwner{
			{Start: slab, End: slab + 64<<20, TypeSig: "Ljava/nio/DirectByteBuffer;", Path: 1},
			{Start: pool + 1<<20, End: pool + 2<<20, TypeSig: "Ljava/nio/DirectByteBuffer;", Path: 3},
			{Start: pool, End: pool + 1<<20, TypeSig: "Ljava/nio/DirectByteBuffer;", Path: 3},
			{Start: 0x5000_0000, End: 0x5000_1000, TypeSig: "Ljava/nio/DirectByteBuffer;", Path: 1}, // in the heap: refused
		}})
	j.Drain(true)
	if j.stats.OffHeapSamples != 5 || j.stats.Attributed != 5 {
		t.Fatalf("stats %+v", j.stats)
	}
	byHolder := map[string]report.Object{}
	for _, o := range j.Report() {
		byHolder[o.Origin+" "+report.HolderText(o.Holder, 0)] = o
	}
	s := byHolder["off-heap Cache.slab (static)"]
	if s.Type != "java.nio.DirectByteBuffer" || s.Site != "[off-heap]" || s.Samples != 3 || s.Objects != 1 || s.Bytes != 64<<20 || !s.Held() {
		t.Errorf("slab row %+v", s)
	}
	p := byHolder["off-heap Pool.chunks (static) → []"]
	if p.Samples != 2 || p.Objects != 2 || p.Bytes != 2<<20 {
		t.Errorf("pool row %+v", p)
	}
	var outside uint64
	for _, a := range j.Remainder() {
		if a.Where != report.WhereUntracked {
			outside += a.Samples
		}
	}
	if outside != 1 {
		t.Errorf("%d samples outside the heap left in the remainder, want 1: %+v", outside, j.Remainder())
	}

	// A walk that finds none takes the owners back.
	j.OnHeapWalk(&HeapWalk{Start: 600, End: 700})
	for _, o := range j.Report() {
		if o.Origin == report.OriginOffHeap && (o.Objects != 0 || o.Bytes != 0) {
			t.Errorf("after a walk with no owners: %+v", o)
		}
	}
}
