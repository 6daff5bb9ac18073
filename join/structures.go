package join

import (
	"strings"

	"github.com/djx-bpf/djx-bpf/jvmsym"
	"github.com/djx-bpf/djx-bpf/objindex"
	"github.com/djx-bpf/djx-bpf/report"
	"github.com/djx-bpf/djx-bpf/sources/agentwire"
)

// A heap walk names the objects that existed when it ran: those of at least
// min size one by one, as a census does, and the small ones by data
// structure, a row of objects of one type reached by one holder chain.

// HeapWalk is what a walk of the heap from outside the JVM found.
type HeapWalk struct {
	// Start and End bound the walk (CLOCK_MONOTONIC ns): samples from
	// Start on wait for it, and meet its objects.
	Start, End uint64
	// Paths are the holder chains, parents first; their IDs are the walk's
	// own (the join moves them out of the agent census's way).
	Paths []agentwire.CensusPath
	// Objects are the objects of at least min size, each with its chain.
	Objects []agentwire.Census
	// OffHeap are the direct buffers' and native segments' memory outside
	// the heap.
	OffHeap []OffHeapOwner
	// Rows are the data structures of the smaller objects.
	Rows []StructureRow
	// Index names a small object's row by an address inside it; nil when
	// the walk kept no addresses.
	Index StructureIndex
	// Overlapped says a GC ran during the walk: what it found in memory
	// the GC moved may be misnamed, which the samples' own headers catch.
	Overlapped bool
	// Failed says the walk could not read the heap (Note says why): what
	// the last walk found stands.
	Failed bool
	// Stats of the walk, for the report.
	Visited, Bytes, Skipped uint64
	Note                    string // why the walk stopped short; "" when whole
	// RootsPass is the agent's pass over the roots the walk could not see
	// (threads' locals), nil without one; Roots counts those the walk took.
	RootsPass *agentwire.RootsEnd
	Roots     uint64
	// RootsPauseMax is the longest of the roots passes the walk asked
	// for (ns): a walk that a GC outran asks for the roots again.
	RootsPauseMax uint64
}

// StructureRow is one data structure: objects of one type reached by one
// holder chain.
type StructureRow struct {
	TypeSig string // "Ljava/util/TreeMap$Entry;"
	Path    uint32 // holder chain, an ID of HeapWalk.Paths
	Objects uint64
	Bytes   uint64
	// OtherRoots and Retained are the walk's Row's (they name the
	// large objects of the row too).
	OtherRoots int
	Retained   uint64
}

// StructureIndex names the object holding a heap address.
type StructureIndex interface {
	// Lookup returns the row (an index of HeapWalk.Rows) of the object
	// holding addr, or -1; klass is the object's Klass* when the sample
	// read its header (it picks among rows where the index is not exact),
	// else 0.
	Lookup(addr, klass uint64) (row int)
}

// walkPathBase moves a walk's chain IDs above the agent census's.
const walkPathBase = 1 << 31

// structureState is what the walks found of the small objects.
type structureState struct {
	walkHold  uint64 // a walk started then and has not ended: the join waits
	walks     []walkRun
	rowSites  []int32 // HeapWalk.Rows index → site, of the last walk
	structIdx StructureIndex
	// What the last walk added, which the next one replaces.
	walkObjs []walkObj
	walkRows []walkRowCount
	// reachSites are the sites the last walk said reach and retained of.
	reachSites []int32
	// The latest in-heap sample addresses, for a walk to name first.
	hotAddrs [4096]uint64
	hotNext  uint64
}

// HotAddrs returns the addresses the latest in-heap samples hit (at most
// 4096), for a heap walk to name first.
func (j *JVM) HotAddrs() []uint64 {
	n := min(j.hotNext, uint64(len(j.hotAddrs)))
	return append([]uint64(nil), j.hotAddrs[:n]...)
}

// walkObj is an object a walk tracked: its ID, while it still is its.
type walkObj struct {
	id   objindex.ID
	site int32
	size uint64
}

type walkRowCount struct {
	site           int32
	objects, bytes uint64
}

type walkRun struct {
	start, end              uint64
	objects, rows           int
	visited, bytes, skipped uint64
	overlapped              bool
	note                    string
	roots                   *agentwire.RootsEnd
	rootsPauseMax           uint64
}

// BeginHeapWalk holds samples from t on until the walk's result arrives.
func (j *JVM) BeginHeapWalk(t uint64) { j.walkHold = t }

// AbandonHeapWalk ends a walk whose result is thrown away: the samples
// held for it are judged by the last walk's.
func (j *JVM) AbandonHeapWalk() {
	j.walkHold = 0
	j.Drain(false)
}

// OnHeapWalk tracks what walk w found: its large objects as census objects
// and its small ones by data structure. A walk after another replaces
// what the other found: a GC had moved the objects since.
func (j *JVM) OnHeapWalk(w *HeapWalk) {
	j.walkHold = 0
	if w.Failed { // the last walk's result stands
		j.walks = append(j.walks, walkRun{start: w.Start, end: w.End, note: w.Note, roots: w.RootsPass})
		j.Drain(false)
		return
	}
	j.forgetWalk()
	for i := range w.Paths {
		p := w.Paths[i]
		p.ID += walkPathBase
		if p.Parent != 0 {
			p.Parent += walkPathBase
		}
		j.onCensusRec(&p)
	}
	for i := range w.Objects {
		c := w.Objects[i]
		if c.Path != 0 {
			c.Path += walkPathBase
		}
		c.Kind = agentwire.CensusAttach
		if id, ok := j.onCensus(&c); ok {
			j.walkObjs = append(j.walkObjs, walkObj{id, j.objs[id].site, c.Size})
		}
	}
	j.rowSites = j.rowSites[:0]
	for _, r := range w.Rows {
		if r.Objects == 0 { // its objects are all tracked one by one
			j.rowSites = append(j.rowSites, -1)
			continue
		}
		path := r.Path
		if path != 0 {
			path += walkPathBase
		}
		si := j.structureSite(r.TypeSig, path)
		if si >= 0 {
			s := j.sites[si]
			s.objects += r.Objects
			s.bytes += r.Bytes
			s.estObjects += float64(r.Objects)
			s.estBytes += float64(r.Bytes)
			j.walkRows = append(j.walkRows, walkRowCount{si, r.Objects, r.Bytes})
		}
		j.rowSites = append(j.rowSites, si)
	}
	j.setReach(w)
	j.setOffHeap(w)
	j.structIdx = w.Index
	j.walks = append(j.walks, walkRun{start: w.Start, end: w.End, objects: len(w.Objects), rows: len(w.Rows),
		visited: w.Visited, bytes: w.Bytes, skipped: w.Skipped, overlapped: w.Overlapped, note: w.Note, roots: w.RootsPass,
		rootsPauseMax: w.RootsPauseMax})
	j.Drain(false)
}

// forgetWalk takes back what the last walk added to the object table: its
// objects still tracked, and its rows' counts. Their samples stay.
func (j *JVM) forgetWalk() {
	for _, o := range j.walkObjs {
		obj := j.objs[o.id]
		if obj.site != o.site {
			continue // freed, and the ID taken by another object
		}
		if cur, ok := j.idx.Lookup(obj.start); !ok || cur.ID != o.id || !j.idx.Remove(obj.start) {
			continue
		}
		j.forget(o.id)
		s := j.sites[o.site]
		s.objects--
		s.bytes -= o.size
		s.estObjects--
		s.estBytes -= float64(o.size)
	}
	j.takeBackRows(j.walkRows)
	j.walkObjs, j.walkRows = j.walkObjs[:0], j.walkRows[:0]
	for _, si := range j.reachSites {
		j.sites[si].otherRoots, j.sites[si].retained = 0, 0
	}
	j.reachSites = j.reachSites[:0]
}

// setReach gives the sites of walk w's rows, and those of its large
// objects, what the walk says of their chain: other roots, retained.
func (j *JVM) setReach(w *HeapWalk) {
	type key struct {
		sig  string
		path uint32
	}
	rows := make(map[key]int, len(w.Rows))
	for i, r := range w.Rows {
		if r.OtherRoots > 0 || r.Retained > 0 {
			rows[key{r.TypeSig, r.Path}] = i
		}
	}
	set := func(si int32, path uint32) {
		s := j.sites[si]
		if path >= walkPathBase {
			path -= walkPathBase
		}
		if i, ok := rows[key{s.typeSig, path}]; ok && s.otherRoots == 0 && s.retained == 0 {
			s.otherRoots, s.retained = w.Rows[i].OtherRoots, w.Rows[i].Retained
			j.reachSites = append(j.reachSites, si)
		}
	}
	for i, si := range j.rowSites {
		if si >= 0 {
			set(si, w.Rows[i].Path)
		}
	}
	for _, o := range j.walkObjs {
		set(o.site, j.sites[o.site].holder)
	}
}

func (j *JVM) structureSite(sig string, path uint32) int32 {
	k := append(j.keyBuf[:0], "structure\x00"...)
	k = append(k, sig...)
	k = append(k, 0, byte(path), byte(path>>8), byte(path>>16), byte(path>>24))
	return j.internSite(k, 0, func() *site {
		return &site{typeSig: sig, census: agentwire.CensusAttach, holder: path, structure: true}
	})
}

// chargeStructure charges sample p, in an untracked heap object, to the data
// structure holding that object, unless the sample's own header read says
// the object there now is another (the walk is older than a GC that moved
// it). typed says the sample's type and field are known.
func (j *JVM) chargeStructure(p *pending, fr []pathFrame, typ, field string, typed bool) bool {
	if j.structIdx == nil {
		return false
	}
	row := j.structIdx.Lookup(p.addr, j.klassPtr(p))
	if row < 0 || row >= len(j.rowSites) || j.rowSites[row] < 0 {
		return false
	}
	s := j.sites[j.rowSites[row]]
	if typed && typ != jvmsym.TypeName(s.typeSig) {
		j.stats.StructureStale++
		return false
	}
	j.stats.StructureSamples++
	if !typed {
		typ, field = jvmsym.TypeName(s.typeSig), ""
	}
	j.chargeSite(s, p, fr, 1, typ, field)
	return true
}

// walkStats adds what the heap walks found and cost to st, and notes what
// a user should know about them.
func (j *JVM) walkStats(st *report.Stats, note func(string, ...any)) {
	for _, w := range j.walks {
		if w.end > w.start {
			st.WalkMs += float64(w.end-w.start) / 1e6
		}
		st.WalkObjects += w.visited
		st.WalkBytes += w.bytes
		st.WalkStructures += uint64(w.rows)
		st.WalkOverlapped = st.WalkOverlapped || w.overlapped
		if w.note != "" {
			note("heap walk: %s", w.note)
		}
		if r := w.roots; r != nil {
			st.RootsPauseMs = max(st.RootsPauseMs, float64(max(r.FollowNanos, w.rootsPauseMax))/1e6)
			st.WalkRoots += r.Roots
			rootsNotes(r, note)
		}
	}
	if j.walkHold != 0 {
		note("the heap walk had not ended when the profile did: objects that existed before the attach are not named")
	}
}

// klassPtr is the Klass* of the object sample p located, or 0.
func (j *JVM) klassPtr(p *pending) uint64 {
	ti := j.typesInfo
	if !p.located || ti == nil {
		return 0
	}
	if ti.KlassBytes == 4 {
		// The klass word's upper half is an array's length or a field.
		return ti.KlassBase + uint64(uint32(p.klass))<<ti.KlassShift
	}
	return p.klass
}

// StructureStale counts the samples that met an object a GC had moved
// since the walk that found it was there.
func (j *JVM) StructureStale() uint64 { return j.stats.StructureStale }

// HeapSamples counts the in-heap samples judged so far, and those charged
// to a tracked object or a data structure.
func (j *JVM) HeapSamples() (inHeap, attributed uint64) { return j.stats.InHeap, j.stats.Attributed }

// rootsNotes says what a user should know of the agent's roots pass.
func rootsNotes(r *agentwire.RootsEnd, note func(string, ...any)) {
	switch {
	case r.Status&agentwire.RootsRefused != 0:
		note("heap walk without the threads' locals: %s", strings.TrimSpace(r.Note))
	case r.Status&agentwire.RootsFailed != 0:
		note("heap walk without some of the threads' locals: the roots pass failed (%s)", strings.TrimSpace(r.Note))
	case r.Status&agentwire.RootsCapped != 0:
		note("heap walk: more roots than a pass keeps; %d were taken", r.Roots)
	}
	if ms := float64(r.FollowNanos) / 1e6; ms > 1.1*rootsPauseGoal {
		note("the roots pass paused the JVM %.0f ms, %.0f%% past its %v ms goal (many threads or deep stacks)", ms, 100*(ms/rootsPauseGoal-1), rootsPauseGoal)
	}
}

// rootsPauseGoal (ms) is what the roots pass should pause a JVM at most.
const rootsPauseGoal = 50

// takeBackRows takes a walk's row counts back from their sites, before a
// later walk's replace them.
func (j *JVM) takeBackRows(rows []walkRowCount) {
	for _, r := range rows {
		s := j.sites[r.site]
		s.objects -= r.objects
		s.bytes -= r.bytes
		s.estObjects -= float64(r.objects)
		s.estBytes -= float64(r.bytes)
	}
}
