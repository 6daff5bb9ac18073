package heapwalk

import (
	"context"
	"testing"
)

// TestWalkHotFirst cuts a walk at its queue's cap: the objects on pages
// the samples hit are named, in place of others, and a walk cut short
// by its context names them first.
func TestWalkHotFirst(t *testing.T) {
	const n = 2000
	s := newSynth(t, "jdk17", true, true)
	_, itemSize := s.fields(0)
	item := s.class("app/Item", 0, itemSize+8, nil, 0)
	objs := s.arrayClass("[Ljava/lang/Object;", true, 2)
	app := s.class("App", 0, 16, nil, 2)
	cold, hot := s.array(objs, n), s.array(objs, n)
	var hotItems []uint64
	for i := range n {
		s.elem(cold, i, s.obj(item))
	}
	for i := range n {
		it := s.obj(item)
		s.elem(hot, i, it)
		hotItems = append(hotItems, it)
	}
	s.setStatic(app, 0, cold)
	s.setStatic(app, 1, hot)
	lay := s.finish()
	names := func(f FieldRef) string {
		if f.Static && f.Klass == app && f.Offset >= classSize {
			return "App." + []string{"cold", "hot"}[(f.Offset-classSize)/uint32(s.oop)]
		}
		return ""
	}
	count := func(res *Result, chain string) uint64 {
		for _, r := range res.Rows {
			if res.ChainString(r.Chain) == chain && r.Class == "app.Item" {
				return r.Count
			}
		}
		return 0
	}
	sc := &scene{l: lay}
	// The cold array comes first (lower address): without a hint its
	// items fill the queue, and the hot ones are dropped.
	plain := walkScene(t, sc, s.m, Config{FieldName: names, MaxQueue: n + n/2})
	if got := count(plain, "App.hot (static) -> []"); got >= n || plain.Stats.QueueDropped == 0 {
		t.Fatalf("without hints: %d of %d hot items named, %d dropped: the test does not cut", got, n, plain.Stats.QueueDropped)
	}
	// Samples spread over the hot items: one in fifty, some on each page.
	var hits []uint64
	for i := 0; i < n; i += 50 {
		hits = append(hits, hotItems[i])
	}
	hinted := walkScene(t, sc, s.m, Config{FieldName: names, MaxQueue: n + n/2, Hot: hits})
	if got := count(hinted, "App.hot (static) -> []"); got != n {
		t.Errorf("with hints: %d of %d hot items named (%d on hot pages), want all", got, n, hinted.Stats.Hot)
	}
	if hinted.Stats.MaxQueueLen > n+n/2 {
		t.Errorf("queue grew to %d past its cap %d", hinted.Stats.MaxQueueLen, n+n/2)
	}
	// A walk whose context ends after its first batch of items has
	// walked the hot pages' objects before the others: the cold items
	// named are those that share a page with hot ones. (The reads are
	// the clock here: one span each, no copied pieces.)
	ctx, cancel := context.WithCancel(context.Background())
	mem := &cancelAfter{fakeMem: s.m, reads: 4, cancel: cancel}
	cut, err := Walk(ctx, lay, mem, Config{FieldName: names, Batch: 256, Hot: hotItems, MaxCopy: 1})
	if err != nil {
		t.Fatal(err)
	}
	if h, c := count(cut, "App.hot (static) -> []"), count(cut, "App.cold (static) -> []"); !cut.Stats.Canceled || h == 0 || c > 4096/(itemSize+8) {
		t.Errorf("cut short (canceled %v): %d hot and %d cold items named, want hot ones and a page of cold at most", cut.Stats.Canceled, h, c)
	}
}

// cancelAfter ends a walk's context after some vector reads.
type cancelAfter struct {
	*fakeMem
	reads  int
	cancel func()
}

func (m *cancelAfter) ReadVector(dst []byte, spans []Span) (int, error) {
	if m.reads--; m.reads <= 0 {
		m.cancel()
	}
	return m.fakeMem.ReadVector(dst, spans)
}

func TestQueueDropLast(t *testing.T) {
	var q queue
	for i := range segLen + 3 {
		q.push(uint64(i))
	}
	for range 4 {
		if !q.dropLast() {
			t.Fatal("dropLast on a full queue")
		}
	}
	got := q.pop(nil, 5)
	if q.len() != segLen-6 || got[0] != 0 || got[4] != 4 {
		t.Fatalf("len %d, popped %v", q.len(), got)
	}
	for q.dropLast() {
	}
	if q.len() != 0 || len(q.pop(nil, 1)) != 0 {
		t.Fatalf("emptied queue: len %d", q.len())
	}
	q.push(7)
	if got := q.pop(nil, 2); len(got) != 1 || got[0] != 7 {
		t.Fatalf("after emptying: %v", got)
	}
}

// TestWalkDefersLargeArrays: a list of more objects than a quarter of
// the queue's cap is walked a piece at a time, so none is dropped.
func TestWalkDefersLargeArrays(t *testing.T) {
	const n = 600_000 // 2.4 MB of narrow oops: three pieces
	s := newSynth(t, "jdk17", true, true)
	_, itemSize := s.fields(0)
	item := s.class("app/Item", 0, itemSize, nil, 0)
	objs := s.arrayClass("[Ljava/lang/Object;", true, 2)
	app := s.class("App", 0, 16, nil, 1)
	arr := s.array(objs, n)
	for i := range n {
		s.elem(arr, i, s.obj(item))
	}
	s.setStatic(app, 0, arr)
	lay := s.finish()
	res := walkScene(t, &scene{l: lay}, s.m, Config{MaxQueue: 400_000})
	var items uint64
	for _, r := range res.Rows {
		if r.Class == "app.Item" {
			items += r.Count
		}
	}
	if items != n || res.Stats.QueueDropped != 0 || res.Stats.Deferred == 0 || res.Stats.MaxQueueLen > 400_000 {
		t.Errorf("%d of %d items walked, %d dropped, %d deferred, queue %d", items, n, res.Stats.QueueDropped, res.Stats.Deferred, res.Stats.MaxQueueLen)
	}
}
