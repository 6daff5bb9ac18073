package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The one-JVM subcommands, toggle and switch, run each workload once, for
// as long as it takes, and compare its work rate in windows with djx-bpf
// or its sampling on against the windows just before and after, without:
// each JVM is its own control, with the same JIT state, heap and CPU
// placement, so the slow drifts of a shared machine that make separate
// runs differ by ±15–20% cancel out.

// windows are the flags of the one-JVM subcommands.
type windows struct {
	common
	mode    string // toggle or switch
	pairs   int
	win     time.Duration
	warm    time.Duration
	variant string
	jfr     bool // the windows may be JFR's (variant jfr or jfr-default)
}

// parse parses the flags of the one-JVM subcommand mode, whose defaults
// are pairs of windows of win; ok false with the exit status.
func (o *windows) parse(args []string, mode, about string, pairs int, win time.Duration) (code int, ok bool) {
	o.mode = mode
	fs := newFlagSet(mode, "", about)
	o.common.register(fs, mode+"-")
	fs.IntVar(&o.pairs, "pairs", pairs, "pairs of windows per workload")
	fs.DurationVar(&o.win, "window", win, "length of each window")
	fs.DurationVar(&o.warm, "warm", 20*time.Second, "warm-up before the first window")
	fs.StringVar(&o.variant, "variant", envStr("BENCH_VARIANTS", "default"), "djx-bpf settings of the windows: "+o.variantNames()+" (env BENCH_VARIANTS)")
	return parse(fs, args, 0)
}

// variantNames are the variants the windows may take.
func (o *windows) variantNames() string {
	if o.jfr {
		return variantNames() + "; or jfr, jfr-default: JFR (settings profile or default), started and stopped through the attach API"
	}
	return variantNames()
}

// run checks the flags, runs each workload once through measure, prints
// the results under title and saves them where slot says, or in
// bench/results/MODE-TIME.json without -o. It returns the exit status: 1
// if a workload failed.
func (o *windows) run(title string, slot func(*result) *[]toggleResult, measure func(*harness, workload) toggleResult) int {
	mode := o.mode
	ws := o.check()
	if o.pairs < 1 {
		fatal("-pairs %d: at least one pair of windows", o.pairs)
	}
	_, known := variants[o.variant]
	if _, jfr := jfrSettings[o.variant]; !known && !(jfr && o.jfr) {
		fatal("unknown variant %q: %s", o.variant, o.variantNames())
	}
	h, res := o.start()
	fmt.Fprintf(os.Stderr, "djxbench: %s: %d workloads, %d pairs of %s windows each, variant %s\n", mode, len(ws), o.pairs, o.win, o.variant)
	failed := false
	dst := slot(res)
	for _, w := range ws {
		r := measure(h, w)
		if r.Err != "" {
			fmt.Fprintf(os.Stderr, "djxbench: %s %s: %s\n", mode, w.Name, r.Err)
			failed = true
		}
		*dst = append(*dst, r)
	}
	res.Seconds = time.Since(res.Started).Seconds()
	printToggle(os.Stdout, title, *dst)
	save(res, o.out, mode+"-")
	h.cleanup()
	if failed {
		return 1
	}
	return 0
}

// longArgs are the workloads' arguments for a run that lasts until killed.
var longArgs = map[string][]string{
	"h2":         {"60000", "100000000"},
	"xalan":      {"20000", "100000000"},
	"fft":        {"64", "14", "100000000"},
	"allocheavy": {"0"},
	"gchot":      {"0"},
	"hotarrays":  {"0"},
}

// opsLog records the workload's "ops N" lines, as cumulative counts, with
// the time each arrived. Fixed-time workloads print the count of each
// second (perSecond), the others a running total.
type opsLog struct {
	mu        sync.Mutex
	t         []time.Time
	ops       []float64
	perSecond bool
}

func (l *opsLog) follow(ch <-chan string) {
	total := 0.0
	for line := range ch {
		f := strings.Fields(line)
		if len(f) != 2 || f[0] != "ops" {
			continue
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			continue
		}
		if l.perSecond {
			total += v
			v = total
		}
		l.mu.Lock()
		l.t = append(l.t, time.Now())
		l.ops = append(l.ops, v)
		l.mu.Unlock()
	}
}

// rate is the work per second between the first and the last ops line
// inside [from, to]; ok is false with fewer than two lines there.
func (l *opsLog) rate(from, to time.Time) (float64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	first, last := -1, -1
	for i, t := range l.t {
		if t.Before(from) || t.After(to) {
			continue
		}
		if first < 0 {
			first = i
		}
		last = i
	}
	if first < 0 || last <= first {
		return 0, false
	}
	return (l.ops[last] - l.ops[first]) / l.t[last].Sub(l.t[first]).Seconds(), true
}

// at is the cumulative work at t, interpolated between the lines around it;
// ok is false outside the lines received.
func (l *opsLog) at(t time.Time) (float64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	i := sort.Search(len(l.t), func(i int) bool { return !l.t[i].Before(t) })
	if i == len(l.t) || (i == 0 && l.t[0].After(t)) {
		return 0, false
	}
	if l.t[i].Equal(t) {
		return l.ops[i], true
	}
	f := t.Sub(l.t[i-1]).Seconds() / l.t[i].Sub(l.t[i-1]).Seconds()
	return l.ops[i-1] + f*(l.ops[i]-l.ops[i-1]), true
}

// lost is the work time missing between from and to at base work per
// second: the span less the time the work done there takes at base.
func (l *opsLog) lost(from, to time.Time, base float64) (float64, bool) {
	a, ok1 := l.at(from)
	b, ok2 := l.at(to)
	if !ok1 || !ok2 || base <= 0 {
		return 0, false
	}
	return to.Sub(from).Seconds() - (b-a)/base, true
}

// startLong starts w to run until killed, following its work rate; stop
// kills it.
func (h *harness) startLong(w workload) (*exec.Cmd, *opsLog, func(), error) {
	wl := w
	wl.Args = longArgs[w.Name]
	pr, pw := io.Pipe()
	jvm, err := start(h.javaArgs(wl, false), nil, pw, io.Discard)
	if err != nil {
		return nil, nil, nil, err
	}
	stop := func() {
		syscall.Kill(-jvm.Process.Pid, syscall.SIGKILL) // our own group, by pid
		jvm.Wait()
		started.done(jvm.Process.Pid)
		pw.Close()
	}
	log := &opsLog{perSecond: w.FixedTime}
	go log.follow(lines(pr))
	return jvm, log, stop, nil
}

// togglePair is one profiled window and the unprofiled ones around it.
type togglePair struct {
	Before, On, After float64 // work per second
	Ratio             float64 // time per unit of work, on / mean(before, after)
	Control           float64 // after / before: the same quantity with no profile in between
	// LostAttach and LostEnd (toggle): seconds of work lost from djx-bpf's
	// start to the window, and from the window to the settle after its exit.
	LostAttach float64        `json:",omitempty"`
	LostEnd    float64        `json:",omitempty"`
	Stats      map[string]any `json:"stats,omitempty"`
}

// newPair is the pair of a window with the profile (on) between two
// without it.
func newPair(before, on, after float64) togglePair {
	return togglePair{Before: before, On: on, After: after, Ratio: (before + after) / 2 / on, Control: after / before}
}

type toggleResult struct {
	Workload string       `json:"workload"`
	Window   float64      `json:"window_s"`
	Pairs    []togglePair `json:"pairs"`
	Ratio    spread       `json:"ratio"`
	// Geomean is the geometric mean of the ratios, with the 95% confidence
	// interval of its log (normal approximation): what the pairs can
	// resolve, which the spread of single pairs hides.
	Geomean  float64 `json:"geomean"`
	CILow    float64 `json:"ci95_low,omitempty"`
	CIHigh   float64 `json:"ci95_high,omitempty"`
	Control  spread  `json:"control"` // |after/before - 1|
	AgentPct spread  `json:"agent_pct"`
	BPFPct   spread  `json:"bpf_pct"`
	// LostAttach and LostEnd (toggle): the pairs' work seconds lost around
	// the window, to the attach and to the end of the profile and detach;
	// their means, with 95% confidence intervals.
	LostAttach meanCI `json:"lost_attach_s"`
	LostEnd    meanCI `json:"lost_end_s"`
	Err        string `json:"error,omitempty"`
}

type meanCI struct {
	Mean float64 `json:"mean"`
	Lo   float64 `json:"ci95_low"`
	Hi   float64 `json:"ci95_high"`
}

// meanCIOf is the mean of v with the 95% confidence interval of the mean
// (normal approximation; none below two values).
func meanCIOf(v []float64) meanCI {
	if len(v) == 0 {
		return meanCI{}
	}
	var sum, sq float64
	for _, x := range v {
		sum += x
	}
	m := sum / float64(len(v))
	if len(v) < 2 {
		return meanCI{Mean: m}
	}
	for _, x := range v {
		sq += (x - m) * (x - m)
	}
	h := 1.96 * math.Sqrt(sq/float64(len(v)-1)/float64(len(v)))
	return meanCI{m, m - h, m + h}
}

// summarize derives the spreads and the geometric mean from the pairs.
func (r *toggleResult) summarize() {
	var ratios, ctl, la, le []float64
	for _, p := range r.Pairs {
		ratios, ctl = append(ratios, p.Ratio), append(ctl, abs(p.Control-1))
		if p.LostAttach != 0 || p.LostEnd != 0 {
			la, le = append(la, p.LostAttach), append(le, p.LostEnd)
		}
	}
	r.Ratio, r.Control = spreadOf(ratios), spreadOf(ctl)
	r.LostAttach, r.LostEnd = meanCIOf(la), meanCIOf(le)
	r.Geomean, r.CILow, r.CIHigh = geomeanCI(ratios)
}

// geomeanCI returns the geometric mean of v and its 95% confidence
// interval (normal approximation on the logs; none below two values).
func geomeanCI(v []float64) (g, lo, hi float64) {
	if len(v) == 0 {
		return 0, 0, 0
	}
	logs := make([]float64, len(v))
	for i, x := range v {
		logs[i] = math.Log(x)
	}
	m := meanCIOf(logs)
	if len(v) < 2 {
		return math.Exp(m.Mean), 0, 0
	}
	return math.Exp(m.Mean), math.Exp(m.Lo), math.Exp(m.Hi)
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

func printToggle(w io.Writer, title string, rs []toggleResult) {
	fmt.Fprintln(w, title)
	fmt.Fprintf(w, "%-10s %5s %8s  %-22s %-22s %-22s %-19s %6s  %-20s %-20s\n", "workload", "pairs", "window", "runtime ratio", "geomean [95% CI]", "control |after/before-1|", "agent% of JVM CPU", "bpf%", "lost s: attach", "lost s: end+detach")
	for _, r := range rs {
		if r.Err != "" {
			fmt.Fprintf(w, "%-10s error: %s\n", r.Workload, r.Err)
			continue
		}
		agent, bpf := "-", "-" // the switch mode has none
		if r.AgentPct.Median > 0 || r.BPFPct.Median > 0 {
			agent = fmt.Sprintf("%.2f [%.2f–%.2f]", r.AgentPct.Median, r.AgentPct.Min, r.AgentPct.Max)
			bpf = fmt.Sprintf("%.2f", r.BPFPct.Median)
		}
		lost := func(m meanCI) string {
			if m == (meanCI{}) {
				return "-" // the switch mode and older files have none
			}
			return fmt.Sprintf("%.2f [%.2f–%.2f]", m.Mean, m.Lo, m.Hi)
		}
		fmt.Fprintf(w, "%-10s %5d %7.0fs  %-22s %-22s %-22s %-19s %6s  %-20s %-20s\n", r.Workload, len(r.Pairs), r.Window,
			fmt.Sprintf("%.3f [%.3f–%.3f]", r.Ratio.Median, r.Ratio.Min, r.Ratio.Max),
			fmt.Sprintf("%.3f [%.3f–%.3f]", r.Geomean, r.CILow, r.CIHigh),
			fmt.Sprintf("%.3f [%.3f–%.3f]", r.Control.Median, r.Control.Min, r.Control.Max),
			agent, bpf, lost(r.LostAttach), lost(r.LostEnd))
	}
}
