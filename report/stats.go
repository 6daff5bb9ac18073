package report

import (
	"fmt"
	"reflect"
)

// Stats are the run's counters, in groups by what they count. The groups
// are embedded without a JSON name, so the JSON object stays flat, in
// declaration order.
//
// Each field says in its merge tag how the reports of several runs merge:
//
//   - sum: counters and summed times add up, as the runs' samples do;
//   - max: the worst of the runs (a longest pause, a largest lag); on a
//     bool, true if it holds in any run, for caveats a merge keeps (a
//     partial census, costs shared with a scan);
//   - min: on a bool, true only if it holds in every run, for guarantees a
//     merge needs from all (the heap range was known);
//   - first: the first run's value, or the next run's while it is unset:
//     a setting that runs of one service share.
type Stats struct {
	SampleStats
	AgentStats
	NamingStats
	RelocStats
	StackStats
	CostStats
	JITStats
	CensusStats
	CapStats
}

// SampleStats count the samples from the sampler to the join.
type SampleStats struct {
	Samples     uint64 `json:"samples" merge:"sum"`      // samples of the target delivered to user space
	WithAddress uint64 `json:"with_address" merge:"sum"` // with a data address (decoded or from the PMU)
	InHeap      uint64 `json:"in_heap" merge:"sum"`      // address inside the Java heap
	Attributed  uint64 `json:"attributed" merge:"sum"`   // address inside a tracked object
	Dropped     uint64 `json:"dropped" merge:"sum"`      // lost: ring buffer full
	// Details.
	DecodedAtIP     uint64 `json:"decoded_at_ip" merge:"sum"`
	DecodedLookBack uint64 `json:"decoded_look_back" merge:"sum"`
	// DecodedBase: a load that overwrote its index register; the address
	// is its base+disp, the start of what it indexed (decode.Base).
	DecodedBase uint64 `json:"decoded_base" merge:"sum"`
	// DecodedStraight: no access at ip nor a load ending there, but the
	// last load before ip in the compiled method's straight-line code.
	DecodedStraight uint64 `json:"decoded_straight,omitempty" merge:"sum"`
	// Why decode gave the others no address (decode.Cause): no memory
	// operand at ip nor a load ending there, an ambiguous boundary before
	// ip, a load ending at ip that overwrote its base or its index, a
	// store or other non-load ending at ip, unreadable bytes, and an
	// access whose address pt_regs cannot give (fs/gs, gather).
	UndecodedNoMemory      uint64 `json:"undecoded_no_memory_operand,omitempty" merge:"sum"`
	UndecodedNoBoundary    uint64 `json:"undecoded_no_boundary,omitempty" merge:"sum"`
	UndecodedBaseClobbered uint64 `json:"undecoded_base_clobbered,omitempty" merge:"sum"`
	UndecodedIndexClobber  uint64 `json:"undecoded_index_clobbered,omitempty" merge:"sum"`
	UndecodedNotLoad       uint64 `json:"undecoded_not_a_load,omitempty" merge:"sum"`
	UndecodedNoBytes       uint64 `json:"undecoded_no_bytes,omitempty" merge:"sum"`
	UndecodedUncomputable  uint64 `json:"undecoded_uncomputable,omitempty" merge:"sum"`
	KernelSkipped          uint64 `json:"kernel_skipped" merge:"sum"`
	Unjoined               uint64 `json:"unjoined" merge:"sum"` // samples before the agent connected
	// Late counts samples that reached the join after it had applied heap
	// changes newer than them (judged against a newer heap); LateMaxMs is
	// the worst such lag.
	Late      uint64  `json:"late,omitempty" merge:"sum"`
	LateMaxMs float64 `json:"late_max_ms,omitempty" merge:"max"`
}

// AgentStats count the agent's allocation tracking and its losses.
type AgentStats struct {
	AllocsTracked  uint64 `json:"allocs_tracked" merge:"sum"`
	AllocCallbacks uint64 `json:"alloc_callbacks" merge:"sum"`
	AllocsBelowMin uint64 `json:"allocs_below_min" merge:"sum"`
	AgentDropped   uint64 `json:"agent_dropped" merge:"sum"`
	AgentErrors    uint64 `json:"agent_errors" merge:"sum"`
	// Allocation stacks the agent walked itself (named from the JVM's
	// memory), and walks that found no whole stack (GetStackTrace's).
	AllocRawStacks    uint64 `json:"allocs_raw_stack,omitempty" merge:"sum"`
	AllocRawFallbacks uint64 `json:"allocs_raw_fallback,omitempty" merge:"sum"`
}

// NamingStats say what named the samples' addresses beyond tracked
// objects.
type NamingStats struct {
	HeapKnown bool `json:"heap_known" merge:"min"`
	// TypeUnknown counts in-heap samples whose data type could not be
	// named; Named the samples with an address that something names: a
	// tracked object, a data type, or a region other than "unknown"
	// (Finish counts it from the objects and the remainder when it is 0).
	TypeUnknown uint64 `json:"type_unknown,omitempty" merge:"sum"`
	Named       uint64 `json:"named,omitempty" merge:"sum"`
	// TypedByAllocation and TypedByEnclosing count in-heap samples in
	// objects being initialised, named by the code's store of the klass
	// word or by another register holding the object's start.
	TypedByAllocation uint64 `json:"typed_by_allocation,omitempty" merge:"sum"`
	TypedByEnclosing  uint64 `json:"typed_by_enclosing,omitempty" merge:"sum"`
	// Rejudged counts stores by the VM (not JIT code) into heap memory no
	// tracked object held at their time, judged again after a grace: an
	// allocation's zeroing or a GC's copy comes before its record.
	Rejudged uint64 `json:"rejudged,omitempty" merge:"sum"`
	// HdrMasked counts samples whose object headers the sampling program
	// read only for the registers the join had used at that instruction;
	// HdrMaskDropped the masks dropped because such a sample then found no
	// object (the instruction reads every header again).
	HdrMasked      uint64 `json:"samples_hdr_masked,omitempty" merge:"sum"`
	HdrMaskDropped uint64 `json:"hdr_masks_dropped,omitempty" merge:"sum"`
}

// RelocStats count the GC relocation tracking. HeapUntracked, a sample
// count, sits among them to keep its place in the JSON.
type RelocStats struct {
	GCs             uint64 `json:"gcs,omitempty" merge:"sum"`              // GCs seen
	Relocations     uint64 `json:"relocations,omitempty" merge:"sum"`      // tracked objects moved by observed copies
	CopiesUnmatched uint64 `json:"copies_unmatched,omitempty" merge:"sum"` // observed copies that moved no tracked object
	MovesVerified   uint64 `json:"moves_verified,omitempty" merge:"sum"`   // reconciled objects found where we had them
	MovesMissed     uint64 `json:"moves_missed,omitempty" merge:"sum"`     // ... found elsewhere: a move the uprobes missed (or, with rescan, the move itself)
	Freed           uint64 `json:"freed,omitempty" merge:"sum"`            // tracked objects the JVM collected
	// MovedLate counts in-heap samples that no tracked object held when
	// taken, charged to one that a later rescan found moved over their
	// address (ZGC, Shenandoah: moves seen up to a cycle late).
	MovedLate uint64 `json:"moved_late,omitempty" merge:"sum"`
	// G1 humongous objects tracked without JVMTI tags (their headers are
	// checked after each GC), and how many of them were found freed.
	HumongousUntagged uint64 `json:"humongous_untagged,omitempty" merge:"sum"`
	HumongousFreed    uint64 `json:"humongous_freed,omitempty" merge:"sum"`
	HeapUntracked     uint64 `json:"heap_untracked" merge:"sum"`             // in the heap but in no tracked object
	RelocHits         uint64 `json:"reloc_hits,omitempty" merge:"sum"`       // memmove uprobe hits (each costs a trap)
	RelocHitsInGC     uint64 `json:"reloc_hits_in_gc,omitempty" merge:"sum"` // ... of which inside GC pauses
	RelocDropped      uint64 `json:"reloc_dropped,omitempty" merge:"sum"`    // copies lost: ring buffer full
}

// StackStats count the access stacks (the agent's AsyncGetCallTrace on a
// signal from BPF) and how samples were joined to them.
type StackStats struct {
	StackSignals      uint64            `json:"stack_signals,omitempty" merge:"sum"`        // signals BPF queued to sampled threads
	StackSignalFailed uint64            `json:"stack_signal_failed,omitempty" merge:"sum"`  // ... the kernel refused (one pending)
	StackSignalSkip   uint64            `json:"stack_signal_skipped,omitempty" merge:"sum"` // not sent: one <100 µs before, or a thread <200 ms old
	StackSignalNoJava uint64            `json:"stack_signal_no_java,omitempty" merge:"sum"` // not sent: a thread the agent found without a JNIEnv
	Stacks            uint64            `json:"stacks,omitempty" merge:"sum"`               // stacks the agent recorded
	StacksJava        uint64            `json:"stacks_java,omitempty" merge:"sum"`          // ... with Java frames
	StacksDropped     uint64            `json:"stacks_dropped,omitempty" merge:"sum"`       // ... lost in the agent (ring full)
	StackErrors       map[string]uint64 `json:"stack_errors,omitempty" merge:"sum"`         // stacks without Java frames, by reason
	SamplesWithStack  uint64            `json:"samples_with_stack,omitempty" merge:"sum"`   // samples joined to their own stack (same thread, same pc)
	SamplesJavaStack  uint64            `json:"samples_java_stack,omitempty" merge:"sum"`   // ... whose stack has Java frames
	// SamplesStackBorrowed: samples with no stack of their own (the stack
	// interval) whose callers came from their thread's last stack.
	SamplesStackBorrowed uint64 `json:"samples_stack_borrowed,omitempty" merge:"sum"`
	StacksUnmatched      uint64 `json:"stacks_unmatched,omitempty" merge:"sum"` // stacks that matched no sample (other pc, or late)
	StackMismatch        uint64 `json:"stack_mismatch,omitempty" merge:"sum"`   // a stack came next but for another pc
	// Stacks unwound in BPF (--stacks bpf): samples whose own stack has
	// Java frames, those walked to the thread's entry, and the walks cut
	// short or without Java frames, by reason.
	SamplesBPFStack    uint64            `json:"samples_bpf_stack,omitempty" merge:"sum"`
	SamplesBPFComplete uint64            `json:"samples_bpf_complete,omitempty" merge:"sum"`
	BPFStackEnds       map[string]uint64 `json:"bpf_stack_ends,omitempty" merge:"sum"`
}

// CostStats are what the profile cost, measured in ms of CPU time: the
// JVM's own CPU time over the agent's session, the agent's time inside it
// (its writer thread's CPU time; the wall time of its allocation, JIT code
// and class callbacks and of its stack signal handler, which are seldom
// descheduled), the BPF sampling program's run time (every CPU, every
// process it saw) and djx-bpf's CPU time. Not in them: the kernel's perf
// interrupt and signal delivery, HotSpot's inline records for JIT code,
// the census pauses (census_*), and the JVM's own heap-sampling slow path.
type CostStats struct {
	CostJVMCPUMs float64 `json:"cost_jvm_cpu_ms,omitempty" merge:"sum"`
	CostAllocMs  float64 `json:"cost_alloc_ms,omitempty" merge:"sum"`
	CostStackMs  float64 `json:"cost_stack_ms,omitempty" merge:"sum"`
	CostCodeMs   float64 `json:"cost_code_ms,omitempty" merge:"sum"`
	CostWriterMs float64 `json:"cost_writer_ms,omitempty" merge:"sum"`
	// CostShared: a scan's JVM, whose BPF and djx-bpf costs are the scan's,
	// not its own (so a merge with one such run lacks part of them).
	CostShared   bool    `json:"cost_shared,omitempty" merge:"max"`
	CostBPFMs    float64 `json:"cost_bpf_ms,omitempty" merge:"sum"`
	CostDjxCPUMs float64 `json:"cost_djx_cpu_ms,omitempty" merge:"sum"`
}

// JITStats count the compiled code the agent reported and the samples it
// named.
type JITStats struct {
	JITCode          uint64 `json:"jit_code,omitempty" merge:"sum"`            // compiled-code blobs the agent reported
	StackLeafFromJIT uint64 `json:"stack_leaf_from_jit,omitempty" merge:"sum"` // samples whose innermost frames came from the JIT pc map at the access
}

// CensusStats describe the census of the objects that existed at the
// attach: the objects it tracks, the heap it walked, its stop-the-world
// pauses (heap walk plus holder walk; the longest of them), its whole
// time, whether holders were named (all, partial, skipped, off, none), and
// the large objects it left out as unreachable. Recensuses: censuses of
// large objects the heap sampler missed, after GCs.
type CensusStats struct {
	CensusObjects     uint64  `json:"census_objects" merge:"sum"`
	CensusBytes       uint64  `json:"census_bytes" merge:"sum"`
	CensusPauseMs     float64 `json:"census_pause_ms" merge:"sum"`
	CensusPauseMaxMs  float64 `json:"census_pause_max_ms,omitempty" merge:"max"`
	CensusPasses      uint64  `json:"census_passes,omitempty" merge:"sum"` // heap walk passes, each within the budget
	CensusHolderMs    float64 `json:"census_holder_ms,omitempty" merge:"sum"`
	CensusMs          float64 `json:"census_ms,omitempty" merge:"sum"`
	CensusHeapObjects uint64  `json:"census_heap_objects,omitempty" merge:"sum"`
	CensusHeapBytes   uint64  `json:"census_heap_bytes,omitempty" merge:"sum"`
	CensusHolders     string  `json:"census_holders,omitempty" merge:"first"`
	CensusPartial     bool    `json:"census_partial,omitempty" merge:"max"` // the heap walk stopped at the budget: objects past it are not tracked
	CensusUnreachable uint64  `json:"census_unreachable,omitempty" merge:"sum"`
	CensusDuplicates  uint64  `json:"census_duplicates,omitempty" merge:"sum"` // found by a census but tracked already
	CensusFillers     uint64  `json:"census_fillers,omitempty" merge:"sum"`    // dead space formatted as filler objects: left out
	// The heap walk from outside the JVM (no pause): the objects it
	// visited, the data structures it grouped the small ones into, and the
	// samples charged to those; stale ones met an object a GC had put
	// where the walk saw another.
	WalkMs           float64 `json:"walk_ms,omitempty" merge:"sum"`
	WalkObjects      uint64  `json:"walk_objects,omitempty" merge:"sum"`
	WalkBytes        uint64  `json:"walk_bytes,omitempty" merge:"sum"`
	WalkStructures   uint64  `json:"walk_structures,omitempty" merge:"sum"`
	WalkOverlapped   bool    `json:"walk_overlapped,omitempty" merge:"max"` // a GC ran during the walk
	WalkRoots        uint64  `json:"walk_roots,omitempty" merge:"sum"`      // the agent's roots (threads' locals, JNI globals) the walk started from
	RootsPauseMs     float64 `json:"roots_pause_ms,omitempty" merge:"max"`  // the agent's roots pass: its stop-the-world pause
	StructureSamples uint64  `json:"structure_samples,omitempty" merge:"sum"`
	StructureStale   uint64  `json:"structure_stale,omitempty" merge:"sum"`
	// OffHeapSamples: samples charged to the off-heap memory of a
	// direct buffer the walk found.
	OffHeapSamples uint64 `json:"off_heap_samples,omitempty" merge:"sum"`
	Recensuses     uint64 `json:"recensuses,omitempty" merge:"sum"`
}

// CapStats say what the per-JVM caps cut from the agent's stream: strings
// and lists (frames, lines, fields) cut short at decode, records dropped
// past a count cap and past a byte budget (the notes say which); and, by
// reason, what the caps on what a target names cut (CapsCut): paths cut
// at a depth, samples on paths past a count or byte cap, frames not named
// past a time budget, names past a byte budget.
type CapStats struct {
	StringsTruncated    uint64            `json:"strings_truncated,omitempty" merge:"sum"`
	ListsTruncated      uint64            `json:"lists_truncated,omitempty" merge:"sum"`
	RecordsDroppedCount uint64            `json:"records_dropped_count,omitempty" merge:"sum"`
	RecordsDroppedBytes uint64            `json:"records_dropped_bytes,omitempty" merge:"sum"`
	CapsCut             map[string]uint64 `json:"caps_cut,omitempty" merge:"sum"`
}

// AgentCostMs is the agent's measured time inside the JVM: its allocation
// callbacks, stack handler, JIT code and class callbacks and writer thread.
func (s *Stats) AgentCostMs() float64 {
	return s.CostAllocMs + s.CostStackMs + s.CostCodeMs + s.CostWriterMs
}

// Merge merges o into s as each field's merge tag says. It never aliases
// o's maps, so that merging leaves o unchanged.
func (s *Stats) Merge(o *Stats) {
	mergeStruct(reflect.ValueOf(s).Elem(), reflect.ValueOf(o).Elem())
}

// mergeStruct merges src into dst field by field, into embedded groups. A
// field without a rule its kind supports is a programming error that
// TestEveryStatDeclaresItsMerge reports.
func mergeStruct(dst, src reflect.Value) {
	t := dst.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		d, s := dst.Field(i), src.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			mergeStruct(d, s)
			continue
		}
		if err := mergeValue(d, s, f.Tag.Get("merge")); err != nil {
			panic(fmt.Sprintf("report: merge of Stats.%s: %v", f.Name, err))
		}
	}
}

// mergeValue merges s into d by rule.
func mergeValue(d, s reflect.Value, rule string) error {
	switch k := d.Kind(); {
	case rule == "first" && k != reflect.Map:
		if d.IsZero() {
			d.Set(s)
		}
	case k == reflect.Bool && (rule == "max" || rule == "min"):
		if rule == "max" {
			d.SetBool(d.Bool() || s.Bool())
		} else {
			d.SetBool(d.Bool() && s.Bool())
		}
	case k >= reflect.Uint && k <= reflect.Uint64:
		a, b := d.Uint(), s.Uint()
		switch rule {
		case "sum":
			d.SetUint(a + b)
		case "max":
			d.SetUint(max(a, b))
		case "min":
			d.SetUint(min(a, b))
		default:
			return fmt.Errorf("no rule %q for %s", rule, d.Type())
		}
	case k == reflect.Float32 || k == reflect.Float64:
		a, b := d.Float(), s.Float()
		switch rule {
		case "sum":
			d.SetFloat(a + b)
		case "max":
			d.SetFloat(max(a, b))
		case "min":
			d.SetFloat(min(a, b))
		default:
			return fmt.Errorf("no rule %q for %s", rule, d.Type())
		}
	case k == reflect.Map && rule == "sum" && d.Type().Elem().Kind() == reflect.Uint64:
		if s.Len() == 0 {
			return nil
		}
		if d.IsNil() {
			d.Set(reflect.MakeMapWithSize(d.Type(), s.Len()))
		}
		for it := s.MapRange(); it.Next(); {
			var cur uint64
			if v := d.MapIndex(it.Key()); v.IsValid() {
				cur = v.Uint()
			}
			d.SetMapIndex(it.Key(), reflect.ValueOf(cur+it.Value().Uint()).Convert(d.Type().Elem()))
		}
	default:
		return fmt.Errorf("no rule %q for %s", rule, d.Type())
	}
	return nil
}
