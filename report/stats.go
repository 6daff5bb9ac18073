package report

// Stats are the run's counters.
type Stats struct {
	Samples     uint64 `json:"samples"`      // samples of the target delivered to user space
	WithAddress uint64 `json:"with_address"` // with a data address (decoded or from the PMU)
	InHeap      uint64 `json:"in_heap"`      // address inside the Java heap
	Attributed  uint64 `json:"attributed"`   // address inside a tracked object
	Dropped     uint64 `json:"dropped"`      // lost: ring buffer full
	// Details.
	DecodedAtIP     uint64 `json:"decoded_at_ip"`
	DecodedLookBack uint64 `json:"decoded_look_back"`
	KernelSkipped   uint64 `json:"kernel_skipped"`
	Unjoined        uint64 `json:"unjoined"` // samples before the agent connected
	// Late counts samples that reached the join after it had applied heap
	// changes newer than them (judged against a newer heap); LateMaxMs is
	// the worst such lag.
	Late           uint64  `json:"late,omitempty"`
	LateMaxMs      float64 `json:"late_max_ms,omitempty"`
	AllocsTracked  uint64  `json:"allocs_tracked"`
	AllocCallbacks uint64  `json:"alloc_callbacks"`
	AllocsBelowMin uint64  `json:"allocs_below_min"`
	AgentDropped   uint64  `json:"agent_dropped"`
	AgentErrors    uint64  `json:"agent_errors"`
	HeapKnown      bool    `json:"heap_known"`
	// TypeUnknown counts in-heap samples whose data type could not be
	// named; Named the samples with an address that something names: a
	// tracked object, a data type, or a region other than "unknown"
	// (Finish counts it from the objects and the remainder when it is 0).
	TypeUnknown uint64 `json:"type_unknown,omitempty"`
	Named       uint64 `json:"named,omitempty"`
	// TypedByAllocation and TypedByEnclosing count in-heap samples in
	// objects being initialised, named by the code's store of the klass
	// word or by another register holding the object's start.
	TypedByAllocation uint64 `json:"typed_by_allocation,omitempty"`
	TypedByEnclosing  uint64 `json:"typed_by_enclosing,omitempty"`
	// Rejudged counts stores by the VM (not JIT code) into heap memory no
	// tracked object held at their time, judged again after a grace: an
	// allocation's zeroing or a GC's copy comes before its record.
	Rejudged uint64 `json:"rejudged,omitempty"`
	// GC relocation tracking.
	GCs             uint64 `json:"gcs,omitempty"`              // GCs seen
	Relocations     uint64 `json:"relocations,omitempty"`      // tracked objects moved by observed copies
	CopiesUnmatched uint64 `json:"copies_unmatched,omitempty"` // observed copies that moved no tracked object
	MovesVerified   uint64 `json:"moves_verified,omitempty"`   // reconciled objects found where we had them
	MovesMissed     uint64 `json:"moves_missed,omitempty"`     // ... found elsewhere: a move the uprobes missed (or, with rescan, the move itself)
	Freed           uint64 `json:"freed,omitempty"`            // tracked objects the JVM collected
	// G1 humongous objects tracked without JVMTI tags (their headers are
	// checked after each GC), and how many of them were found freed.
	HumongousUntagged uint64 `json:"humongous_untagged,omitempty"`
	HumongousFreed    uint64 `json:"humongous_freed,omitempty"`
	HeapUntracked     uint64 `json:"heap_untracked"`             // in the heap but in no tracked object
	RelocHits         uint64 `json:"reloc_hits,omitempty"`       // memmove uprobe hits (each costs a trap)
	RelocHitsInGC     uint64 `json:"reloc_hits_in_gc,omitempty"` // ... of which inside GC pauses
	RelocDropped      uint64 `json:"reloc_dropped,omitempty"`    // copies lost: ring buffer full
	// Access stacks (the agent's AsyncGetCallTrace on a signal from BPF).
	StackSignals      uint64            `json:"stack_signals,omitempty"`        // signals BPF queued to sampled threads
	StackSignalFailed uint64            `json:"stack_signal_failed,omitempty"`  // ... the kernel refused (one pending)
	StackSignalSkip   uint64            `json:"stack_signal_skipped,omitempty"` // not sent: one <100 µs before, or a thread <200 ms old
	StackSignalNoJava uint64            `json:"stack_signal_no_java,omitempty"` // not sent: a thread the agent found without a JNIEnv
	Stacks            uint64            `json:"stacks,omitempty"`               // stacks the agent recorded
	StacksJava        uint64            `json:"stacks_java,omitempty"`          // ... with Java frames
	StacksDropped     uint64            `json:"stacks_dropped,omitempty"`       // ... lost in the agent (ring full)
	StackErrors       map[string]uint64 `json:"stack_errors,omitempty"`         // stacks without Java frames, by reason
	SamplesWithStack  uint64            `json:"samples_with_stack,omitempty"`   // samples joined to their own stack (same thread, same pc)
	SamplesJavaStack  uint64            `json:"samples_java_stack,omitempty"`   // ... whose stack has Java frames
	// SamplesStackBorrowed: samples with no stack of their own (the stack
	// interval) whose callers came from their thread's last stack.
	SamplesStackBorrowed uint64 `json:"samples_stack_borrowed,omitempty"`
	StacksUnmatched      uint64 `json:"stacks_unmatched,omitempty"` // stacks that matched no sample (other pc, or late)
	StackMismatch        uint64 `json:"stack_mismatch,omitempty"`   // a stack came next but for another pc
	// What the profile cost, measured in ms of CPU time: the JVM's own CPU
	// time over the agent's session, the agent's CPU time inside it
	// (allocation callbacks, JIT code and class callbacks, writer thread;
	// the stack signal handler's wall time, as a handler is seldom
	// descheduled), the BPF sampling program's run time (every CPU, every
	// process it saw) and djx-bpf's CPU time. Not in them: the kernel's perf
	// interrupt and signal delivery, HotSpot's inline records for JIT code,
	// the census pauses (census_*), and the JVM's own heap-sampling slow
	// path.
	CostJVMCPUMs     float64 `json:"cost_jvm_cpu_ms,omitempty"`
	CostAllocMs      float64 `json:"cost_alloc_ms,omitempty"`
	CostStackMs      float64 `json:"cost_stack_ms,omitempty"`
	CostCodeMs       float64 `json:"cost_code_ms,omitempty"`
	CostWriterMs     float64 `json:"cost_writer_ms,omitempty"`
	CostShared       bool    `json:"cost_shared,omitempty"` // a scan's JVM: BPF and djx-bpf costs are the scan's, not its own
	CostBPFMs        float64 `json:"cost_bpf_ms,omitempty"`
	CostDjxCPUMs     float64 `json:"cost_djx_cpu_ms,omitempty"`
	JITCode          uint64  `json:"jit_code,omitempty"`            // compiled-code blobs the agent reported
	StackLeafFromJIT uint64  `json:"stack_leaf_from_jit,omitempty"` // samples whose innermost frames came from the JIT pc map at the access
	// The census of the objects that existed at the attach: the objects it
	// tracks, the heap it walked, its stop-the-world pauses (heap walk plus
	// holder walk; the longest of them), its whole time, whether holders
	// were named (all, partial, skipped, off, none), and the large objects
	// it left out as unreachable. Recensuses: censuses of large objects the
	// heap sampler missed, after GCs.
	CensusObjects     uint64  `json:"census_objects"`
	CensusBytes       uint64  `json:"census_bytes"`
	CensusPauseMs     float64 `json:"census_pause_ms"`
	CensusPauseMaxMs  float64 `json:"census_pause_max_ms,omitempty"`
	CensusPasses      uint64  `json:"census_passes,omitempty"` // heap walk passes, each within the budget
	CensusHolderMs    float64 `json:"census_holder_ms,omitempty"`
	CensusMs          float64 `json:"census_ms,omitempty"`
	CensusHeapObjects uint64  `json:"census_heap_objects,omitempty"`
	CensusHeapBytes   uint64  `json:"census_heap_bytes,omitempty"`
	CensusHolders     string  `json:"census_holders,omitempty"`
	CensusPartial     bool    `json:"census_partial,omitempty"` // the heap walk stopped at the budget: objects past it are not tracked
	CensusUnreachable uint64  `json:"census_unreachable,omitempty"`
	CensusDuplicates  uint64  `json:"census_duplicates,omitempty"` // found by a census but tracked already
	Recensuses        uint64  `json:"recensuses,omitempty"`
	// What the per-JVM caps cut from the agent's stream: strings and lists
	// (frames, lines, fields) cut short at decode, records dropped past a
	// count cap and past a byte budget (the notes say which).
	StringsTruncated    uint64 `json:"strings_truncated,omitempty"`
	ListsTruncated      uint64 `json:"lists_truncated,omitempty"`
	RecordsDroppedCount uint64 `json:"records_dropped_count,omitempty"`
	RecordsDroppedBytes uint64 `json:"records_dropped_bytes,omitempty"`
}

// AgentCostMs is the agent's measured time inside the JVM: its allocation
// callbacks, stack handler, JIT code and class callbacks and writer thread.
func (s *Stats) AgentCostMs() float64 {
	return s.CostAllocMs + s.CostStackMs + s.CostCodeMs + s.CostWriterMs
}
