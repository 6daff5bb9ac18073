package profiler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/djx-bpf/djx-bpf/hotspot/heapwalk"
	"github.com/djx-bpf/djx-bpf/hotspot/targetmem"
	"github.com/djx-bpf/djx-bpf/hotspot/vmstructs"
	"github.com/djx-bpf/djx-bpf/join"
	"github.com/djx-bpf/djx-bpf/sources/agentwire"
)

// The heap walk names the objects an attached JVM holds already, from
// outside it and with no pause (package heapwalk), where the census would
// stop the world for a time that grows with the heap.

// walker drives one session's heap walk.
type walker struct {
	layout *heapwalk.Layout
	mem    heapwalk.Mem
	names  *fieldNames
	roots  []heapwalk.Root

	// ready starts a walk whose roots have not come: after walkNoRoots,
	// or walkNoTypes when the agent could not be asked for them.
	ready    <-chan time.Time
	rootsEnd *agentwire.RootsEnd // the agent's last roots pass
	// collecting: the agent was asked for roots, and a walk waits for
	// them; running: a walk runs; checking: a walk's result is in the
	// join, and checked against the heap.
	collecting, running, checking bool
	cancel                        context.CancelFunc
	done                          chan *join.HeapWalk
	// A running walk that finds, once it has walked the statics, that a
	// GC ran since its roots were taken asks for them anew (rootsReq);
	// the loop answers on rootsResp when the agent's pass ends.
	rootsReq   chan struct{}
	rootsResp  chan rootsPass
	refreshing bool

	// paths numbers chains alike across walks, so that a walk after a
	// GC meets the rows of the walk before.
	paths chainPaths
	// What tells whether a GC moved what the last walk found: the
	// collection count it began at, and some of its objects' addresses
	// and classes.
	gcs    uint32
	probes []probe
	// checkAt fires the next check; a walk takes at most 1/walkShare of
	// the time since the last one began.
	checkAt   <-chan time.Time
	lastStart time.Time
	lastTook  time.Duration
	walks     int
	staleAt   uint64 // the join's stale structure samples when the last walk ended
	// hot are the addresses the samples hit before the walk began: it
	// names their objects first.
	hot []uint64
	// lastVisited counts the objects of the last walk the join took;
	// again says the last walk was thrown away, and the next check walks.
	lastVisited int64
	lastMirrors int
	again       bool
	rootsGC     uint32 // the collection count when the roots pass ended
	layoutTries int    // a launched JVM's checks that could not read its layout
	// launched: the JVM started under the profile, whose agent tracked
	// its large objects from their allocation; the walk names its small
	// ones.
	launched bool
	// The join's in-heap and attributed samples when the last walk ended.
	heapAt, attrAt uint64
}

// rootsPass is what a walk takes of one of the agent's roots passes: its
// roots, its end, and the collection count then; ok false: none came.
type rootsPass struct {
	roots []heapwalk.Root
	end   *agentwire.RootsEnd
	gc    uint32
	ok    bool
}

// probe is an object a walk found: where, and its Klass*.
type probe struct{ addr, klass uint64 }

// How a walk's result is checked against the heap, and how often a GC
// that moved it may start another walk.
const (
	walkCheckEvery = 500 * time.Millisecond
	maxProbes      = 4096
	walkShare      = 4  // at most a quarter of the time walking
	staleShare     = 10 // a walk again when 1/10 of the probes moved
	minProbedRow   = 100
	staleSamples   = 16 // a walk again after this many samples met moved objects
)

// A continuous scan's session, which runs for days and costs its host as
// long, walks again at most 0.5% of the time (a 50 ms walk every 10 s at
// most, a 2 s walk every 400 s: continuous profiling's goal for its whole
// cost) and checks every 2 s: in windows of a minute, samples on objects
// a GC moved are named again a little later.
const (
	continuousWalkShare  = 200
	continuousCheckEvery = 2 * time.Second
)

// walkNoTypes is how long a walk that gets no roots waits for the agent's
// class descriptions to arrive, and walkNoRoots how long one waits for
// roots the agent never sends (the roots come after the classes).
const (
	walkNoTypes = 2 * time.Second
	walkNoRoots = 10 * time.Second
)

// planWalk readies a heap walk of the attached JVM, or says why it cannot
// (OpenJ9, a JVM without vmStructs, a heap layout heapwalk refuses).
func (s *session) planWalk() (*walker, error) {
	if s.opts.Census != CensusAuto || s.mode != "attach" {
		return nil, nil
	}
	l, mem, err := openLayout(s.pid)
	if err != nil {
		return nil, err
	}
	w := newWalker()
	w.layout, w.mem = l, mem
	return w, nil
}

func newWalker() *walker {
	return &walker{names: newFieldNames(), done: make(chan *join.HeapWalk, 1),
		rootsReq: make(chan struct{}, 1), rootsResp: make(chan rootsPass, 1),
		paths: chainPaths{ids: map[heapwalk.ChainID]uint32{}, pre: map[string]uint32{}}}
}

// openLayout reads how pid's JVM lays out its heap.
func openLayout(pid int) (*heapwalk.Layout, heapwalk.Mem, error) {
	tab, err := vmstructs.Open(pid)
	if err != nil {
		return nil, nil, fmt.Errorf("read the JVM's vmStructs: %w", err)
	}
	mem := targetmem.Open(pid)
	l, err := heapwalk.NewLayout(tab, mem, heapwalk.Options{})
	if err != nil {
		return nil, nil, err // "heap layout: ...": the note says what it stops
	}
	return l, mem, nil
}

// A launched JVM builds its data after the profile starts: its small
// objects are not tracked one by one, and only their types would be
// named. Once the in-heap samples since the start are mostly on objects
// nothing tracks (unnamed), it is walked as an attached one is, and
// walked again on the same terms.

// launchWalkTries bounds the checks that try to read a launched JVM's
// heap layout (it is not there while the VM starts).
const launchWalkTries = 3

// planLaunchWalk readies a launched JVM's walk: the class descriptions
// are kept from the start, and the checks start it.
func (s *session) planLaunchWalk() {
	if s.opts.Census != CensusAuto || s.mode != "launch" || s.conn == nil {
		return
	}
	w := newWalker()
	w.checking, w.launched = true, true
	w.checkAt = time.After(s.walkCheckEvery())
	s.walk = w
}

// firstLaunchWalk starts a launched JVM's first walk once its in-heap
// samples are mostly unnamed.
func (s *session) firstLaunchWalk() {
	w := s.walk
	w.checkAt = time.After(s.walkCheckEvery())
	if !s.unnamedSince() {
		return
	}
	l, mem, err := openLayout(s.pid)
	if err != nil {
		if w.layoutTries++; w.layoutTries >= launchWalkTries {
			s.addNote("no heap walk of the launched JVM: %v", err)
			s.walk = nil
		}
		return
	}
	w.layout, w.mem = l, mem
	s.opts.note("in-heap samples of pid %d are mostly on objects nothing tracks: walking its heap", s.pid)
	w.checking = false
	s.askRoots()
	if !w.collecting {
		s.startWalk()
	}
}

// planCensus picks, before the agent loads, what names the objects an
// attached JVM holds already: a heap walk where one can run, else the
// agent's census. vmStructs that lead into memory whose reads may never
// answer (a FUSE mapping) end the session: the agent would read them
// too, and stall the JVM's attach.
func (s *session) planCensus() error {
	w, err := s.planWalk()
	if errors.Is(err, targetmem.ErrMayBlock) || errors.Is(err, targetmem.ErrHung) {
		return fmt.Errorf("not attaching to pid %d: %w", s.pid, err)
	}
	if err != nil {
		s.addNote("census in a pause instead of a heap walk: %v", err)
	}
	s.walk = w
	return nil
}

// agentOptions are the agent's options for this session: with a heap
// walk, no census of large objects after GCs (walks again follow them).
func (s *session) agentOptions() string {
	o := s.opts
	if s.walk != nil {
		o.Recensus = 0
	}
	return o.agentOptions(s.ch.SocketPath())
}

// prepareCensus starts what names the objects that exist already: for a
// walk, the agent's pass over the roots it cannot see (threads' locals);
// the walk starts when they arrive.
func (s *session) prepareCensus() {
	if s.conn == nil || s.mode != "attach" || s.opts.Census == CensusOff {
		return
	}
	if s.walk == nil {
		s.askCensus()
		return
	}
	s.walk.ready = time.After(walkNoTypes)
	s.askRoots()
}

// askRoots asks the agent for the roots a walk cannot see; the walk
// starts when they arrive (or, failing that, when ready fires).
func (s *session) askRoots() {
	w := s.walk
	w.roots, w.collecting = w.roots[:0], true
	if _, err := s.conn.Write([]byte{agentwire.CommandRoots}); err != nil {
		s.addNote("heap walk without the threads' locals: %v", err)
		w.collecting = false
		return
	}
	w.ready = time.After(walkNoRoots)
}

// onWalkBatch collects the class descriptions the walk names fields by and
// the roots it starts from; the roots pass's end starts the walk.
func (s *session) onWalkBatch(b *agentwire.Batch) {
	w := s.walk
	if w == nil {
		return
	}
	for _, r := range b.Records {
		switch r := r.(type) {
		case *agentwire.Class:
			w.names.add(r)
		case *agentwire.Root:
			if w.collecting && len(w.roots) < maxRoots {
				w.roots = append(w.roots, heapwalk.Root{Addr: r.Addr, Hop: r.Hop, Rank: rootRank(r), Others: int(max(r.Reach, 1) - 1)})
			}
		case *agentwire.RootsEnd:
			if w.collecting {
				w.collecting = false
				w.rootsEnd = r
				w.rootsGC, _, _ = w.layout.Collections(w.mem)
				if !w.refreshing {
					s.startWalk()
					continue
				}
				w.refreshing = false
				select {
				case w.rootsResp <- rootsPass{slices.Clone(w.roots), r, w.rootsGC, true}:
				default:
				}
			}
		}
	}
}

// rootRank orders the agent's roots for the walk, after the statics
// (rank 0): the lasting ones (JNI globals, threads, the VM's), then the
// threads' frames from the outermost, then monitors and compiled code's
// constants.
func rootRank(r *agentwire.Root) int {
	switch r.Kind {
	case agentwire.RootJNIGlobal, agentwire.RootThread, agentwire.RootOther:
		return 1
	case agentwire.RootStackLocal:
		return 2 + int(min(r.Rank, 1<<16))
	}
	return 2 + 1<<16 + 1
}

// walkReady is the loop's channel that starts a walk whose roots have not
// come (nil: none waits).
func (s *session) walkReady() <-chan time.Time {
	if s.walk == nil || s.walk.running || s.walk.checking {
		return nil
	}
	return s.walk.ready
}

// maxRoots bounds the roots kept for a walk: the agent's pass sends what
// the target's threads hold.
const maxRoots = 1 << 20

// startWalk starts a walk; samples from now on wait for its result.
func (s *session) startWalk() {
	w := s.walk
	w.running, w.checking, w.collecting = true, false, false
	w.walks++
	w.lastStart = s.clk.Now()
	start := s.clk.Mono()
	s.j.BeginHeapWalk(start)
	w.hot = s.j.HotAddrs()
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	if w.walks == 1 {
		s.opts.note("walking the heap of pid %d", s.pid)
	}
	// What a walk before asked for and did not take.
	select {
	case <-w.rootsReq:
	default:
	}
	select {
	case <-w.rootsResp:
	default:
	}
	rp := rootsPass{slices.Clone(w.roots), w.rootsEnd, w.rootsGC, w.rootsEnd != nil}
	go func() {
		w.done <- w.run(ctx, s.walkGate, start, s.opts.MinSize, s.clk, rp)
	}()
}

// walkRootsReq is the loop's channel of a running walk's asking for the
// roots anew (nil: no walk runs).
func (s *session) walkRootsReq() <-chan struct{} {
	if s.walk == nil || !s.walk.running {
		return nil
	}
	return s.walk.rootsReq
}

// refreshRoots asks the agent for the roots anew for the running walk.
func (s *session) refreshRoots() {
	w := s.walk
	if w.collecting {
		w.refreshing = true // the pass under way answers
		return
	}
	s.askRoots()
	if w.refreshing = w.collecting; !w.collecting {
		// The agent cannot be asked: the walk drops its stale roots, or
		// takes an answer already waiting in the channel.
		select {
		case w.rootsResp <- rootsPass{}:
		default:
		}
	}
}

// freshRoots is a walk's heapwalk.Config.Refresh: once the statics are
// walked, when a GC ran since the roots were taken (their objects may have
// moved), it asks the loop for them anew and waits. It updates rp; stale
// says the roots could not be had anew, and the walk leaves them out.
func (w *walker) freshRoots(rp *rootsPass, stale *bool) func(context.Context) ([]heapwalk.Root, bool) {
	return func(ctx context.Context) ([]heapwalk.Root, bool) {
		if !rp.ok {
			return nil, false // no roots pass: none to refresh
		}
		if n, _, err := w.layout.Collections(w.mem); err != nil || n == rp.gc {
			return nil, false
		}
		select {
		case w.rootsReq <- struct{}{}:
		default:
		}
		select {
		case f := <-w.rootsResp:
			if !f.ok {
				*stale = true
				return nil, true
			}
			*rp = f
			return f.roots, true
		case <-ctx.Done():
			return nil, false
		case <-time.After(walkNoRoots):
			*stale = true
			return nil, true
		}
	}
}

// walkTries bounds the walks in a row that a GC moving the heap under
// them makes start again.
const walkTries = 3

// overlapSkips: a walk a GC overlapped starts again when it skipped more
// than one object in overlapSkips.
const overlapSkips = 100

// run walks the heap and turns what it found into the join's terms. A walk
// that a GC overlapped, and whose objects the GC moved, starts again.
func (w *walker) run(ctx context.Context, gate *walkGate, start, minSize uint64, clk clock, rp rootsPass) *join.HeapWalk {
	var large []heapwalk.Object
	var res *heapwalk.Result
	var err error
	stale := false
	pause := uint64(0)
	if rp.end != nil {
		pause = rp.end.FollowNanos
	}
	turn, ok := gate.enter(ctx)
	defer turn.leave()
	if !ok {
		return &join.HeapWalk{Start: start, End: clk.Mono(), RootsPass: rp.end, Failed: true,
			Note: "not started: the profile ended while the other JVMs' walks ran"}
	}
	tries := 0
	for try := 1; ; try++ {
		tries = try
		large = large[:0]
		stale = false
		cfg := heapwalk.Config{Roots: rp.roots, FieldName: w.names.name, FieldOffset: w.names.offset, MinSize: minSize, Hot: w.hot,
			Refresh:  w.freshRoots(&rp, &stale),
			OnObject: func(o heapwalk.Object) { large = append(large, o) }}
		if turn != nil {
			cfg.Pace = turn.pace
		}
		res, err = heapwalk.Walk(ctx, w.layout, w.mem, cfg)
		if rp.end != nil {
			pause = max(pause, rp.end.FollowNanos)
		}
		if err != nil || !res.GC.Overlapped || try == walkTries || ctx.Err() != nil {
			break
		}
		if w.short(res) {
			continue
		}
		// A young GC moves what the walk skips anyway; one that moved the
		// old objects under it leaves many it could not parse.
		st := &res.Stats
		if (st.Invalid+st.Unreadable+st.Forwarded+st.ArrayMoved)*overlapSkips < st.Objects {
			w.setProbes(res, large)
			if moved, all := w.moved(); moved*staleShare < all || all == 0 {
				break
			}
		}
	}
	hw := &join.HeapWalk{Start: start, End: clk.Mono(), RootsPass: rp.end, RootsPauseMax: pause}
	if err != nil {
		hw.Note, hw.Failed = fmt.Sprintf("failed: %v", err), true
		return hw
	}
	if w.lastVisited > 0 && (res.Stats.Canceled || (res.GC.Overlapped && w.short(res)) || stale) {
		// A walk again that the profile's end cut short, or that a GC
		// overlapped, or whose roots could not be had anew after a GC
		// (their addresses are stale): the last walk's result stands,
		// and the check walks again.
		return nil
	}
	w.lastVisited, w.lastMirrors = res.Stats.Objects, res.Stats.Mirrors
	w.setProbes(res, large)
	w.paths.res, w.paths.out = res, nil
	clear(w.paths.ids)
	hw.Objects = w.census(start, large)
	// A row counts its large objects too; they are tracked one by one.
	counts := make([][2]uint64, len(res.Rows))
	for _, o := range large {
		if o.Row >= 0 && o.Row < len(counts) {
			counts[o.Row][0]++
			counts[o.Row][1] += o.Size
		}
	}
	// The join's rows are the walk's, index for index, as its lookup
	// answers by index.
	for i, r := range res.Rows {
		hw.Rows = append(hw.Rows, join.StructureRow{TypeSig: typeSig(r.Class), Path: w.paths.id(r.Chain),
			Objects: r.Count - min(r.Count, counts[i][0]), Bytes: r.Bytes - min(r.Bytes, counts[i][1]),
			OtherRoots: r.OtherRoots, Retained: r.Retained})
	}
	for _, o := range res.OffHeap.Owners {
		hw.OffHeap = append(hw.OffHeap, join.OffHeapOwner{Start: o.Addr, End: o.Addr + o.Size, TypeSig: typeSig(o.Class),
			Path: w.paths.id(o.Chain), Mapped: o.Mapped})
	}
	w.gcs = res.GC.Before
	hw.Paths = w.paths.out
	hw.Index = structureIndex{res}
	hw.Overlapped = res.GC.Overlapped
	hw.Visited, hw.Bytes = uint64(res.Stats.Objects), uint64(res.Stats.Bytes)
	hw.Skipped = uint64(res.Stats.Invalid + res.Stats.Unreadable + res.Stats.Forwarded + res.Stats.ArrayMoved)
	hw.Note = walkNote(&res.Stats, res.GC.Overlapped, tries)
	hw.Roots = uint64(res.Stats.Roots)
	return hw
}

// census is what the walk adds to the object table: its large objects,
// named by their chains. A launched JVM's large objects are the agent's,
// by their sites (and its censuses after GCs): the walk's would take
// their samples as objects "allocated before attach" wherever the two
// disagree on an address, as after a GC moved them.
func (w *walker) census(start uint64, large []heapwalk.Object) []agentwire.Census {
	if w.launched {
		return nil
	}
	var out []agentwire.Census
	for _, o := range large {
		out = append(out, agentwire.Census{Time: start, Addr: o.Addr, Size: o.Size,
			Path: w.paths.id(o.Chain), Kind: agentwire.CensusAttach, TypeSig: typeSig(o.Class)})
	}
	return out
}

// walkDone is the loop's channel of the walk's result (nil: none to wait for).
func (s *session) walkDone() <-chan *join.HeapWalk {
	if s.walk == nil || !s.walk.running {
		return nil
	}
	return s.walk.done
}

// onWalk hands the walk's result to the join.
func (s *session) onWalk(hw *join.HeapWalk) {
	w := s.walk
	w.running, w.checking = false, true
	w.lastTook = s.clk.Now().Sub(w.lastStart)
	w.checkAt = time.After(s.walkCheckEvery())
	if w.again = hw == nil; w.again {
		s.j.AbandonHeapWalk()
		return
	}
	s.j.OnHeapWalk(hw)
	w.staleAt = s.j.StructureStale()
	w.heapAt, w.attrAt = s.j.HeapSamples()
	if w.walks == 1 {
		s.opts.note("heap walk of pid %d: %d objects in %.1fs", s.pid, hw.Visited, float64(hw.End-hw.Start)/1e9)
	}
}

// short says a walk found under half of the objects or class mirrors the
// last whole one did: a GC moved the mirrors, or the objects near the
// roots, under it.
func (w *walker) short(res *heapwalk.Result) bool {
	return w.lastVisited > 0 && (res.Stats.Objects*2 < w.lastVisited || res.Stats.Mirrors*2 < w.lastMirrors)
}

// setProbes keeps some of what a walk found to check against the heap:
// its large objects, and a sample of its larger rows (young garbage moves
// at every GC, and says nothing).
func (w *walker) setProbes(res *heapwalk.Result, large []heapwalk.Object) {
	w.probes = w.probes[:0]
	add := func(addr, klass uint64) {
		if len(w.probes) < maxProbes {
			w.probes = append(w.probes, probe{addr, klass})
		}
	}
	for _, o := range large {
		add(o.Addr, o.Klass)
	}
	for _, r := range res.Rows {
		if r.Count >= minProbedRow {
			for _, a := range r.Sample {
				add(a, r.Klass)
			}
		}
	}
}

// unnamedSince says many of the in-heap samples since the last walk met
// objects it did not find: a program that keeps building its data (a
// copy-on-write B-tree's new pages, a growing map), which another walk
// names once they are reachable.
func (s *session) unnamedSince() bool {
	w := s.walk
	heap, attr := s.j.HeapSamples()
	// A sample is counted in the heap when it comes and attributed when
	// the join charges it, later: more may have been attributed than
	// counted since the walk, which is no sign of unnamed objects.
	return unnamed(heap-w.heapAt, attr-w.attrAt)
}

// unnamed says whether many of dh in-heap samples, da of them (or more)
// attributed, met objects no walk found.
func unnamed(dh, da uint64) bool {
	return dh >= unnamedMin && da < dh && (dh-da)*unnamedShare > dh
}

// rebase keeps the counts since the last walk across a window's cut,
// reset, which restarts the join's counters (counts) from 0: without it,
// the counts since the walk wrap around and a cut starts another walk.
func (w *walker) rebase(counts func() (stale, heap, attr uint64), reset func()) {
	stale, heap, attr := counts()
	reset()
	s, h, a := counts()
	// Unsigned arithmetic: now - at stays the count since the walk.
	w.staleAt -= stale - s
	w.heapAt -= heap - h
	w.attrAt -= attr - a
}

// walkCounts are the join's counters a walk's checks start from.
func walkCounts(j *join.JVM) func() (stale, heap, attr uint64) {
	return func() (uint64, uint64, uint64) {
		heap, attr := j.HeapSamples()
		return j.StructureStale(), heap, attr
	}
}

// A walk again when one in unnamedShare of at least unnamedMin in-heap
// samples since the last walk met objects it did not find.
const (
	unnamedMin   = 200
	unnamedShare = 4
)

// walkAgain walks again, with the roots as they are now.
func (s *session) walkAgain() {
	w := s.walk
	w.checking = false // no checks until the next walk's result
	if w.rootsEnd == nil {
		s.startWalk() // the agent sent no roots the first time
		return
	}
	s.askRoots()
	if !w.collecting {
		s.startWalk()
	}
}

// walkShare is how many times as long as the last walk took must pass
// from its start before another: a continuous scan's walks take less.
func (s *session) walkShare() time.Duration {
	if s.cuts != nil {
		return continuousWalkShare
	}
	return walkShare
}

// walkCheckEvery is how often the last walk is checked against the heap.
func (s *session) walkCheckEvery() time.Duration {
	if s.cuts != nil {
		return continuousCheckEvery
	}
	return walkCheckEvery
}

// walkCheck is the loop's channel that checks the last walk against the
// heap (nil: no walk to check).
func (s *session) walkCheck() <-chan time.Time {
	if s.walk == nil || !s.walk.checking {
		return nil
	}
	return s.walk.checkAt
}

// checkWalk walks again when a GC moved what the last walk found, as far
// as the walks' share of the time allows.
func (s *session) checkWalk() {
	w := s.walk
	if w.layout == nil {
		s.firstLaunchWalk()
		return
	}
	w.checkAt = time.After(s.walkCheckEvery())
	if s.clk.Now().Sub(w.lastStart) < s.walkShare()*w.lastTook {
		return
	}
	// The samples' own headers are the surest sign that a GC moved the
	// walk's objects: a sample whose object is not of its row's class.
	if w.again || s.j.StructureStale()-w.staleAt >= staleSamples || s.unnamedSince() {
		s.walkAgain()
		return
	}
	n, _, err := w.layout.Collections(w.mem)
	if err != nil || n == w.gcs {
		return
	}
	if moved, all := w.moved(); moved*staleShare >= all && all > 0 {
		s.walkAgain()
	} else {
		w.gcs = n // GCs that left the last walk's objects where they were
	}
}

// moved counts the probes whose object is no longer where the walk found
// it: the klass word there is another. The probes are read in one vector;
// those past a read that failed, one at a time.
func (w *walker) moved() (moved, all int) {
	l := w.layout
	const hdr = 16
	buf := make([]byte, hdr*len(w.probes))
	got := 0
	if vm, ok := w.mem.(heapwalk.VectorMem); ok && len(w.probes) > 0 {
		spans := make([]heapwalk.Span, len(w.probes))
		for i, p := range w.probes {
			spans[i] = heapwalk.Span{Addr: p.addr, Len: hdr}
		}
		got, _ = vm.ReadVector(buf, spans)
	}
	for i, p := range w.probes {
		b := buf[i*hdr : (i+1)*hdr]
		if (i+1)*hdr > got {
			if n, _ := w.mem.ReadAt(b, int64(p.addr)); n < hdr {
				moved++
				all++
				continue
			}
		}
		if l.KlassOf(b) != p.klass {
			moved++
		}
		all++
	}
	return moved, all
}

// walkGrace is how long a profile that ends during its walk waits for
// what the cancelled walk found so far.
const walkGrace = 2 * time.Second

// finishWalk ends a walk still running when the profile ends, and keeps
// what it found.
func (s *session) finishWalk() {
	ch := s.walkDone()
	if ch == nil {
		return
	}
	s.walk.cancel()
	select {
	case hw := <-ch:
		s.onWalk(hw)
	case <-time.After(walkGrace):
	}
}

// walkNote says what a user should know of a walk cut short (how far it
// got, and what it waited for) or one that collections kept overlapping.
func walkNote(st *heapwalk.Stats, overlapped bool, tries int) string {
	var cut []string
	if overlapped && tries >= walkTries {
		cut = append(cut, fmt.Sprintf("a collection ran during each of its %d tries: objects it moved as the walk read them may be counted twice or named by another holder", tries))
	}
	if st.Canceled {
		s := fmt.Sprintf("the profile ended before the walk did: it named %d objects (%.1f MiB), those on the pages the samples hit first, and had found %d more it did not reach",
			st.Objects, float64(st.Bytes)/(1<<20), st.Pending)
		if st.Waited >= time.Millisecond {
			s += fmt.Sprintf("; it waited %.1fs of its %.1fs for the other JVMs' walks", st.Waited.Seconds(), st.Time.Seconds())
		}
		cut = append(cut, s)
	}
	if n := st.ObjectsCapped + st.QueueDropped + st.BitmapDropped; n > 0 {
		cut = append(cut, fmt.Sprintf("%d objects past its caps were not visited", n))
	}
	if st.RefsCapped {
		cut = append(cut, fmt.Sprintf("it stopped at its cap of references read, after %d objects (%.1f MiB), with %d found and not reached",
			st.Objects, float64(st.Bytes)/(1<<20), st.Pending))
	}
	if st.LookupLost > 0 {
		cut = append(cut, fmt.Sprintf("%d small objects have no address entry", st.LookupLost))
	}
	return strings.Join(cut, "; ")
}

// structureIndex is a walk's address lookup, as the join asks it.
type structureIndex struct{ res *heapwalk.Result }

func (x structureIndex) Lookup(addr, klass uint64) int {
	row, _ := x.res.LookupClass(addr, klass)
	return row
}

// chainPaths numbers the walks' chains as the join's holder chains,
// parents first: each prefix of hops once across walks, and out holds the
// ones a walk added.
type chainPaths struct {
	res  *heapwalk.Result
	ids  map[heapwalk.ChainID]uint32 // of res's chains
	out  []agentwire.CensusPath
	pre  map[string]uint32 // a prefix of hops → its ID
	next uint32
}

// id interns chain c's hops.
func (p *chainPaths) id(c heapwalk.ChainID) uint32 {
	if id, ok := p.ids[c]; ok {
		return id
	}
	var parent uint32
	key := ""
	for _, h := range p.res.Hops(c) {
		key += h + "\x00"
		id, ok := p.pre[key]
		if !ok {
			p.next++
			id = p.next
			p.out = append(p.out, agentwire.CensusPath{ID: id, Parent: parent, Hop: h})
			p.pre[key] = id
		}
		parent = id
	}
	p.ids[c] = parent
	return parent
}

// typeSig is the JVM signature of a Java type name: long[] → [J,
// java.util.HashMap$Node → Ljava/util/HashMap$Node;.
func typeSig(name string) string {
	dims := 0
	for strings.HasSuffix(name, "[]") {
		name = strings.TrimSuffix(name, "[]")
		dims++
	}
	base, ok := primitiveSigs[name]
	if !ok {
		base = "L" + strings.ReplaceAll(name, ".", "/") + ";"
	}
	return strings.Repeat("[", dims) + base
}

var primitiveSigs = map[string]string{
	"boolean": "Z", "byte": "B", "char": "C", "short": "S",
	"int": "I", "long": "J", "float": "F", "double": "D",
}

// fieldNames are the reference fields and statics of the classes the agent
// described, by Klass* and offset, for the walk's goroutine to name hops by.
type fieldNames struct {
	mu      sync.RWMutex
	fields  map[uint64]map[uint32]string // Klass* → offset → field name
	statics map[uint64]map[uint32]string // Klass* → offset in its mirror → static's name
	// bufs are the java.nio and jdk.internal.foreign classes' fields the
	// walk reads to find direct buffers and native segments (heapwalk's
	// Config.FieldOffset).
	bufs  map[uint64]map[string]uint32
	bytes int // of names kept (the loop's goroutine only)
}

func newFieldNames() *fieldNames {
	return &fieldNames{fields: map[uint64]map[uint32]string{}, statics: map[uint64]map[uint32]string{},
		bufs: map[uint64]map[string]uint32{}}
}

// maxNamedClasses and maxNameBytes bound what the agent's stream, which
// the target controls, can make the names hold.
const (
	maxNamedClasses = 1 << 18
	maxNameBytes    = 64 << 20
)

func (n *fieldNames) add(c *agentwire.Class) {
	size := 0
	for _, fs := range [][]agentwire.Field{c.Fields, c.Statics} {
		for _, f := range fs {
			size += 16 + len(f.Name)
		}
	}
	if len(n.fields) >= maxNamedClasses || n.bytes+size > maxNameBytes {
		return // its hops read Class+OFFSET
	}
	n.bytes += size
	fields, statics, bufs := refFields(c.Fields), refFields(c.Statics), bufferFields(c)
	n.mu.Lock()
	n.fields[c.Klass] = fields
	if bufs != nil {
		n.bufs[c.Klass] = bufs
	}
	if len(statics) > 0 {
		n.statics[c.Klass] = statics
	}
	n.mu.Unlock()
}

// refFields maps the reference fields of fs by offset.
func refFields(fs []agentwire.Field) map[uint32]string {
	m := make(map[uint32]string, len(fs))
	for _, f := range fs {
		if len(f.Sig) > 0 && (f.Sig[0] == 'L' || f.Sig[0] == '[') {
			m[f.Offset] = f.Name
		}
	}
	return m
}

// bufferFields are the fields of a java.nio class that locate a direct
// buffer's memory, or of a jdk.internal.foreign class that locate a native
// segment's, by name; nil for other classes.
func bufferFields(c *agentwire.Class) map[string]uint32 {
	var want map[string]string
	switch {
	case strings.HasPrefix(c.Sig, "Ljava/nio/"):
		want = map[string]string{"address": "J", "capacity": "I", "att": "Ljava/lang/Object;", "fd": "Ljava/io/FileDescriptor;"}
	case strings.HasPrefix(c.Sig, "Ljdk/internal/foreign/"):
		want = map[string]string{"min": "J", "length": "J"}
	default:
		return nil
	}
	var m map[string]uint32
	for _, f := range c.Fields {
		if sig, ok := want[f.Name]; ok && sig == f.Sig {
			if m == nil {
				m = make(map[string]uint32, len(want))
			}
			m[f.Name] = f.Offset
		}
	}
	return m
}

// offset is heapwalk's Config.FieldOffset.
func (n *fieldNames) offset(klass uint64, name string) (uint32, bool) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	off, ok := n.bufs[klass][name]
	return off, ok
}

// name is heapwalk's Config.FieldName: "java.util.TreeMap.root", and for
// a static "ServiceTruth.table" (the walk adds " (static)").
func (n *fieldNames) name(f heapwalk.FieldRef) string {
	n.mu.RLock()
	defer n.mu.RUnlock()
	var name string
	var ok bool
	if f.Static {
		name, ok = n.statics[f.Klass][f.Offset]
	} else if name, ok = n.fields[f.Klass][f.Offset]; !ok {
		name, ok = n.fields[f.Declaring][f.Offset]
	}
	if !ok {
		return ""
	}
	return f.Class + "." + name
}
