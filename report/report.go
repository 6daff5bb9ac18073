// Package report holds the object-centric result of a profile and renders it
// as a table or JSON.
package report

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"

	"github.com/djx-bpf/djx-bpf/termsafe"
)

// Object is one allocation site and type: every tracked object allocated
// there, with the samples that hit them. For objects found by the census
// (Origin "census"), whose allocation site is unknown, it is one holder
// chain and type.
type Object struct {
	Type      string   `json:"type"`
	Site      string   `json:"site"`
	AllocPath []string `json:"alloc_path"` // innermost frame first
	// Origin is "allocation" (a sampled allocation) or "census" (an object
	// that existed when the profile began, or that the heap sampler missed).
	Origin string `json:"origin"`
	// Holder is the reference chain from a GC root to the objects, root
	// first: "RealService.index (static)", "java.util.HashMap.table", "[]".
	// Empty when unknown.
	Holder []string `json:"holder"`
	// Objects and Bytes count the tracked (sampled) allocations.
	Objects uint64 `json:"objects"`
	Bytes   uint64 `json:"bytes"`
	// EstObjects and EstBytes correct for the heap sampler: each tracked
	// object of size s counts 1/p(s) with p(s) = 1 - exp(-s/interval).
	EstObjects float64 `json:"est_objects"`
	EstBytes   float64 `json:"est_bytes"`
	Samples    uint64  `json:"samples"`
	// EstSamples weights each sample by 1/p of the object it hit: the
	// estimated cost of the whole site, untracked instances included.
	EstSamples float64 `json:"est_samples"`
	Share      float64 `json:"share"` // of attributed samples
	// Accesses are the code paths whose samples hit this object, most
	// sampled first.
	Accesses []Access `json:"accesses,omitempty"`
	// Fields breaks a tracked instance object's samples down by the field
	// they fell in, most sampled first (empty for arrays, and when the
	// fields are not known).
	Fields []FieldShare `json:"fields,omitempty"`
	// Mem: hardware sources only; NUMA: with --numa.
	Mem  *MemMetrics  `json:"mem,omitempty"`
	NUMA *NUMAMetrics `json:"numa,omitempty"`
}

// AddCounts adds b's allocation and sample counts and its metrics to o
// (the merge of two reports of one site, or of sites that name the same
// type and path).
func (o *Object) AddCounts(b *Object) {
	o.Objects += b.Objects
	o.Bytes += b.Bytes
	o.EstObjects += b.EstObjects
	o.EstBytes += b.EstBytes
	o.Samples += b.Samples
	o.EstSamples += b.EstSamples
	o.Mem = SumMem(o.Mem, b.Mem)
	o.NUMA = SumNUMA(o.NUMA, b.NUMA)
}

// Access is one access path: the code that touched an object (or, in the
// remainder, memory outside tracked objects) and its samples.
type Access struct {
	// Where is set in the remainder only: "heap (untracked object)", the
	// memory region of an address outside the heap ("thread stack", "code
	// cache", "metaspace", "class space", "GC card table", "native
	// (malloc)", "mapped file /data/idx/_0.dvd", "anonymous", "unknown";
	// "outside the heap" in reports from before regions were named), "heap
	// range unknown" or "no data address".
	Where string `json:"where,omitempty"`
	// DataType is set in the remainder only: the data type of the access,
	// "java.util.TreeMap$Entry.left" or "long[]" (DataTypeName), when the
	// sample's heap object and field were named. The remainder is keyed by
	// (Where, DataType, Path).
	DataType string   `json:"data_type,omitempty"`
	Path     []string `json:"path"` // innermost frame first
	Samples  uint64   `json:"samples"`
	// Share is of the object's samples (of all samples, in the remainder).
	Share float64      `json:"share"`
	Mem   *MemMetrics  `json:"mem,omitempty"`
	NUMA  *NUMAMetrics `json:"numa,omitempty"`
}

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

// Report is the result of profiling one JVM.
type Report struct {
	PID         int     `json:"pid"`
	JVM         string  `json:"jvm,omitempty"`
	Mode        string  `json:"mode"`  // attach | launch
	Event       string  `json:"event"` // sample source
	DurationSec float64 `json:"duration_s"`
	// DisabledSec is the part of the duration with sampling switched off
	// (--control disable).
	DisabledSec   float64 `json:"disabled_s,omitempty"`
	AllocInterval uint64  `json:"alloc_interval"`
	// AllocIntervalMax is the interval the agent raised it to (0: never).
	AllocIntervalMax uint64   `json:"alloc_interval_max,omitempty"`
	MinSize          uint64   `json:"min_size"`
	Objects          []Object `json:"objects"`
	// DataTypes are the in-heap samples by data type and field, tracked
	// objects or not, most sampled first.
	DataTypes []DataType `json:"data_types,omitempty"`
	Stats     Stats      `json:"stats"`
	// Remainder holds the access paths of samples that hit no tracked
	// object, so that no sample is silently dropped: code-centric.
	Remainder []Access `json:"remainder,omitempty"`
	Notes     []string `json:"notes,omitempty"`
}

// Finish computes shares and orders objects, most sampled first (ties: more
// bytes first, then type and site so that output is deterministic).
func (r *Report) Finish() {
	for i := range r.Objects {
		o := &r.Objects[i]
		if o.Origin == "" {
			o.Origin = OriginAllocation // reports of djx-bpf before the census
		}
		if o.Holder == nil {
			o.Holder = []string{}
		}
		if r.Stats.Attributed > 0 {
			o.Share = float64(o.Samples) / float64(r.Stats.Attributed)
		}
		finishAccesses(o.Accesses, o.Samples)
		finishFields(o.Fields, o.Samples)
	}
	finishAccesses(r.Remainder, r.Stats.Samples)
	finishDataTypes(r.DataTypes, r.Stats.InHeap)
	r.Stats.Named = r.namedSamples()
	sort.SliceStable(r.Objects, func(i, j int) bool {
		a, b := &r.Objects[i], &r.Objects[j]
		if a.Samples != b.Samples {
			return a.Samples > b.Samples
		}
		if a.Bytes != b.Bytes {
			return a.Bytes > b.Bytes
		}
		if a.Type != b.Type {
			return a.Type < b.Type
		}
		if a.Site != b.Site {
			return a.Site < b.Site
		}
		return slices.Compare(a.Holder, b.Holder) < 0
	})
}

// HolderText is a holder chain cut to its last depth hops (0: all).
func HolderText(h []string, depth int) string {
	cut := ""
	if depth > 0 && len(h) > depth {
		h, cut = h[len(h)-depth:], "… → "
	}
	return cut + strings.Join(h, " → ")
}

// Origins of objects.
const (
	OriginAllocation = "allocation"
	OriginCensus     = "census"
)

// finishAccesses sets shares of total and orders paths, most sampled first
// (ties: by where, then path, so that output is deterministic).
func finishAccesses(as []Access, total uint64) {
	for i := range as {
		if total > 0 {
			as[i].Share = float64(as[i].Samples) / float64(total)
		}
	}
	// Element by element, not joined: joining both paths in every
	// comparison was most of the report's cost on Xalan (100 of 530 ms).
	slices.SortStableFunc(as, func(a, b Access) int {
		if a.Samples != b.Samples {
			return cmp.Compare(b.Samples, a.Samples)
		}
		if a.Where != b.Where {
			return strings.Compare(a.Where, b.Where)
		}
		if a.DataType != b.DataType {
			return strings.Compare(a.DataType, b.DataType)
		}
		return slices.Compare(a.Path, b.Path)
	})
}

// MergeAccesses adds up paths that are equal after cutting them to depth
// frames (0: whole paths), of equal Where and DataType, and returns them in
// Finish's order with shares of total.
func MergeAccesses(as []Access, depth int, total uint64) []Access {
	var out []Access
	idx := make(map[string]int)
	for _, a := range as {
		p := a.Path
		if depth > 0 && len(p) > depth {
			p = p[:depth]
		}
		k := a.Where + "\x01" + a.DataType + "\x01" + strings.Join(p, "\x00")
		if i, ok := idx[k]; ok {
			out[i].Samples += a.Samples
			out[i].Mem = SumMem(out[i].Mem, a.Mem)
			out[i].NUMA = SumNUMA(out[i].NUMA, a.NUMA)
			continue
		}
		idx[k] = len(out)
		out = append(out, Access{Where: a.Where, DataType: a.DataType, Path: p, Samples: a.Samples, Mem: SumMem(nil, a.Mem), NUMA: SumNUMA(nil, a.NUMA)})
	}
	finishAccesses(out, total)
	return out
}

func (r *Report) top(n int) []Object {
	if n > 0 && n < len(r.Objects) {
		return r.Objects[:n]
	}
	return r.Objects
}

// WriteJSON writes the report with at most top objects and top data types
// (0: all).
func WriteJSON(w io.Writer, r *Report, top int) error {
	c := *r
	c.Objects = r.top(top)
	if top > 0 && len(c.DataTypes) > top {
		c.DataTypes = c.DataTypes[:top]
	}
	if c.Objects == nil {
		c.Objects = []Object{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(&c); err != nil {
		return fmt.Errorf("write json report: %w", err)
	}
	return nil
}

// TableOptions choose what the table shows.
type TableOptions struct {
	Top       int // objects (0: all with samples)
	AccessTop int // access paths under each object and in the remainder (0: none)
	Depth     int // frames per access path (0: all)
}

// DefaultTableOptions are the command line's defaults.
var DefaultTableOptions = TableOptions{Top: 20, AccessTop: 3, Depth: 4}

// WriteTable writes the top objects as a table, their top access paths, the
// remainder and the statistics. Every string of the report may come from the
// target or a crafted file: each is escaped (termsafe) where it is printed,
// and the writer escapes whatever slips past, so that none reaches a
// terminal as a control sequence.
func WriteTable(w io.Writer, r *Report, opt TableOptions) error {
	w = termsafe.NewWriter(w)
	top := opt.Top
	fmt.Fprintf(w, "djx-bpf: pid %d", r.PID)
	if r.JVM != "" {
		fmt.Fprintf(w, " (%s)", termsafe.String(r.JVM))
	}
	fmt.Fprintf(w, ", %s mode, event %s, %.1fs", termsafe.String(r.Mode), termsafe.String(r.Event), r.DurationSec)
	if r.DisabledSec > 0 {
		fmt.Fprintf(w, " (sampling off %.1fs)", r.DisabledSec)
	}
	fmt.Fprintf(w, ", heap sampling interval %s, min size %s", Bytes(r.AllocInterval), Bytes(r.MinSize))
	if st := &r.Stats; st.CensusHolders != "" {
		holders := map[string]string{"all": "with holders", "partial": "holders partial", "skipped": "no holders: over budget",
			"off": "no holders", "none": "none: over budget or failed"}[st.CensusHolders]
		census := "census"
		if st.CensusPartial {
			census = "partial census"
		}
		fmt.Fprintf(w, ", %s %d objects (%s), pause %.0f ms", census, st.CensusObjects, holders, st.CensusPauseMs)
	}
	fmt.Fprintln(w)
	// Sites that no sample hit cost nothing measurable: the table leaves
	// them out (JSON keeps them, with their allocation counts).
	var objs []*Object
	quiet := 0
	for i := range r.Objects {
		if o := &r.Objects[i]; o.Samples == 0 {
			quiet++
		} else if top <= 0 || len(objs) < top {
			objs = append(objs, o)
		}
	}
	if len(objs) == 0 {
		fmt.Fprintln(w, "no samples hit a tracked object")
	} else {
		right := tw.AlignRight
		// The columns adapt to what the source measured: memory-level
		// columns only for hardware address sampling, remote share only
		// with --numa.
		mem, numa := false, false
		for _, o := range objs {
			mem = mem || (o.Mem != nil && o.Mem.Samples > 0)
			numa = numa || o.NUMA != nil
		}
		header := []string{"#", "TYPE", "ALLOCATION SITE", "OBJECTS (EST)", "BYTES", "SAMPLES", "EST SAMPLES", "SHARE"}
		align := []tw.Align{right, tw.AlignLeft, tw.AlignLeft, right, right, right, right, right}
		if mem {
			header = append(header, "AVG LAT", "DRAM", "TLB MISS", "HITM")
			align = append(align, right, right, right, right)
		}
		if numa {
			header = append(header, "REMOTE")
			align = append(align, right)
		}
		t := tablewriter.NewTable(w,
			tablewriter.WithRowAlignmentConfig(tw.CellAlignment{PerColumn: align}),
			tablewriter.WithHeaderAutoFormat(tw.Off),
		)
		t.Header(header)
		sites := siteTexts(objs, opt.Depth, func(i int) string { return objs[i].Type })
		for i, o := range objs {
			row := []string{
				strconv.Itoa(i + 1), o.Type, sites[i],
				fmt.Sprintf("%d (%.0f)", o.Objects, o.EstObjects),
				Bytes(o.Bytes),
				strconv.FormatUint(o.Samples, 10),
				fmt.Sprintf("%.0f", o.EstSamples),
				fmt.Sprintf("%.1f%%", 100*o.Share),
			}
			if mem {
				row = append(row, memColumns(o.Mem)...)
			}
			if numa {
				row = append(row, numaColumn(o.NUMA))
			}
			if err := t.Append(safeCells(row)); err != nil {
				return fmt.Errorf("render table: %w", err)
			}
		}
		if err := t.Render(); err != nil {
			return fmt.Errorf("render table: %w", err)
		}
	}
	writeAccesses(w, objs, r, opt)
	writeNUMA(w, objs)
	if quiet > 0 {
		what := "sites had"
		if quiet == 1 {
			what = "site had"
		}
		fmt.Fprintf(w, "%d more allocation %s no samples (--format json lists them)\n", quiet, what)
	}
	s := r.Stats
	pct := func(a, b uint64) string {
		if b == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f%%", 100*float64(a)/float64(b))
	}
	heap := strconv.FormatUint(s.InHeap, 10) + " (" + pct(s.InHeap, s.WithAddress) + " of addressed)"
	if !s.HeapKnown {
		heap = "unknown (heap range not available)"
	}
	fmt.Fprintf(w, "samples %d, with address %d (%s), in heap %s, attributed %d (%s of in heap), dropped %d\n",
		s.Samples, s.WithAddress, pct(s.WithAddress, s.Samples), heap, s.Attributed, pct(s.Attributed, s.InHeap), s.Dropped)
	if r.namesMore() {
		fmt.Fprintf(w, "named %d (%s of samples with an address: by an object, a data type or a region), in heap of unknown type %d\n",
			s.Named, pct(s.Named, s.WithAddress), s.TypeUnknown)
	}
	fmt.Fprintf(w, "allocations tracked %d (callbacks %d, below min size %d, agent drops %d)\n",
		s.AllocsTracked, s.AllocCallbacks, s.AllocsBelowMin, s.AgentDropped)
	if s.CostJVMCPUMs > 0 {
		agent := s.AgentCostMs()
		of := func(v float64) string { return fmt.Sprintf("%.2f%%", 100*v/s.CostJVMCPUMs) }
		fmt.Fprintf(w, "cost: agent %s of the JVM's CPU (allocations %s, stacks %s, JIT records %s, writer %s)",
			of(agent), of(s.CostAllocMs), of(s.CostStackMs), of(s.CostCodeMs), of(s.CostWriterMs))
		if s.CostShared {
			fmt.Fprintln(w, "; BPF and djx-bpf: shared by the scan's JVMs (its last line)")
		} else {
			fmt.Fprintf(w, ", BPF %s; djx-bpf %.2f CPU-s\n", of(s.CostBPFMs), s.CostDjxCPUMs/1000)
		}
	}
	if s.StackSignals > 0 || s.Stacks > 0 {
		borrowed := ""
		if s.SamplesStackBorrowed > 0 {
			borrowed = fmt.Sprintf(", callers borrowed from their thread's last stack %d (%s)", s.SamplesStackBorrowed, pct(s.SamplesStackBorrowed, s.Samples))
		}
		noJava := ""
		if s.StackSignalNoJava > 0 {
			noJava = fmt.Sprintf(", not sent to non-Java threads %d", s.StackSignalNoJava)
		}
		fmt.Fprintf(w, "stacks: samples with their own stack %d (%s), with Java frames %d (%s)%s; stacks %d, unmatched %d, agent drops %d, signals refused %d%s%s\n",
			s.SamplesWithStack, pct(s.SamplesWithStack, s.Samples), s.SamplesJavaStack, pct(s.SamplesJavaStack, s.Samples), borrowed,
			s.Stacks, s.StacksUnmatched, s.StacksDropped, s.StackSignalFailed, noJava, stackErrors(s.StackErrors))
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", termsafe.String(n))
	}
	return nil
}

// safeCells escapes a table row in place: a newline would split the cell
// and a control sequence would reach the terminal.
func safeCells(row []string) []string {
	for i := range row {
		row[i] = termsafe.String(row[i])
	}
	return row
}

// memColumns renders AVG LAT (cycles), DRAM, TLB MISS and HITM shares.
func memColumns(m *MemMetrics) []string {
	if m == nil || m.Samples == 0 {
		return []string{"-", "-", "-", "-"}
	}
	share := func(n uint64) string { return fmt.Sprintf("%.1f%%", 100*float64(n)/float64(m.Samples)) }
	return []string{fmt.Sprintf("%.0f", float64(m.Latency)/float64(m.Samples)), share(m.DRAM()), share(m.TLBMisses), strconv.FormatUint(m.HitM, 10)}
}

// numaColumn renders the share of samples whose CPU was on another node
// than the page.
func numaColumn(n *NUMAMetrics) string {
	if n == nil {
		return "-"
	}
	var known uint64 // samples whose page node is known
	for _, v := range n.Home {
		known += v
	}
	if known == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(n.Remote)/float64(known))
}

// writeNUMA lists, per shown object, the nodes holding its sampled pages
// and the nodes of the CPUs that accessed it.
func writeNUMA(w io.Writer, objs []*Object) {
	any := false
	nodes := func(m map[int]uint64) string {
		var total uint64
		keys := make([]int, 0, len(m))
		for k, v := range m {
			keys = append(keys, k)
			total += v
		}
		sort.Ints(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = fmt.Sprintf("node%d %.0f%%", k, 100*float64(m[k])/float64(total))
		}
		if len(parts) == 0 {
			return "-"
		}
		return strings.Join(parts, ", ")
	}
	for i, o := range objs {
		if o.NUMA == nil {
			continue
		}
		if !any {
			fmt.Fprintln(w, "NUMA (pages of the sampled accesses vs. the CPUs that made them):")
			any = true
		}
		fmt.Fprintf(w, "#%d %s at %s: home %s; accessed from %s; remote %s; page node unknown %d\n",
			i+1, termsafe.String(o.Type), termsafe.String(o.Site), nodes(o.NUMA.Home), nodes(o.NUMA.From), numaColumn(o.NUMA), o.NUMA.Unknown)
	}
	if any {
		fmt.Fprintln(w)
	}
}

// stackErrors formats the failure breakdown, most frequent first.
func stackErrors(m map[string]uint64) string {
	if len(m) == 0 {
		return ""
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", termsafe.String(k), m[k])
	}
	return "; no Java stack: " + strings.Join(parts, ", ")
}

// writeAccesses lists under each shown object its fields and top access
// paths, then the data types and the top paths of samples in no tracked
// object, by region.
func writeAccesses(w io.Writer, objs []*Object, r *Report, opt TableOptions) {
	if opt.AccessTop <= 0 && len(r.DataTypes) == 0 {
		return
	}
	any := false
	for i, o := range objs {
		if opt.AccessTop <= 0 {
			break
		}
		as := MergeAccesses(o.Accesses, opt.Depth, o.Samples)
		if len(as) == 0 && len(o.Fields) == 0 {
			continue
		}
		if !any {
			fmt.Fprintln(w, "\naccess paths (share of the object's samples, innermost frame first):")
			any = true
		}
		if o.Origin == OriginCensus && len(o.Holder) > 0 {
			fmt.Fprintf(w, "#%d %s %s, held by %s\n", i+1, termsafe.String(o.Type), termsafe.String(o.Site), termsafe.String(HolderText(o.Holder, 0)))
		} else {
			fmt.Fprintf(w, "#%d %s allocated at %s\n", i+1, termsafe.String(o.Type), termsafe.String(o.Site))
		}
		if len(o.Fields) > 0 {
			fmt.Fprintf(w, "  fields: %s\n", termsafe.String(fieldsText(o.Fields, 5)))
		}
		writePaths(w, as, opt.AccessTop, "  ")
	}
	dt := writeDataTypes(w, r, opt)
	rest := writeRemainder(w, r, opt)
	if any || dt || rest {
		fmt.Fprintln(w)
	}
}

// writePaths writes the top paths of as, each line indented.
func writePaths(w io.Writer, as []Access, top int, indent string) {
	for k, a := range as {
		if k == top {
			fmt.Fprintf(w, "%s... %d more paths\n", indent, len(as)-k)
			break
		}
		extra := ""
		if a.Mem != nil && a.Mem.Samples > 0 {
			extra += fmt.Sprintf("  [avg lat %.0f, DRAM %s]", float64(a.Mem.Latency)/float64(a.Mem.Samples), memColumns(a.Mem)[1])
		}
		if a.NUMA != nil {
			extra += "  [remote " + numaColumn(a.NUMA) + "]"
		}
		dt := ""
		if a.DataType != "" {
			dt = "[" + a.DataType + "] "
		}
		fmt.Fprintf(w, "%s%6.1f%% %6d  %s%s%s\n", indent, 100*a.Share, a.Samples, termsafe.String(dt), termsafe.String(strings.Join(a.Path, " <- ")), extra)
	}
}

// fieldsText lists the first n fields with their shares.
func fieldsText(fs []FieldShare, n int) string {
	parts := make([]string, 0, min(len(fs), n)+1)
	for k, f := range fs {
		if k == n {
			parts = append(parts, fmt.Sprintf("%d more", len(fs)-k))
			break
		}
		parts = append(parts, fmt.Sprintf("%s %.1f%%", f.Field, 100*f.Share))
	}
	return strings.Join(parts, ", ")
}

// namesMore says whether the report names samples beyond tracked objects:
// data types or regions (reports from before they were named do not).
func (r *Report) namesMore() bool {
	if len(r.DataTypes) > 0 || r.Stats.TypeUnknown > 0 {
		return true
	}
	for i := range r.Remainder {
		if r.Remainder[i].Named() {
			return true
		}
	}
	return false
}

// writeDataTypes writes the table of the top data types and their top
// access paths; it says whether it wrote anything.
func writeDataTypes(w io.Writer, r *Report, opt TableOptions) bool {
	ds := r.DataTypes
	if len(ds) == 0 {
		return false
	}
	more := 0
	if opt.Top > 0 && len(ds) > opt.Top {
		ds, more = ds[:opt.Top], len(ds)-opt.Top
	}
	fmt.Fprintf(w, "\ndata types (share of in-heap samples; named %.1f%% of samples with an address):\n", 100*r.Stats.NamedShare())
	right := tw.AlignRight
	t := tablewriter.NewTable(w,
		tablewriter.WithRowAlignmentConfig(tw.CellAlignment{PerColumn: []tw.Align{right, tw.AlignLeft, tw.AlignLeft, right, right}}),
		tablewriter.WithHeaderAutoFormat(tw.Off),
	)
	t.Header([]string{"#", "TYPE", "FIELD", "SAMPLES", "SHARE"})
	for i := range ds {
		d := &ds[i]
		if err := t.Append(safeCells([]string{strconv.Itoa(i + 1), d.Type, d.fieldText(), strconv.FormatUint(d.Samples, 10), fmt.Sprintf("%.1f%%", 100*d.Share)})); err != nil {
			fmt.Fprintf(w, "render table: %v\n", err)
			return true
		}
	}
	if err := t.Render(); err != nil {
		fmt.Fprintf(w, "render table: %v\n", err)
		return true
	}
	if more > 0 {
		fmt.Fprintf(w, "%d more data types (--format json lists them)\n", more)
	}
	if opt.AccessTop <= 0 {
		return true
	}
	head := false
	for i := range ds {
		d := &ds[i]
		as := MergeAccesses(d.Accesses, opt.Depth, d.Samples)
		if len(as) == 0 {
			continue
		}
		if !head {
			fmt.Fprintln(w, "\naccess paths (share of the data type's samples, innermost frame first):")
			head = true
		}
		fmt.Fprintf(w, "#%d %s\n", i+1, termsafe.String(d.Name()))
		writePaths(w, as, opt.AccessTop, "  ")
	}
	return true
}

// writeRemainder writes the samples in no tracked object by region (where),
// most sampled first, each with its top paths; it says whether it wrote
// anything.
func writeRemainder(w io.Writer, r *Report, opt TableOptions) bool {
	if opt.AccessTop <= 0 {
		return false
	}
	rest := MergeAccesses(r.Remainder, opt.Depth, r.Stats.Samples)
	if len(rest) == 0 {
		return false
	}
	type region struct {
		where   string
		samples uint64
		paths   []Access
	}
	var regions []*region
	by := make(map[string]*region)
	var n uint64
	for _, a := range rest { // in MergeAccesses' order: most sampled first
		g := by[a.Where]
		if g == nil {
			g = &region{where: a.Where}
			by[a.Where] = g
			regions = append(regions, g)
		}
		g.samples += a.Samples
		g.paths = append(g.paths, a)
		n += a.Samples
	}
	sort.SliceStable(regions, func(i, j int) bool {
		if regions[i].samples != regions[j].samples {
			return regions[i].samples > regions[j].samples
		}
		return regions[i].where < regions[j].where
	})
	fmt.Fprintf(w, "\nnot in a tracked object: %d samples (share of all samples), by region:\n", n)
	for k, g := range regions {
		if opt.Top > 0 && k == opt.Top {
			var left uint64
			for _, g := range regions[k:] {
				left += g.samples
			}
			fmt.Fprintf(w, "  ... %d more regions, %d samples\n", len(regions)-k, left)
			break
		}
		share := 0.0
		if r.Stats.Samples > 0 {
			share = float64(g.samples) / float64(r.Stats.Samples)
		}
		fmt.Fprintf(w, "  %s: %d samples (%.1f%%)\n", termsafe.String(g.where), g.samples, 100*share)
		writePaths(w, g.paths, opt.AccessTop, "    ")
	}
	return true
}

// Bytes formats a byte count with binary units (1536 → "1.5KiB").
func Bytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatUint(n, 10) + "B"
	}
	v, i := float64(n), -1
	for v >= unit && i < 4 {
		v /= unit
		i++
	}
	s := strconv.FormatFloat(v, 'f', 1, 64)
	s = strings.TrimSuffix(s, ".0")
	return s + [...]string{"KiB", "MiB", "GiB", "TiB", "PiB"}[i]
}

// ParseBytes parses a size such as "1KiB", "4k", "2MB" or "512" (bytes).
// Decimal and binary suffixes are both read as binary, as the JVM does.
func ParseBytes(s string) (uint64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	mult := uint64(1)
	for _, u := range []struct {
		suf string
		m   uint64
	}{{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"kb", 1 << 10}, {"mb", 1 << 20}, {"gb", 1 << 30}, {"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}, {"b", 1}} {
		if strings.HasSuffix(t, u.suf) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suf)), u.m
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("bad size %q: want a number with an optional unit such as 1KiB or 4MiB", s)
	}
	return uint64(v * float64(mult)), nil
}
