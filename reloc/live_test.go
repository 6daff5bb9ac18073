package reloc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/djx-bpf/djx-bpf/attach"
	"github.com/djx-bpf/djx-bpf/heap"

	"github.com/djx-bpf/djx-bpf/internal/testenv"
)

const liveLen = 32768*8 + 16 // Churn's long[32768] with its header

type jdk struct{ name, home string }

// liveJDKs skips the test unless it can load BPF and start real JVMs.
func liveJDKs(t testing.TB) []jdk {
	t.Helper()
	testenv.Root(t)
	var jdks []jdk
	for _, j := range testenv.JDKs(t) {
		jdks = append(jdks, jdk{j.Name, j.Home})
	}
	return jdks
}

// compileChurn compiles testdata/Churn.java into a temporary directory.
func compileChurn(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command(filepath.Join(jdk17Home, "bin", "javac"), "--release", "17",
		"-d", dir, "testdata/Churn.java").CombinedOutput()
	if err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	return dir
}

var gcFlags = []struct{ name, flag string }{
	{"Serial", "-XX:+UseSerialGC"},
	{"Parallel", "-XX:+UseParallelGC"},
	{"G1", "-XX:+UseG1GC"},
}

// churn is a started Churn JVM waiting for "go".
type churn struct {
	pid    int
	stdin  io.WriteCloser
	lines  chan string
	exited chan struct{}
	cmd    *exec.Cmd
	gcLog  string
	stderr *strings.Builder
}

func startChurn(t testing.TB, j jdk, classes, gcFlag string, rounds int) *churn {
	t.Helper()
	c := &churn{gcLog: filepath.Join(t.TempDir(), "gc.log"), stderr: &strings.Builder{}}
	c.cmd = exec.Command(filepath.Join(j.home, "bin", "java"), gcFlag, "-Xms256m", "-Xmx256m",
		"-Xlog:gc:file="+c.gcLog, "-cp", classes, "Churn", strconv.Itoa(rounds))
	c.cmd.Dir = t.TempDir()
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // dies with the test binary, also on a timeout panic
	var err error
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.cmd.Stderr = c.stderr
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c.pid = c.cmd.Process.Pid
	c.exited = make(chan struct{})
	c.lines = make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	go func() {
		c.cmd.Wait()
		close(c.exited)
	}()
	t.Cleanup(func() {
		c.stdin.Close()
		select {
		case <-c.exited:
		case <-time.After(5 * time.Second):
			c.cmd.Process.Kill()
			<-c.exited
		}
	})
	c.expect(t, "ready", 30*time.Second)
	return c
}

// expect waits for a stdout line starting with prefix.
func (c *churn) expect(t testing.TB, prefix string, d time.Duration) string {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				<-c.exited
				t.Fatalf("JVM exited before %q: %v; stderr:\n%s", prefix, c.cmd.ProcessState, c.stderr)
			}
			if strings.HasPrefix(l, prefix) {
				return l
			}
		case <-timeout:
			t.Fatalf("no %q from JVM after %v; stderr:\n%s", prefix, d, c.stderr)
		}
	}
}

// finish lets Churn exit and checks its exit code.
func (c *churn) finish(t testing.TB) {
	t.Helper()
	c.stdin.Close()
	select {
	case <-c.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("JVM did not exit after its work")
	}
	if code := c.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("JVM exit code %d; stderr:\n%s", code, c.stderr)
	}
}

func heapRanges(t testing.TB, pid int) heap.Info {
	t.Helper()
	tg, err := attach.Inspect(pid)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := tg.Jcmd(ctx, "GC.heap_info")
	if err != nil {
		t.Fatal(err)
	}
	info, err := heap.ParseHeapInfo(out)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// collector reads every event of the tracker until flushed.
type collector struct {
	mu     sync.Mutex
	events []Event
	done   chan error
}

func collect(tr *Tracker) *collector {
	c := &collector{done: make(chan error, 1)}
	go func() {
		for {
			var ev Event
			err := tr.Read(&ev)
			if err != nil {
				if errors.Is(err, ErrFlushed) || errors.Is(err, ErrClosed) {
					err = nil
				}
				c.done <- err
				return
			}
			c.mu.Lock()
			c.events = append(c.events, ev)
			c.mu.Unlock()
		}
	}()
	return c
}

// stop flushes the tracker and returns the events read.
func (c *collector) stop(t testing.TB, tr *Tracker) []Event {
	t.Helper()
	if err := tr.Flush(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-c.done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("reader did not stop after Flush")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.events
}

// gcStats summarizes -Xlog:gc pause lines.
type gcStats struct {
	n     map[string]int
	total map[string]float64 // ms
}

var pauseRE = regexp.MustCompile(`Pause (Young|Full|Remark|Cleanup)\b.* ([0-9.]+)ms$`)

func parseGCLog(t testing.TB, path string) gcStats {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := gcStats{n: map[string]int{}, total: map[string]float64{}}
	for _, l := range strings.Split(string(data), "\n") {
		m := pauseRE.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		ms, _ := strconv.ParseFloat(m[2], 64)
		s.n[m[1]]++
		s.total[m[1]] += ms
	}
	return s
}

func (s gcStats) String() string {
	var parts []string
	for _, k := range []string{"Young", "Full", "Remark", "Cleanup"} {
		if s.n[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d× mean %.2fms", k, s.n[k], s.total[k]/float64(s.n[k])))
		}
	}
	return strings.Join(parts, ", ")
}

func (s gcStats) mean(k string) float64 {
	if s.n[k] == 0 {
		return 0
	}
	return s.total[k] / float64(s.n[k])
}

// runResult is what one tracked Churn run produced.
type runResult struct {
	events   []Event
	counters Counters
	heap     heap.Info
	info     Info
	gc       gcStats
	elapsed  time.Duration
}

// runChurn runs Churn under j with gcFlag; with track set, a Tracker
// (MinLen 1 KiB) is attached between "ready" and "go" and removed before
// the JVM exits.
func runChurn(t testing.TB, j jdk, classes, gcFlag string, rounds int, track bool) runResult {
	t.Helper()
	var res runResult
	c := startChurn(t, j, classes, gcFlag, rounds)
	var tr *Tracker
	var col *collector
	if track {
		res.heap = heapRanges(t, c.pid)
		var err error
		tr, err = Open(Config{MinLen: 1024})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		var rs []Range
		for _, r := range res.heap.Ranges {
			rs = append(rs, Range{r.Start, r.End})
		}
		if res.info, err = tr.AddJVM(c.pid, rs); err != nil {
			t.Fatal(err)
		}
		col = collect(tr)
	}
	start := time.Now()
	if _, err := io.WriteString(c.stdin, "go\n"); err != nil {
		t.Fatal(err)
	}
	c.expect(t, "done", 120*time.Second)
	res.elapsed = time.Since(start)
	if track {
		if err := tr.RemoveJVM(c.pid); err != nil {
			t.Error(err)
		}
		var err error
		if res.counters, err = tr.Counters(); err != nil {
			t.Error(err)
		}
		res.events = col.stop(t, tr)
		if err := tr.Close(); err != nil {
			t.Error(err)
		}
	}
	c.finish(t)
	res.gc = parseGCLog(t, c.gcLog)
	return res
}

func TestLiveJVM(t *testing.T) {
	jdks := liveJDKs(t)
	classes := compileChurn(t)
	for _, j := range jdks {
		for _, g := range gcFlags {
			t.Run(j.name+"/"+g.name, func(t *testing.T) {
				res := runChurn(t, j, classes, g.flag, 6, true)
				checkRun(t, res)
			})
		}
	}
}

func checkRun(t *testing.T, res runResult) {
	t.Helper()
	info := res.info
	if info.CopyErr != nil || info.GCErr != nil {
		t.Fatalf("partial attach: copies: %v, gc: %v", info.CopyErr, info.GCErr)
	}
	for _, c := range info.Copies {
		t.Logf("copy probe %v -> %s+%#x %q", c.Imports, c.Lib, c.Offset, c.Symbol)
	}
	t.Logf("usdt sites: gc__begin %d, gc__end %d; heap %s %v", len(info.GCBegin), len(info.GCEnd), res.heap.GC, res.heap.Ranges)

	// GC epochs alternate begin, end on the VM thread.
	type window struct{ begin, end uint64 }
	var wins []window
	open := false
	var full, fullKnown int
	var copies, big, inGC, bigInGC int
	var begin uint64
	for _, ev := range res.events {
		switch ev.Kind {
		case GCBegin:
			if open {
				t.Fatalf("gc__begin at %d inside an open GC", ev.Time)
			}
			open, begin = true, ev.Time
			if ev.FullKnown {
				fullKnown++
			}
			if ev.Full {
				full++
			}
		case GCEnd:
			if !open {
				t.Fatalf("gc__end at %d without gc__begin", ev.Time)
			}
			open = false
			wins = append(wins, window{begin, ev.Time})
		case Copy:
			copies++
			if ev.Len < 1024 {
				t.Errorf("copy of %d bytes passed MinLen 1024", ev.Len)
			}
			if !res.heap.Contains(ev.Src) {
				t.Errorf("copy source %#x outside the heap", ev.Src)
			}
		}
	}
	if open {
		t.Error("last GC never ended")
	}
	within := func(ts uint64) bool {
		i := sort.Search(len(wins), func(i int) bool { return wins[i].end >= ts })
		return i < len(wins) && wins[i].begin <= ts
	}
	for _, ev := range res.events {
		if ev.Kind != Copy {
			continue
		}
		g := within(ev.Time)
		if g {
			inGC++
		}
		if ev.Len >= liveLen-16 {
			big++
			if g && res.heap.Contains(ev.Dst) {
				bigInGC++
			}
		}
	}
	cn := res.counters
	t.Logf("GCs %d (full %d, arg read %d), -Xlog:gc %s", len(wins), full, fullKnown, res.gc)
	t.Logf("copies kept %d (%d inside GC windows), ≥256KiB %d (%d inside GC with dst in heap)", copies, inGC, big, bigInGC)
	perGC := func(n uint64) float64 { return float64(n) / float64(max(len(wins), 1)) }
	t.Logf("counters %+v; per GC: hits %.1f (in GC %.1f), kept %.1f; run %v", cn, perGC(cn.Hits), perGC(cn.HitsInGC), perGC(cn.Kept), res.elapsed)
	if len(wins) < 2 {
		t.Errorf("%d GC epochs, want at least the 2 System.gc() calls", len(wins))
	}
	// One VM operation may log two pauses (Parallel's System.gc() runs a
	// scavenge before the full GC), so epochs ≤ pauses.
	if n := res.gc.n["Young"] + res.gc.n["Full"] + res.gc.n["Remark"] + res.gc.n["Cleanup"]; len(wins) > n || len(wins) < res.gc.n["Full"] {
		t.Errorf("%d GC epochs seen, -Xlog:gc shows %s", len(wins), res.gc)
	}
	if fullKnown != len(wins) || full < 2 {
		t.Errorf("gc__begin argument: read %d of %d, full %d, want all read and ≥2 full", fullKnown, len(wins), full)
	}
	if bigInGC == 0 {
		t.Error("no copy of the live 256 KiB array inside a GC with source and destination in the heap")
	}
	if cn.Kept != uint64(copies) || cn.Dropped != 0 {
		t.Errorf("kept counter %d, copies read %d, dropped %d", cn.Kept, copies, cn.Dropped)
	}
	if cn.Hits < cn.Kept+cn.FilteredLen+cn.FilteredHeap {
		t.Errorf("hits %d < kept+filtered", cn.Hits)
	}
}

// BenchmarkLiveGCPause compares -Xlog:gc pause times with and without the
// tracker attached, per collector: mean young and full pauses (ms) and the
// uprobe hits per GC pause.
func BenchmarkLiveGCPause(b *testing.B) {
	jdks := liveJDKs(b)
	classes := compileChurn(b)
	for _, j := range jdks[:1] {
		for _, g := range gcFlags {
			b.Run(j.name+"/"+g.name, func(b *testing.B) {
				var base, tracked runResult
				for i := 0; i < b.N; i++ {
					base = runChurn(b, j, classes, g.flag, 9, false)
					tracked = runChurn(b, j, classes, g.flag, 9, true)
				}
				for _, k := range []string{"Young", "Full"} {
					if m := base.gc.mean(k); m > 0 {
						b.ReportMetric(m, strings.ToLower(k)+"-ms")
						b.ReportMetric(tracked.gc.mean(k), strings.ToLower(k)+"-tracked-ms")
					}
				}
				if n := tracked.gc.n["Young"] + tracked.gc.n["Full"]; n > 0 {
					b.ReportMetric(float64(tracked.counters.Hits)/float64(n), "hits/pause")
				}
			})
		}
	}
}
