// Command djxbench measures what djx-bpf costs the JVMs it profiles: it runs
// real Java workloads (H2 running SQL, Xalan transforming XML, Commons Math
// FFTs, all from Debian's packages) and synthetic ones (allocation-heavy, GC-heavy, the
// HotArrays demo) without djx-bpf, attached to by djx-bpf, and launched
// under it, in alternating runs, and prints runtime and peak-RSS overhead
// ratios with their spread, with the samples, drops and attribution stats of
// each profile. Results also go to a JSON file for later comparison.
//
// Usage (as root; `make bench` builds everything and runs it):
//
//	djxbench -bin build/djx-bpf -cp CLASSPATH [-runs 3] [-workloads h2,xalan,...]
//	         [-modes base,attach,launch] [-variants default,freq999,...] [-o results.json]
//
// Each run of a workload is one JVM. Fixed-work workloads (h2, xalan, fft)
// report their elapsed time; fixed-time ones (allocheavy, gchot, hotarrays)
// report work per second, averaged from their third second on. The JVM
// itself reads its peak RSS (VmHWM) and CPU time just before it exits (the
// Bench wrapper in bench/java), which works the same whether the JVM is
// ours (base, attach) or djx-bpf's child (launch).
//
// Every process the harness starts is the leader of a process group of its
// own; on failure, timeout or Ctrl-C the harness kills those groups and no
// other process.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// workload is one Java program the harness runs.
type workload struct {
	Name      string
	Class     string
	Args      []string
	JVMFlags  []string
	FixedTime bool // reports "ops N" per second for a fixed time; else fixed work
}

var workloads = []workload{
	{Name: "h2", Class: "H2Bench", Args: []string{"60000", "1500"}, JVMFlags: []string{"-Xmx1g"}},
	{Name: "xalan", Class: "XalanBench", Args: []string{"20000", "40"}, JVMFlags: []string{"-Xmx1g"}},
	{Name: "fft", Class: "FftBench", Args: []string{"64", "14", "200"}, JVMFlags: []string{"-Xmx1g"}},
	{Name: "allocheavy", Class: "AllocHeavy", Args: []string{"8"}, JVMFlags: []string{"-Xmx1g"}, FixedTime: true},
	{Name: "gchot", Class: "GcHot", Args: []string{"8"}, JVMFlags: []string{"-Xmx512m", "-Xmn32m"}, FixedTime: true},
	{Name: "hotarrays", Class: "HotArrays", Args: []string{"8"}, JVMFlags: []string{"-Xmx1g"}, FixedTime: true},
}

// variants are djx-bpf settings compared against the defaults (-variants).
var variants = map[string][]string{
	"default":  nil,
	"freq999":  {"--freq", "999"},
	"freq4999": {"--freq", "4999"},
	"freq499":  {"--freq", "499"},
	"freq199":  {"--freq", "199"},
	// agentonly leaves the agent's cost: allocation sampling, rescans and
	// JIT records, with the sampler nearly idle.
	"agentonly":   {"--freq", "1", "--stack-signal", "0"},
	"ao-budget1k": {"--freq", "1", "--stack-signal", "0", "--alloc-budget", "1000"},
	"ao-relocoff": {"--freq", "1", "--stack-signal", "0", "--relocation", "off"},
	"ao-big":      {"--freq", "1", "--stack-signal", "0", "--min-size", "1MiB", "--relocation", "off"},
	"nostacks":    {"--stack-signal", "0"},
	"rescan":      {"--relocation", "rescan"},
	"relocoff":    {"--relocation", "off"},
	"notypes":     {"--data-types=false"},
	"uprobe":      {"--relocation", "uprobe"},
	"minsize4k":   {"--min-size", "4KiB"},
	"interval4k":  {"--alloc-interval", "4KiB"},
	"budget0":     {"--alloc-budget", "0"},
	"lean":        {"--relocation", "rescan", "--stack-signal", "0"},
	"nostacksoff": {"--stack-signal", "0", "--relocation", "off"},
	"lean999":     {"--relocation", "rescan", "--stack-signal", "0", "--freq", "999"},
	"budget1k":    {"--alloc-budget", "1000"},
	"floor":       {"--relocation", "off", "--stack-signal", "0", "--freq", "999", "--alloc-budget", "1000"},
}

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
	// Toggle holds the toggle mode's results (-toggle).
	Toggle []toggleResult `json:"toggle,omitempty"`
	// Switch holds the switch mode's results (-switch).
	Switch []toggleResult `json:"switch,omitempty"`
	// IRQ holds the interrupt probe's results (-irq).
	IRQ     []irqResult `json:"irq,omitempty"`
	Seconds float64     `json:"total_s"`
}

// procs tracks the process groups the harness started.
type procs struct {
	mu   sync.Mutex
	pids map[int]bool
}

func (p *procs) add(pid int) {
	p.mu.Lock()
	p.pids[pid] = true
	p.mu.Unlock()
}

func (p *procs) done(pid int) {
	p.mu.Lock()
	delete(p.pids, pid)
	p.mu.Unlock()
}

// killAll ends every process group still running that the harness started:
// SIGTERM (djx-bpf writes its report and detaches), then SIGKILL.
func (p *procs) killAll() {
	p.mu.Lock()
	pids := make([]int, 0, len(p.pids))
	for pid := range p.pids {
		pids = append(pids, pid)
	}
	p.mu.Unlock()
	for _, pid := range pids {
		syscall.Kill(-pid, syscall.SIGTERM)
	}
	deadline := time.Now().Add(3 * time.Second)
	for _, pid := range pids {
		for time.Now().Before(deadline) && syscall.Kill(pid, 0) == nil {
			time.Sleep(50 * time.Millisecond)
		}
		syscall.Kill(-pid, syscall.SIGKILL)
	}
}

var started = &procs{pids: map[int]bool{}}

type harness struct {
	bin, java, cp, tmp string
	djxFlags           []string
	jvmFlags           []string // added to every workload's
	timeout            time.Duration
	verbose            bool
}

func main() {
	var (
		bin      = flag.String("bin", "build/djx-bpf", "djx-bpf binary")
		java     = flag.String("java", "java", "java launcher")
		cp       = flag.String("cp", "", "class path holding bench/java and testdata/java classes and the H2 and Xalan jars")
		runs     = flag.Int("runs", envInt("BENCH_RUNS", 3), "alternating rounds per workload (env BENCH_RUNS)")
		wl       = flag.String("workloads", envStr("BENCH_WORKLOADS", "h2,xalan,fft,allocheavy,gchot"), "workloads: h2, xalan, fft, allocheavy, gchot, hotarrays (env BENCH_WORKLOADS)")
		modes    = flag.String("modes", envStr("BENCH_MODES", "base,attach,launch,jfr,jfr-default"), "modes: base, attach, launch, jfr (JFR with settings=profile), jfr-default (settings=default) (env BENCH_MODES)")
		vars     = flag.String("variants", envStr("BENCH_VARIANTS", "default"), "djx-bpf settings to compare, comma-separated: "+variantNames()+" (env BENCH_VARIANTS)")
		extra    = flag.String("djx-flags", envStr("BENCH_DJX_FLAGS", ""), "extra djx-bpf profile flags for every profiled run (env BENCH_DJX_FLAGS)")
		jvmExtra = flag.String("jvm-flags", envStr("BENCH_JVM_FLAGS", ""), "extra JVM flags for every run, e.g. -XX:ParallelGCThreads=1 (env BENCH_JVM_FLAGS)")
		out      = flag.String("o", envStr("BENCH_OUT", ""), "JSON results file (default bench/results/TIME.json)")
		timeout  = flag.Duration("timeout", 3*time.Minute, "give up on one run after this long")
		verbose  = flag.Bool("v", false, "print each run")
		compare  = flag.String("compare", "", "print the summaries of this earlier results file beside the new ones")
		fromFile = flag.String("summarize", "", "do not run: print the table of this results file")
		printCmd = flag.String("print", "", "do not run: print this workload's java command line, with -java, -cp and -jvm-flags (scripts/perfshare.sh)")
		toggleN  = flag.Int("toggle", envInt("BENCH_TOGGLE", 0), "instead of separate runs: this many profiled windows on one long-running JVM per workload, each between unprofiled ones (env BENCH_TOGGLE)")
		window   = flag.Duration("window", 10*time.Second, "toggle: length of each window")
		warm     = flag.Duration("warm", 20*time.Second, "toggle and switch: warm-up before the first window")
		switchN  = flag.Int("switch", envInt("BENCH_SWITCH", 0), "instead of separate runs: one profile attached to one long-running JVM per workload, its sampling switched on this many times, each between windows with it off (env BENCH_SWITCH)")
		swWindow = flag.Duration("switch-window", 4*time.Second, "switch: length of each window")
		irq      = flag.Bool("irq", envInt("BENCH_IRQ", 0) != 0, "instead of separate runs: measure what the sampling interrupt alone costs a thread doing random loads, at 499 and 999 Hz over 256 KiB and 16 MiB (env BENCH_IRQ=1)")
	)
	flag.Parse()
	if *fromFile != "" {
		var r result
		if err := readJSON(*fromFile, &r); err != nil {
			fatal("%v", err)
		}
		printTable(os.Stdout, &r, nil)
		if len(r.Toggle) > 0 {
			for i := range r.Toggle { // files from before the geomean was kept
				r.Toggle[i].summarize()
			}
			printToggle(os.Stdout, toggleTitle, r.Toggle)
		}
		if len(r.Switch) > 0 {
			printToggle(os.Stdout, switchTitle, r.Switch)
		}
		if len(r.IRQ) > 0 {
			printIRQ(os.Stdout, r.IRQ)
		}
		return
	}
	if *printCmd != "" {
		w, ok := findWorkload(*printCmd)
		if !ok {
			fatal("unknown workload %q", *printCmd)
		}
		h := &harness{java: *java, cp: *cp, jvmFlags: strings.Fields(*jvmExtra)}
		fmt.Println(strings.Join(h.javaArgs(w, false), " "))
		return
	}
	if os.Geteuid() != 0 {
		fatal("must run as root: djx-bpf loads BPF programs and attaches to JVMs (sudo make bench)")
	}
	if *cp == "" {
		fatal("-cp is required (make bench sets it)")
	}
	if _, err := os.Stat(*bin); err != nil {
		fatal("djx-bpf binary: %v (make build)", err)
	}
	var ws []workload
	for _, n := range strings.Split(*wl, ",") {
		w, ok := findWorkload(strings.TrimSpace(n))
		if !ok {
			fatal("unknown workload %q", n)
		}
		ws = append(ws, w)
	}
	ms := strings.Split(*modes, ",")
	for _, m := range ms {
		if _, jfr := jfrSettings[m]; m != "base" && m != "attach" && m != "launch" && !jfr {
			fatal("unknown mode %q: base, attach, launch, jfr or jfr-default", m)
		}
	}
	if ms[0] != "base" {
		ms = append([]string{"base"}, ms...) // ratios need the base
	}
	vs := strings.Split(*vars, ",")
	for _, v := range vs {
		_, jfr := jfrSettings[v]
		if jfr && *toggleN > 0 && len(vs) == 1 {
			continue // the toggle mode's windows may be JFR's
		}
		if _, ok := variants[v]; !ok {
			fatal("unknown variant %q: %s (jfr and jfr-default only alone, with -toggle)", v, variantNames())
		}
	}
	var old *result
	if *compare != "" {
		old = &result{}
		if err := readJSON(*compare, old); err != nil {
			fatal("%v", err)
		}
	}
	tmp, err := os.MkdirTemp("", "djxbench-")
	if err != nil {
		fatal("%v", err)
	}
	h := &harness{bin: *bin, java: *java, cp: *cp, tmp: tmp, djxFlags: strings.Fields(*extra), jvmFlags: strings.Fields(*jvmExtra), timeout: *timeout, verbose: *verbose}
	ctx := context.Background()
	cleanup := func() {
		started.killAll()
		os.RemoveAll(tmp)
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		fmt.Fprintln(os.Stderr, "djxbench: interrupted: stopping the processes it started")
		cleanup()
		os.Exit(130)
	}()

	res := &result{Started: time.Now(), CPUs: runtime.NumCPU(), DjxFlags: h.djxFlags, JVMFlags: h.jvmFlags}
	res.Host, _ = os.Hostname()
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		res.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := exec.Command(*java, "-version").CombinedOutput(); err == nil {
		res.Java = strings.SplitN(strings.TrimSpace(string(b)), "\n", 2)[0]
	}
	if *irq {
		for _, f := range []int{499, 999} {
			for _, size := range []int{256 << 10, 16 << 20} {
				r := irqProbe(f, size, 40, 500*time.Millisecond)
				fmt.Fprintf(os.Stderr, "djxbench: irq %d Hz %s: %.4f\n", f, bytesStr(size), r.Geomean)
				res.IRQ = append(res.IRQ, r)
			}
		}
		res.Seconds = time.Since(res.Started).Seconds()
		printIRQ(os.Stdout, res.IRQ)
		save(res, *out, "irq-")
		cleanup()
		return
	}
	// The one-JVM modes: each workload once, its pairs of windows, into
	// *dst; then the results are saved and the harness exits.
	oneJVM := func(mode, title string, pairs int, win time.Duration, dst *[]toggleResult, run func(workload) toggleResult) {
		fmt.Fprintf(os.Stderr, "djxbench: %s: %d workloads, %d pairs of %s windows each, variant %s\n", mode, len(ws), pairs, win, vs[0])
		failed := false
		for _, w := range ws {
			r := run(w)
			if r.Err != "" {
				fmt.Fprintf(os.Stderr, "djxbench: %s %s: %s\n", mode, w.Name, r.Err)
				failed = true
			}
			*dst = append(*dst, r)
		}
		res.Seconds = time.Since(res.Started).Seconds()
		printToggle(os.Stdout, title, *dst)
		save(res, *out, mode+"-")
		cleanup()
		if failed {
			os.Exit(1)
		}
		os.Exit(0)
	}
	if *switchN > 0 {
		oneJVM("switch", switchTitle, *switchN, *swWindow, &res.Switch, func(w workload) toggleResult {
			return h.switched(w, *switchN, *swWindow, *warm, vs[0])
		})
	}
	if *toggleN > 0 {
		oneJVM("toggle", toggleTitle, *toggleN, *window, &res.Toggle, func(w workload) toggleResult {
			return h.toggle(w, *toggleN, *window, *warm, vs[0])
		})
	}
	perRound := 0
	for _, m := range ms {
		if profiled(m) {
			perRound += len(vs)
		} else {
			perRound++
		}
	}
	total := *runs * len(ws) * perRound
	fmt.Fprintf(os.Stderr, "djxbench: %d runs (%d rounds × %d workloads × %d: djx-bpf's modes once per variant)\n", total, *runs, len(ws), perRound)
	n := 0
	for round := 1; round <= *runs; round++ {
		for _, w := range ws {
			for _, m := range ms {
				for _, v := range vs {
					if !profiled(m) && v != vs[0] {
						continue // base and JFR take no djx-bpf variant
					}
					vv := v
					if !profiled(m) {
						vv = ""
					}
					n++
					r := h.run(ctx, w, m, vv, round)
					if r.Err != "" {
						fmt.Fprintf(os.Stderr, "djxbench: [%d/%d] %s %s %s round %d: %s\n", n, total, w.Name, m, vv, round, r.Err)
					} else {
						fmt.Fprintf(os.Stderr, "djxbench: [%d/%d] %s %s %s round %d: cost %.3f, peak RSS %d MiB, djx-bpf CPU %.2fs\n", n, total, w.Name, m, vv, round, r.Cost, r.HWMKiB>>10, r.DjxCPU)
					}
					res.Runs = append(res.Runs, r)
				}
			}
		}
	}
	res.Seconds = time.Since(res.Started).Seconds()
	res.Summaries = summarize(res.Runs)
	printTable(os.Stdout, res, old)
	save(res, *out, "")
	cleanup()
	for _, r := range res.Runs {
		if r.Err != "" {
			os.Exit(1)
		}
	}
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

func variantNames() string {
	var n []string
	for k := range variants {
		n = append(n, k)
	}
	sort.Strings(n)
	return strings.Join(n, ", ")
}

func findWorkload(name string) (workload, bool) {
	for _, w := range workloads {
		if w.Name == name {
			return w, true
		}
	}
	return workload{}, false
}

// javaArgs is the JVM command line of a workload.
// jfrSettings are the JFR modes: the workload runs with a flight recording
// of these settings from its start, as a user who leaves JFR on has it.
var jfrSettings = map[string]string{"jfr": "profile", "jfr-default": "default"}

// profiled reports whether djx-bpf profiles the runs of mode m.
func profiled(m string) bool { return m == "attach" || m == "launch" }

func jfrFile(report string) string { return strings.TrimSuffix(report, ".json") + ".jfr" }

// jvmArgv is the gated JVM's command line in mode (base, attach or a JFR
// mode).
func (h *harness) jvmArgv(w workload, mode, report string) []string {
	a := h.javaArgs(w, true)
	if s, ok := jfrSettings[mode]; ok {
		a = slices.Insert(a, 1, "-XX:StartFlightRecording=settings="+s+",filename="+jfrFile(report))
	}
	return a
}

func (h *harness) javaArgs(w workload, gate bool) []string {
	a := []string{h.java}
	a = append(a, w.JVMFlags...)
	a = append(a, h.jvmFlags...)
	a = append(a, "-cp", h.cp, "Bench")
	if gate {
		a = append(a, "--gate")
	}
	a = append(a, w.Class)
	return append(a, w.Args...)
}

// start starts argv as the leader of a new process group that dies with
// the harness.
func start(argv []string, stdin io.Reader, stdout, stderr io.Writer) (*exec.Cmd, error) {
	c := exec.Command(argv[0], argv[1:]...)
	c.Stdin, c.Stdout, c.Stderr = stdin, stdout, stderr
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := c.Start(); err != nil {
		return nil, err
	}
	started.add(c.Process.Pid)
	return c, nil
}

// lines forwards the lines of r to a channel.
func lines(r io.Reader) <-chan string {
	ch := make(chan string, 1024)
	go func() {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 1<<16), 1<<20)
		for sc.Scan() {
			ch <- sc.Text()
		}
		close(ch)
	}()
	return ch
}

// waitFor reads lines until one starts with prefix; the lines it read are
// appended to *seen.
func waitFor(ch <-chan string, prefix string, timeout time.Duration, seen *[]string) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		select {
		case l, ok := <-ch:
			if !ok {
				return fmt.Errorf("ended before %q", prefix)
			}
			*seen = append(*seen, l)
			if strings.Contains(l, prefix) {
				return nil
			}
		case <-t.C:
			return fmt.Errorf("no %q after %s", prefix, timeout)
		}
	}
}

// waitCmd waits for c with a deadline; past it the group is killed.
func waitCmd(c *exec.Cmd, deadline time.Time) error {
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	pid := c.Process.Pid
	defer started.done(pid)
	select {
	case err := <-done:
		return err
	case <-t.C:
		syscall.Kill(-pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			syscall.Kill(-pid, syscall.SIGKILL)
			<-done
		}
		return errors.New("timed out")
	}
}

func (h *harness) run(ctx context.Context, w workload, mode, variant string, round int) run {
	r := run{Workload: w.Name, Mode: mode, Variant: variant, Round: round}
	if err := h.run1(ctx, w, &r); err != nil {
		r.Err = err.Error()
	}
	if h.verbose {
		b, _ := json.Marshal(r)
		fmt.Fprintf(os.Stderr, "%s\n", b)
	}
	return r
}

func (h *harness) djxArgs(variant, report string) []string {
	a := []string{h.bin, "profile", "--format", "json", "-o", report}
	a = append(a, variants[variant]...)
	return append(a, h.djxFlags...)
}

func (h *harness) run1(ctx context.Context, w workload, r *run) error {
	deadline := time.Now().Add(h.timeout)
	report := filepath.Join(h.tmp, fmt.Sprintf("%s-%s-%s-%d.json", w.Name, r.Mode, r.Variant, r.Round))
	var out []string
	var djxErr strings.Builder
	_, jfr := jfrSettings[r.Mode]
	switch {
	case r.Mode == "base" || r.Mode == "attach" || jfr:
		// A file, not an io.Reader: exec.Cmd.Wait would wait for the copy
		// of an io.Reader to end.
		stdinR, stdinW, err := os.Pipe()
		if err != nil {
			return err
		}
		defer stdinW.Close()
		pr, pw := io.Pipe()
		var jerr strings.Builder
		jvm, err := start(h.jvmArgv(w, r.Mode, report), stdinR, pw, &jerr)
		stdinR.Close()
		if err != nil {
			return fmt.Errorf("start java: %w", err)
		}
		ch := lines(pr)
		if err := waitFor(ch, "gate", 60*time.Second, &out); err != nil {
			syscall.Kill(-jvm.Process.Pid, syscall.SIGKILL)
			waitCmd(jvm, deadline)
			return fmt.Errorf("java: %v: %s", err, jerr.String())
		}
		var djx *exec.Cmd
		var djxStart time.Time
		if r.Mode == "attach" {
			a := h.djxArgs(r.Variant, report)
			a = append(a, "--pid", strconv.Itoa(jvm.Process.Pid))
			er, ew := io.Pipe()
			djxStart = time.Now()
			djx, err = start(a, nil, io.Discard, ew)
			if err != nil {
				syscall.Kill(-jvm.Process.Pid, syscall.SIGKILL)
				waitCmd(jvm, deadline)
				return fmt.Errorf("start djx-bpf: %w", err)
			}
			ech := lines(er)
			var seen []string
			if err := waitFor(ech, "profiling pid", 60*time.Second, &seen); err != nil {
				syscall.Kill(-jvm.Process.Pid, syscall.SIGKILL)
				waitCmd(jvm, deadline)
				waitCmd(djx, time.Now().Add(10*time.Second))
				return fmt.Errorf("djx-bpf did not start profiling: %v: %s", err, strings.Join(seen, "; "))
			}
			go func() {
				for l := range ech {
					djxErr.WriteString(l + "\n")
				}
			}()
			defer ew.Close()
		}
		fmt.Fprintln(stdinW, "go")
		done := make(chan struct{})
		go func() {
			for l := range ch {
				out = append(out, l)
			}
			close(done)
		}()
		jwerr := waitCmd(jvm, deadline)
		pw.Close()
		<-done
		if jwerr != nil {
			if djx != nil {
				waitCmd(djx, time.Now().Add(30*time.Second))
			}
			return fmt.Errorf("java: %v: %s", jwerr, tail(jerr.String()))
		}
		if djx != nil {
			if err := waitCmd(djx, deadline); err != nil {
				return fmt.Errorf("djx-bpf: %v: %s", err, tail(djxErr.String()))
			}
			r.DjxWall = time.Since(djxStart).Seconds()
			ru := djx.ProcessState.SysUsage().(*syscall.Rusage)
			r.DjxCPU = tv(ru.Utime) + tv(ru.Stime)
			r.DjxRSS = ru.Maxrss
		}
	case r.Mode == "launch":
		a := h.djxArgs(r.Variant, report)
		a = append(a, "--quiet", "--")
		a = append(a, h.javaArgs(w, false)...)
		pr, pw := io.Pipe()
		var derr strings.Builder
		t0 := time.Now()
		djx, err := start(a, nil, pw, &derr)
		if err != nil {
			return fmt.Errorf("start djx-bpf: %w", err)
		}
		ch := lines(pr)
		done := make(chan struct{})
		go func() {
			for l := range ch {
				out = append(out, l)
			}
			close(done)
		}()
		werr := waitCmd(djx, deadline)
		pw.Close()
		<-done
		if werr != nil {
			return fmt.Errorf("djx-bpf: %v: %s", werr, tail(derr.String()))
		}
		r.DjxWall = time.Since(t0).Seconds()
		ru := djx.ProcessState.SysUsage().(*syscall.Rusage)
		// The rusage of a waited process includes its waited children:
		// djx-bpf's own CPU is what the JVM did not use.
		r.DjxCPU = tv(ru.Utime) + tv(ru.Stime) // JVM's part subtracted below
		djxErr.WriteString(derr.String())
	}
	if err := parseOutput(out, w, r); err != nil {
		return err
	}
	if r.Mode == "launch" {
		r.DjxCPU = max(0, r.DjxCPU-r.JVMCPU)
	}
	if jfr {
		os.Remove(jfrFile(report))
	}
	if r.Mode == "attach" || r.Mode == "launch" {
		var rep struct {
			Stats map[string]any `json:"stats"`
			Notes []string       `json:"notes"`
		}
		if err := readJSON(report, &rep); err != nil {
			return fmt.Errorf("djx-bpf report: %v: %s", err, tail(djxErr.String()))
		}
		r.Stats, r.Notes = rep.Stats, rep.Notes
		os.Remove(report)
	}
	return ctx.Err()
}

func tv(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }

func tail(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 600 {
		s = "..." + s[len(s)-600:]
	}
	return s
}

// parseOutput reads the workload's "ops" lines and the Bench wrapper's
// closing line.
func parseOutput(out []string, w workload, r *run) error {
	var ops []float64
	found := false
	for _, l := range out {
		f := strings.Fields(l)
		if len(f) == 2 && f[0] == "ops" {
			v, _ := strconv.ParseFloat(f[1], 64)
			ops = append(ops, v)
		}
		if len(f) > 1 && f[0] == "bench" {
			found = true
			for _, kv := range f[1:] {
				k, v, _ := strings.Cut(kv, "=")
				n, _ := strconv.ParseInt(v, 10, 64)
				switch k {
				case "elapsed_ns":
					r.Elapsed = float64(n) / 1e9
				case "vmhwm_kb":
					r.HWMKiB = n
				case "cpu_ms":
					r.JVMCPU = float64(n) / 1e3
				case "gc_ms":
					r.GCMs = float64(n)
				case "gc_n":
					r.GCCount = n
				}
			}
		}
	}
	if !found {
		return fmt.Errorf("the JVM printed no bench line (output: %s)", tail(strings.Join(out, "\n")))
	}
	r.Cost = r.Elapsed
	if w.FixedTime {
		// Per-second counts from the third second on: the first two hold
		// JIT warm-up (and, in attach mode, nothing the profile changes).
		if len(ops) < 4 {
			return fmt.Errorf("only %d ops lines", len(ops))
		}
		s := 0.0
		for _, v := range ops[2:] {
			s += v
		}
		r.OpsPerS = s / float64(len(ops)-2)
		r.Cost = 1e6 / r.OpsPerS // µs per million ops
	}
	return nil
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

func envInt(k string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(k)); err == nil {
		return v
	}
	return def
}

func envStr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func fatal(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "djxbench: "+format+"\n", a...)
	os.Exit(2)
}
