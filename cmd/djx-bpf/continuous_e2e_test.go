package main

import (
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// continuousRun is a `djx-bpf scan --continuous` started by a test.
type continuousRun struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan struct{}
}

func startContinuous(t *testing.T, args ...string) *continuousRun {
	t.Helper()
	r := &continuousRun{stderr: &syncBuffer{}, done: make(chan struct{})}
	r.cmd = exec.Command(binPath, append([]string{"scan", "--continuous"}, args...)...)
	r.cmd.Stderr = r.stderr
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.cmd.Wait(); close(r.done) }()
	t.Cleanup(func() {
		select {
		case <-r.done:
		default:
			r.cmd.Process.Kill()
			<-r.done
		}
	})
	return r
}

// syncBuffer is stderr, read by the test while the command writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *syncBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (r *continuousRun) output() string {
	r.stderr.mu.Lock()
	defer r.stderr.mu.Unlock()
	return r.stderr.b.String()
}

// stop sends SIGTERM and waits; it returns the summary's counts.
func (r *continuousRun) stop(t *testing.T) (cut, sent, retried, dropped int) {
	t.Helper()
	r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("scan --continuous did not stop within 30s of SIGTERM:\n%s", r.output())
	}
	m := regexp.MustCompile(`(\d+) windows cut, (\d+) sent, (\d+) tries failed and were retried, (\d+) dropped`).FindStringSubmatch(r.output())
	if m == nil {
		t.Fatalf("no summary after SIGTERM:\n%s", r.output())
	}
	n := func(s string) int { v, _ := strconv.Atoi(s); return v }
	return n(m[1]), n(m[2]), n(m[3]), n(m[4])
}

// waitWindow waits until the collector has a window of seq or later.
func waitWindow(t *testing.T, c *collector, run *continuousRun, seq int, within time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		for _, l := range c.received(t) {
			if num(l.Attributes["djx.window.seq"]) >= seq {
				return
			}
		}
	}
	t.Fatalf("the collector has no window %d after %v; djx-bpf's stderr:\n%s", seq, within, run.output())
}

// windowsOf are the windows of pid's samples profiles the collector has,
// by sequence number.
func windowsOf(t *testing.T, lines []dumpLine, pid int) map[int]dumpLine {
	t.Helper()
	out := map[int]dumpLine{}
	for _, l := range lines {
		if l.SampleType == "samples" && num(l.Resource["process.pid"]) == pid {
			out[num(l.Attributes["djx.window.seq"])] = l
		}
	}
	return out
}

// TestContinuousToCollector: two JVMs whose top objects are known,
// profiled in 4 s windows into a real OpenTelemetry Collector (built from
// the module proxy). The collector receives every window of each JVM,
// labelled with the host, pid, main class and JVM version, and the top
// object of each JVM over the windows is the right one.
func TestContinuousToCollector(t *testing.T) {
	setup(t)
	c := startCollector(t)
	marker := fmt.Sprintf("-Ddjx.continuous.test=%d", time.Now().UnixNano())
	hot := startJVM(t, jdks()["jdk17"], []string{marker}, "60")
	svc := startJVM(t, jdks()["jdk17"], []string{marker, "-Xmx2g"}, "-main=ServiceTruth", "100000", "20000", fmt.Sprint(serviceTable), "60")
	time.Sleep(time.Second) // start-up is over when a host's agent finds a JVM
	run := startContinuous(t, "--window", "4s", "--match", regexp.QuoteMeta(marker), "--otlp-endpoint", "http://"+c.addr, "--host", "test-host")
	waitWindow(t, c, run, 3, 30*time.Second)
	cut, sent, retried, dropped := run.stop(t)
	t.Logf("%d windows cut, %d sent, %d retried, %d dropped", cut, sent, retried, dropped)
	if cut < 4 || sent != cut || dropped != 0 {
		t.Errorf("%d windows cut, %d sent, %d dropped: want 3 and the stop's, all sent\n%s", cut, sent, dropped, run.output())
	}
	lines := c.received(t)
	want := map[int]struct{ main, top string }{
		hot.cmd.Process.Pid: {"HotArrays", "[object] long[] @ " + hotSite + " / HotArrays.allocHot"},
		svc.cmd.Process.Pid: {"ServiceTruth", serviceTableChain[0]},
	}
	for pid, w := range want {
		wins := windowsOf(t, lines, pid)
		if len(wins) == 0 {
			t.Errorf("pid %d: no window in the collector", pid)
			continue
		}
		// Window 1 ends 4 s after djx-bpf starts: a JVM whose attach took
		// longer on a loaded host is in the next one on.
		first := slices.Min(keys(wins))
		if first > 2 {
			t.Errorf("pid %d: first window %d, want 1 or 2", pid, first)
		}
		tops := map[string]int64{}
		for seq := first; seq <= cut; seq++ {
			l, ok := wins[seq]
			if !ok {
				t.Errorf("pid %d: no window %d in the collector (has %d windows)", pid, seq, len(wins))
				continue
			}
			r := l.Resource
			if r["host.name"] != "test-host" || r["process.executable.name"] != w.main || r["service.name"] != w.main ||
				!strings.HasPrefix(fmt.Sprint(r["process.runtime.version"]), "17.") || r["process.runtime.name"] != "java" {
				t.Errorf("pid %d window %d: resource %v", pid, seq, r)
			}
			k, n := topObject(l)
			tops[k] += n
			t.Logf("pid %d window %d: %d samples, top %s (%d)", pid, seq, l.Total, k, n)
		}
		best, n := "", int64(0)
		for k, v := range tops {
			if v > n {
				best, n = k, v
			}
		}
		if !strings.Contains(best, w.top) {
			t.Errorf("pid %d: top object over the windows %q, want %q (all: %v)", pid, best, w.top, tops)
		}
	}
}

// TestContinuousCollectorRestart: the collector is killed after the first
// window and started again on its port three windows later. The windows
// cut meanwhile wait in the bounded queue (2 windows) and arrive once it
// is back; the ones past the queue are dropped and counted, and every
// window is either received or counted as dropped.
func TestContinuousCollectorRestart(t *testing.T) {
	setupBuild(t)
	parallel(t) // counts windows over an outage; mostly waits
	c := startCollector(t)
	marker := fmt.Sprintf("-Ddjx.continuous.restart=%d", time.Now().UnixNano())
	j := startJVM(t, jdks()["jdk17"], []string{marker}, "60")
	time.Sleep(time.Second)
	run := startContinuous(t, "--window", "2s", "--queue", "2", "--match", regexp.QuoteMeta(marker), "--otlp-endpoint", "http://"+c.addr)
	waitWindow(t, c, run, 1, 30*time.Second)
	c.stop()
	lastBefore := 0
	for seq := range windowsOf(t, c.received(t), j.cmd.Process.Pid) {
		lastBefore = max(lastBefore, seq)
	}
	time.Sleep(9 * time.Second) // 4 windows or so are cut while it is down
	c.start(t)
	time.Sleep(5 * time.Second)
	cut, sent, retried, dropped := run.stop(t)
	wins := windowsOf(t, c.received(t), j.cmd.Process.Pid)
	t.Logf("%d windows cut, %d sent, %d retried, %d dropped; the collector has windows %v (up to %d before the outage)\n%s", cut, sent, retried, dropped, keys(wins), lastBefore, run.output())
	if retried == 0 || dropped == 0 {
		t.Errorf("%d retried, %d dropped: want both, the collector was down for 4 windows with a queue of 2", retried, dropped)
	}
	// A window cut while the JVM was still attaching (heap walk) is empty
	// of it: count from its first.
	first := slices.Min(keys(wins))
	if len(wins)+dropped != cut-first+1 {
		t.Errorf("%d windows cut, the JVM's from %d on: %d received, %d dropped: a window is lost beyond the count", cut, first, len(wins), dropped)
	}
	// The queued windows arrived after the restart: the collector has
	// windows cut while it was down.
	late := 0
	for seq := range wins {
		if seq > lastBefore+1 {
			late++
		}
	}
	if late == 0 {
		t.Errorf("no window cut during the outage reached the collector: %v", keys(wins))
	}
	if !strings.Contains(run.output(), "dropped window") {
		t.Errorf("the drops were not reported on stderr:\n%s", run.output())
	}
}

func keys(m map[int]dumpLine) []int {
	var out []int
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
