package report

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"

	"github.com/djx-bpf/djx-bpf/safety/termsafe"
)

// Scan is the result of profiling every JVM on a host at once.
type Scan struct {
	Event       string       `json:"event"`
	DurationSec float64      `json:"duration_s"`
	JVMs        []*Report    `json:"jvms"`              // one per profiled JVM, by pid
	Skipped     []SkippedJVM `json:"skipped,omitempty"` // JVMs found but not profiled
	Stats       ScanStats    `json:"stats"`
	Notes       []string     `json:"notes,omitempty"`
}

// SkippedJVM is a JVM the scan found and could not (or was told not to)
// profile.
type SkippedJVM struct {
	PID    int    `json:"pid"`
	Main   string `json:"main,omitempty"`
	Reason string `json:"reason"`
}

// ScanStats are the counters of the shared sampler: the per-CPU events
// serve every JVM, so drops and signals are counted for the scan as a
// whole.
type ScanStats struct {
	Discovered   int    `json:"jvms_discovered"`
	Profiled     int    `json:"jvms_profiled"`
	Dropped      uint64 `json:"dropped"`       // ring buffer full
	Lost         uint64 `json:"lost"`          // a JVM's session did not keep up
	StackSignals uint64 `json:"stack_signals"` // signals sent for access stacks
	// The shared sampler's costs, which no one JVM can be charged with.
	CostBPFMs    float64 `json:"cost_bpf_ms,omitempty"`
	CostDjxCPUMs float64 `json:"cost_djx_cpu_ms,omitempty"`
}

// Finish orders the JVMs by pid.
func (s *Scan) Finish() {
	sort.Slice(s.JVMs, func(i, j int) bool { return s.JVMs[i].PID < s.JVMs[j].PID })
	sort.Slice(s.Skipped, func(i, j int) bool { return s.Skipped[i].PID < s.Skipped[j].PID })
}

// WriteScanJSON writes the scan with at most top objects per JVM.
func WriteScanJSON(w io.Writer, s *Scan, top int) error {
	c := *s
	c.JVMs = make([]*Report, len(s.JVMs))
	for i, r := range s.JVMs {
		rc := *r
		rc.Objects = r.top(top)
		if rc.Objects == nil {
			rc.Objects = []Object{}
		}
		c.JVMs[i] = &rc
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(&c); err != nil {
		return fmt.Errorf("write json scan: %w", err)
	}
	return nil
}

// WriteScanTable writes each JVM's table, then the top objects across all
// JVMs, each row naming its JVM, then what was skipped. Strings are escaped
// as WriteTable escapes them.
func WriteScanTable(w io.Writer, s *Scan, opt TableOptions) error {
	w = termsafe.NewWriter(w)
	for _, r := range s.JVMs {
		if err := WriteTable(w, r, opt); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	type row struct {
		pid  int
		jvm  string
		o    *Object
		frac float64
	}
	var rows []row
	var total uint64
	for _, r := range s.JVMs {
		for i := range r.Objects {
			o := &r.Objects[i]
			if o.Samples > 0 {
				rows = append(rows, row{pid: r.PID, jvm: r.JVM, o: o})
				total += o.Samples
			}
		}
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].o.Samples > rows[j].o.Samples })
	if opt.Top > 0 && len(rows) > opt.Top {
		rows = rows[:opt.Top]
	}
	fmt.Fprintf(w, "djx-bpf scan: %d JVMs profiled, event %s, %.1fs; top objects across them:\n", len(s.JVMs), termsafe.String(s.Event), s.DurationSec)
	if len(rows) == 0 {
		fmt.Fprintln(w, "no samples hit a tracked object")
	} else {
		right := tw.AlignRight
		t := tablewriter.NewTable(w,
			tablewriter.WithRowAlignmentConfig(tw.CellAlignment{PerColumn: []tw.Align{right, right, tw.AlignLeft, tw.AlignLeft, right, right, right}}),
			tablewriter.WithHeaderAutoFormat(tw.Off),
		)
		t.Header("#", "PID", "TYPE", "ALLOCATION SITE", "BYTES", "SAMPLES", "SHARE")
		objs := make([]*Object, len(rows))
		for i := range rows {
			objs[i] = rows[i].o
		}
		sites := siteTexts(objs, DefaultTableOptions.Depth, func(i int) string { return strconv.Itoa(rows[i].pid) + "\x00" + rows[i].o.Type })
		for i, r := range rows {
			if err := t.Append(safeCells([]string{strconv.Itoa(i + 1), strconv.Itoa(r.pid), r.o.Type, sites[i], Bytes(r.o.Bytes),
				strconv.FormatUint(r.o.Samples, 10), fmt.Sprintf("%.1f%%", 100*float64(r.o.Samples)/float64(total))})); err != nil {
				return fmt.Errorf("render scan table: %w", err)
			}
		}
		if err := t.Render(); err != nil {
			return fmt.Errorf("render scan table: %w", err)
		}
	}
	for _, k := range s.Skipped {
		fmt.Fprintf(w, "skipped pid %d (%s): %s\n", k.PID, termsafe.String(k.Main), termsafe.String(k.Reason))
	}
	fmt.Fprintf(w, "JVMs discovered %d, profiled %d; samples dropped %d (ring buffer full), lost %d (a JVM's session fell behind)\n",
		s.Stats.Discovered, s.Stats.Profiled, s.Stats.Dropped, s.Stats.Lost)
	if s.Stats.CostBPFMs > 0 || s.Stats.CostDjxCPUMs > 0 {
		fmt.Fprintf(w, "cost for all JVMs: BPF %.2f CPU-s; djx-bpf %.2f CPU-s\n", s.Stats.CostBPFMs/1000, s.Stats.CostDjxCPUMs/1000)
	}
	for _, n := range s.Notes {
		fmt.Fprintf(w, "note: %s\n", termsafe.String(n))
	}
	return nil
}
