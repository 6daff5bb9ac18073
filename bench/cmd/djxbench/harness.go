package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"sort"
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
	// The in-memory database service: H2Bench's SQL on HSQLDB.
	{Name: "hsqldb", Class: "H2Bench", Args: []string{"100000", "8000", "jdbc:hsqldb:mem:bench"}, JVMFlags: []string{"-Xmx1g"}},
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

// jfrSettings are the JFR modes: the workload runs with a flight recording
// of these settings from its start, as a user who leaves JFR on has it.
var jfrSettings = map[string]string{"jfr": "profile", "jfr-default": "default"}

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

// harness runs workloads and djx-bpf, and keeps its files in tmp.
type harness struct {
	bin, java, cp, tmp string
	djxFlags           []string
	jvmFlags           []string // added to every workload's
	timeout            time.Duration
	verbose            bool
}

// cleanup ends every process group the harness started that still runs,
// and removes its files.
func (h *harness) cleanup() {
	started.killAll()
	os.RemoveAll(h.tmp)
}

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

// javaArgs is the JVM command line of a workload.
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

// djxArgs is djx-bpf's profile command line with variant's settings,
// writing its JSON report to report.
func (h *harness) djxArgs(variant, report string) []string {
	a := []string{h.bin, "profile", "--format", "json", "-o", report}
	a = append(a, variants[variant]...)
	return append(a, h.djxFlags...)
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

// collect appends the lines of ch to *out until ch closes, and then closes
// the channel it returns.
func collect(ch <-chan string, out *[]string) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		for l := range ch {
			*out = append(*out, l)
		}
		close(done)
	}()
	return done
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

// rusage is the CPU time of a process c waited for, its children waited
// for included, and its peak RSS.
func rusage(c *exec.Cmd) (cpu float64, maxRSSKiB int64) {
	ru := c.ProcessState.SysUsage().(*syscall.Rusage)
	return tv(ru.Utime) + tv(ru.Stime), ru.Maxrss
}

func tv(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }

func tail(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 600 {
		s = "..." + s[len(s)-600:]
	}
	return s
}
