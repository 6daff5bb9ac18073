// Package walkplan is the heap walk's policy in djx-bpf's terms: what one
// walk of a JVM's heap (package heapwalk) starts from and turns into the
// join's terms, whether a GC moved what it found, when its counts call for
// another walk, and how a scan's walks share the CPU (Gate). The profiler's
// session decides when to walk, asks the agent for roots and hands the
// result to the join.
package walkplan

import (
	"context"
	"fmt"
	"time"

	"github.com/djx-bpf/djx-bpf/hotspot/heapwalk"
	"github.com/djx-bpf/djx-bpf/hotspot/targetmem"
	"github.com/djx-bpf/djx-bpf/hotspot/vmstructs"
	"github.com/djx-bpf/djx-bpf/join"
	"github.com/djx-bpf/djx-bpf/sources/agentwire"
)

// Walker is one JVM's heap walk across its walks: what it reads, the
// names it gives fields, and what the last walk found, to tell whether a
// GC moved it.
type Walker struct {
	Layout *heapwalk.Layout // nil until the heap's layout could be read
	Mem    heapwalk.Mem
	// Launched: the JVM started under the profile, whose agent tracked
	// its large objects from their allocation; the walk names its small
	// ones.
	Launched bool
	// Hot are the addresses the samples hit before the walk began: it
	// names their objects first.
	Hot []uint64

	names *fieldNames
	// A running walk that finds, once it has walked the statics, that a
	// GC ran since its roots were taken asks for them anew (rootsReq);
	// the session answers on rootsResp when the agent's pass ends.
	rootsReq  chan struct{}
	rootsResp chan RootsPass

	// paths numbers chains alike across walks, so that a walk after a
	// GC meets the rows of the walk before.
	paths chainPaths
	// What tells whether a GC moved what the last walk found: the
	// collection count it began at, and some of its objects' addresses
	// and classes.
	gcs    uint32
	probes []probe
	// lastVisited counts the objects of the last walk the join took.
	lastVisited int64
	lastMirrors int
	staleAt     uint64 // the join's stale structure samples when the last walk ended
	// The join's in-heap and attributed samples when the last walk ended.
	heapAt, attrAt uint64
}

// New is a walker with no layout yet.
func New() *Walker {
	return &Walker{names: newFieldNames(),
		rootsReq: make(chan struct{}, 1), rootsResp: make(chan RootsPass, 1),
		paths: chainPaths{ids: map[heapwalk.ChainID]uint32{}, pre: map[string]uint32{}}}
}

// RootsPass is what a walk takes of one of the agent's roots passes: its
// roots, its end, and the collection count then; Ok false: none came.
type RootsPass struct {
	Roots []heapwalk.Root
	End   *agentwire.RootsEnd
	GC    uint32
	Ok    bool
}

// probe is an object a walk found: where, and its Klass*.
type probe struct{ addr, klass uint64 }

// How a walk's result is checked against the heap.
const (
	maxProbes    = 4096
	staleShare   = 10 // a walk again when 1/10 of the probes moved
	minProbedRow = 100
	staleSamples = 16 // a walk again after this many samples met moved objects
)

// NoRoots is how long a walk waits for roots the agent never sends.
const NoRoots = 10 * time.Second

// Target is what a walk reads of the JVM's process (jvm.Process): a live
// one, or a session's recording of one.
type Target interface {
	Mem() targetmem.Mem
	VMStructs() (*vmstructs.Table, error)
}

// OpenLayout reads how t's JVM lays out its heap.
func OpenLayout(t Target) (*heapwalk.Layout, heapwalk.Mem, error) {
	tab, err := t.VMStructs()
	if err != nil {
		return nil, nil, fmt.Errorf("read the JVM's vmStructs: %w", err)
	}
	mem := t.Mem()
	l, err := heapwalk.NewLayout(tab, mem, heapwalk.Options{})
	if err != nil {
		return nil, nil, err // "heap layout: ...": the note says what it stops
	}
	return l, mem, nil
}

// AddClass keeps a class description the agent sent, to name the walk's
// fields by.
func (w *Walker) AddClass(c *agentwire.Class) { w.names.add(c) }

// RootOf is the agent's root r as the walk starts from it.
func RootOf(r *agentwire.Root) heapwalk.Root {
	return heapwalk.Root{Addr: r.Addr, Hop: r.Hop, Rank: rootRank(r), Others: int(max(r.Reach, 1) - 1)}
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

// RootsWanted is the channel on which a running walk asks for the roots
// anew; the session answers with Answer.
func (w *Walker) RootsWanted() <-chan struct{} { return w.rootsReq }

// Answer hands a walk that asked the roots anew; a zero pass says they
// cannot be had. It does not wait for the walk to take them.
func (w *Walker) Answer(rp RootsPass) {
	select {
	case w.rootsResp <- rp:
	default:
	}
}

// DropAnswers forgets what a walk before asked for and did not take.
func (w *Walker) DropAnswers() {
	select {
	case <-w.rootsReq:
	default:
	}
	select {
	case <-w.rootsResp:
	default:
	}
}

// freshRoots is a walk's heapwalk.Config.Refresh: once the statics are
// walked, when a GC ran since the roots were taken (their objects may have
// moved), it asks the session for them anew and waits. It updates rp; stale
// says the roots could not be had anew, and the walk leaves them out.
func (w *Walker) freshRoots(rp *RootsPass, stale *bool) func(context.Context) ([]heapwalk.Root, bool) {
	return func(ctx context.Context) ([]heapwalk.Root, bool) {
		if !rp.Ok {
			return nil, false // no roots pass: none to refresh
		}
		if n, _, err := w.Layout.Collections(w.Mem); err != nil || n == rp.GC {
			return nil, false
		}
		select {
		case w.rootsReq <- struct{}{}:
		default:
		}
		select {
		case f := <-w.rootsResp:
			if !f.Ok {
				*stale = true
				return nil, true
			}
			*rp = f
			return f.Roots, true
		case <-ctx.Done():
			return nil, false
		case <-time.After(NoRoots):
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

// Run walks the heap and turns what it found into the join's terms; start
// is the walk's start on mono's clock. A walk that a GC overlapped, and
// whose objects the GC moved, starts again. nil: a walk again whose result
// is not to be taken, and the last walk's stands.
func (w *Walker) Run(ctx context.Context, gate *Gate, start, minSize uint64, mono func() uint64, rp RootsPass) *join.HeapWalk {
	var large []heapwalk.Object
	var res *heapwalk.Result
	var err error
	stale := false
	pause := uint64(0)
	if rp.End != nil {
		pause = rp.End.FollowNanos
	}
	turn, ok := gate.enter(ctx)
	defer turn.leave()
	if !ok {
		return &join.HeapWalk{Start: start, End: mono(), RootsPass: rp.End, Failed: true,
			Note: "not started: the profile ended while the other JVMs' walks ran"}
	}
	tries := 0
	for try := 1; ; try++ {
		tries = try
		large = large[:0]
		stale = false
		cfg := heapwalk.Config{Roots: rp.Roots, FieldName: w.names.name, FieldOffset: w.names.offset, MinSize: minSize, Hot: w.Hot,
			Refresh:  w.freshRoots(&rp, &stale),
			OnObject: func(o heapwalk.Object) { large = append(large, o) }}
		if turn != nil {
			cfg.Pace = turn.pace
		}
		res, err = heapwalk.Walk(ctx, w.Layout, w.Mem, cfg)
		if rp.End != nil {
			pause = max(pause, rp.End.FollowNanos)
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
		if (st.Invalid+st.Unreadable+st.Forwarded+st.ArrayMoved+st.Stale)*overlapSkips < st.Objects {
			w.setProbes(res, large)
			if moved, all := w.moved(); moved*staleShare < all || all == 0 {
				break
			}
		}
	}
	hw := &join.HeapWalk{Start: start, End: mono(), RootsPass: rp.End, RootsPauseMax: pause}
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
	hw.Skipped = uint64(res.Stats.Invalid + res.Stats.Unreadable + res.Stats.Forwarded + res.Stats.ArrayMoved + res.Stats.Stale)
	hw.Note = walkNote(&res.Stats, res.GC.Overlapped, tries)
	hw.Roots = uint64(res.Stats.Roots)
	return hw
}

// census is what the walk adds to the object table: its large objects,
// named by their chains. A launched JVM's large objects are the agent's,
// by their sites (and its censuses after GCs): the walk's would take
// their samples as objects "allocated before attach" wherever the two
// disagree on an address, as after a GC moved them.
func (w *Walker) census(start uint64, large []heapwalk.Object) []agentwire.Census {
	if w.Launched {
		return nil
	}
	var out []agentwire.Census
	for _, o := range large {
		out = append(out, agentwire.Census{Time: start, Addr: o.Addr, Size: o.Size,
			Path: w.paths.id(o.Chain), Kind: agentwire.CensusAttach, TypeSig: typeSig(o.Class)})
	}
	return out
}

// short says a walk found under half of the objects or class mirrors the
// last whole one did: a GC moved the mirrors, or the objects near the
// roots, under it.
func (w *Walker) short(res *heapwalk.Result) bool {
	return w.lastVisited > 0 && (res.Stats.Objects*2 < w.lastVisited || res.Stats.Mirrors*2 < w.lastMirrors)
}

// setProbes keeps some of what a walk found to check against the heap:
// its large objects, and a sample of its larger rows (young garbage moves
// at every GC, and says nothing).
func (w *Walker) setProbes(res *heapwalk.Result, large []heapwalk.Object) {
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

// GCMoved says a GC since the last walk moved what it found. GCs that left
// its objects where they were are not asked about again.
func (w *Walker) GCMoved() bool {
	n, _, err := w.Layout.Collections(w.Mem)
	if err != nil || n == w.gcs {
		return false
	}
	if moved, all := w.moved(); moved*staleShare >= all && all > 0 {
		return true
	}
	w.gcs = n
	return false
}

// moved counts the probes whose object is no longer where the walk found
// it: the klass word there is another. The probes are read in one vector;
// those past a read that failed, one at a time.
func (w *Walker) moved() (moved, all int) {
	l := w.Layout
	const hdr = 16
	buf := make([]byte, hdr*len(w.probes))
	got := 0
	if vm, ok := w.Mem.(heapwalk.VectorMem); ok && len(w.probes) > 0 {
		spans := make([]heapwalk.Span, len(w.probes))
		for i, p := range w.probes {
			spans[i] = heapwalk.Span{Addr: p.addr, Len: hdr}
		}
		got, _ = vm.ReadVector(buf, spans)
	}
	for i, p := range w.probes {
		b := buf[i*hdr : (i+1)*hdr]
		if (i+1)*hdr > got {
			if n, _ := w.Mem.ReadAt(b, int64(p.addr)); n < hdr {
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
