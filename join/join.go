// Package join merges, in time order, the samples of one JVM with its
// agent's stream (allocations, frees, GC moves, censuses, stacks, JIT
// code) into the object table a report shows: each sample is charged to
// the tracked object that held its address when it was taken, or to the
// code-centric remainder.
//
// A sample's walk goes forward through the files:
//
//	sample.go    OnSample: decode its address, queue it as a pending sample
//	agent.go     OnBatch: the agent's records, applied at once or queued by time
//	gc.go        OnGCBegin/OnCopy/OnGCEnd: the relocation stream's batches
//	timeline.go  horizon and Drain: apply records, GC batches and samples in time order
//	objects.go   the object and site table the records build
//	attribute.go attribute: charge a pending sample to an object or the remainder
//	stacks.go    its access path: the Java stack joined to it, or its leaf
//	mem.go       hardware memory metrics and NUMA placement
//	report.go    Report: resolve names, build the object table and stats
//
// census.go holds the census records, structures.go what heap walks found,
// and caps.go the per-JVM caps on what a stream can make the join keep.
package join

import (
	"io"

	"github.com/djx-bpf/djx-bpf/hotspot/heap"
	"github.com/djx-bpf/djx-bpf/jvmsym"
	"github.com/djx-bpf/djx-bpf/objindex"
	"github.com/djx-bpf/djx-bpf/report"
	"github.com/djx-bpf/djx-bpf/sources/agentwire"
	"github.com/djx-bpf/djx-bpf/sources/decode"
)

// JVM is the joined state of one profiled JVM. It is owned by one goroutine.
type JVM struct {
	pid       int
	heap      heap.Info
	heapKnown bool
	canon     func(uint64) (uint64, bool) // nil: addresses are canonical
	stats     report.Stats

	timeline       // queues of records, GC batches and samples waiting for the horizon
	retries        // samples judged again after a grace (retry.go)
	lateSamples    // samples waiting for a later rescan (late.go)
	objectTable    // tracked objects and their sites
	stackStore     // stacks, JIT code and native symbols that name access paths
	gcState        // relocation and rescans
	agentState     // what the agent said of itself
	censusState    // holder chains and census runs
	structureState // what heap walks found of the small objects
	offHeapState   // what heap walks found outside the heap
	typeState      // data types and regions of the samples
	hdrLearner     // which headers the sampling program reads (hdrmask.go)

	dec  decode.Decoder
	regs decode.Regs
	// remainder holds the access paths of samples no tracked object took.
	remainder accessSet

	// Hardware memory metrics and NUMA placement (mem.go).
	weightStruct bool // the event reports PERF_SAMPLE_WEIGHT_STRUCT
	numa         *NUMA
}

// Moves is how the GC's moves of objects reach the join.
type Moves int

const (
	// MovesOff: no relocation stream and no rescans.
	MovesOff Moves = iota
	// MovesUprobe: a relocation stream (OnGCBegin, OnCopy, OnGCEnd) feeds
	// the join; the agent's rescans check it.
	MovesUprobe
	// MovesRescan: the agent rescans the tracked objects after each GC, and
	// the join waits for the rescan.
	MovesRescan
	// MovesNoRescan: the collector's addresses cannot be rescanned (it
	// never moves objects, or moves them concurrently); rescans are ignored.
	MovesNoRescan
)

// Config is what the session knows of the JVM before its streams start.
type Config struct {
	PID       int
	Heap      heap.Info // the collector's name, and its ranges when HeapKnown
	HeapKnown bool
	// Canonical, when set, turns a heap address into the one objects are
	// known by: ZGC's heap has several views (heapwalk.Layout.Canonical).
	Canonical func(addr uint64) (uint64, bool)
	Moves     Moves
	// Native names native code; PerfMap names code the agent has not
	// described (nil: none).
	Native  NativeSymbols
	PerfMap *jvmsym.PerfMap
	// HostTID, when set, turns the agent's thread ids into the host's (a
	// JVM in another pid namespace); false: the thread is gone.
	HostTID func(tid uint32) (uint32, bool)
	// WeightStruct: the event reports PERF_SAMPLE_WEIGHT_STRUCT.
	WeightStruct bool
	// NUMA, when set, places every sampled page and CPU on a node.
	NUMA *NUMA
	// Regions, when set, names the addresses outside the heap.
	Regions Regions
	// CodeMem, when set, reads the JVM's memory (its JIT code) at an
	// address: it names objects being initialised.
	CodeMem io.ReaderAt
	// Budget, when set, bounds what this JVM's join keeps together with
	// the others sharing it (a scan).
	Budget *Budget
}

// NativeSymbols names native code by address: jvmsym.Native reads a live
// process's maps and ELF files; a replay answers from a recording.
type NativeSymbols interface {
	Lookup(ip uint64) (jvmsym.NativeFrame, bool)
}

// New is the join of a JVM whose samples come from a sampler, which reports
// how far its stream is complete (SamplesComplete).
func New(c Config) *JVM {
	j := newJVM(c.PID)
	j.sampleStream = true
	j.heap, j.heapKnown, j.canon = c.Heap, c.HeapKnown, c.Canonical
	j.regions, j.codeMem, j.budget = c.Regions, c.CodeMem, c.Budget
	switch c.Moves {
	case MovesUprobe:
		j.reloc = true
	case MovesRescan:
		j.rescan = true
		j.lateMoves = c.Heap.GC == "Z" || c.Heap.GC == "Shenandoah"
	case MovesNoRescan:
		j.noReconcile = true
	}
	j.native, j.perfMap, j.hostTID = c.Native, c.PerfMap, c.HostTID
	j.weightStruct, j.numa = c.WeightStruct, c.NUMA
	return j
}

// newJVM is an empty join; tests feed it samples directly.
func newJVM(pid int) *JVM {
	j := &JVM{pid: pid, remainder: make(accessSet)}
	j.faultGrace = pageFaultGrace
	j.objectTable = objectTable{idx: objindex.New(), siteIdx: make(map[string]int32), tags: make(map[uint64]objindex.ID)}
	j.stackStore = stackStore{syms: jvmsym.NewTable(), stacks: make(map[uint32]*stackQ), lastStacks: make(map[stackKey]*lastStack), code: jvmsym.NewCodeTable(), nativeCache: make(map[uint64]uint32), names: newNames()}
	j.codeMap = j.code
	j.idx.OnEvict(func(o objindex.Object) {
		if j.objs[o.ID].tag != 0 && (j.reconciling || j.agentPlaces()) {
			// Moved, not dead: the agent follows the object and will
			// say where it went (a RECONCILE) or that it died (a FREE).
			return
		}
		j.forget(o.ID)
	})
	j.idx.OnMove(func(o objindex.Object) { j.objs[o.ID].start = o.Start })
	return j
}

// StacksAsked says BPF signals the JVM's sampled threads for stacks on sig
// from time from on; noJava, when set, stops the signals to a thread the
// agent found without a JNIEnv.
func (j *JVM) StacksAsked(sig int, from uint64, noJava func(tid uint32)) {
	j.stackSig, j.stacksFrom, j.noJava = sig, from, noJava
}

// AgentStackSignal is the signal the agent's stack handler is installed
// on; 0: none (yet).
func (j *JVM) AgentStackSignal() int { return j.agentStackSig }

// Connected says the agent's first record has arrived.
func (j *JVM) Connected() bool { return j.connected }

// VMName is the JVM's name and version, as its agent reports them.
func (j *JVM) VMName() string { return j.vmName }

// AgentStats are the agent's last STATS.
func (j *JVM) AgentStats() agentwire.Stats { return j.lastAgt }

// Samples is the number of samples of the JVM joined so far.
func (j *JVM) Samples() uint64 { return j.stats.Samples }

// LiveObjects is the number of objects tracked now.
func (j *JVM) LiveObjects() int { return len(j.objs) - len(j.free) }

// AllocInterval is the heap sampling interval the agent started with and
// the one in force now; raised says the agent raised it to stay within its
// budget, the first time after seconds since its first record.
func (j *JVM) AllocInterval() (initial, now uint64, raised bool, after float64) {
	if j.raisedAt != 0 && j.raisedAt > j.helloTime {
		after = float64(j.raisedAt-j.helloTime) / 1e9
	}
	return j.initial, j.interval, j.raisedAt != 0, after
}

// canonical is the address objects are known by of a (a itself outside
// the heap, or where the heap has one view).
func (j *JVM) canonical(a uint64) uint64 {
	if j.canon == nil || a == 0 {
		return a
	}
	if c, ok := j.canon(a); ok {
		return c
	}
	return a
}
