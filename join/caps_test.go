package join

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/djx-bpf/djx-bpf/agent"
	"github.com/djx-bpf/djx-bpf/heap"
)

// TestCapsFutureRecords: a record stamped far past the stream's watermark
// would wait in the queue to the end of the profile; it is dropped.
func TestCapsFutureRecords(t *testing.T) {
	j := newJVM(1)
	wm := uint64(10 * time.Second)
	j.OnBatch(batch(wm, hello(1), alloc(wm+uint64(2*time.Minute), 0x1000, 2048, "[B", agent.Frame{Method: 1}),
		&agent.Free{Time: wm + uint64(time.Hour), Tag: 1},
		alloc(wm+1, 0x2000, 2048, "[B", agent.Frame{Method: 1})))
	if q := len(j.agentQ) - j.agentH; q > 1 {
		t.Errorf("%d records queued, want the future ones dropped", q)
	}
	if n := j.capNote(); !strings.Contains(n, "2 allocations stamped in the future") && !strings.Contains(n, "stamped in the future") {
		t.Errorf("note %q", n)
	}
}

// TestCapsSpreadAllocs: ALLOCs 1 GiB apart cost the index 384 KiB each;
// outside a known heap they are dropped, and with the heap unknown the
// ranges they may spread over are capped.
func TestCapsSpreadAllocs(t *testing.T) {
	j := newJVM(1)
	j.heap, j.heapKnown = heap.Info{Ranges: []heap.Range{{Start: 0x7000_0000, End: 0x8000_0000}}}, true
	var recs []agent.Record
	recs = append(recs, hello(1), alloc(2, 0x7000_1000, 2048, "[B", agent.Frame{Method: 1}))
	for i := uint64(1); i <= 4096; i++ {
		recs = append(recs, alloc(2, i<<30|0x1000, 2048, "[B", agent.Frame{Method: 1}))
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	j.OnBatch(batch(10, recs...))
	j.Drain(true)
	runtime.ReadMemStats(&after)
	if n := j.stats.AllocsTracked; n != 1 {
		t.Errorf("%d allocations tracked, want only the one in the heap", n)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
		t.Errorf("known heap: %d MiB allocated", grew>>20)
	}
	if !strings.Contains(j.capNote(), "4096 allocations outside the heap") {
		t.Errorf("note %q", j.capNote())
	}

	old := maxChunks
	maxChunks = 16
	defer func() { maxChunks = old }()
	j = newJVM(1)
	j.OnBatch(batch(10, recs...))
	j.Drain(true)
	// The first two share range 1.
	if n := j.stats.AllocsTracked; n != 17 {
		t.Errorf("heap unknown: %d allocations tracked, want %d (the ranges' cap)", n, 17)
	}
	if !strings.Contains(j.capNote(), "allocations spread over more than 16 GiB ranges") {
		t.Errorf("note %q", j.capNote())
	}
}

// TestCapsCounts: objects, sites, methods, code blobs and stacks stop at
// their caps, and the drops are counted.
func TestCapsCounts(t *testing.T) {
	defer func(o, s, m, c, st, sq int) {
		maxObjects, maxSites, maxMethods, maxCodeBlobs, maxStackThreads, maxStackQueue = o, s, m, c, st, sq
	}(maxObjects, maxSites, maxMethods, maxCodeBlobs, maxStackThreads, maxStackQueue)
	maxObjects, maxSites, maxMethods, maxCodeBlobs, maxStackThreads, maxStackQueue = 10, 5, 3, 2, 2, 2
	j := newJVM(1)
	recs := []agent.Record{hello(1)}
	for i := uint64(0); i < 20; i++ {
		recs = append(recs, method(i+1, "LA;", "m", 1),
			alloc(2, 0x10000+i*0x1000, 2048, "[B", agent.Frame{Method: 1 + i%3}),
			&agent.Code{Start: 0x1_0000_0000 + i*0x100, Size: 0x10, Method: 1},
			&agent.Stack{Time: 3, TID: uint32(i % 3), Status: 1})
	}
	j.OnBatch(batch(10, recs...))
	if j.syms.Len() != 3 || j.code.Len() != 2 || len(j.sites) > 5 || len(j.stacks) > 2 {
		t.Errorf("methods %d, code %d, sites %d, stack threads %d: past their caps", j.syms.Len(), j.code.Len(), len(j.sites), len(j.stacks))
	}
	for _, q := range j.stacks {
		if len(q.q)-q.head > 2 {
			t.Errorf("%d stacks queued on one thread, cap 2", len(q.q)-q.head)
		}
	}
	j.Drain(true)
	if n := len(j.objs) - len(j.free); n > 10 {
		t.Errorf("%d objects tracked, cap 10", n)
	}
	note := j.capNote()
	for _, want := range []string{"17 methods past 3", "18 code blobs past 2", "10 allocations past 10 tracked objects"} {
		if !strings.Contains(note, want) {
			t.Errorf("note %q lacks %q", note, want)
		}
	}
}

// TestAgentNotes: the agent's CodeDropped count and its ERROR texts reach
// the report, the texts shortened and without control characters.
func TestAgentNotes(t *testing.T) {
	j := newJVM(1)
	j.OnBatch(batch(10, hello(1), &agent.Stats{CodeDropped: 7},
		&agent.ErrorRec{Message: "SetEventNotificationMode failed\n\x1b[31mred"},
		&agent.ErrorRec{Message: strings.Repeat("x", 1000)}))
	notes := strings.Join(j.AgentNotes(), "\n")
	if !strings.Contains(notes, "dropped 7 JIT code records") {
		t.Errorf("no CodeDropped note: %q", notes)
	}
	if !strings.Contains(notes, "SetEventNotificationMode failed  [31mred") || strings.Contains(notes, "\x1b") {
		t.Errorf("error text not kept or not cleaned: %q", notes)
	}
	if strings.Contains(notes, strings.Repeat("x", maxErrorLen+1)) {
		t.Errorf("long error text kept whole")
	}
}

// TestCapsClasses: an agent that describes class after class (new klasses
// or new signatures for old ones) stops being heard at maxClasses.
func TestCapsClasses(t *testing.T) {
	defer func(c int) { maxClasses = c }(maxClasses)
	maxClasses = 4
	j := newJVM(1)
	recs := []agent.Record{hello(1), &agent.TypesInfo{OK: true, Fields: true, OopBytes: 4, KlassBytes: 4}}
	for i := uint64(0); i < 10; i++ {
		recs = append(recs, &agent.Class{Klass: 0x1000 * (1 + i%2), Narrow: uint32(i % 2), Sig: fmt.Sprintf("LC%d;", i)})
	}
	j.OnBatch(batch(10, recs...))
	if n := j.types.Len(); n != 4 {
		t.Errorf("table holds %d classes or signatures, cap 4", n)
	}
	if note := j.capNote(); !strings.Contains(note, "6 classes past 4") {
		t.Errorf("note %q lacks the dropped classes", note)
	}
}

// TestClassesAskedOnce: a klass word the agent has not described is asked
// for once, not every second: each ask walks every loaded class.
func TestClassesAskedOnce(t *testing.T) {
	j := newJVM(1)
	j.OnBatch(batch(1, hello(1), &agent.TypesInfo{OK: true, Fields: true, OopBytes: 4, KlassBytes: 4}))
	stray := func(k uint64) {
		if _, _, ok := j.untrackedType(&pending{located: true, klass: k, addr: 0x10010, obj: 0x10000}); ok {
			t.Fatalf("klass %#x named before it was described", k)
		}
	}
	stray(0x7000)
	if !j.WantClasses() {
		t.Fatal("a new klass word was not asked for")
	}
	stray(0x7000)
	if j.WantClasses() {
		t.Error("the same klass word was asked for again")
	}
	stray(0x7008)
	if !j.WantClasses() {
		t.Error("a second new klass word was not asked for")
	}
	for k := uint64(0); k < 2*maxAsked; k++ {
		stray(0x100000 + 8*k)
		j.WantClasses()
	}
	stray(0x900000)
	if j.WantClasses() || len(j.asked) > maxAsked {
		t.Errorf("asked %d klass words, cap %d", len(j.asked), maxAsked)
	}
}
