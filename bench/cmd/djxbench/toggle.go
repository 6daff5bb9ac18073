package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/djx-bpf/djx-bpf/target/attach"
)

// The toggle subcommand measures the steady-state cost of a profile on one
// long-running JVM: its work rate while djx-bpf is attached (--pid,
// --duration) against the windows just before and after, without it,
// alternating. Start-up (JIT warm-up, djx-bpf's own start, the agent's
// attach) is left out of the windows, and measured apart.

const toggleAbout = `Runs each workload once, for as long as it takes, and after the warm-up
attaches djx-bpf to it for one window at a time, each between two windows
without it. The ratio compares the work rate in the profiled window with
the mean of the two around it, on the same JVM, JIT state and heap;
control is how far those two differ. The profiled window starts 1.5 s
after djx-bpf does and ends 1 s before its profile does; the work lost to
the attach and to the end of the profile is measured apart.`

const toggleTitle = "toggle: one JVM per workload, profiled and unprofiled windows alternating; ratio = time per unit of work profiled / unprofiled around it: median [min–max]"

const (
	toggleSettle  = 1500 * time.Millisecond // djx-bpf's start and the attach; the agent's detach
	toggleOverrun = time.Second             // the profile runs on past the window
)

func cmdToggle(args []string) int {
	o := windows{jfr: true}
	if code, ok := o.parse(args, "toggle", toggleAbout, 8, 10*time.Second); !ok {
		return code
	}
	slot := func(r *result) *[]toggleResult { return &r.Toggle }
	return o.run(toggleTitle, slot, func(h *harness, w workload) toggleResult {
		return h.toggle(w, o.pairs, o.win, o.warm, o.variant)
	})
}

// toggle runs w until killed and alternates unprofiled and profiled windows
// of win, pairs times, after warm of warm-up. The profiled window is the
// steady state: it starts toggleSettle after djx-bpf does and ends
// toggleOverrun before the profile does; the work lost outside it, to the
// attach and to the end of the profile, is measured apart.
func (h *harness) toggle(w workload, pairs int, win, warm time.Duration, variant string) toggleResult {
	res := toggleResult{Workload: w.Name, Window: win.Seconds()}
	fail := func(format string, args ...any) toggleResult {
		res.Err = fmt.Sprintf(format, args...)
		return res
	}
	jvm, log, stop, err := h.startLong(w)
	if err != nil {
		return fail("%v", err)
	}
	defer stop()
	time.Sleep(warm)
	var agt, bpf []float64
	prevStart := time.Now()
	time.Sleep(win)
	for i := 0; i < pairs; i++ {
		before, ok := log.rate(prevStart, time.Now())
		if !ok {
			return fail("no work reported in an unprofiled window (pair %d)", i+1)
		}
		report := filepath.Join(h.tmp, fmt.Sprintf("toggle-%s-%d.json", w.Name, i))
		t0 := time.Now()
		onFrom := t0.Add(toggleSettle)
		onTo := onFrom.Add(win)
		if err := h.profileWindow(jvm.Process.Pid, variant, report, win, onTo); err != nil {
			return fail("%v", err)
		}
		on, ok := log.rate(onFrom, onTo)
		if !ok {
			return fail("no work reported in a profiled window (pair %d)", i+1)
		}
		time.Sleep(toggleSettle)
		prevStart = time.Now()
		time.Sleep(win)
		after, ok := log.rate(prevStart, time.Now())
		if !ok {
			return fail("no work reported in an unprofiled window (pair %d)", i+1)
		}
		p := newPair(before, on, after)
		base := (before + after) / 2
		la, ok1 := log.lost(t0, onFrom, base)
		le, ok2 := log.lost(onTo, prevStart, base)
		if ok1 && ok2 {
			p.LostAttach, p.LostEnd = la, le
		}
		var rep struct {
			Stats map[string]any `json:"stats"`
		}
		if err := readJSON(report, &rep); err == nil {
			p.Stats = rep.Stats
			if a, b, ok := costPcts(rep.Stats); ok {
				agt, bpf = append(agt, a), append(bpf, b)
			}
		}
		res.Pairs = append(res.Pairs, p)
		fmt.Fprintf(os.Stderr, "djxbench: toggle %s pair %d: %.4g/s before, %.4g/s profiled, %.4g/s after: ratio %.3f; lost %.2fs to the attach, %.2fs to the end\n",
			w.Name, i+1, before, on, after, p.Ratio, p.LostAttach, p.LostEnd)
		// The next pair's "before" is this one's "after".
	}
	res.summarize()
	res.AgentPct, res.BPFPct = spreadOf(agt), spreadOf(bpf)
	return res
}

// profileWindow profiles the JVM pid from now until toggleOverrun past
// onTo, the end of the window of win: with a JFR recording for a JFR
// variant, else with djx-bpf, which writes its report to report.
func (h *harness) profileWindow(pid int, variant, report string, win time.Duration, onTo time.Time) error {
	if settings, jfr := jfrSettings[variant]; jfr {
		return jfrWindow(pid, settings, onTo.Add(toggleOverrun))
	}
	argv := []string{h.bin, "profile", "--pid", strconv.Itoa(pid), "--duration", (win + toggleSettle + toggleOverrun).String(), "--quiet", "--format", "json", "-o", report}
	argv = append(append(argv, variants[variant]...), h.djxFlags...)
	var stderr strings.Builder
	djx, err := start(argv, nil, io.Discard, &stderr)
	if err != nil {
		return err
	}
	time.Sleep(time.Until(onTo))
	if err := waitCmd(djx, time.Now().Add(toggleOverrun+30*time.Second)); err != nil {
		return fmt.Errorf("djx-bpf: %w: %s", err, tail(stderr.String()))
	}
	return nil
}

// jfrWindow records the JVM pid with JFR (settings profile or default) until
// end, started and stopped through the attach API as jcmd would, without a
// jcmd JVM of its own on the 2 CPUs; the recording is discarded.
func jfrWindow(pid int, settings string, end time.Time) error {
	t, err := attach.Inspect(pid)
	if err != nil {
		return fmt.Errorf("jfr: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Until(end)+30*time.Second)
	defer cancel()
	if _, err := t.Jcmd(ctx, "JFR.start name=djxbench settings="+settings); err != nil {
		return fmt.Errorf("jfr start: %w", err)
	}
	time.Sleep(time.Until(end))
	if _, err := t.Jcmd(ctx, "JFR.stop name=djxbench"); err != nil {
		return fmt.Errorf("jfr stop: %w", err)
	}
	return nil
}
