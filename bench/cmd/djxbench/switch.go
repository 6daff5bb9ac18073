package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The switch mode measures what sampling costs, with the resolution the
// toggle mode lacks: one profile stays attached to one long-running JVM,
// and its sampling is switched off and on through --control every few
// seconds. Neighbouring windows share the machine's slow drifts, and
// there is no attach, start-up or detach inside any of them, so short
// windows and many pairs fit in minutes. What it leaves out is what stays
// on while sampling is off (tags, GC events and rescans, JIT records, the
// agent's writer); the profile's cost line measures those.

const switchTitle = "switch: one JVM and one attached profile per workload, sampling switched on and off through --control; ratio = time per unit of work sampled / not sampled around it: median [min–max]"

// switchSettle skips the work reported just after a switch (already
// acknowledged, so in effect): lines in flight and the JIT's reaction.
const switchSettle = 300 * time.Millisecond

func (h *harness) switched(w workload, pairs int, win, warm time.Duration, variant string) toggleResult {
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
	ctl, ack := filepath.Join(h.tmp, "ctl-"+w.Name), filepath.Join(h.tmp, "ack-"+w.Name)
	for _, p := range []string{ctl, ack} {
		os.Remove(p)
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			return fail("mkfifo: %v", err)
		}
	}
	time.Sleep(warm)
	report := filepath.Join(h.tmp, "switch-"+w.Name+".json")
	argv := []string{h.bin, "profile", "--pid", strconv.Itoa(jvm.Process.Pid), "--control", "fifo:" + ctl + "," + ack,
		"--quiet", "--format", "json", "-o", report}
	argv = append(append(argv, variants[variant]...), h.djxFlags...)
	var stderr strings.Builder
	djx, err := start(argv, nil, io.Discard, &stderr)
	if err != nil {
		return fail("%v", err)
	}
	ended := make(chan error, 1)
	go func() { ended <- waitCmd(djx, time.Now().Add(time.Duration(pairs+2)*2*win+5*time.Minute)) }()
	defer func() {
		syscall.Kill(-djx.Process.Pid, syscall.SIGTERM) // our own group, by pid; no-op once ended
	}()
	acks := make(chan struct{}, 4)
	go func() {
		f, err := os.Open(ack) // djx-bpf holds the write end
		if err != nil {
			return
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			acks <- struct{}{}
		}
	}()
	send := func(cmd string) error {
		if err := os.WriteFile(ctl, []byte(cmd+"\n"), 0); err != nil {
			return err
		}
		select {
		case <-acks:
			return nil
		case err := <-ended:
			return fmt.Errorf("djx-bpf ended before %s was answered: %v: %s", cmd, err, tail(stderr.String()))
		case <-time.After(time.Minute):
			return fmt.Errorf("djx-bpf did not answer %s within a minute", cmd)
		}
	}
	// The first enable is answered once the profile runs.
	if err := send("enable"); err != nil {
		return fail("%v", err)
	}
	window := func(on bool) (float64, error) {
		cmd := "disable"
		if on {
			cmd = "enable"
		}
		if err := send(cmd); err != nil {
			return 0, err
		}
		from := time.Now().Add(switchSettle)
		time.Sleep(win)
		r, ok := log.rate(from, time.Now())
		if !ok {
			return 0, fmt.Errorf("no work reported in a window of %s", win)
		}
		return r, nil
	}
	before, err := window(false)
	if err != nil {
		return fail("%v", err)
	}
	for i := 0; i < pairs; i++ {
		on, err := window(true)
		if err != nil {
			return fail("%v", err)
		}
		after, err := window(false)
		if err != nil {
			return fail("%v", err)
		}
		p := newPair(before, on, after)
		res.Pairs = append(res.Pairs, p)
		fmt.Fprintf(os.Stderr, "djxbench: switch %s pair %d: %.4g/s off, %.4g/s on, %.4g/s off: ratio %.3f\n",
			w.Name, i+1, before, on, after, p.Ratio)
		before = after
	}
	if err := send("stop"); err != nil {
		return fail("%v", err)
	}
	if err := <-ended; err != nil {
		return fail("djx-bpf: %v: %s", err, tail(stderr.String()))
	}
	// The profile's cost line covers sampled and unsampled windows alike,
	// so it is left out here; the report must still be whole.
	var rep struct {
		Stats map[string]any `json:"stats"`
	}
	if err := readJSON(report, &rep); err != nil {
		return fail("djx-bpf's report: %v", err)
	}
	res.summarize()
	return res
}
