package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The walkcost subcommand measures what the attach-mode census (the heap
// walk from outside plus the agent's roots pass) costs a service whose
// data was built at start-up (testdata/java/ServiceTruth.java), per JDK,
// collector and heap size: the JVM's own -Xlog:safepoint pauses while
// djx-bpf is attached, djx-bpf's CPU and peak RSS, and the service's
// slowdown during the walk and the whole attach, beside what starting JFR
// costs the same JVM.

const walkcostAbout = `For each JDK, collector and size, starts ServiceTruth (its data built at
start-up, then served) with -Xlog:safepoint, and on that one JVM alternates
baseline windows with a djx-bpf attach at the defaults (--census auto: the
heap walk) and with JFR recordings (settings profile and default), started
and stopped through the attach API. Slowdown = baseline ops/s over the
ops/s of the window, minus 1, with the baseline the mean of the windows
before and after; the pause is the longest safepoint whose VM operation is
not a collection's while djx-bpf ran (docs/benchmarks.md).`

// wcSize is one heap size: ServiceTruth's list entries are about its
// objects; the tree and the table stay the same.
type wcSize struct {
	Name     string
	Xmx      string
	List     int
	Duration time.Duration // djx-bpf's --duration: the walk and some sampling
}

var wcSizes = []wcSize{
	{"256m-1M", "256m", 1_000_000, 8 * time.Second},
	{"3g-24M", "3g", 24_000_000, 10 * time.Second},
	{"8g-50M", "8g", 50_000_000, 15 * time.Second},
}

const (
	wcTree     = 200_000
	wcTableMiB = 64
	wcSettle   = 1500 * time.Millisecond // after a window, before the next baseline
	wcJFRStart = 3 * time.Second         // JFR's start: the seconds after JFR.start
)

// wcConditions is what runs in a window: djx-bpf at the defaults,
// djx-bpf without the census (what the attach costs without the walk),
// or a JFR recording.
var wcConditions = []string{"djx", "djx-off", "jfr-profile", "jfr-default"}

type walkcostOpts struct {
	bin, src, jdks, gcs, sizes, out, tag, commit, show string
	reps                                               int
	quiet                                              float64
	base, warm, jfrWin                                 time.Duration
}

// wcJDK is a JDK to run: its home, a short name and ServiceTruth's
// classes compiled by its javac.
type wcJDK struct {
	Home, Name, Version, Classes string
}

// wcResult is the results file of walkcost.
type wcResult struct {
	Started  time.Time  `json:"started"`
	Host     string     `json:"host"`
	Kernel   string     `json:"kernel"`
	CPUs     int        `json:"cpus"`
	Commit   string     `json:"commit"`
	Bin      string     `json:"djx_bpf"`
	Notes    []string   `json:"notes,omitempty"`
	Configs  []wcConfig `json:"configs"`
	Seconds  float64    `json:"total_s"`
	Settings struct {
		BaseS    float64 `json:"baseline_window_s"`
		WarmS    float64 `json:"warm_s"`
		JFRS     float64 `json:"jfr_window_s"`
		JFRStart float64 `json:"jfr_start_s"`
		Reps     int     `json:"reps"`
	} `json:"settings"`
}

// wcConfig is one JVM: a JDK, a collector and a size, and its windows.
type wcConfig struct {
	JDK       string    `json:"jdk"`
	Java      string    `json:"java"`
	GC        string    `json:"gc"`
	Size      string    `json:"size"`
	Xmx       string    `json:"xmx"`
	List      int       `json:"list_entries"`
	ReadyS    float64   `json:"ready_s"` // start to "ready": the data built
	Baselines []float64 `json:"baseline_ops_per_s"`
	// BaseOther are the CPUs other processes used in each baseline window.
	BaseOther []float64 `json:"baseline_other_cpus"`
	// BaseSafepoint is the longest non-GC safepoint in the baseline
	// windows: what the JVM does on its own.
	BaseSafepoint wcSafepoint `json:"baseline_safepoint"`
	Attaches      []wcAttach  `json:"attaches"`
	JFR           []wcJFR     `json:"jfr"`
	Err           string      `json:"error,omitempty"`
}

// wcSafepoint is the longest non-GC safepoint in a window, how many
// non-GC and GC safepoints it held.
type wcSafepoint struct {
	MaxMs float64 `json:"max_ms"`
	Name  string  `json:"name,omitempty"`
	Count int     `json:"count"`
	GCs   int     `json:"gc_count"`
}

// wcWindow is what every window has: when it ran in the JVM's sequence,
// its baseline and its slowdowns.
type wcWindow struct {
	Order int     `json:"order"` // 1-based place among the JVM's windows
	Base  float64 `json:"baseline_ops_per_s"`
	OpsS  float64 `json:"ops_per_s"` // over the whole window
	// SlowPct is the whole window's slowdown, LostS the work seconds lost
	// in it at the baseline rate.
	SlowPct   float64     `json:"slowdown_pct"`
	LostS     float64     `json:"lost_s"`
	Safepoint wcSafepoint `json:"safepoint"`
	// OtherCPU is the CPUs that processes other than the JVM and djx-bpf
	// used on average in the window (the host is shared), BaseOther the
	// more of its two baselines': a busy window's slowdown is noise.
	OtherCPU  float64 `json:"other_cpus"`
	BaseOther float64 `json:"baseline_other_cpus"`
	// OpsPerCPU is the work per second of the JVM's CPU time (all its
	// threads, the agent's and the BPF program's work in them included),
	// CPUSlowPct its slowdown against the baselines': other processes'
	// contention for the CPUs cancels out of it; waits at safepoints and
	// djx-bpf's own CPU do not show in it.
	OpsPerCPU  float64 `json:"ops_per_jvm_cpu_s"`
	CPUSlowPct float64 `json:"cpu_slowdown_pct"`
	m0, m1     mark
	Err        string `json:"error,omitempty"`
	from, to   time.Time
}

// wcAttach is one djx-bpf attach.
type wcAttach struct {
	wcWindow
	Census string  `json:"census"` // auto (the defaults) or off
	WallS  float64 `json:"djx_wall_s"`
	CPUS   float64 `json:"djx_cpu_s"`
	RSSMiB float64 `json:"djx_maxrss_mib"`
	// The walk's window from djx-bpf's progress lines, and the slowdown
	// over the ops lines around it (at least the walk, up to a second more
	// each side).
	WalkS        float64 `json:"walk_s"`
	WalkSpanS    float64 `json:"walk_span_s"`
	WalkSlowPct  float64 `json:"walk_slowdown_pct"`
	WalkLostS    float64 `json:"walk_lost_s"`
	WalkMs       float64 `json:"walk_ms"`
	WalkObjects  float64 `json:"walk_objects"`
	WalkBytes    float64 `json:"walk_bytes"`
	WalkOverlap  bool    `json:"walk_overlapped"`
	RootsPauseMs float64 `json:"roots_pause_ms"`
	CensusMs     float64 `json:"census_pause_ms"`
	InHeap       float64 `json:"in_heap"`
	AttrPct      float64 `json:"attributed_pct"`
	HeldPct      float64 `json:"held_pct"` // in-heap samples in rows named by a holder chain
	// The JVM's minor page faults per second in the attach and in the
	// baseline window before it (a fork's copy-on-write would show here).
	MinfltPerS     float64  `json:"jvm_minflt_per_s"`
	BaseMinfltPerS float64  `json:"baseline_minflt_per_s"`
	Notes          []string `json:"notes,omitempty"`
	walkFrom       time.Time
}

// wcJFR is one JFR recording started and stopped on the JVM.
type wcJFR struct {
	wcWindow
	Settings string `json:"settings"`
	// StartSlowPct is the slowdown over the ops lines around the first
	// wcJFRStart after JFR.start.
	StartSlowPct float64 `json:"start_slowdown_pct"`
	StartSpanS   float64 `json:"start_span_s"`
}

func cmdWalkcost(args []string) int {
	var o walkcostOpts
	fs := newFlagSet("walkcost", "", walkcostAbout)
	o.register(fs)
	if code, ok := parse(fs, args, 0); !ok {
		return code
	}
	if o.show != "" {
		var res wcResult
		if err := readJSON(o.show, &res); err != nil {
			fatal("%v", err)
		}
		printWalkcost(os.Stdout, &res, o.quiet)
		return 0
	}
	return o.run()
}

func (o *walkcostOpts) register(fs *flag.FlagSet) {
	fs.StringVar(&o.bin, "bin", "build/djx-bpf", "djx-bpf binary")
	fs.StringVar(&o.src, "src", "testdata/java/ServiceTruth.java", "ServiceTruth's source, compiled by each JDK")
	fs.StringVar(&o.jdks, "jdks", "/usr/lib/jvm/java-17-openjdk-amd64,/usr/lib/jvm/temurin-25-jdk-amd64", "JAVA_HOMEs, comma-separated")
	fs.StringVar(&o.gcs, "gcs", "Serial,Parallel,G1", "collectors, comma-separated")
	fs.StringVar(&o.sizes, "sizes", "256m-1M,3g-24M,8g-50M", "sizes, comma-separated; each may be JDK:GC:SIZE to run only that combination")
	fs.IntVar(&o.reps, "reps", 2, "windows of each condition per JVM")
	fs.DurationVar(&o.base, "base", 6*time.Second, "baseline window")
	fs.DurationVar(&o.warm, "warm", 5*time.Second, "steady serving after ready, before the first baseline")
	fs.DurationVar(&o.jfrWin, "jfr-window", 8*time.Second, "how long each JFR recording runs")
	fs.StringVar(&o.out, "o", "", "JSON results file (default bench/results/walkcost-TAG.json)")
	fs.StringVar(&o.tag, "tag", "", "the results file's tag (default: the time)")
	fs.StringVar(&o.commit, "commit", "", "the commit djx-bpf was built from (default: git rev-parse HEAD)")
	fs.StringVar(&o.show, "show", "", "print the table of a results file and exit")
	fs.Float64Var(&o.quiet, "quiet-cpus", 0.3, "the table's slowdowns leave out windows, or windows whose baselines, had other processes use more CPUs than this")
}

// wcPlan is one configuration to run.
type wcPlan struct {
	jdk  *wcJDK
	gc   string
	size wcSize
}

// plan is every (JDK, GC, size) the flags name, sizes outermost so that
// the small heaps are done first.
func (o *walkcostOpts) plan(jdks []*wcJDK) ([]wcPlan, error) {
	var out []wcPlan
	for _, s := range strings.Split(o.sizes, ",") {
		parts := strings.Split(strings.TrimSpace(s), ":")
		name := parts[len(parts)-1]
		var size *wcSize
		for i := range wcSizes {
			if wcSizes[i].Name == name {
				size = &wcSizes[i]
			}
		}
		if size == nil {
			return nil, fmt.Errorf("unknown size %q (256m-1M, 3g-24M, 8g-50M)", name)
		}
		for _, j := range jdks {
			for _, gc := range strings.Split(o.gcs, ",") {
				if len(parts) == 3 && (!strings.Contains(j.Name, parts[0]) || parts[1] != gc) {
					continue
				}
				out = append(out, wcPlan{j, gc, *size})
			}
		}
	}
	return out, nil
}

func (o *walkcostOpts) run() int {
	if os.Geteuid() != 0 {
		fatal("must run as root: djx-bpf loads BPF programs and attaches to JVMs")
	}
	if _, err := os.Stat(o.bin); err != nil {
		fatal("djx-bpf binary: %v", err)
	}
	tmp, err := os.MkdirTemp("", "djxbench-walkcost-")
	if err != nil {
		fatal("%v", err)
	}
	stopOnSignal(tmp)
	defer os.RemoveAll(tmp)
	var jdks []*wcJDK
	for _, home := range strings.Split(o.jdks, ",") {
		j, err := compileTruth(strings.TrimSpace(home), o.src, tmp)
		if err != nil {
			fatal("%v", err)
		}
		jdks = append(jdks, j)
	}
	plans, err := o.plan(jdks)
	if err != nil {
		fatal("%v", err)
	}
	res := o.newResult()
	failed := false
	for i, p := range plans {
		fmt.Fprintf(os.Stderr, "djxbench: walkcost %d/%d: %s %s %s\n", i+1, len(plans), p.jdk.Name, p.gc, p.size.Name)
		c := o.config(p, tmp)
		if c.Err != "" {
			fmt.Fprintf(os.Stderr, "djxbench: walkcost %s %s %s: %s\n", p.jdk.Name, p.gc, p.size.Name, c.Err)
			failed = true
		}
		res.Configs = append(res.Configs, c)
		res.Seconds = time.Since(res.Started).Seconds()
		o.save(res) // after each config: a long matrix keeps what it measured
	}
	printWalkcost(os.Stdout, res, o.quiet)
	if failed {
		return 1
	}
	return 0
}

// stopOnSignal ends the process groups walkcost started on SIGINT or
// SIGTERM, removes tmp and exits.
func stopOnSignal(tmp string) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		fmt.Fprintln(os.Stderr, "djxbench: interrupted: stopping the processes it started")
		started.killAll()
		os.RemoveAll(tmp)
		os.Exit(130)
	}()
}

func (o *walkcostOpts) newResult() *wcResult {
	res := &wcResult{Started: time.Now(), CPUs: runtime.NumCPU(), Bin: o.bin, Commit: o.commit}
	res.Host, _ = os.Hostname()
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		res.Kernel = strings.TrimSpace(string(b))
	}
	if res.Commit == "" {
		if b, err := exec.Command("git", "rev-parse", "HEAD").Output(); err == nil {
			res.Commit = strings.TrimSpace(string(b))
		}
	}
	res.Settings.BaseS, res.Settings.WarmS, res.Settings.JFRS = o.base.Seconds(), o.warm.Seconds(), o.jfrWin.Seconds()
	res.Settings.JFRStart, res.Settings.Reps = wcJFRStart.Seconds(), o.reps
	return res
}

func (o *walkcostOpts) save(res *wcResult) {
	path := o.out
	if path == "" {
		tag := o.tag
		if tag == "" {
			tag = res.Started.Format("20060102-150405")
		}
		path = filepath.Join("bench", "results", "walkcost-"+tag+".json")
	}
	if err := writeJSON(path, res); err != nil {
		fmt.Fprintf(os.Stderr, "djxbench: %v\n", err)
	}
}

// compileTruth compiles ServiceTruth with home's javac into a directory of
// its own under tmp.
func compileTruth(home, src, tmp string) (*wcJDK, error) {
	j := &wcJDK{Home: home, Name: filepath.Base(home)}
	j.Classes = filepath.Join(tmp, "classes-"+j.Name)
	out, err := exec.Command(filepath.Join(home, "bin", "javac"), "-d", j.Classes, src).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("javac of %s: %w: %s", home, err, tail(string(out)))
	}
	if b, err := exec.Command(filepath.Join(home, "bin", "java"), "-version").CombinedOutput(); err == nil {
		j.Version = strings.SplitN(strings.TrimSpace(string(b)), "\n", 2)[0]
	}
	return j, nil
}

// wcJVM is a running ServiceTruth.
type wcJVM struct {
	cmd    *exec.Cmd
	log    *opsLog
	spLog  string
	stderr *tailBuf
	pw     *io.PipeWriter
}

func (j *wcJVM) pid() int { return j.cmd.Process.Pid }

// stop kills the JVM's group (its own, by pid) and waits for it.
func (j *wcJVM) stop() {
	syscall.Kill(-j.pid(), syscall.SIGKILL)
	j.cmd.Wait()
	started.done(j.pid())
	j.pw.Close()
}

// startTruth starts ServiceTruth for p and waits for its "ready".
func startTruth(p wcPlan, tmp string) (*wcJVM, time.Duration, error) {
	j := &wcJVM{spLog: filepath.Join(tmp, fmt.Sprintf("safepoint-%s-%s-%s.log", p.jdk.Name, p.gc, p.size.Name)), stderr: &tailBuf{}}
	os.Remove(j.spLog)
	// timemillis: the log's times on the same clock as the harness's.
	argv := []string{filepath.Join(p.jdk.Home, "bin", "java"), "-Xmx" + p.size.Xmx, "-XX:+Use" + p.gc + "GC",
		"-Xlog:safepoint=info:file=" + j.spLog + ":timemillis", "-cp", p.jdk.Classes, "ServiceTruth",
		strconv.Itoa(p.size.List), strconv.Itoa(wcTree), strconv.Itoa(wcTableMiB), "1000000"}
	pr, pw := io.Pipe()
	j.pw = pw
	t0 := time.Now()
	cmd, err := start(argv, nil, pw, j.stderr)
	if err != nil {
		return nil, 0, fmt.Errorf("start java: %w", err)
	}
	j.cmd = cmd
	ch := lines(pr)
	var seen []string
	if err := waitFor(ch, "ready", 15*time.Minute, &seen); err != nil {
		j.stop()
		return nil, 0, fmt.Errorf("servicetruth: %w: %s %s", err, strings.Join(seen, "; "), j.stderr.String())
	}
	j.log = &opsLog{}
	go j.log.follow(ch)
	return j, time.Since(t0), nil
}

// config runs one JVM: after the warm-up, each condition reps times, in
// an order rotated each round, each window between two baselines.
func (o *walkcostOpts) config(p wcPlan, tmp string) wcConfig {
	c := wcConfig{JDK: p.jdk.Name, Java: p.jdk.Version, GC: p.gc, Size: p.size.Name, Xmx: p.size.Xmx, List: p.size.List}
	jvm, ready, err := startTruth(p, tmp)
	if err != nil {
		c.Err = err.Error()
		return c
	}
	defer jvm.stop()
	c.ReadyS = ready.Seconds()
	time.Sleep(o.warm)
	var bases []window
	prev := o.baseline(jvm, &c, &bases)
	order := 0
	for r := 0; r < o.reps; r++ {
		for k := range wcConditions {
			cond := wcConditions[(k+r)%len(wcConditions)]
			order++
			w := o.window(jvm, cond, order, p, tmp, prev)
			time.Sleep(wcSettle)
			after := o.baseline(jvm, &c, &bases)
			w.finish(jvm.log, prev, after)
			prev = after
			c.add(w)
		}
	}
	jvm.stop()
	sps, err := readSafepoints(jvm.spLog)
	if err != nil {
		c.Err = err.Error()
		return c
	}
	c.setSafepoints(sps, bases)
	return c
}

// window is a baseline window: its span and work rate.
type window struct {
	m0, m1     mark
	from, to   time.Time
	rate       float64
	minfltPerS float64
	otherCPU   float64
}

// baseline measures a baseline window of o.base and records its rate.
func (o *walkcostOpts) baseline(j *wcJVM, c *wcConfig, bases *[]window) window {
	m0 := markNow(j.pid())
	time.Sleep(o.base)
	m1 := markNow(j.pid())
	w := window{m0: m0, m1: m1, from: m0.t, to: m1.t, minfltPerS: faultsPerS(m0, m1), otherCPU: otherCPU(m0, m1, 0)}
	w.rate, _ = j.log.rate(w.from, w.to)
	c.Baselines, c.BaseOther = append(c.Baselines, w.rate), append(c.BaseOther, w.otherCPU)
	*bases = append(*bases, w)
	return w
}

// measured is a djx-bpf or JFR window waiting for its baseline.
type measured struct {
	attach *wcAttach
	jfr    *wcJFR
}

// finish gives the window the baselines before and after it.
func (m measured) finish(l *opsLog, before, after window) {
	base := (before.rate + after.rate) / 2
	var w *wcWindow
	if m.attach != nil {
		w = &m.attach.wcWindow
		m.attach.finish(l, base)
	} else {
		w = &m.jfr.wcWindow
		m.jfr.finish(l, base)
	}
	w.BaseOther = max(before.otherCPU, after.otherCPU)
	b0, b1, on := perCPU(l, before.m0, before.m1), perCPU(l, after.m0, after.m1), perCPU(l, w.m0, w.m1)
	if b0 > 0 && b1 > 0 && on > 0 {
		w.OpsPerCPU, w.CPUSlowPct = on, slowdown((b0+b1)/2, on)
	}
}

// perCPU is the work per second of the JVM's CPU time from a to b; 0 if
// the ops lines do not cover them (it waits up to 2 s for one past b).
func perCPU(l *opsLog, a, b mark) float64 {
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if _, ok := l.at(b.t); ok {
			break
		}
	}
	x, ok1 := l.at(a.t)
	y, ok2 := l.at(b.t)
	if !ok1 || !ok2 || b.jvmCPU <= a.jvmCPU {
		return 0
	}
	return (y - x) / (b.jvmCPU - a.jvmCPU)
}

func (c *wcConfig) add(m measured) {
	if m.attach != nil {
		c.Attaches = append(c.Attaches, *m.attach)
	} else {
		c.JFR = append(c.JFR, *m.jfr)
	}
}

// window runs condition cond after the baseline prev.
func (o *walkcostOpts) window(j *wcJVM, cond string, order int, p wcPlan, tmp string, prev window) measured {
	if census, ok := strings.CutPrefix(cond, "djx"); ok {
		census = strings.TrimPrefix(census, "-")
		if census == "" {
			census = "auto"
		}
		report := filepath.Join(tmp, fmt.Sprintf("report-%d.json", order))
		a := o.attachDjx(j, census, report, p.size.Duration, prev)
		a.Order = order
		return measured{attach: &a}
	}
	settings := strings.TrimPrefix(cond, "jfr-")
	f := wcJFR{Settings: settings}
	f.Order = order
	m0 := markNow(j.pid())
	if err := jfrWindow(j.pid(), settings, m0.t.Add(o.jfrWin)); err != nil {
		f.Err = err.Error()
	}
	m1 := markNow(j.pid())
	f.m0, f.m1, f.from, f.to, f.OtherCPU = m0, m1, m0.t, m1.t, otherCPU(m0, m1, 0)
	return measured{jfr: &f}
}

// finish sets the whole window's rate and slowdown against base.
func (w *wcWindow) finish(l *opsLog, base float64) {
	w.Base = base
	if rate, span, ok := l.around(w.from, w.to); ok && rate > 0 {
		w.OpsS, w.SlowPct, w.LostS = rate, slowdown(base, rate), span*(1-rate/base)
	}
}

func (f *wcJFR) finish(l *opsLog, base float64) {
	f.wcWindow.finish(l, base)
	if rate, span, ok := l.around(f.from, f.from.Add(wcJFRStart)); ok && rate > 0 {
		f.StartSlowPct, f.StartSpanS = slowdown(base, rate), span
	}
}

func (a *wcAttach) finish(l *opsLog, base float64) {
	a.wcWindow.finish(l, base)
	if a.WalkS == 0 || a.walkFrom.IsZero() {
		return
	}
	walkFrom := a.walkFrom
	if rate, span, ok := l.around(walkFrom, walkFrom.Add(time.Duration(a.WalkS*float64(time.Second)))); ok && rate > 0 {
		a.WalkSlowPct, a.WalkSpanS, a.WalkLostS = slowdown(base, rate), span, span*(1-rate/base)
	}
}

// slowdown is the time per unit of work at rate over that at base, as a
// percentage above 1: 5 is 5% slower.
func slowdown(base, rate float64) float64 {
	if rate <= 0 || base <= 0 {
		return 0
	}
	return 100 * (base/rate - 1)
}

// around is the work rate between the last ops line at or before from and
// the first at or after to, and that span in seconds: the smallest span
// of whole lines that holds [from, to].
func (l *opsLog) around(from, to time.Time) (rate, span float64, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	first, last := -1, -1
	for i, t := range l.t {
		if !t.After(from) {
			first = i
		}
		if !t.Before(to) && last < 0 {
			last = i
		}
	}
	if first < 0 || last <= first {
		return 0, 0, false
	}
	span = l.t[last].Sub(l.t[first]).Seconds()
	return (l.ops[last] - l.ops[first]) / span, span, true
}

// attachDjx runs djx-bpf attached to j for d at the defaults but census,
// and reads its rusage, its progress lines' times and its report.
func (o *walkcostOpts) attachDjx(j *wcJVM, census, report string, d time.Duration, prev window) wcAttach {
	a := wcAttach{Census: census, BaseMinfltPerS: prev.minfltPerS}
	argv := []string{o.bin, "profile", "--pid", strconv.Itoa(j.pid()), "--duration", d.String(), "--format", "json", "-o", report}
	if census != "auto" {
		argv = append(argv, "--census", census)
	}
	st := &stampedLines{}
	m0 := markNow(j.pid())
	a.from = m0.t
	djx, err := start(argv, nil, io.Discard, st)
	if err != nil {
		a.to, a.Err = time.Now(), fmt.Sprintf("start djx-bpf: %v", err)
		return a
	}
	werr := waitCmd(djx, time.Now().Add(d+3*time.Minute))
	m1 := markNow(j.pid())
	a.m0, a.m1, a.to = m0, m1, m1.t
	a.WallS = a.to.Sub(a.from).Seconds()
	cpu, rss := rusage(djx)
	a.CPUS, a.RSSMiB = cpu, float64(rss)/1024
	a.MinfltPerS, a.OtherCPU = faultsPerS(m0, m1), otherCPU(m0, m1, cpu)
	if werr != nil {
		a.Err = fmt.Sprintf("djx-bpf: %v: %s", werr, tail(st.String()))
	}
	if t0, ok := st.at("walking the heap of pid"); ok {
		a.walkFrom = t0
		if t1, ok := st.at("heap walk of pid"); ok {
			a.WalkS = t1.Sub(t0).Seconds()
		}
	}
	if err := a.readReport(report); err != nil && a.Err == "" {
		a.Err = err.Error()
	}
	if a.WalkS == 0 && !a.walkFrom.IsZero() {
		a.WalkS = a.WalkMs / 1000 // the walk's end was not printed
	}
	return a
}

// wcReport is what walkcost reads of a profile's JSON report.
type wcReport struct {
	Objects []struct {
		Origin  string   `json:"origin"`
		Holder  []string `json:"holder"`
		Samples float64  `json:"samples"`
	} `json:"objects"`
	Stats map[string]any `json:"stats"`
	Notes []string       `json:"notes"`
}

// readReport takes the walk's figures and the held share from a report.
func (a *wcAttach) readReport(path string) error {
	var r wcReport
	if err := readJSON(path, &r); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	s := r.Stats
	a.WalkMs, a.WalkObjects, a.WalkBytes = stat(s, "walk_ms"), stat(s, "walk_objects"), stat(s, "walk_bytes")
	a.WalkOverlap, _ = s["walk_overlapped"].(bool)
	a.RootsPauseMs, a.CensusMs, a.InHeap = stat(s, "roots_pause_ms"), stat(s, "census_pause_ms"), stat(s, "in_heap")
	a.Notes = r.Notes
	a.HeldPct, a.AttrPct = heldPct(&r), 0
	if a.InHeap > 0 {
		a.AttrPct = 100 * stat(s, "attributed") / a.InHeap
	}
	return nil
}

// heldPct is the share of in-heap samples in rows named by a holder chain
// (census objects and data structures with a holder), as report.Object's
// Held says.
func heldPct(r *wcReport) float64 {
	in := stat(r.Stats, "in_heap")
	if in <= 0 {
		return 0
	}
	var held float64
	for _, o := range r.Objects {
		if (o.Origin == "census" || o.Origin == "structure") && len(o.Holder) > 0 {
			held += o.Samples
		}
	}
	return 100 * held / in
}

// stampedLines keeps a process's output lines with the time each arrived.
type stampedLines struct {
	mu      sync.Mutex
	partial []byte
	lines   []string
	times   []time.Time
}

func (s *stampedLines) Write(b []byte) (int, error) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.partial = append(s.partial, b...)
	for {
		i := strings.IndexByte(string(s.partial), '\n')
		if i < 0 {
			return len(b), nil
		}
		s.lines, s.times = append(s.lines, string(s.partial[:i])), append(s.times, now)
		s.partial = s.partial[i+1:]
	}
}

// at is when the first line holding sub arrived.
func (s *stampedLines) at(sub string) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, l := range s.lines {
		if strings.Contains(l, sub) {
			return s.times[i], true
		}
	}
	return time.Time{}, false
}

func (s *stampedLines) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.lines, "\n") + string(s.partial)
}

// tailBuf keeps the last 4 KiB written to it (a JVM's stderr).
type tailBuf struct {
	mu sync.Mutex
	b  []byte
}

func (t *tailBuf) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, b...)
	if len(t.b) > 4096 {
		t.b = t.b[len(t.b)-4096:]
	}
	return len(b), nil
}

func (t *tailBuf) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// mark is what a window's edges read: the time, the host's busy CPU
// seconds, and the JVM's CPU seconds and minor page faults.
type mark struct {
	t            time.Time
	busy, jvmCPU float64
	minflt       uint64
}

func markNow(pid int) mark {
	m := mark{t: time.Now()}
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		m.busy = parseBusy(string(b))
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		m.minflt, m.jvmCPU = parseProcStat(string(b))
	}
	return m
}

// faultsPerS is the JVM's minor faults per second from a to b.
func faultsPerS(a, b mark) float64 {
	if wall := b.t.Sub(a.t).Seconds(); wall > 0 && b.minflt >= a.minflt {
		return float64(b.minflt-a.minflt) / wall
	}
	return 0
}

// otherCPU is the CPUs busy from a to b, on average, with neither the JVM
// nor own (djx-bpf's CPU seconds there).
func otherCPU(a, b mark, own float64) float64 {
	wall := b.t.Sub(a.t).Seconds()
	if wall <= 0 || a.busy == 0 || b.busy == 0 {
		return 0
	}
	return max(0, (b.busy-a.busy)-(b.jvmCPU-a.jvmCPU)-own) / wall
}

// clockTicks is USER_HZ, the unit of /proc's CPU times.
const clockTicks = 100

// parseBusy is the busy CPU seconds of /proc/stat's "cpu" line: all but
// idle and iowait (guest time is inside user).
func parseBusy(stat string) float64 {
	line, _, _ := strings.Cut(stat, "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0
	}
	var busy float64
	for i, v := range f[1:9] {
		if i == 3 || i == 4 {
			continue // idle, iowait
		}
		n, _ := strconv.ParseFloat(v, 64)
		busy += n
	}
	return busy / clockTicks
}

// parseProcStat reads minflt and utime+stime (seconds) from a
// /proc/PID/stat line; the command name in parentheses may hold spaces, so
// fields count from its closing one.
func parseProcStat(stat string) (minflt uint64, cpu float64) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, 0
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 13 {
		return 0, 0
	}
	minflt, _ = strconv.ParseUint(f[7], 10, 64)
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return minflt, (ut + st) / clockTicks
}

// safepoint is one line of -Xlog:safepoint with the timemillis decorator.
type safepoint struct {
	at      time.Time // when it was logged: its end
	name    string    // the VM operation
	totalMs float64
}

// safepointRe matches JDK 17's and 25's safepoint lines:
// [1796205012551ms] Safepoint "SetNotifyJvmtiEventsMode", Time since last: ..., Total: 626334 ns, ...
var safepointRe = regexp.MustCompile(`^\[(\d+)ms\].*Safepoint "([^"]+)".* Total: (\d+) ns`)

// parseSafepoints reads a safepoint log; lines of other forms are skipped.
func parseSafepoints(r io.Reader) ([]safepoint, error) {
	var out []safepoint
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		m := safepointRe.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		ms, err1 := strconv.ParseInt(m[1], 10, 64)
		ns, err2 := strconv.ParseInt(m[3], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		out = append(out, safepoint{at: time.UnixMilli(ms), name: m[2], totalMs: float64(ns) / 1e6})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("safepoint log: %w", err)
	}
	return out, nil
}

func readSafepoints(path string) ([]safepoint, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("safepoint log: %w", err)
	}
	defer f.Close()
	return parseSafepoints(f)
}

// gcOperation says a VM operation is a collector's: HotSpot names them
// *Collect* (G1CollectForAllocation, GenCollectFull,
// SerialCollectForAllocation), *GC* (ParallelGCFailedAllocation) or G1*
// (G1PauseRemark, G1PauseCleanup, G1TryInitiateConcMark).
func gcOperation(name string) bool {
	return strings.Contains(name, "Collect") || strings.Contains(name, "GC") || strings.HasPrefix(name, "G1")
}

// slowest is the longest non-GC safepoint logged in [from, to], with the
// counts of non-GC and GC safepoints there. A line is logged as its
// safepoint ends, so to takes in one more second.
func slowest(sps []safepoint, from, to time.Time) wcSafepoint {
	var w wcSafepoint
	for _, sp := range sps {
		if sp.at.Before(from) || sp.at.After(to) {
			continue
		}
		if gcOperation(sp.name) {
			w.GCs++
			continue
		}
		w.Count++
		if sp.totalMs > w.MaxMs {
			w.MaxMs, w.Name = sp.totalMs, sp.name
		}
	}
	return w
}

// setSafepoints gives each window, and the baselines together, their
// safepoints.
func (c *wcConfig) setSafepoints(sps []safepoint, bases []window) {
	for _, b := range bases {
		w := slowest(sps, b.from, b.to)
		if w.MaxMs > c.BaseSafepoint.MaxMs {
			c.BaseSafepoint.MaxMs, c.BaseSafepoint.Name = w.MaxMs, w.Name
		}
		c.BaseSafepoint.Count += w.Count
		c.BaseSafepoint.GCs += w.GCs
	}
	for i := range c.Attaches {
		a := &c.Attaches[i]
		a.Safepoint = slowest(sps, a.from, a.to.Add(time.Second))
	}
	for i := range c.JFR {
		f := &c.JFR[i]
		f.Safepoint = slowest(sps, f.from, f.to.Add(time.Second))
	}
}

// rng formats the spread of the values got picks from xs as "min–max"
// (one value alone), with format f.
func rng[T any](xs []T, f string, get func(T) float64) string {
	var v []float64
	for _, x := range xs {
		v = append(v, get(x))
	}
	if len(v) == 0 {
		return "-"
	}
	s := spreadOf(v)
	if fmt.Sprintf(f, s.Min) == fmt.Sprintf(f, s.Max) {
		return fmt.Sprintf(f, s.Min)
	}
	return fmt.Sprintf(f+"–"+f, s.Min, s.Max)
}

// jfrOf are the recordings of settings.
func jfrOf(c wcConfig, settings string) []wcJFR {
	var out []wcJFR
	for _, f := range c.JFR {
		if f.Settings == settings && f.Err == "" {
			out = append(out, f)
		}
	}
	return out
}

// quietOf are the windows of xs where, and in whose baselines, other
// processes used at most thr CPUs.
func quietOf[T any](xs []T, win func(T) wcWindow, thr float64) []T {
	var out []T
	for _, x := range xs {
		if w := win(x); w.OtherCPU <= thr && w.BaseOther <= thr {
			out = append(out, x)
		}
	}
	return out
}

func attachWindow(a wcAttach) wcWindow { return a.wcWindow }
func jfrWindowOf(j wcJFR) wcWindow     { return j.wcWindow }

// attachesOf are the attaches with census (auto or off).
func attachesOf(c wcConfig, census string) []wcAttach {
	var out []wcAttach
	for _, a := range c.Attaches {
		if a.Census == census && a.Err == "" {
			out = append(out, a)
		}
	}
	return out
}

const walkcostTitle = `walkcost: ServiceTruth per JDK, GC and size; ranges over the windows (min–max).
pause: longest non-GC safepoint while djx-bpf ran (-Xlog:safepoint) / the roots pass (roots_pause_ms).
slow %: baseline ops/s over the window's, minus 1; lost s: work seconds lost at the baseline rate;
(/CPU): the same per second of the JVM's CPU time, over all windows.
walk: over the ops lines around the walk (once a second); attach: djx-bpf's whole run at the defaults;
off: the same with --census off; JFR: the first 3 s after JFR.start (start), and start to stop (all).
Slowdowns are over the quiet windows (other processes' CPUs at most -quiet-cpus): kept/all`

func printWalkcost(w io.Writer, r *wcResult, quiet float64) {
	fmt.Fprintln(w, walkcostTitle)
	fmt.Fprintf(w, "commit %s, %d CPUs, %.0f s, quiet: other processes at most %.2f CPUs\n", r.Commit, r.CPUs, r.Seconds, quiet)
	fmt.Fprintf(w, "%-24s %5s %-11s %-10s %-8s %-6s %-13s %-8s %-9s %-16s %-19s %-19s %-19s %-19s %-5s\n",
		"config", "ready", "pause ms", "roots ms", "walk s", "objs M", "CPU s (off)", "RSS MiB", "held %", "walk slow% lost", "attach % (/CPU)", "off % (/CPU)", "JFR prof start|all", "JFR def start|all", "kept")
	for _, c := range r.Configs {
		printConfig(w, c, quiet)
	}
}

// jdkNumber is the feature release in a JDK's directory name.
var jdkNumber = regexp.MustCompile(`\d+`)

// printConfig prints one configuration's row, and its errors under it.
func printConfig(w io.Writer, c wcConfig, quiet float64) {
	name := fmt.Sprintf("JDK %s %s %s", jdkNumber.FindString(c.JDK), c.GC, c.Size)
	if c.Err != "" && len(c.Attaches) == 0 {
		fmt.Fprintf(w, "%-24s error: %s\n", name, c.Err)
		return
	}
	as, off := attachesOf(c, "auto"), attachesOf(c, "off")
	qa, qo := quietOf(as, attachWindow, quiet), quietOf(off, attachWindow, quiet)
	qp, qd := quietOf(jfrOf(c, "profile"), jfrWindowOf, quiet), quietOf(jfrOf(c, "default"), jfrWindowOf, quiet)
	kept := fmt.Sprintf("%d/%d", len(qa)+len(qo)+len(qp)+len(qd), len(c.Attaches)+len(c.JFR))
	pct := func(xs []wcAttach, slow, lost func(wcAttach) float64) string {
		return rng(xs, "%.0f", slow) + " " + rng(xs, "%.2f", lost)
	}
	// The wall slowdown of the quiet windows, and per JVM CPU second of all.
	both := func(q, all []wcAttach) string {
		return rng(q, "%.0f", func(a wcAttach) float64 { return a.SlowPct }) + " (" + rng(all, "%.0f", func(a wcAttach) float64 { return a.CPUSlowPct }) + ")"
	}
	jfr := func(q, all []wcJFR) string {
		return rng(q, "%.0f", func(j wcJFR) float64 { return j.StartSlowPct }) + "|" + rng(q, "%.0f", func(j wcJFR) float64 { return j.SlowPct }) +
			" (" + rng(all, "%.0f", func(j wcJFR) float64 { return j.CPUSlowPct }) + ")"
	}
	fmt.Fprintf(w, "%-24s %4.0fs %-11s %-10s %-8s %-6s %-13s %-8s %-9s %-16s %-19s %-19s %-19s %-19s %-5s\n", name, c.ReadyS,
		rng(as, "%.1f", func(a wcAttach) float64 { return a.Safepoint.MaxMs }),
		rng(as, "%.1f", func(a wcAttach) float64 { return a.RootsPauseMs }),
		rng(as, "%.1f", func(a wcAttach) float64 { return a.WalkS }),
		rng(as, "%.1f", func(a wcAttach) float64 { return a.WalkObjects / 1e6 }),
		rng(as, "%.1f", func(a wcAttach) float64 { return a.CPUS })+" ("+rng(off, "%.1f", func(a wcAttach) float64 { return a.CPUS })+")",
		rng(as, "%.0f", func(a wcAttach) float64 { return a.RSSMiB }),
		rng(as, "%.1f", func(a wcAttach) float64 { return a.HeldPct }),
		pct(qa, func(a wcAttach) float64 { return a.WalkSlowPct }, func(a wcAttach) float64 { return a.WalkLostS }),
		both(qa, as), both(qo, off), jfr(qp, jfrOf(c, "profile")), jfr(qd, jfrOf(c, "default")), kept)
	for _, a := range c.Attaches {
		if a.Err != "" {
			fmt.Fprintf(w, "%-24s   attach %d (census %s): %s\n", "", a.Order, a.Census, a.Err)
		}
	}
	for _, f := range c.JFR {
		if f.Err != "" {
			fmt.Fprintf(w, "%-24s   jfr %d (%s): %s\n", "", f.Order, f.Settings, f.Err)
		}
	}
	if c.Err != "" {
		fmt.Fprintf(w, "%-24s   %s\n", "", c.Err)
	}
}
