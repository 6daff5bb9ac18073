package main

import (
	"bufio"
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

// The switch subcommand measures what sampling costs, with the resolution
// toggle lacks: one profile stays attached to one long-running JVM, and
// its sampling is switched off and on through --control every few
// seconds. Neighbouring windows share the machine's slow drifts, and
// there is no attach, start-up or detach inside any of them, so short
// windows and many pairs fit in minutes. What it leaves out is what stays
// on while sampling is off (tags, GC events and rescans, JIT records, the
// agent's writer); the profile's cost line measures those.

const switchAbout = `Runs each workload once, for as long as it takes, attaches one profile to
it after the warm-up, and switches the profile's sampling on for one
window at a time through --control, each between two windows with it off.
The ratio compares the work rate with sampling on to the mean of the two
windows around it. No window holds an attach, a start-up or a detach.`

const switchTitle = "switch: one JVM and one attached profile per workload, sampling switched on and off through --control; ratio = time per unit of work sampled / not sampled around it: median [min–max]"

// switchSettle skips the work reported just after a switch (already
// acknowledged, so in effect): lines in flight and the JIT's reaction.
const switchSettle = 300 * time.Millisecond

func cmdSwitch(args []string) int {
	var o windows
	if code, ok := o.parse(args, "switch", switchAbout, 20, 4*time.Second); !ok {
		return code
	}
	slot := func(r *result) *[]toggleResult { return &r.Switch }
	return o.run(switchTitle, slot, func(h *harness, w workload) toggleResult {
		return h.switched(w, o.pairs, o.win, o.warm, o.variant)
	})
}

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
	if err := mkfifos(ctl, ack); err != nil {
		return fail("%v", err)
	}
	time.Sleep(warm)
	report := filepath.Join(h.tmp, "switch-"+w.Name+".json")
	djx, err := h.attachControlled(jvm.Process.Pid, ctl, ack, variant, report, time.Duration(pairs+2)*2*win+5*time.Minute)
	if err != nil {
		return fail("%v", err)
	}
	defer djx.stop()
	// The first enable is answered once the profile runs.
	if err := djx.send("enable"); err != nil {
		return fail("%v", err)
	}
	before, err := djx.window(log, false, win)
	if err != nil {
		return fail("%v", err)
	}
	for i := 0; i < pairs; i++ {
		on, err := djx.window(log, true, win)
		if err != nil {
			return fail("%v", err)
		}
		after, err := djx.window(log, false, win)
		if err != nil {
			return fail("%v", err)
		}
		p := newPair(before, on, after)
		res.Pairs = append(res.Pairs, p)
		fmt.Fprintf(os.Stderr, "djxbench: switch %s pair %d: %.4g/s off, %.4g/s on, %.4g/s off: ratio %.3f\n",
			w.Name, i+1, before, on, after, p.Ratio)
		before = after
	}
	if err := djx.send("stop"); err != nil {
		return fail("%v", err)
	}
	if err := <-djx.ended; err != nil {
		return fail("djx-bpf: %v: %s", err, tail(djx.stderr.String()))
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

// controlled is djx-bpf attached to a JVM, its sampling switched through
// the --control FIFO pair.
type controlled struct {
	cmd    *exec.Cmd
	ctl    string        // the FIFO djx-bpf reads its commands from
	acks   chan struct{} // one for each line djx-bpf answers with
	ended  chan error    // djx-bpf's exit
	stderr strings.Builder
}

// attachControlled starts djx-bpf on the JVM pid, reading commands from
// the FIFO ctl and answering on ack, writing its report to report; past
// life its group is stopped.
func (h *harness) attachControlled(pid int, ctl, ack, variant, report string, life time.Duration) (*controlled, error) {
	argv := []string{h.bin, "profile", "--pid", strconv.Itoa(pid), "--control", "fifo:" + ctl + "," + ack,
		"--quiet", "--format", "json", "-o", report}
	argv = append(append(argv, variants[variant]...), h.djxFlags...)
	c := &controlled{ctl: ctl, acks: make(chan struct{}, 4), ended: make(chan error, 1)}
	djx, err := start(argv, nil, io.Discard, &c.stderr)
	if err != nil {
		return nil, err
	}
	c.cmd = djx
	go func() { c.ended <- waitCmd(djx, time.Now().Add(life)) }()
	go func() {
		f, err := os.Open(ack) // djx-bpf holds the write end
		if err != nil {
			return
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			c.acks <- struct{}{}
		}
	}()
	return c, nil
}

// send writes cmd to djx-bpf and waits for its answer.
func (c *controlled) send(cmd string) error {
	if err := os.WriteFile(c.ctl, []byte(cmd+"\n"), 0); err != nil {
		return err
	}
	select {
	case <-c.acks:
		return nil
	case err := <-c.ended: // nil if it exited 0, so not wrapped
		return fmt.Errorf("djx-bpf ended before %s was answered: %v: %s", cmd, err, tail(c.stderr.String()))
	case <-time.After(time.Minute):
		return fmt.Errorf("djx-bpf did not answer %s within a minute", cmd)
	}
}

// window switches sampling on or off for a window of win, and returns the
// work rate log saw in it after switchSettle.
func (c *controlled) window(log *opsLog, on bool, win time.Duration) (float64, error) {
	cmd := "disable"
	if on {
		cmd = "enable"
	}
	if err := c.send(cmd); err != nil {
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

// stop ends djx-bpf's process group, which the harness started; once
// djx-bpf has ended it does nothing.
func (c *controlled) stop() { syscall.Kill(-c.cmd.Process.Pid, syscall.SIGTERM) }

// mkfifos makes a FIFO at each path, in place of what was there.
func mkfifos(paths ...string) error {
	for _, p := range paths {
		os.Remove(p)
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			return fmt.Errorf("mkfifo: %w", err)
		}
	}
	return nil
}
