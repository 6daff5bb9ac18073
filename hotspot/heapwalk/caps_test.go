package heapwalk

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/djx-bpf/djx-bpf/safety/procfs"
)

// Each cap stops what it caps, counted, and the walk goes on.
func TestWalkCaps(t *testing.T) {
	sc := buildScene(t, "jdk17", true, true)
	full := walkScene(t, sc, sc.s.m, Config{FieldName: sc.names})
	for _, tc := range []struct {
		name  string
		cfg   Config
		check func(r *Result) string
	}{
		{"objects", Config{MaxObjects: 100}, func(r *Result) string {
			if r.Stats.ObjectsCapped == 0 || r.Stats.Objects > 100 {
				return fmt.Sprintf("%d objects, %d capped", r.Stats.Objects, r.Stats.ObjectsCapped)
			}
			return ""
		}},
		{"queue", Config{MaxQueue: 10}, func(r *Result) string {
			if r.Stats.QueueDropped == 0 || r.Stats.MaxQueueLen > 10 {
				return fmt.Sprintf("queue %d, %d dropped", r.Stats.MaxQueueLen, r.Stats.QueueDropped)
			}
			return ""
		}},
		{"chains", Config{MaxChains: 3}, func(r *Result) string {
			if r.Stats.ChainsCapped == 0 || r.Stats.Chains > 4 || r.Stats.Objects != full.Stats.Objects {
				return fmt.Sprintf("%d chains, %d capped, %d objects", r.Stats.Chains, r.Stats.ChainsCapped, r.Stats.Objects)
			}
			return ""
		}},
		{"depth", Config{MaxDepth: 1}, func(r *Result) string {
			for _, ro := range r.Rows {
				if len(r.Hops(ro.Chain)) > 1 {
					return "chain " + r.ChainString(ro.Chain)
				}
			}
			if r.Stats.DepthCapped == 0 || r.Stats.Objects != full.Stats.Objects {
				return fmt.Sprintf("%d capped, %d objects", r.Stats.DepthCapped, r.Stats.Objects)
			}
			return ""
		}},
		{"rows", Config{MaxRows: 5}, func(r *Result) string {
			if r.Stats.RowsCapped == 0 || r.Stats.Objects != full.Stats.Objects || len(r.Rows) > 6+len(sc.s.order) {
				return fmt.Sprintf("%d rows, %d capped, %d objects", len(r.Rows), r.Stats.RowsCapped, r.Stats.Objects)
			}
			return ""
		}},
		{"klasses", Config{MaxKlasses: 5}, func(r *Result) string {
			if r.Stats.KlassesCapped == 0 || r.Stats.Klasses > 5 {
				return fmt.Sprintf("%d klasses, %d capped", r.Stats.Klasses, r.Stats.KlassesCapped)
			}
			return ""
		}},
		{"clds", Config{MaxCLDs: 1}, func(r *Result) string {
			if !r.Stats.ClassesCapped || r.Stats.CLDs != 1 {
				return fmt.Sprintf("%d CLDs, capped %v", r.Stats.CLDs, r.Stats.ClassesCapped)
			}
			return ""
		}},
		{"classes", Config{MaxClasses: 3}, func(r *Result) string {
			if !r.Stats.ClassesCapped || r.Stats.Classes > 3 {
				return fmt.Sprintf("%d classes, capped %v", r.Stats.Classes, r.Stats.ClassesCapped)
			}
			return ""
		}},
		{"bitmap", Config{MaxBitmap: 1}, func(r *Result) string {
			// One block, the least the cap allows.
			bm := newBitmap(heapLo, heapLo+heapBytes, 0, sc.l.minObjectShift())
			defer bm.free()
			if r.Stats.BitmapDropped == 0 || r.Stats.BitmapBytes > len(bm.touched)*8+bm.words*8 {
				return fmt.Sprintf("%d dropped, %d bytes", r.Stats.BitmapDropped, r.Stats.BitmapBytes)
			}
			return ""
		}},
		{"hops", Config{MaxHops: 8}, func(r *Result) string {
			if r.Stats.HopsCapped == 0 || r.Stats.Objects != full.Stats.Objects {
				return fmt.Sprintf("%d hops capped, %d objects", r.Stats.HopsCapped, r.Stats.Objects)
			}
			for _, ro := range r.Rows {
				if strings.Contains(r.ChainString(ro.Chain), "(hops capped)") {
					return ""
				}
			}
			return "no chain says (hops capped)"
		}},
		{"edges", Config{MaxEdges: 8}, func(r *Result) string {
			if r.Stats.EdgesCapped == 0 || r.Stats.Objects >= full.Stats.Objects {
				return fmt.Sprintf("%d edges capped, %d objects", r.Stats.EdgesCapped, r.Stats.Objects)
			}
			return ""
		}},
		{"refs", Config{MaxRefs: 500}, func(r *Result) string {
			if !r.Stats.RefsCapped || r.Stats.Objects >= full.Stats.Objects {
				return fmt.Sprintf("refs capped %v, %d objects", r.Stats.RefsCapped, r.Stats.Objects)
			}
			return ""
		}},
		{"sample", Config{Sample: 2}, func(r *Result) string {
			for _, ro := range r.Rows {
				if len(ro.Sample) > 2 {
					return fmt.Sprintf("sample of %d", len(ro.Sample))
				}
			}
			return ""
		}},
		{"tiny batches", Config{Batch: 1, CacheBytes: 1, ChunkSize: 4096}, func(r *Result) string {
			if r.Stats.Objects != full.Stats.Objects || len(r.Rows) != len(full.Rows) {
				return fmt.Sprintf("%d objects %d rows, want %d %d", r.Stats.Objects, len(r.Rows), full.Stats.Objects, len(full.Rows))
			}
			return ""
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := walkScene(t, sc, sc.s.m, tc.cfg)
			if msg := tc.check(r); msg != "" {
				t.Error(msg)
			}
			var sum uint64
			for _, ro := range r.Rows {
				sum += ro.Count
			}
			if int64(sum) != r.Stats.Objects {
				t.Errorf("rows hold %d objects, stats %d", sum, r.Stats.Objects)
			}
		})
	}
}

// Past MaxRuns the lookup is by page: the row with most bytes there,
// or, given the object's class, that class's row.
func TestLookupPages(t *testing.T) {
	sc := buildScene(t, "jdk25", true, true)
	full := walkScene(t, sc, sc.s.m, Config{FieldName: sc.names})
	r := walkScene(t, sc, sc.s.m, Config{FieldName: sc.names, MaxRuns: 10})
	if r.Stats.LookupApprox == 0 || r.Stats.Runs > 10 {
		t.Fatalf("%d runs, %d approximate", r.Stats.Runs, r.Stats.LookupApprox)
	}
	exact, named, total := 0, 0, 0
	for i, ro := range full.Rows {
		for _, a := range ro.Sample {
			want := rowsBy(r)[full.ChainString(ro.Chain)+" | "+ro.Class]
			total++
			if got, _ := r.Lookup(a); got >= 0 {
				named++
			}
			got, ok := r.LookupClass(a, ro.Klass)
			if ok && r.Rows[got].Klass == want.Klass && r.Rows[got].Chain == want.Chain {
				exact++
			} else if ok {
				t.Errorf("LookupClass %#x (%s) says row %d exactly, wrong", a, full.Name(i), got)
			}
		}
	}
	t.Logf("of %d sampled objects: %d named, %d exactly by class", total, named, exact)
	if named != total || exact < total*8/10 {
		t.Errorf("of %d sampled objects %d named, %d exactly by class", total, named, exact)
	}
	lost := walkScene(t, sc, sc.s.m, Config{MaxRuns: 10, MaxPages: 1})
	if lost.Stats.LookupLost == 0 {
		t.Errorf("MaxPages 1 lost nothing")
	}
}

// A collection during the walk is reported, and StopOnGC stops it.
func TestWalkGC(t *testing.T) {
	sc := buildScene(t, "jdk17", true, true)
	m := sc.s.m
	reads := 0
	m.onRead = func() {
		if reads++; reads == 50 {
			m.put32(sc.s.gcCount, m.get32(sc.s.gcCount)+1)
		}
	}
	r := walkScene(t, sc, m, Config{Batch: 16})
	if !r.GC.Overlapped || r.GC.Before != 7 || r.GC.After != 8 || r.Stats.StoppedOnGC {
		t.Errorf("gc %+v, stopped %v", r.GC, r.Stats.StoppedOnGC)
	}
	reads = 0
	r = walkScene(t, sc, m, Config{Batch: 16, StopOnGC: true})
	if !r.GC.Overlapped || !r.Stats.StoppedOnGC {
		t.Errorf("StopOnGC: gc %+v, stopped %v", r.GC, r.Stats.StoppedOnGC)
	}
	m.onRead = nil
	if sc.s.gcActive != 0 {
		m.write(sc.s.gcActive, []byte{1})
		r = walkScene(t, sc, m, Config{})
		if !r.GC.Overlapped || !r.GC.ActiveBefore {
			t.Errorf("active: gc %+v", r.GC)
		}
		m.write(sc.s.gcActive, []byte{0})
	}
}

func TestWalkCancel(t *testing.T) {
	sc := buildScene(t, "jdk17", true, true)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r, err := Walk(ctx, sc.l, sc.s.m, Config{})
	if err != nil || !r.Stats.Canceled || r.Stats.Objects != 0 {
		t.Errorf("canceled walk: %v, %+v", err, r.Stats)
	}
}

// Cycles in the class loaders' lists end at the first repeat.
func TestWalkClassGraphCycles(t *testing.T) {
	sc := buildScene(t, "jdk17", true, true)
	s := sc.s
	head := s.m.get64(s.static("ClassLoaderDataGraph::_head"))
	s.put64(head+s.f("ClassLoaderData::_next"), head) // the first CLD is its own next
	k := s.m.get64(head + s.f("ClassLoaderData::_klasses"))
	s.put64(k+s.f("Klass::_next_link"), k) // and its first class its own next
	testWalkWithin(t, func() {
		r := walkScene(t, sc, s.m, Config{})
		if !r.Stats.ClassesCapped || r.Stats.CLDs != 1 || r.Stats.Classes != 1 {
			t.Errorf("%d CLDs, %d classes, capped %v", r.Stats.CLDs, r.Stats.Classes, r.Stats.ClassesCapped)
		}
	})
}

// goneMem is a process that exited.
type goneMem struct{ m *fakeMem }

func (g goneMem) ReadAt(p []byte, off int64) (int, error) {
	return 0, fmt.Errorf("read: %w: %w", procfs.ErrNoProcess, syscall.ESRCH)
}

func TestWalkProcessGone(t *testing.T) {
	sc := buildScene(t, "jdk17", true, true)
	_, err := Walk(context.Background(), sc.l, goneMem{sc.s.m}, Config{})
	if !errors.Is(err, procfs.ErrNoProcess) {
		t.Errorf("err %v, want ErrNoProcess", err)
	}
}

func testWalkWithin(t *testing.T, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("walk still running after 30 s")
	}
}

// TestWalkPace: a walk calls Pace between batches, counts the time it
// waited there, and stops when Pace says so, with the objects it found
// and did not visit counted as Pending.
func TestWalkPace(t *testing.T) {
	sc := buildSceneV(t, variants[0])
	full := walkScene(t, sc, sc.s.m, Config{FieldName: sc.names})
	calls := 0
	res := walkScene(t, sc, sc.s.m, Config{FieldName: sc.names, Batch: 64, Pace: func(context.Context) bool {
		calls++
		time.Sleep(time.Millisecond)
		return calls < 5
	}})
	if calls != 5 || !res.Stats.Canceled || res.Stats.Waited < 5*time.Millisecond {
		t.Errorf("Pace called %d times, canceled %v, waited %v: want 5 calls, canceled, 5 ms waited", calls, res.Stats.Canceled, res.Stats.Waited)
	}
	if st := res.Stats; st.Objects == 0 || st.Pending == 0 || st.Objects+st.Pending > full.Stats.Objects {
		t.Errorf("stopped walk: %d visited, %d pending; the whole walk visits %d", st.Objects, st.Pending, full.Stats.Objects)
	}
	if full.Stats.Pending != 0 {
		t.Errorf("a whole walk left %d pending", full.Stats.Pending)
	}
}

// TestWalkCopyAfterGC: once the collection count moves during a walk,
// the pieces copied before are dropped and copied again as batches need
// them, and the walk finds what one without copies does.
func TestWalkCopyAfterGC(t *testing.T) {
	sc := buildScene(t, "jdk17", true, true)
	m := sc.s.m
	want := walkScene(t, sc, m, Config{Batch: 16, MaxCopy: 1})
	before := m.reads
	calm := walkScene(t, sc, m, Config{Batch: 16})
	sameResult(t, "calm", calm, want)
	// Half way through: after pieces were copied, and before the last.
	half, reads := (m.reads-before)/2, 0
	m.onRead = func() {
		if reads++; reads == half {
			m.put32(sc.s.gcCount, m.get32(sc.s.gcCount)+1)
		}
	}
	defer func() { m.onRead = nil }()
	got := walkScene(t, sc, m, Config{Batch: 16})
	if calm.Stats.CopyResets != 0 || got.Stats.CopyResets == 0 || got.Stats.Pieces <= calm.Stats.Pieces {
		t.Errorf("copies dropped %d times (%d without a collection), %d pieces copied (%d without)",
			got.Stats.CopyResets, calm.Stats.CopyResets, got.Stats.Pieces, calm.Stats.Pieces)
	}
	sameResult(t, "after a collection", got, want)
}

// midGC is a target in which a stop-the-world collection runs while the
// walk copies pieces: the collection starts with a copy and lasts for a
// few reads, and the pieces copied while
// it runs show every reference cleared, as a collection that rewrites
// them as it moves objects may leave a piece half way: each object
// parses, and what it held is gone. Read on their own, the objects are
// as they were.
type midGC struct {
	*fakeMem
	s        *synth
	l        *Layout
	left     int // reads the collection still runs for
	started  bool
	copies   int // vectors that copied pieces
	poisoned int // pieces copied while it ran
}

// The collection starts with the gcCopy'th vector of pieces (the first
// copies the pieces of the class mirrors), and lasts for gcReads reads.
const gcCopy, gcReads = 2, 20

func (m *midGC) ReadVector(dst []byte, spans []Span) (int, error) {
	piece := false
	for _, s := range spans {
		piece = piece || (s.Len == pieceSize && s.Addr%pieceSize == 0)
	}
	if piece {
		m.copies++
	}
	if piece && !m.started && m.copies == gcCopy {
		m.started, m.left = true, gcReads
		m.put32(m.s.gcCount, m.get32(m.s.gcCount)+1)
		m.write(m.s.gcActive, []byte{1})
		m.onRead = func() {
			if m.left--; m.left == 0 {
				m.write(m.s.gcActive, []byte{0})
			}
		}
	}
	n, err := m.fakeMem.ReadVector(dst, spans)
	if !piece || m.left <= 0 {
		return n, err
	}
	off := 0
	for _, s := range spans {
		if s.Len == pieceSize && s.Addr%pieceSize == 0 {
			m.poisoned++
			b := dst[off : off+s.Len]
			for i := 0; i+4 <= len(b); i += 4 {
				if a := m.l.decodeOop(uint64(le32(b[i:]))); a >= heapLo && a < heapLo+heapBytes {
					clear(b[i : i+4])
				}
			}
		}
		off += s.Len
	}
	return n, err
}

// TestWalkCopyDuringGC: pieces copied while a collection runs, or whose
// copy a collection's start overlapped, are not parsed: those objects
// are read from the JVM on their own, and the walk finds what one
// without copies does (the pieces a collection left half way hold
// objects that parse and lose what they hold).
func TestWalkCopyDuringGC(t *testing.T) {
	sc := buildScene(t, "jdk17", true, true)
	if sc.s.gcActive == 0 || sc.l.OopSize != 4 {
		t.Fatal("the scene has no _is_gc_active or no compressed oops")
	}
	want := walkScene(t, sc, sc.s.m, Config{FieldName: sc.names, MinSize: 1 << 20, Batch: 16, MaxCopy: 1})
	m := &midGC{fakeMem: sc.s.m, s: sc.s, l: sc.l}
	defer func() { m.onRead = nil }()
	got := walkScene(t, sc, m, Config{FieldName: sc.names, MinSize: 1 << 20, Batch: 16})
	if m.poisoned == 0 || got.Stats.Pieces == 0 {
		t.Fatalf("%d pieces copied during the collection, %d in all: want some of each", m.poisoned, got.Stats.Pieces)
	}
	if !got.GC.Overlapped {
		t.Errorf("gc %+v: want the collection seen", got.GC)
	}
	sameResult(t, "pieces copied during a collection", got, want)
}

// markingGC is a target in which a stop-the-world collection starts
// while the walk reads its third batch of 8 objects or more: that read shows the objects at
// the spans' starts marked, as a full collection's marking leaves every
// live object's header until it ends, a few reads later. Nothing moves.
type markingGC struct {
	*fakeMem
	s       *synth
	vectors int
	marked  int
	left    int // reads the collection still runs for
}

func (m *markingGC) ReadVector(dst []byte, spans []Span) (int, error) {
	n, err := m.fakeMem.ReadVector(dst, spans)
	if len(spans) < 8 || spans[0].Addr < heapLo || spans[0].Addr >= heapLo+heapBytes {
		return n, err // not a batch's
	}
	if m.vectors++; m.vectors != 3 {
		return n, err
	}
	m.put32(m.s.gcCount, m.get32(m.s.gcCount)+1)
	m.write(m.s.gcActive, []byte{1})
	m.left = 5
	m.onRead = func() {
		if m.left--; m.left == 0 {
			m.write(m.s.gcActive, []byte{0})
		}
	}
	off := 0
	for _, s := range spans {
		if s.Addr >= heapLo && s.Addr < heapLo+heapBytes && s.Len >= 8 && off+8 <= n {
			dst[off] |= 3
			m.marked++
		}
		off += s.Len
	}
	return n, err
}

// TestWalkRereadsAfterGC: objects read while a collection marks them
// are read again once it ended (their batch, or each it skipped), and
// the walk finds what one without the collection does (skipped, each
// lost all it held).
func TestWalkRereadsAfterGC(t *testing.T) {
	sc := buildScene(t, "jdk17", true, true)
	if sc.s.gcActive == 0 {
		t.Fatal("the scene has no _is_gc_active")
	}
	cfg := Config{FieldName: sc.names, MinSize: 1 << 20, Batch: 16, MaxCopy: 1}
	want := walkScene(t, sc, sc.s.m, cfg)
	m := &markingGC{fakeMem: sc.s.m, s: sc.s}
	defer func() { m.onRead = nil }()
	got := walkScene(t, sc, m, cfg)
	if m.marked == 0 || !got.GC.Overlapped {
		t.Fatalf("%d objects marked, gc %+v: want some marked by a collection the walk sees", m.marked, got.GC)
	}
	if got.Stats.GCReread+got.Stats.GCRetried == 0 || got.Stats.Forwarded != want.Stats.Forwarded {
		t.Errorf("%d batches and %d objects read again, %d skipped as forwarded: want the %d marked read again, and %d skipped as without the collection",
			got.Stats.GCReread, got.Stats.GCRetried, got.Stats.Forwarded, m.marked, want.Stats.Forwarded)
	}
	// The objects read again are visited after their batch, so the rows'
	// samples may be others: the rows, and where each sample is, agree.
	for i := range got.Rows {
		got.Rows[i].Sample = want.Rows[min(i, len(want.Rows)-1)].Sample
	}
	sameResult(t, "a collection marked objects the walk read", got, want)
}

// movingGC is a target in which a compacting collection ends while the
// walk reads the second piece of a large array: the array moved, and
// others' references moved in where that piece and its header were.
type movingGC struct {
	*fakeMem
	s       *synth
	at      uint64 // the second piece's address
	arr     uint64
	movedIn []byte // what lies at the array's piece after the collection
	header  uint64 // the klass that moved in at the array's start
	fired   bool
}

func (m *movingGC) ReadAt(p []byte, off int64) (int, error) {
	n, err := m.fakeMem.ReadAt(p, off)
	if !m.fired && uint64(off) == m.at && len(p) == 1<<20 {
		m.fired = true
		m.put32(m.s.gcCount, m.get32(m.s.gcCount)+1)
		m.write(m.at, m.movedIn)
		m.s.setKlass(m.arr, m.header)
	}
	return n, err
}

// TestWalkArrayMovedUnderPiece: a large array that a collection moved
// between its header's read and its second piece's is not read where
// it was (what moved in there is not its elements): the rest of it is
// counted as not followed, and the objects that moved in keep their own
// holder.
func TestWalkArrayMovedUnderPiece(t *testing.T) {
	const n, others = 600_000, 300_000
	s := newSynth(t, "jdk17", true, true)
	_, itemSize := s.fields(0)
	item := s.class("app/Item", 0, itemSize, nil, 0)
	other := s.class("app/Other", 0, itemSize, nil, 0)
	objs := s.arrayClass("[Ljava/lang/Object;", true, 2)
	app := s.class("App", 0, 16, nil, 2)
	arr := s.array(objs, n)
	for i := range n {
		s.elem(arr, i, s.obj(item))
	}
	oarr := s.array(objs, others)
	for i := range others {
		s.elem(oarr, i, s.obj(other))
	}
	s.setStatic(app, 0, arr)
	s.setStatic(app, 1, oarr)
	lay := s.finish()
	hdr := s.arrays[objs].hdr
	piece := uint64(1<<20) / s.oop
	movedIn := make([]byte, 1<<20)
	if _, err := s.m.read(movedIn, oarr+hdr); err != nil {
		t.Fatal(err)
	}
	m := &movingGC{fakeMem: s.m, s: s, at: arr + hdr + 1<<20, arr: arr, movedIn: movedIn, header: other}
	res := walkScene(t, &scene{l: lay}, m, Config{})
	if !m.fired {
		t.Fatal("the walk never read the array's second piece")
	}
	chains := map[string]uint64{}
	var items uint64
	for _, r := range res.Rows {
		switch r.Class {
		case "app.Other":
			chains[res.ChainString(r.Chain)] += r.Count
		case "app.Item":
			items += r.Count
		}
	}
	if len(chains) != 1 || items != piece || res.Stats.ArrayMoved != int64(n-piece) {
		t.Errorf("others by chain %v, %d items, %d elements not followed: want every other under its own array, %d items (the first piece), %d not followed",
			chains, items, res.Stats.ArrayMoved, piece, n-piece)
	}
}
