package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const runAbout = `Runs each workload in separate JVMs, in alternating rounds: unprofiled
(base), attached to by djx-bpf (--pid, while the JVM waits at a gate, so
that the whole workload runs profiled), launched under djx-bpf, and with
JFR (settings profile, or default). Prints runtime, peak-RSS and GC pause
ratios to the base run of the same round, median [min-max], with each
profile's costs, samples, drops and attribution, and saves the runs.

Fixed-work workloads (h2, xalan, fft) report their elapsed time;
fixed-time ones (allocheavy, gchot, hotarrays) work per second from their
third second on. The JVM reads its own peak RSS (VmHWM) and CPU time just
before it exits (bench/java's Bench wrapper), which works the same whether
it is the harness's child or djx-bpf's.`

func cmdRun(args []string) int {
	fs := newFlagSet("run", "", runAbout)
	var c common
	c.register(fs, "")
	var (
		runs    = fs.Int("runs", envInt("BENCH_RUNS", 3), "alternating rounds per workload (env BENCH_RUNS)")
		modes   = fs.String("modes", envStr("BENCH_MODES", "base,attach,launch,jfr,jfr-default"), "modes: base, attach, launch, jfr (JFR with settings=profile), jfr-default (settings=default) (env BENCH_MODES)")
		vars    = fs.String("variants", envStr("BENCH_VARIANTS", "default"), "djx-bpf settings to compare, comma-separated: "+variantNames()+" (env BENCH_VARIANTS)")
		timeout = fs.Duration("timeout", 3*time.Minute, "give up on one run after this long")
		verbose = fs.Bool("v", false, "print each run")
		compare = fs.String("compare", "", "print the summaries of this earlier results file beside the new ones")
	)
	if code, ok := parse(fs, args, 0); !ok {
		return code
	}
	ws := c.check()
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
		if _, ok := variants[v]; !ok {
			fatal("unknown variant %q: %s (JFR windows: djxbench toggle -variant jfr)", v, variantNames())
		}
	}
	var old *result
	if *compare != "" {
		old = &result{}
		if err := readJSON(*compare, old); err != nil {
			fatal("%v", err)
		}
	}
	h, res := c.start()
	h.timeout, h.verbose = *timeout, *verbose
	res.Runs = h.rounds(ws, ms, vs, *runs)
	res.Seconds = time.Since(res.Started).Seconds()
	res.Summaries = summarize(res.Runs)
	printTable(os.Stdout, res, old)
	save(res, c.out, "")
	h.cleanup()
	for _, r := range res.Runs {
		if r.Err != "" {
			return 1
		}
	}
	return 0
}

// rounds runs each workload in each mode, in djx-bpf's modes once per
// variant, in that order, rounds times over.
func (h *harness) rounds(ws []workload, ms, vs []string, rounds int) []run {
	perRound := 0
	for _, m := range ms {
		if profiled(m) {
			perRound += len(vs)
		} else {
			perRound++
		}
	}
	total := rounds * len(ws) * perRound
	fmt.Fprintf(os.Stderr, "djxbench: %d runs (%d rounds × %d workloads × %d: djx-bpf's modes once per variant)\n", total, rounds, len(ws), perRound)
	ctx := context.Background()
	var runs []run
	n := 0
	for round := 1; round <= rounds; round++ {
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
					runs = append(runs, r)
				}
			}
		}
	}
	return runs
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

// run1 runs w once in r's mode and variant, and fills in r from the
// JVM's output and djx-bpf's report.
func (h *harness) run1(ctx context.Context, w workload, r *run) error {
	deadline := time.Now().Add(h.timeout)
	report := filepath.Join(h.tmp, fmt.Sprintf("%s-%s-%s-%d.json", w.Name, r.Mode, r.Variant, r.Round))
	var out []string
	var djxErr strings.Builder
	var err error
	if r.Mode == "launch" {
		out, err = h.launched(w, r, report, deadline, &djxErr)
	} else {
		out, err = h.gated(w, r, report, deadline, &djxErr)
	}
	if err != nil {
		return err
	}
	if err := parseOutput(out, w, r); err != nil {
		return err
	}
	if r.Mode == "launch" {
		r.DjxCPU = max(0, r.DjxCPU-r.JVMCPU)
	}
	if _, jfr := jfrSettings[r.Mode]; jfr {
		os.Remove(jfrFile(report))
	}
	if profiled(r.Mode) {
		var rep struct {
			Stats map[string]any `json:"stats"`
			Notes []string       `json:"notes"`
		}
		if err := readJSON(report, &rep); err != nil {
			return fmt.Errorf("djx-bpf report: %w: %s", err, tail(djxErr.String()))
		}
		r.Stats, r.Notes = rep.Stats, rep.Notes
		os.Remove(report)
	}
	return ctx.Err()
}

// gated runs w's JVM in base, attach or a JFR mode: held at its gate until
// djx-bpf, in attach mode, profiles it, so that the whole workload runs
// profiled. It returns the JVM's output; djx-bpf's stderr goes to djxErr.
func (h *harness) gated(w workload, r *run, report string, deadline time.Time, djxErr *strings.Builder) ([]string, error) {
	// A file, not an io.Reader: exec.Cmd.Wait would wait for the copy
	// of an io.Reader to end.
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer stdinW.Close()
	pr, pw := io.Pipe()
	var jerr strings.Builder
	jvm, err := start(h.jvmArgv(w, r.Mode, report), stdinR, pw, &jerr)
	stdinR.Close()
	if err != nil {
		return nil, fmt.Errorf("start java: %w", err)
	}
	var out []string
	ch := lines(pr)
	if err := waitFor(ch, "gate", 60*time.Second, &out); err != nil {
		syscall.Kill(-jvm.Process.Pid, syscall.SIGKILL)
		waitCmd(jvm, deadline)
		return nil, fmt.Errorf("java: %w: %s", err, jerr.String())
	}
	var djx *exec.Cmd
	var djxStart time.Time
	closeErr := func() {}
	if r.Mode == "attach" {
		djxStart = time.Now()
		if djx, closeErr, err = h.attachGated(jvm, r.Variant, report, deadline, djxErr); err != nil {
			return nil, err
		}
	}
	fmt.Fprintln(stdinW, "go")
	done := collect(ch, &out)
	jwerr := waitCmd(jvm, deadline)
	pw.Close()
	<-done
	if jwerr != nil {
		if djx != nil {
			waitCmd(djx, time.Now().Add(30*time.Second))
			closeErr()
		}
		return nil, fmt.Errorf("java: %w: %s", jwerr, tail(jerr.String()))
	}
	if djx != nil {
		err := waitCmd(djx, deadline)
		closeErr()
		if err != nil {
			return nil, fmt.Errorf("djx-bpf: %w: %s", err, tail(djxErr.String()))
		}
		r.DjxWall = time.Since(djxStart).Seconds()
		r.DjxCPU, r.DjxRSS = rusage(djx)
	}
	return out, nil
}

// attachGated starts djx-bpf on the gated JVM and waits until it profiles;
// its stderr from then on goes to djxErr. Once djx-bpf has been waited
// for, closeErr ends its stderr and returns when djxErr holds all of it.
func (h *harness) attachGated(jvm *exec.Cmd, variant, report string, deadline time.Time, djxErr *strings.Builder) (djx *exec.Cmd, closeErr func(), err error) {
	a := h.djxArgs(variant, report)
	a = append(a, "--pid", strconv.Itoa(jvm.Process.Pid))
	er, ew := io.Pipe()
	djx, err = start(a, nil, io.Discard, ew)
	if err != nil {
		syscall.Kill(-jvm.Process.Pid, syscall.SIGKILL)
		waitCmd(jvm, deadline)
		return nil, nil, fmt.Errorf("start djx-bpf: %w", err)
	}
	ech := lines(er)
	var seen []string
	if err := waitFor(ech, "profiling pid", 60*time.Second, &seen); err != nil {
		syscall.Kill(-jvm.Process.Pid, syscall.SIGKILL)
		waitCmd(jvm, deadline)
		waitCmd(djx, time.Now().Add(10*time.Second))
		return nil, nil, fmt.Errorf("djx-bpf did not start profiling: %w: %s", err, strings.Join(seen, "; "))
	}
	forwarded := make(chan struct{})
	go func() {
		for l := range ech {
			djxErr.WriteString(l + "\n")
		}
		close(forwarded)
	}()
	return djx, func() { ew.Close(); <-forwarded }, nil
}

// launched runs w under djx-bpf (launch mode) and returns the JVM's
// output; djx-bpf's stderr goes to djxErr.
func (h *harness) launched(w workload, r *run, report string, deadline time.Time, djxErr *strings.Builder) ([]string, error) {
	a := h.djxArgs(r.Variant, report)
	a = append(a, "--quiet", "--")
	a = append(a, h.javaArgs(w, false)...)
	pr, pw := io.Pipe()
	var derr strings.Builder
	t0 := time.Now()
	djx, err := start(a, nil, pw, &derr)
	if err != nil {
		return nil, fmt.Errorf("start djx-bpf: %w", err)
	}
	var out []string
	done := collect(lines(pr), &out)
	werr := waitCmd(djx, deadline)
	pw.Close()
	<-done
	if werr != nil {
		return nil, fmt.Errorf("djx-bpf: %w: %s", werr, tail(derr.String()))
	}
	r.DjxWall = time.Since(t0).Seconds()
	// The rusage of a waited process includes its waited children:
	// djx-bpf's own CPU is what the JVM did not use.
	r.DjxCPU, _ = rusage(djx) // JVM's part subtracted by run1
	djxErr.WriteString(derr.String())
	return out, nil
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
