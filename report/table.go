package report

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"

	"github.com/djx-bpf/djx-bpf/safety/termsafe"
)

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
	writeHeader(w, r)
	objs, quiet := shownObjects(r, opt.Top)
	if len(objs) == 0 {
		fmt.Fprintln(w, "no samples hit a tracked object")
	} else if err := writeObjects(w, objs, opt.Depth); err != nil {
		return err
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
	writeStats(w, r)
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", termsafe.String(n))
	}
	return nil
}

// writeHeader writes the line that says what was profiled, how, and what
// the census found.
func writeHeader(w io.Writer, r *Report) {
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
	if st := &r.Stats; st.WalkObjects > 0 {
		took := fmt.Sprintf("%.1fs", st.WalkMs/1000)
		if st.WalkMs < 1000 {
			took = fmt.Sprintf("%.0f ms", st.WalkMs)
		}
		fmt.Fprintf(w, ", heap walk %s objects in %s (%d data structures), no pause", Count(st.WalkObjects), took, st.WalkStructures)
	}
	fmt.Fprintln(w)
}

// shownObjects returns the first top objects with samples (0: all), and
// how many objects have none. Sites that no sample hit cost nothing
// measurable: the table leaves them out (JSON keeps them, with their
// allocation counts).
func shownObjects(r *Report, top int) (objs []*Object, quiet int) {
	for i := range r.Objects {
		if o := &r.Objects[i]; o.Samples == 0 {
			quiet++
		} else if top <= 0 || len(objs) < top {
			objs = append(objs, o)
		}
	}
	return objs, quiet
}

// writeObjects writes the table of objs, their sites cut to depth frames.
func writeObjects(w io.Writer, objs []*Object, depth int) error {
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
	sites := siteTexts(objs, depth, func(i int) string { return objs[i].Type })
	for i, o := range objs {
		row := []string{
			strconv.Itoa(i + 1), o.Type, sites[i] + otherRootsText(o),
			fmt.Sprintf("%d (%.0f)", o.Objects, o.EstObjects),
			bytesText(o),
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
	return nil
}

// otherRootsText says how many other roots reach a held object:
// " (+2 roots)", "" for none.
func otherRootsText(o *Object) string {
	switch {
	case !o.Held() || o.OtherRoots <= 0:
		return ""
	case o.OtherRoots == 1:
		return " (+1 root)"
	case o.OtherRoots >= 64:
		return " (+64 or more roots)"
	}
	return fmt.Sprintf(" (+%d roots)", o.OtherRoots)
}

// bytesText is the BYTES cell: with what the holder chain retains when it
// is more than the objects themselves.
func bytesText(o *Object) string {
	if o.RetainedBytes > o.Bytes {
		return Bytes(o.Bytes) + ", retains " + Bytes(o.RetainedBytes)
	}
	return Bytes(o.Bytes)
}

// writeStats writes the run's statistics: samples and how they were
// named, allocations, cost and stacks.
func writeStats(w io.Writer, r *Report) {
	s := &r.Stats
	heap := strconv.FormatUint(s.InHeap, 10) + " (" + percent(s.InHeap, s.WithAddress) + " of addressed)"
	if !s.HeapKnown {
		heap = "unknown (heap range not available)"
	}
	fmt.Fprintf(w, "samples %d, with address %d (%s), in heap %s, attributed %d (%s of in heap), dropped %d\n",
		s.Samples, s.WithAddress, percent(s.WithAddress, s.Samples), heap, s.Attributed, percent(s.Attributed, s.InHeap), s.Dropped)
	if r.namesMore() {
		fmt.Fprintf(w, "named %d (%s of samples with an address: by an object, a data type or a region), in heap of unknown type %d\n",
			s.Named, percent(s.Named, s.WithAddress), s.TypeUnknown)
	}
	fmt.Fprintf(w, "allocations tracked %d (callbacks %d, below min size %d, agent drops %d)\n",
		s.AllocsTracked, s.AllocCallbacks, s.AllocsBelowMin, s.AgentDropped)
	if s.CostJVMCPUMs > 0 {
		agent := s.AgentCostMs()
		of := func(v float64) string { return fmt.Sprintf("%.2f%%", 100*v/s.CostJVMCPUMs) }
		fmt.Fprintf(w, "cost: agent %s of the JVM's CPU (allocations %s, stacks %s, classes and JIT records %s, writer %s)",
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
			borrowed = fmt.Sprintf(", callers borrowed from their thread's last stack %d (%s)", s.SamplesStackBorrowed, percent(s.SamplesStackBorrowed, s.Samples))
		}
		noJava := ""
		if s.StackSignalNoJava > 0 {
			noJava = fmt.Sprintf(", not sent to non-Java threads %d", s.StackSignalNoJava)
		}
		fmt.Fprintf(w, "stacks: samples with their own stack %d (%s), with Java frames %d (%s)%s; stacks %d, unmatched %d, agent drops %d, signals refused %d%s%s\n",
			s.SamplesWithStack, percent(s.SamplesWithStack, s.Samples), s.SamplesJavaStack, percent(s.SamplesJavaStack, s.Samples), borrowed,
			s.Stacks, s.StacksUnmatched, s.StacksDropped, s.StackSignalFailed, noJava, stackErrors(s.StackErrors))
	}
	if s.SamplesBPFStack > 0 || len(s.BPFStackEnds) > 0 {
		fmt.Fprintf(w, "stacks (unwound in BPF): samples with their own Java stack %d (%s), walked to the thread's entry %d (%s)%s\n",
			s.SamplesBPFStack, percent(s.SamplesBPFStack, s.Samples), s.SamplesBPFComplete, percent(s.SamplesBPFComplete, s.Samples),
			strings.Replace(stackErrors(s.BPFStackEnds), "; no Java stack: ", "; not whole: ", 1))
	}
	if len(s.CapsCut) > 0 {
		// What the caps on what a target names cut, as perf and
		// async-profiler say what their stack caps cut.
		fmt.Fprintf(w, "caps cut: %s\n", strings.TrimPrefix(stackErrors(s.CapsCut), "; no Java stack: "))
	}
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
		if o.Held() {
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
