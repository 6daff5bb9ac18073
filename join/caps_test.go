package join

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/djx-bpf/djx-bpf/hotspot/heap"
	"github.com/djx-bpf/djx-bpf/sources/agentwire"
)

// TestCapsFutureRecords: a record stamped far past the stream's watermark
// would wait in the queue to the end of the profile; it is dropped.
func TestCapsFutureRecords(t *testing.T) {
	j := newJVM(1)
	wm := uint64(10 * time.Second)
	j.OnBatch(batch(wm, hello(1), alloc(wm+uint64(2*time.Minute), 0x1000, 2048, "[B", agentwire.Frame{Method: 1}),
		&agentwire.Free{Time: wm + uint64(time.Hour), Tag: 1},
		alloc(wm+1, 0x2000, 2048, "[B", agentwire.Frame{Method: 1})))
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
	var recs []agentwire.Record
	recs = append(recs, hello(1), alloc(2, 0x7000_1000, 2048, "[B", agentwire.Frame{Method: 1}))
	for i := uint64(1); i <= 4096; i++ {
		recs = append(recs, alloc(2, i<<30|0x1000, 2048, "[B", agentwire.Frame{Method: 1}))
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
	recs := []agentwire.Record{hello(1)}
	for i := uint64(0); i < 20; i++ {
		recs = append(recs, method(i+1, "LA;", "m", 1),
			alloc(2, 0x10000+i*0x1000, 2048, "[B", agentwire.Frame{Method: 1 + i%3}),
			&agentwire.Code{Start: 0x1_0000_0000 + i*0x100, Size: 0x10, Method: 1},
			&agentwire.Stack{Time: 3, TID: uint32(i % 3), Status: 1})
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
	j.OnBatch(batch(10, hello(1), &agentwire.Stats{CodeDropped: 7},
		&agentwire.ErrorRec{Message: "SetEventNotificationMode failed\n\x1b[31mred"},
		&agentwire.ErrorRec{Message: strings.Repeat("x", 1000)}))
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
	recs := []agentwire.Record{hello(1), &agentwire.TypesInfo{OK: true, Fields: true, OopBytes: 4, KlassBytes: 4}}
	for i := uint64(0); i < 10; i++ {
		recs = append(recs, &agentwire.Class{Klass: 0x1000 * (1 + i%2), Narrow: uint32(i % 2), Sig: fmt.Sprintf("LC%d;", i)})
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
	j.OnBatch(batch(1, hello(1), &agentwire.TypesInfo{OK: true, Fields: true, OopBytes: 4, KlassBytes: 4}))
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

// TestClassesAskedPlausible: a narrow klass word is asked for by its
// lower half, one that decodes to an unaligned Klass* is not asked for,
// and AskedFound counts the asks a CLASS record answered.
func TestClassesAskedPlausible(t *testing.T) {
	j := newJVM(1)
	j.OnBatch(batch(1, hello(1), &agentwire.TypesInfo{OK: true, Fields: true, OopBytes: 4,
		KlassBytes: 4, KlassBase: 0x8_0000_0000}))
	j.askClass(0x7003) // Klass* 0x8_0000_7003: no Klass is there
	if j.WantClasses() {
		t.Error("an unaligned klass word was asked for")
	}
	j.askClass(0x10_0000_7000) // an array of 16: the klass is the lower half
	j.askClass(0x20_0000_7000)
	if !j.WantClasses() || len(j.asked) != 1 {
		t.Fatalf("asked %v, want the one narrow klass 0x7000", j.asked)
	}
	j.OnBatch(batch(2, &agentwire.Class{Klass: 0x8_0000_7000, Narrow: 0x7000, Sig: "[J"}))
	if j.AskedFound() != 1 {
		t.Errorf("AskedFound %d after the asked class came, want 1", j.AskedFound())
	}
	if l := j.types.ByKlassWord(0x30_0000_7000); l == nil || l.Sig != "[J" {
		t.Errorf("klass word of a 48-element array named %v, want [J", l)
	}
}

// methodStream is a crafted agent stream of n METHOD records, one a batch,
// each naming its method with size bytes (shared, not copied n times).
func methodStream(n, size int) io.Reader {
	name := bytes.Repeat([]byte("m"), size)
	var parts []io.Reader
	for i := 0; i < n; i++ {
		var head, tail []byte
		head = binary.LittleEndian.AppendUint64(head, uint64(i+1))
		head = binary.LittleEndian.AppendUint32(head, 5)
		head = append(head, "LBig;"...)
		head = binary.LittleEndian.AppendUint32(head, uint32(size))
		for _, s := range []string{"()V", "Big.java"} {
			tail = binary.LittleEndian.AppendUint32(tail, uint32(len(s)))
			tail = append(tail, s...)
		}
		tail = binary.LittleEndian.AppendUint32(tail, 0) // no lines
		blen := len(head) + size + len(tail)
		var hdr []byte
		hdr = binary.LittleEndian.AppendUint32(hdr, agentwire.Magic)
		hdr = binary.LittleEndian.AppendUint16(hdr, agentwire.Version)
		hdr = binary.LittleEndian.AppendUint16(hdr, 0)
		hdr = binary.LittleEndian.AppendUint32(hdr, uint32(agentwire.RecHeaderLen+blen))
		hdr = binary.LittleEndian.AppendUint32(hdr, 1)
		hdr = binary.LittleEndian.AppendUint64(hdr, 10)
		hdr = binary.LittleEndian.AppendUint32(hdr, uint32(blen))
		hdr = binary.LittleEndian.AppendUint16(hdr, uint16(agentwire.TypeMethod))
		hdr = binary.LittleEndian.AppendUint16(hdr, 0)
		parts = append(parts, bytes.NewReader(append(hdr, head...)), bytes.NewReader(name), bytes.NewReader(tail))
	}
	return io.MultiReader(parts...)
}

// TestCapsMethodNames: 64 METHOD records naming their methods with 4 MiB
// each (which kept 256 MiB live) keep at most agentwire.MaxString bytes a
// name, and the cuts are counted in the report's stats.
func TestCapsMethodNames(t *testing.T) {
	rd := agentwire.NewReader(methodStream(64, 4<<20))
	j := newJVM(1)
	for {
		b, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		j.OnBatch(b)
	}
	if j.syms.Len() != 64 {
		t.Fatalf("%d methods kept, want 64", j.syms.Len())
	}
	for id := uint64(1); id <= 64; id++ {
		if f := j.syms.Resolve(id, 0); len(f.Method) > agentwire.MaxString {
			t.Fatalf("method %d: name of %d bytes kept", id, len(f.Method))
		}
	}
	if b := j.syms.Bytes(); b > 64*(agentwire.MaxString+256) {
		t.Errorf("methods hold %d bytes, want at most %d", b, 64*(agentwire.MaxString+256))
	}
	if st := j.Stats(); st.StringsTruncated != 64 {
		t.Errorf("strings_truncated %d, want 64", st.StringsTruncated)
	}
}

// TestCapsByteBudgets: methods, classes, code, sites and holder chains
// stop at their tables' byte budgets, however few their records, and the
// drops are counted apart from the count caps'.
func TestCapsByteBudgets(t *testing.T) {
	defer func(m, c, k, s, p int) {
		maxMethodBytes, maxClassBytes, maxCodeBytes, maxSiteBytes, maxCensusPathBytes = m, c, k, s, p
	}(maxMethodBytes, maxClassBytes, maxCodeBytes, maxSiteBytes, maxCensusPathBytes)
	const budget = 64 << 10
	maxMethodBytes, maxClassBytes, maxCodeBytes, maxSiteBytes, maxCensusPathBytes = budget, budget, budget, budget, budget
	big := strings.Repeat("x", agentwire.MaxString)
	frames := make([]agentwire.Frame, agentwire.MaxFrames)
	j := newJVM(1)
	recs := []agentwire.Record{hello(1), &agentwire.TypesInfo{OK: true, Fields: true, OopBytes: 4, KlassBytes: 4}}
	for i := uint64(0); i < 100; i++ {
		frames = append([]agentwire.Frame(nil), frames...)
		frames[0].Method = i + 1
		recs = append(recs,
			&agentwire.Method{ID: i + 1, ClassSig: "LA;", Name: big},
			&agentwire.Class{Klass: 0x1000 * (i + 1), Sig: big},
			&agentwire.Stub{Start: 0x1_0000_0000 + i*0x100, Size: 0x10, Name: big},
			&agentwire.CensusPath{ID: uint32(i + 1), Hop: big},
			alloc(2, 0x10000+i*0x1000, 2048, "[B", frames...))
	}
	j.OnBatch(batch(10, recs...))
	j.Drain(true)
	over := func(what string, n int) {
		if n > budget+budget/2 {
			t.Errorf("%s hold %d bytes, budget %d", what, n, budget)
		}
	}
	over("methods", j.syms.Bytes())
	over("classes", j.classBytes)
	over("code blobs", j.codeBytes)
	over("sites", j.siteBytes)
	over("holder chains", j.censusPathBytes)
	note := j.capNote()
	for _, want := range []string{"methods past 0 MiB", "classes past 0 MiB", "code blobs past 0 MiB", "allocations past 0 MiB of sites", "holder chain hops past 0 MiB"} {
		if !strings.Contains(note, want) {
			t.Errorf("note %q lacks %q", note, want)
		}
	}
	if st := j.Stats(); st.RecordsDroppedBytes < 5*50 || st.RecordsDroppedCount != 0 {
		t.Errorf("records_dropped_bytes %d, records_dropped_count %d", st.RecordsDroppedBytes, st.RecordsDroppedCount)
	}
	// What CODE_UNLOAD frees is given back.
	before := j.codeBytes
	j.OnBatch(batch(11, &agentwire.CodeUnload{Start: 0x1_0000_0000}))
	if j.codeBytes >= before {
		t.Errorf("code bytes %d after an unload, %d before", j.codeBytes, before)
	}
}

// TestCapsSharedBudget: the JVMs of a scan share one byte budget, so that
// many hostile agents together cannot make root keep what each alone
// may. Once the first JVM's methods spend it, the second's are dropped
// and counted against the budget.
func TestCapsSharedBudget(t *testing.T) {
	b := NewBudget(256 << 10)
	a, c := newJVM(1), newJVM(2)
	a.budget, c.budget = b, b
	big := strings.Repeat("m", agentwire.MaxString)
	feed := func(j *JVM, first uint64, n int) {
		recs := []agentwire.Record{hello(1)}
		for i := range n {
			recs = append(recs, &agentwire.Method{ID: first + uint64(i), ClassSig: "LC;", Name: big})
		}
		j.OnBatch(batch(1, recs...))
	}
	feed(a, 1, 400) // about 450 KiB (names are cut to jvmsym.MaxName): past the budget on its own
	feed(c, 1000, 10)
	if b.Used() < 256<<10 {
		t.Fatalf("budget used %d, want past its 256 KiB", b.Used())
	}
	if n := a.syms.Len(); n == 400 || n < 150 {
		t.Errorf("first JVM kept %d of 400 methods, want those within the budget", n)
	}
	if n := c.syms.Len(); n != 0 {
		t.Errorf("second JVM kept %d methods past the shared budget", n)
	}
	if st := c.Stats(); st.RecordsDroppedBytes != 10 {
		t.Errorf("second JVM: %d records dropped past a byte budget, want 10", st.RecordsDroppedBytes)
	}
}

// TestCapsStacks: stacks stamped far past the stream's watermark are
// refused (no sample claims them, nor does pruning reach them), and those
// waiting hold at most maxStackBytes; claimed and pruned ones give their
// bytes back.
func TestCapsStacks(t *testing.T) {
	defer func(b int) { maxStackBytes = b }(maxStackBytes)
	maxStackBytes = 64 << 10
	frames := make([]agentwire.Frame, agentwire.MaxFrames)
	j := newJVM(1)
	j.OnBatch(batch(1_000, hello(1), &agentwire.Stack{Time: 1_000 + 2*uint64(time.Minute), TID: 7, Status: 1, Frames: frames}))
	if len(j.stacks) != 0 || j.stats.RecordsDroppedCount != 1 {
		t.Fatalf("a stack two minutes ahead was kept (%d threads, %d dropped)", len(j.stacks), j.stats.RecordsDroppedCount)
	}
	recs := []agentwire.Record{}
	for i := range 20 { // 20 × 16 KiB
		recs = append(recs, &agentwire.Stack{Time: 2_000 + uint64(i), TID: 7, Status: 1, Frames: frames})
	}
	j.OnBatch(batch(2_000, recs...))
	if n := len(j.stacks[7].q) - j.stacks[7].head; n == 20 || j.stackBytes > maxStackBytes+stackBytes(recs[0].(*agentwire.Stack)) {
		t.Fatalf("%d stacks waiting, %d bytes: past the %d byte budget", n, j.stackBytes, maxStackBytes)
	}
	if j.stats.RecordsDroppedBytes == 0 {
		t.Error("stacks past the budget not counted")
	}
	j.pruneStacks(1<<62, true)
	if j.stackBytes != 0 {
		t.Errorf("%d stack bytes left after pruning every stack", j.stackBytes)
	}
}
