package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"
)

// run is one JVM run.
type run struct {
	Workload string         `json:"workload"`
	Mode     string         `json:"mode"` // base, attach or launch
	Variant  string         `json:"variant,omitempty"`
	Round    int            `json:"round"`
	Elapsed  float64        `json:"elapsed_s"`           // wall time of the workload's main
	OpsPerS  float64        `json:"ops_per_s,omitempty"` // fixed-time workloads
	Cost     float64        `json:"cost"`                // time per unit of work: elapsed, or 1/ops_per_s
	HWMKiB   int64          `json:"vmhwm_kib"`           // the JVM's peak RSS
	JVMCPU   float64        `json:"jvm_cpu_s"`           // the JVM's CPU time
	GCMs     float64        `json:"gc_pause_ms"`         // the collectors' pause time (MXBeans)
	GCCount  int64          `json:"gc_pauses"`
	DjxCPU   float64        `json:"djx_cpu_s,omitempty"`  // djx-bpf's own CPU time
	DjxWall  float64        `json:"djx_wall_s,omitempty"` // djx-bpf's wall time
	DjxRSS   int64          `json:"djx_maxrss_kib,omitempty"`
	Stats    map[string]any `json:"stats,omitempty"` // the profile's stats
	Notes    []string       `json:"notes,omitempty"`
	Err      string         `json:"error,omitempty"`
}

// summary is one (workload, mode, variant) over the rounds.
type summary struct {
	Workload     string `json:"workload"`
	Mode         string `json:"mode"`
	Variant      string `json:"variant,omitempty"`
	Runs         int    `json:"runs"`
	RuntimeRatio spread `json:"runtime_ratio"` // cost / cost of the base run of the same round
	RSSRatio     spread `json:"rss_ratio"`     // peak RSS / base's
	// GCPauseRatio is the time per GC pause over base's: what following
	// the moves adds to each pause (uprobes trap inside them).
	GCPauseRatio spread  `json:"gc_pause_ratio"`
	DjxCPUPerS   float64 `json:"djx_cpu_per_s,omitempty"` // djx-bpf CPU seconds per wall second (median)
	Samples      float64 `json:"samples,omitempty"`       // medians over the runs
	Dropped      float64 `json:"dropped"`
	AttrPct      float64 `json:"attributed_pct,omitempty"` // attributed / in heap
	StackPct     float64 `json:"stack_pct,omitempty"`      // samples with Java callers (own stack or borrowed) / samples
	GCs          float64 `json:"gcs,omitempty"`
	RelocHits    float64 `json:"reloc_hits,omitempty"`
	// Measured costs (the report's cost_*_ms) as % of the JVM's CPU time:
	// the agent's time in the JVM, and the BPF program's run time.
	AgentPct spread `json:"agent_pct"`
	BPFPct   spread `json:"bpf_pct"`
}

type spread struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

type result struct {
	Started   time.Time `json:"started"`
	Host      string    `json:"host"`
	Kernel    string    `json:"kernel"`
	CPUs      int       `json:"cpus"`
	Java      string    `json:"java"`
	DjxFlags  []string  `json:"djx_flags,omitempty"`
	JVMFlags  []string  `json:"jvm_flags,omitempty"`
	Runs      []run     `json:"runs"`
	Summaries []summary `json:"summaries"`
	// Toggle holds the results of djxbench toggle.
	Toggle []toggleResult `json:"toggle,omitempty"`
	// Switch holds the results of djxbench switch.
	Switch []toggleResult `json:"switch,omitempty"`
	// IRQ holds the results of djxbench irq.
	IRQ     []irqResult `json:"irq,omitempty"`
	Seconds float64     `json:"total_s"`
}

// newResult starts the results of a subcommand, with the machine's and
// h's settings; the JVM's version when h names a java launcher.
func newResult(h *harness) *result {
	res := &result{Started: time.Now(), CPUs: runtime.NumCPU(), DjxFlags: h.djxFlags, JVMFlags: h.jvmFlags}
	res.Host, _ = os.Hostname()
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		res.Kernel = strings.TrimSpace(string(b))
	}
	if h.java == "" {
		return res
	}
	if b, err := exec.Command(h.java, "-version").CombinedOutput(); err == nil {
		res.Java = strings.SplitN(strings.TrimSpace(string(b)), "\n", 2)[0]
	}
	return res
}

func stat(m map[string]any, k string) float64 {
	if v, ok := m[k].(float64); ok {
		return v
	}
	return 0
}

// costPcts is a profile's measured agent and BPF time as % of the JVM's
// CPU time (its cost_*_ms stats); false without the JVM's CPU time.
func costPcts(st map[string]any) (agent, bpf float64, ok bool) {
	jc := stat(st, "cost_jvm_cpu_ms")
	if jc <= 0 {
		return 0, 0, false
	}
	a := stat(st, "cost_alloc_ms") + stat(st, "cost_stack_ms") + stat(st, "cost_code_ms") + stat(st, "cost_writer_ms")
	return 100 * a / jc, 100 * stat(st, "cost_bpf_ms") / jc, true
}

func summarize(runs []run) []summary {
	base := map[string]run{} // workload/round
	for _, r := range runs {
		if r.Mode == "base" && r.Err == "" {
			base[fmt.Sprint(r.Workload, "/", r.Round)] = r
		}
	}
	type key struct{ w, m, v string }
	groups := map[key][]run{}
	var order []key
	for _, r := range runs {
		k := key{r.Workload, r.Mode, r.Variant}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		if r.Err == "" {
			groups[k] = append(groups[k], r)
		} else if groups[k] == nil {
			groups[k] = []run{}
		}
	}
	var out []summary
	for _, k := range order {
		g := groups[k]
		s := summary{Workload: k.w, Mode: k.m, Variant: k.v, Runs: len(g)}
		var rt, rss, gcp, cpu, smp, drop, attr, stk, gcs, rh, agt, bpf []float64
		for _, r := range g {
			b, ok := base[fmt.Sprint(r.Workload, "/", r.Round)]
			if ok && b.Cost > 0 && b.HWMKiB > 0 {
				rt = append(rt, r.Cost/b.Cost)
				rss = append(rss, float64(r.HWMKiB)/float64(b.HWMKiB))
			}
			if ok && b.GCMs > 0 && b.GCCount > 0 && r.GCCount > 0 {
				gcp = append(gcp, (r.GCMs/float64(r.GCCount))/(b.GCMs/float64(b.GCCount)))
			}
			if r.Mode == "base" {
				continue
			}
			if r.DjxWall > 0 {
				cpu = append(cpu, r.DjxCPU/r.DjxWall)
			}
			st := r.Stats
			smp = append(smp, stat(st, "samples"))
			drop = append(drop, stat(st, "dropped"))
			if ih := stat(st, "in_heap"); ih > 0 {
				attr = append(attr, 100*stat(st, "attributed")/ih)
			}
			if n := stat(st, "samples"); n > 0 {
				stk = append(stk, 100*(stat(st, "samples_java_stack")+stat(st, "samples_stack_borrowed"))/n)
			}
			gcs = append(gcs, stat(st, "gcs"))
			rh = append(rh, stat(st, "reloc_hits"))
			if a, b, ok := costPcts(st); ok {
				agt, bpf = append(agt, a), append(bpf, b)
			}
		}
		s.RuntimeRatio, s.RSSRatio, s.GCPauseRatio = spreadOf(rt), spreadOf(rss), spreadOf(gcp)
		s.DjxCPUPerS = spreadOf(cpu).Median
		s.Samples, s.Dropped, s.AttrPct = spreadOf(smp).Median, spreadOf(drop).Median, spreadOf(attr).Median
		s.StackPct, s.GCs, s.RelocHits = spreadOf(stk).Median, spreadOf(gcs).Median, spreadOf(rh).Median
		s.AgentPct, s.BPFPct = spreadOf(agt), spreadOf(bpf)
		out = append(out, s)
	}
	return out
}

func spreadOf(v []float64) spread {
	if len(v) == 0 {
		return spread{}
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return spread{Median: m, Min: s[0], Max: s[len(s)-1]}
}

func printTable(w io.Writer, r *result, old *result) {
	fmt.Fprintf(w, "djx-bpf overhead, %s, %d CPUs, %s; ratios are profiled / unprofiled of the same round: median [min–max]\n", r.Kernel, r.CPUs, r.Java)
	if len(r.DjxFlags) > 0 {
		fmt.Fprintf(w, "djx-bpf flags: %s\n", strings.Join(r.DjxFlags, " "))
	}
	if len(r.JVMFlags) > 0 {
		fmt.Fprintf(w, "JVM flags: %s\n", strings.Join(r.JVMFlags, " "))
	}
	prev := map[string]summary{}
	if old != nil {
		for _, s := range old.Summaries {
			prev[s.Workload+"/"+s.Mode+"/"+s.Variant] = s
		}
	}
	fmt.Fprintf(w, "%-10s %-11s %-11s %4s  %-22s %-22s %-22s %-19s %6s %8s %9s %7s %6s %6s %5s %8s", "workload", "mode", "variant", "runs", "runtime ratio", "peak RSS ratio", "GC pause ratio", "agent% of JVM CPU", "bpf%", "djx CPU/s", "samples", "dropped", "attr%", "java%", "GCs", "reloc")
	if old != nil {
		fmt.Fprintf(w, "  %-8s", "before")
	}
	fmt.Fprintln(w)
	for _, s := range r.Summaries {
		rt, rs, gp := "-", "-", "-"
		if s.Mode != "base" {
			rt = fmt.Sprintf("%.3f [%.3f–%.3f]", s.RuntimeRatio.Median, s.RuntimeRatio.Min, s.RuntimeRatio.Max)
			rs = fmt.Sprintf("%.3f [%.3f–%.3f]", s.RSSRatio.Median, s.RSSRatio.Min, s.RSSRatio.Max)
			if s.GCPauseRatio != (spread{}) {
				gp = fmt.Sprintf("%.3f [%.3f–%.3f]", s.GCPauseRatio.Median, s.GCPauseRatio.Min, s.GCPauseRatio.Max)
			}
		}
		fmt.Fprintf(w, "%-10s %-11s %-11s %4d  %-22s %-22s %-22s", s.Workload, s.Mode, s.Variant, s.Runs, rt, rs, gp)
		if _, jfr := jfrSettings[s.Mode]; jfr {
			fmt.Fprintf(w, " %-19s", "(JFR: no djx-bpf)")
		} else if s.Mode != "base" {
			ag := fmt.Sprintf("%.2f [%.2f–%.2f]", s.AgentPct.Median, s.AgentPct.Min, s.AgentPct.Max)
			fmt.Fprintf(w, " %-19s %6.2f %8.3f %9.0f %7.0f %6.1f %6.1f %5.0f %8.0f", ag, s.BPFPct.Median, s.DjxCPUPerS, s.Samples, s.Dropped, s.AttrPct, s.StackPct, s.GCs, s.RelocHits)
			if p, ok := prev[s.Workload+"/"+s.Mode+"/"+s.Variant]; ok {
				fmt.Fprintf(w, "  %.3f", p.RuntimeRatio.Median)
			}
		}
		fmt.Fprintln(w)
	}
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

func writeJSON(path string, v any) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// save writes res to path, or to bench/results/PREFIXTIME.json without one.
func save(res *result, path, prefix string) {
	if path == "" {
		path = filepath.Join("bench", "results", prefix+res.Started.Format("20060102-150405")+".json")
	}
	if err := writeJSON(path, res); err != nil {
		fmt.Fprintf(os.Stderr, "djxbench: %v\n", err)
	} else {
		fmt.Fprintf(os.Stderr, "djxbench: results in %s (%.0f s)\n", path, res.Seconds)
	}
}
