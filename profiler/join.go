package profiler

import (
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/djx-bpf/djx-bpf/agent"
	"github.com/djx-bpf/djx-bpf/decode"
	"github.com/djx-bpf/djx-bpf/heap"
	"github.com/djx-bpf/djx-bpf/jvmsym"
	"github.com/djx-bpf/djx-bpf/loader"
	"github.com/djx-bpf/djx-bpf/objindex"
	"github.com/djx-bpf/djx-bpf/report"
)

// maxPending bounds the samples waiting for the agent's watermark; past it
// the oldest are attributed against what is known (a stalled agent must not
// make the loader grow without bound).
const maxPending = 1 << 20

// pageFaultGrace is how much later than its fault a page-fault sample is
// attributed: longer than the JVM takes to zero a large array.
const pageFaultGrace = uint64(50 * time.Millisecond)

// pending is a decoded sample waiting until the allocation stream has caught
// up with its timestamp.
type pending struct {
	time  uint64 // when to judge it (page faults: later than taken)
	addr  uint64 // 0: no data address
	stime uint64 // when it was taken
	ip    uint64
	// accessPC is where to look up the accessing instruction in the JIT pc
	// map (the first descriptor at or after it): ip for a load found by
	// look-back (it ends at ip), ip+1 for an access at ip; 0 if unknown.
	accessPC uint64
	tid      uint32
	cpu      uint32
	memOK    bool   // dataSrc and weight came with the sample (hardware)
	noStack  bool   // no stack was asked for this sample (the thread had one just before)
	dataSrc  uint64 // union perf_mem_data_src
	weight   uint64 // union perf_sample_weight
}

// site is one (allocation path, type) pair, or for census objects one
// (holder chain, type) pair.
type site struct {
	typeSig    string
	frames     []agent.Frame
	census     agent.CensusKind // 0: sampled allocations
	holder     uint32           // census: the holder chain (agent.CensusPath ID)
	objects    uint64
	bytes      uint64
	estObjects float64
	estBytes   float64
	samples    uint64
	estSamples float64
	accesses   accessSet
	mem        *report.MemMetrics
	numa       *report.NUMAMetrics
}

// timedRec is an agent record whose effect depends on when it happened.
type timedRec struct {
	time uint64
	rec  agent.Record
}

// gcBatch holds the copies of one GC, applied at its end as one batch.
type gcBatch struct {
	begin, end uint64
	moves      []objindex.Move
}

// object is a tracked allocation; its index in jvm.objs is its objindex.ID.
type object struct {
	site   int32
	weight float32 // 1/p: the heap sampler caught it with probability p
	start  uint64  // current address (kept up to date through moves)
	size   uint64
	tag    uint64 // the agent's tag, 0 if none
}

// jvm is the joined state of one profiled JVM. It is owned by one goroutine.
type jvm struct {
	pid       int
	interval  uint64 // heap sampling interval now in force
	initial   uint64 // ... when the agent started
	raisedAt  uint64 // when the agent first raised it to stay within budget
	connected bool
	helloTime uint64
	watermark uint64
	drained   uint64 // the horizon drain last reached: heap state is past it
	// sampleWM: every sample taken before it has reached onSample, when
	// sampleStream says a sampler reports it (tests feed samples directly).
	sampleWM     uint64
	sampleStream bool
	heap         heap.Info
	heapKnown    bool

	idx     *objindex.Index
	syms    *jvmsym.Table
	objs    []object
	free    []objindex.ID
	sites   []*site
	siteIdx map[string]int32
	tags    map[uint64]objindex.ID // agent tag -> live tracked object
	keyBuf  []byte

	dec    decode.Decoder
	regs   decode.Regs
	queue  []pending // decoded samples, time order
	head   int
	agentQ []timedRec // allocation-stream records that must apply in time order
	agentH int
	gcQ    []*gcBatch // finished GCs whose moves wait to be applied
	gcH    int
	curGC  *gcBatch // GC in progress (relocation tracking)
	reloc  bool     // a relocation stream feeds this JVM
	// faultGrace delays page-fault samples (pageFaultGrace; tests set 0).
	faultGrace  uint64
	agentGCs    uint64 // GC pauses the agent saw (GarbageCollectionFinish)
	rescan      bool   // moves come from the agent's rescans (RelocRescan)
	noReconcile bool   // the collector's addresses cannot be rescanned
	lastGCEnd   uint64 // latest GarbageCollectionFinish
	rescanWait  uint64 // a GC ended here and its rescan has not arrived
	relocWM     uint64 // relocation stream complete up to here (when no GC is in progress)
	stats       report.Stats
	capDrops    map[string]uint64   // records dropped by the caps of caps.go, by reason
	agentErrs   []string            // the first ERROR records' texts
	chunks      map[uint64]struct{} // 1 GiB ranges that held tracked objects (caps.go)
	lastAgt     agent.Stats
	vmName      string

	// Access stacks (stacks.go).
	stackSig      int    // the signal BPF sends for stacks; 0: none asked
	agentStackSig int    // the signal the agent's handler is installed on
	stacksFrom    uint64 // when BPF started signalling
	stacks        map[uint32]*stackQ
	lastStacks    map[stackKey]*lastStack // per thread and code blob, for borrowStack
	lastPrune     uint64
	code          *jvmsym.CodeTable
	native        *jvmsym.Native
	nativeCache   map[uint64]string
	perfMap       *jvmsym.PerfMap
	remainder     accessSet
	pathBuf       []pathFrame
	pathKeyBuf    []byte
	// noJava, when set, stops BPF's stack signals to a thread the agent
	// found without a JNIEnv; noJavaTIDs are the threads handed to it.
	noJava     func(tid uint32)
	noJavaTIDs map[uint32]struct{}
	// hostTID, when set, turns the agent's thread ids into the host's
	// (a JVM in another pid namespace); false: the thread is gone.
	hostTID func(tid uint32) (uint32, bool)

	// Hardware memory metrics and NUMA placement (mem.go).
	weightStruct bool // the event reports PERF_SAMPLE_WEIGHT_STRUCT
	numa         *numaState

	// The census (census.go).
	censusPaths map[uint32]agent.CensusPath
	censusHold  uint64 // a census started then and has not ended: the join waits
	censuses    []censusRun
}

func newJVM(pid int) *jvm {
	j := &jvm{pid: pid, idx: objindex.New(), syms: jvmsym.NewTable(), siteIdx: make(map[string]int32), tags: make(map[uint64]objindex.ID), faultGrace: pageFaultGrace,
		stacks: make(map[uint32]*stackQ), lastStacks: make(map[stackKey]*lastStack), code: jvmsym.NewCodeTable(), nativeCache: make(map[uint64]string), remainder: make(accessSet)}
	j.idx.OnEvict(func(o objindex.Object) { j.forget(o.ID) })
	j.idx.OnMove(func(o objindex.Object) { j.objs[o.ID].start = o.Start })
	return j
}

// captureWeight is 1/p for an object of size bytes under a heap sampling
// interval: the sampler picks points a geometric (mean interval) number of
// bytes apart, so p = 1 - exp(-size/interval).
func captureWeight(size, interval uint64) float64 {
	if interval == 0 {
		return 1
	}
	p := -math.Expm1(-float64(size) / float64(interval))
	if p <= 0 {
		return 1
	}
	return 1 / p
}

// onBatch applies one batch of the agent's stream.
func (j *jvm) onBatch(b *agent.Batch) {
	for _, r := range b.Records {
		if !j.admit(r, b.Watermark) {
			continue // past a per-JVM cap (caps.go)
		}
		switch r := r.(type) {
		case *agent.Hello:
			j.connected = true
			j.helloTime = r.Monotonic
			j.interval, j.initial = r.Interval, r.Interval
			j.vmName = strings.TrimSpace(r.VMName + " " + r.VMVersion)
			j.agentStackSig = int(r.StackSignal)
		case *agent.Method:
			lines := make([]jvmsym.LineEntry, len(r.Lines))
			for i, l := range r.Lines {
				lines[i] = jvmsym.LineEntry{Start: l.Start, Line: l.Line}
			}
			j.syms.Add(r.ID, jvmsym.Method{ClassSig: r.ClassSig, Name: r.Name, Sig: r.Sig, SourceFile: r.SourceFile, Lines: lines})
		case *agent.Alloc:
			j.agentQ = append(j.agentQ, timedRec{r.Time, r})
		case *agent.Interval:
			j.agentQ = append(j.agentQ, timedRec{r.Time, r})
		case *agent.Free:
			// Stamped at the GC the object died in.
			j.insertTimed(timedRec{r.Time, r})
		case *agent.Reconcile:
			t := r.Time
			if j.rescan && j.lastGCEnd != 0 && j.lastGCEnd <= t {
				// The addresses hold from the GC's end on: judge the
				// samples taken since then by them.
				t = j.lastGCEnd
				j.rescanWait = 0
			}
			j.insertTimed(timedRec{t, r})
		case *agent.GCFinish:
			j.agentGCs++
			j.lastGCEnd = r.Time
			if j.rescan {
				j.rescanWait = r.Time
			}
		case *agent.Stack:
			j.onStack(r)
		case *agent.Code, *agent.CodeUnload, *agent.Stub:
			j.onCode(r)
		case *agent.CensusStart, *agent.CensusPath, *agent.CensusEnd:
			j.onCensusRec(r)
		case *agent.Census:
			// Stamped when its address became valid, which may precede
			// records already queued.
			j.insertTimed(timedRec{r.Time, r})
		case *agent.Stats:
			j.lastAgt = *r
		case *agent.ErrorRec:
			j.stats.AgentErrors++
			j.keepError(r.Message)
		}
	}
	if b.Watermark > j.watermark {
		j.watermark = b.Watermark
	}
	j.drain(false)
}

// insertTimed queues a record whose time may precede records already
// queued, keeping the queue in time order.
func (j *jvm) insertTimed(tr timedRec) {
	q := j.agentQ[j.agentH:]
	i := sort.Search(len(q), func(i int) bool { return q[i].time > tr.time })
	j.agentQ = slices.Insert(j.agentQ, j.agentH+i, tr)
}

// applyTimed applies one time-ordered agent record.
func (j *jvm) applyTimed(r agent.Record) {
	switch r := r.(type) {
	case *agent.Alloc:
		j.onAlloc(r)
	case *agent.Interval:
		if j.raisedAt == 0 {
			j.raisedAt = r.Time
		}
		j.interval = r.Interval
	case *agent.Free:
		j.onFree(r.Tag)
	case *agent.Reconcile:
		j.onReconcile(r.Objects)
	case *agent.Census:
		j.onCensus(r)
	}
}

// onGCBegin, onCopy and onGCEnd feed the relocation stream: the copies of
// one GC are applied together at its end, in time order with allocations
// and samples.
func (j *jvm) onGCBegin(t uint64) {
	j.reloc = true
	if j.curGC == nil {
		j.curGC = &gcBatch{begin: t}
	}
}

func (j *jvm) onCopy(src, dst, n uint64) {
	if j.curGC != nil {
		j.curGC.moves = append(j.curGC.moves, objindex.Move{Src: src, Dst: dst, Len: n})
	}
}

func (j *jvm) onGCEnd(t uint64) {
	if j.curGC == nil {
		return
	}
	j.curGC.end = t
	j.gcQ = append(j.gcQ, j.curGC)
	j.curGC = nil
	j.stats.GCs++
	j.drain(false)
}

// relocComplete says the relocation stream holds every event up to t.
func (j *jvm) relocComplete(t uint64) {
	if t > j.relocWM {
		j.relocWM = t
		j.drain(false)
	}
}

// rescanTimeout bounds how long samples wait for a rescan that the agent
// skipped or limited.
const rescanTimeout = uint64(500 * time.Millisecond)

// samplesComplete says every sample taken before t has been fed to
// onSample (0: nothing new known).
func (j *jvm) samplesComplete(t uint64) {
	if t > j.sampleWM {
		j.sampleWM = t
		j.drain(false)
	}
}

// horizon is the time up to which every stream is complete.
func (j *jvm) horizon() uint64 {
	h := j.watermark
	if j.sampleStream {
		// A sample still on its way must meet the heap as it was.
		h = min(h, j.sampleWM)
	}
	if j.stackSig != 0 {
		// Stacks come a little after their samples.
		h = max(h, stackGrace) - stackGrace
	}
	if j.censusHold != 0 && j.censusHold < h {
		h = j.censusHold // samples from the census on meet its objects
	}
	if j.rescanWait != 0 {
		if j.watermark > j.rescanWait+rescanTimeout {
			j.rescanWait = 0
		} else if j.rescanWait < h {
			h = j.rescanWait // after a GC, wait for the rescan
		}
	}
	if j.reloc {
		r := j.relocWM
		if j.curGC != nil && j.curGC.begin < r {
			r = j.curGC.begin
		}
		if r < h {
			h = r
		}
	}
	return h
}

func (j *jvm) applyGC(g *gcBatch) {
	st := j.idx.ApplyMoves(g.moves)
	j.stats.Relocations += uint64(st.Moved)
	j.stats.CopiesUnmatched += uint64(st.Unmatched)
}

func (j *jvm) siteOf(a *agent.Alloc) int32 {
	k := append(j.keyBuf[:0], a.TypeSig...)
	k = append(k, 0)
	for _, f := range a.Frames {
		for s := 0; s < 64; s += 8 {
			k = append(k, byte(f.Method>>s))
		}
		for s := 0; s < 64; s += 8 {
			k = append(k, byte(uint64(f.BCI)>>s))
		}
	}
	return j.internSite(k, func() *site {
		return &site{typeSig: a.TypeSig, frames: append([]agent.Frame(nil), a.Frames...)}
	})
}

// internSite returns the index of the site keyed k, made by mk if new; -1
// past maxSites (caps.go).
func (j *jvm) internSite(k []byte, mk func() *site) int32 {
	j.keyBuf = k
	if i, ok := j.siteIdx[string(k)]; ok {
		return i
	}
	if len(j.sites) >= maxSites {
		return -1
	}
	i := int32(len(j.sites))
	j.sites = append(j.sites, mk())
	j.siteIdx[string(k)] = i
	return i
}

func (j *jvm) onAlloc(a *agent.Alloc) {
	si := j.siteOf(a)
	if !j.roomForObject(si) {
		return // past a per-JVM cap (caps.go)
	}
	j.track(si, a.Addr, a.Size, a.Tag, captureWeight(a.Size, j.interval))
	j.stats.AllocsTracked++
}

// track starts following an object of site si, weighted w (1/p).
func (j *jvm) track(si int32, addr, size, tag uint64, w float64) {
	s := j.sites[si]
	s.objects++
	s.bytes += size
	s.estObjects += w
	s.estBytes += w * float64(size)
	o := object{site: si, weight: float32(w), start: addr, size: size, tag: tag}
	var id objindex.ID
	if n := len(j.free); n > 0 {
		id = j.free[n-1]
		j.free = j.free[:n-1]
		j.objs[id] = o
	} else {
		id = objindex.ID(len(j.objs))
		j.objs = append(j.objs, o)
	}
	j.idx.Insert(addr, size, id)
	if tag != 0 {
		j.tags[tag] = id
	}
}

// forget releases an object the index no longer holds.
func (j *jvm) forget(id objindex.ID) {
	if t := j.objs[id].tag; t != 0 && j.tags[t] == id {
		delete(j.tags, t)
	}
	j.objs[id].tag = 0
	j.free = append(j.free, id)
}

// onFree drops an object the JVM collected, so that memory reused by an
// untracked object is not charged to the dead one.
func (j *jvm) onFree(tag uint64) {
	id, ok := j.tags[tag]
	if !ok {
		return // already evicted by a reuse of its memory
	}
	j.idx.Remove(j.objs[id].start)
	j.forget(id)
	j.stats.Freed++
}

// onReconcile checks the agent's view of where tracked objects are after a
// GC against ours: agreement verifies the moves we applied; disagreement is
// a move we missed, and the agent's address wins.
func (j *jvm) onReconcile(objs []agent.TagAddr) {
	if j.noReconcile {
		return
	}
	for _, ta := range objs {
		id, ok := j.tags[ta.Tag]
		if !ok {
			continue
		}
		o := &j.objs[id]
		if o.start == ta.Addr {
			j.stats.MovesVerified++
			continue
		}
		j.stats.MovesMissed++
		j.idx.Remove(o.start)
		o.start = ta.Addr
		j.idx.Insert(ta.Addr, o.size, id)
	}
}

// onSample decodes a sample and queues it for attribution.
func (j *jvm) onSample(s *loader.Sample, src loader.Source) {
	if !j.connected || s.Time < j.helloTime {
		// No allocation is known before the agent's first record.
		j.stats.Unjoined++
		return
	}
	j.stats.Samples++
	addr := s.Addr
	accessPC := s.IP() + 1 // page faults and hardware events: the access is at ip
	if src == loader.Decode {
		accessPC = 0
		j.regs = decode.RegsFromPtRegs(&s.Regs)
		var before, at []byte
		if s.Flags&loader.FlagBeforeOK != 0 {
			before = s.Before[:]
		}
		if s.Flags&loader.FlagAtOK != 0 {
			at = s.At[:]
		}
		res := j.dec.Decode(before, at, &j.regs)
		switch res.Method {
		case decode.AtIP:
			j.stats.DecodedAtIP++
			addr = res.Addr
			accessPC = s.IP() + 1
		case decode.LookBack:
			j.stats.DecodedLookBack++
			addr = res.Addr
			accessPC = s.IP()
		}
	}
	if addr != 0 {
		j.stats.WithAddress++
		if j.heapKnown && j.heap.Contains(addr) {
			j.stats.InHeap++
		}
	}
	// Samples without an address are queued too: their access paths go to
	// the remainder.
	if len(j.queue)-j.head >= maxPending {
		j.attribute(&j.queue[j.head])
		j.head++
	}
	t := s.Time
	if src == loader.PageFaults {
		// A first-touch fault comes before the agent reports the allocation
		// that caused it (the JVM zeroes the memory first). The page was
		// never touched, so no other object can have owned it meanwhile:
		// judging the fault a little later is safe.
		t += j.faultGrace
	}
	if t < j.drained {
		// Judged against a heap newer than its time.
		j.stats.Late++
		j.stats.LateMaxMs = max(j.stats.LateMaxMs, float64(j.drained-t)/1e6)
	}
	j.queue = append(j.queue, pending{time: t, addr: addr, stime: s.Time, ip: s.IP(), accessPC: accessPC, tid: s.TID, cpu: s.CPU,
		memOK: s.Flags&loader.FlagMemOK != 0, dataSrc: s.DataSrc, weight: s.Weight, noStack: s.Flags&loader.FlagNoStack != 0})
}

// drain applies, in time order, the allocation records, GC batches and
// samples that every stream has caught up with (all of them when final), so
// that each sample meets the heap as it was when it was taken.
func (j *jvm) drain(final bool) {
	h := j.horizon()
	if !final {
		j.drained = max(j.drained, h)
	}
	for {
		const none = ^uint64(0)
		ta, tg, ts := none, none, none
		if j.agentH < len(j.agentQ) {
			ta = j.agentQ[j.agentH].time
		}
		if j.gcH < len(j.gcQ) {
			tg = j.gcQ[j.gcH].end
		}
		if j.head < len(j.queue) {
			ts = j.queue[j.head].time
		}
		t := min(ta, tg, ts)
		if t == none || (!final && t > h) {
			break
		}
		switch t {
		case ta:
			j.applyTimed(j.agentQ[j.agentH].rec)
			j.agentQ[j.agentH] = timedRec{}
			j.agentH++
		case tg:
			j.applyGC(j.gcQ[j.gcH])
			j.gcQ[j.gcH] = nil
			j.gcH++
		default:
			j.attribute(&j.queue[j.head])
			j.head++
		}
	}
	j.pruneStacks(h, final)
	j.queue, j.head = compact(j.queue, j.head)
	j.agentQ, j.agentH = compact(j.agentQ, j.agentH)
	j.gcQ, j.gcH = compact(j.gcQ, j.gcH)
}

// compact drops the consumed prefix of a queue once it dominates.
func compact[T any](q []T, head int) ([]T, int) {
	if head > 4096 && head*2 > len(q) {
		n := copy(q, q[head:])
		clear(q[n:])
		return q[:n], 0
	}
	if head == len(q) {
		return q[:0], 0
	}
	return q, head
}

// attribute charges sample p and its access path to the tracked object
// holding its address, or to the code-centric remainder.
func (j *jvm) attribute(p *pending) {
	fr := j.accessPath(p)
	if p.addr != 0 {
		if o, ok := j.idx.Lookup(p.addr); ok {
			obj := j.objs[o.ID]
			s := j.sites[obj.site]
			s.samples++
			s.estSamples += float64(obj.weight)
			j.stats.Attributed++
			if s.accesses == nil {
				s.accesses = make(accessSet)
			}
			j.pathKeyBuf = pathKey(j.pathKeyBuf, "", fr)
			a := s.accesses.add(j.pathKeyBuf, "", fr)
			if p.memOK {
				s.mem = j.addMem(s.mem, p)
				a.mem = j.addMem(a.mem, p)
			}
			if j.numa != nil {
				node, from := j.numa.place(j.pid, p)
				s.numa = count(s.numa, node, from)
				a.numa = count(a.numa, node, from)
			}
			return
		}
	}
	where := "no data address"
	switch {
	case p.addr == 0:
	case !j.heapKnown:
		where = "heap range unknown"
	case j.heap.Contains(p.addr):
		where = "heap (untracked object)"
	default:
		where = "outside the heap"
	}
	j.pathKeyBuf = pathKey(j.pathKeyBuf, where, fr)
	a := j.remainder.add(j.pathKeyBuf, where, fr)
	if p.memOK {
		a.mem = j.addMem(a.mem, p)
	}
}

// report resolves names and builds the object table.
func (j *jvm) report() []report.Object {
	acc := make(map[int][]accessSet) // out index → access sets of its sites
	out := make([]report.Object, 0, len(j.sites))
	byName := make(map[string]int)
	for _, s := range j.sites {
		path := make([]string, len(s.frames))
		for i, f := range s.frames {
			path[i] = j.syms.Resolve(f.Method, f.BCI).String()
		}
		siteName := "[no Java frames]"
		if len(path) > 0 {
			siteName = path[0]
		}
		origin, holder := report.OriginAllocation, []string{}
		if s.census != 0 {
			origin, siteName = report.OriginCensus, censusSiteName(s.census)
			if h := j.holderChain(s.holder); h != nil {
				holder = h
			}
		}
		typ := jvmsym.TypeName(s.typeSig)
		// Different bcis on one line name the same site, and chains that
		// read the same the same holder: merge them.
		key := typ + "\x00" + siteName + "\x00" + strings.Join(path, "\x00") + "\x01" + strings.Join(holder, "\x00")
		o := report.Object{
			Type: typ, Site: siteName, AllocPath: path, Origin: origin, Holder: holder,
			Objects: s.objects, Bytes: s.bytes, EstObjects: s.estObjects, EstBytes: s.estBytes,
			Samples: s.samples, EstSamples: s.estSamples,
			Mem: report.SumMem(nil, s.mem), NUMA: report.SumNUMA(nil, s.numa),
		}
		if i, ok := byName[key]; ok {
			out[i].AddCounts(&o)
			acc[i] = append(acc[i], s.accesses)
			continue
		}
		acc[len(out)] = []accessSet{s.accesses}
		byName[key] = len(out)
		out = append(out, o)
	}
	for i, sets := range acc {
		out[i].Accesses = j.accesses(sets...)
	}
	return out
}
