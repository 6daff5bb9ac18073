package heapwalk

import (
	"context"
	"testing"
)

// BenchmarkWalkSynth walks a synthetic service heap (ServiceTruth's
// shape: a list of long[2] and a tree of entries with Integer keys and
// rows holding a long[4]) in the fake memory, with no JVM: the walk's own
// CPU per object, without the reads' system calls.
//
//	go test ./heapwalk -run '^$' -bench WalkSynth -cpuprofile cpu.out
func BenchmarkWalkSynth(b *testing.B) {
	s := newSynth(b, "jdk17", true, true)
	longs := s.arrayClass("[J", false, 3)
	objs := s.arrayClass("[Ljava/lang/Object;", true, 2)
	lf, size := s.fields(1)
	list := s.class("app/List", 0, size, lf, 0)
	_, size = s.fields(0)
	integer := s.class("java/lang/Integer", 0, size+8, nil, 0)
	rf, size := s.fields(1)
	rowK := s.class("app/Row", 0, size+16, rf, 0)
	ef, size := s.fields(5) // key, value, left, right, parent
	entry := s.class("java/util/TreeMap$Entry", 0, size, ef, 0)
	tf, size := s.fields(1)
	tree := s.class("java/util/TreeMap", 0, size, tf, 0)
	app := s.class("App", 0, 16, nil, 2)

	const listN, treeN = 400_000, 150_000
	l := s.obj(list)
	arr := s.array(objs, listN)
	s.ref(l, lf[0], arr)
	for i := range listN {
		s.elem(arr, i, s.array(longs, 2))
	}
	s.setStatic(app, 0, l)
	// A balanced tree, its entries allocated in key order as puts make
	// them, each with its key, row and the row's columns.
	t := s.obj(tree)
	entries := make([]uint64, treeN)
	for i := range entries {
		e := s.obj(entry)
		s.ref(e, ef[0], s.obj(integer))
		r := s.obj(rowK)
		s.ref(r, rf[0], s.array(longs, 4))
		s.ref(e, ef[1], r)
		entries[i] = e
	}
	var link func(lo, hi int, parent uint64) uint64
	link = func(lo, hi int, parent uint64) uint64 {
		if lo >= hi {
			return 0
		}
		mid := (lo + hi) / 2
		e := entries[mid]
		s.ref(e, ef[4], parent)
		s.ref(e, ef[2], link(lo, mid, e))
		s.ref(e, ef[3], link(mid+1, hi, e))
		return e
	}
	s.ref(t, tf[0], link(0, treeN, 0))
	s.setStatic(app, 1, t)
	lay := s.finish()

	var res *Result
	for b.Loop() {
		var err error
		res, err = Walk(context.Background(), lay, s.m, Config{})
		if err != nil {
			b.Fatal(err)
		}
	}
	st := res.Stats
	if want := int64(2 + listN + 4*treeN + 1); st.Objects < want {
		b.Fatalf("walked %d objects, want at least %d", st.Objects, want)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(st.Objects), "ns/object")
	b.ReportMetric(float64(st.Objects), "objects")
}
