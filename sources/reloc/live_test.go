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

	"github.com/djx-bpf/djx-bpf/hotspot/heap"
	"github.com/djx-bpf/djx-bpf/target/attach"

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

// compileChurn compiles testdata/Churn.java and testdata/Burst.java into a
// temporary directory.
func compileChurn(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command(filepath.Join(jdk17Home, "bin", "javac"), "--release", "17",
		"-d", dir, "testdata/Churn.java", "testdata/Burst.java").CombinedOutput()
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

func startChurn(t testing.TB, j jdk, classes, main, gcFlag string, rounds int) *churn {
	t.Helper()
	c := &churn{gcLog: filepath.Join(t.TempDir(), "gc.log"), stderr: &strings.Builder{}}
	c.cmd = exec.Command(filepath.Join(j.home, "bin", "java"), gcFlag, "-Xms256m", "-Xmx256m",
		"-Xlog:gc:file="+c.gcLog, "-cp", classes, main, strconv.Itoa(rounds))
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

// trackResult is what one Tracker of a Churn run produced.
type trackResult struct {
	events   []Event
	counters Counters
	info     Info
}

// runResult is what one tracked Churn run produced: the first tracker's
// results, and those of the others in extra.
type runResult struct {
	trackResult
	extra   []trackResult
	heap    heap.Info
	gc      gcStats
	elapsed time.Duration
}

// runChurn runs Churn under j with gcFlag; one Tracker per configuration
// (MinLen 1 KiB unless set) is attached between "ready" and "go" and
// removed before the JVM exits. Without configurations nothing is tracked.
func runChurn(t testing.TB, j jdk, classes, gcFlag string, rounds int, cfgs ...Config) runResult {
	t.Helper()
	return runMain(t, j, classes, "Churn", gcFlag, rounds, cfgs...)
}

// runMain is runChurn with another main class that speaks Churn's
// protocol.
func runMain(t testing.TB, j jdk, classes, main, gcFlag string, rounds int, cfgs ...Config) runResult {
	t.Helper()
	var res runResult
	c := startChurn(t, j, classes, main, gcFlag, rounds)
	trs := make([]*Tracker, len(cfgs))
	cols := make([]*collector, len(cfgs))
	infos := make([]Info, len(cfgs))
	if len(cfgs) > 0 {
		res.heap = heapRanges(t, c.pid)
	}
	for i, cfg := range cfgs {
		if cfg.MinLen == 0 {
			cfg.MinLen = 1024
		}
		tr, err := Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		trs[i] = tr
		t.Cleanup(func() { tr.Close() })
		var rs []Range
		for _, r := range res.heap.Ranges {
			rs = append(rs, Range{r.Start, r.End})
		}
		if infos[i], err = tr.AddJVM(c.pid, rs); err != nil {
			t.Fatal(err)
		}
		cols[i] = collect(tr)
	}
	start := time.Now()
	if _, err := io.WriteString(c.stdin, "go\n"); err != nil {
		t.Fatal(err)
	}
	c.expect(t, "done", 120*time.Second)
	res.elapsed = time.Since(start)
	for i, tr := range trs {
		tres := trackResult{info: infos[i]}
		if err := tr.RemoveJVM(c.pid); err != nil {
			t.Error(err)
		}
		var err error
		if tres.counters, err = tr.Counters(); err != nil {
			t.Error(err)
		}
		tres.events = cols[i].stop(t, tr)
		if err := tr.Close(); err != nil {
			t.Error(err)
		}
		if i == 0 {
			res.trackResult = tres
		} else {
			res.extra = append(res.extra, tres)
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
				// The copy sites, and beside them the libc probe, which
				// sees every copy libjvm makes: the independent truth.
				res := runChurn(t, j, classes, g.flag, 6, Config{Copies: CopiesGCSites}, Config{Copies: CopiesLibc})
				checkRun(t, res)
				checkSitesAgainstLibc(t, res, res.extra[0])
			})
			// Promotions: 64 arrays built at once, then young GCs.
			t.Run(j.name+"/"+g.name+"/Burst", func(t *testing.T) {
				res := runMain(t, j, classes, "Burst", g.flag, 1, Config{Copies: CopiesGCSites}, Config{Copies: CopiesLibc})
				checkSitesAgainstLibc(t, res, res.extra[0])
			})
		}
	}
}

func checkRun(t *testing.T, res runResult) {
	t.Helper()
	logProbes(t, res)
	wins, full, fullKnown := checkEpochs(t, res.events)
	cc := countCopies(t, res, wins)
	cn := res.counters
	t.Logf("GCs %d (full %d, arg read %d), -Xlog:gc %s", len(wins), full, fullKnown, res.gc)
	t.Logf("copies kept %d (%d inside GC windows), ≥256KiB %d (%d inside GC with dst in heap)", cc.all, cc.inGC, cc.big, cc.bigInGC)
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
	if cc.bigInGC == 0 {
		t.Error("no copy of the live 256 KiB array inside a GC with source and destination in the heap")
	}
	if cn.Kept != uint64(cc.all) || cn.Dropped != 0 {
		t.Errorf("kept counter %d, copies read %d, dropped %d", cn.Kept, cc.all, cn.Dropped)
	}
	if cn.Hits < cn.Kept+cn.FilteredLen+cn.FilteredHeap {
		t.Errorf("hits %d < kept+filtered", cn.Hits)
	}
}

// logProbes stops the test unless both copies and GC epochs were
// attached, and logs which probes were.
func logProbes(t *testing.T, res runResult) {
	t.Helper()
	info := res.info
	if info.CopyErr != nil || info.GCErr != nil {
		t.Fatalf("partial attach: copies: %v, gc: %v", info.CopyErr, info.GCErr)
	}
	for _, c := range info.Copies {
		t.Logf("copy probe %v -> %s+%#x %q", c.Imports, c.Lib, c.Offset, c.Symbol)
	}
	if len(info.Sites) > 0 {
		t.Logf("copy probes: %d collector copy sites", len(info.Sites))
	}
	t.Logf("usdt sites: gc__begin %d, gc__end %d; heap %s %v", len(info.GCBegin), len(info.GCEnd), res.heap.GC, res.heap.Ranges)
}

// checkEpochs checks that GC epochs alternate begin, end, as the VM thread
// runs them, and returns their windows, how many were full GCs and of how
// many gc__begin's argument was read.
func checkEpochs(t *testing.T, events []Event) (wins [][2]uint64, full, fullKnown int) {
	t.Helper()
	open := false
	for _, ev := range events {
		switch ev.Kind {
		case GCBegin:
			if open {
				t.Fatalf("gc__begin at %d inside an open GC", ev.Time)
			}
			open = true
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
		}
	}
	if open {
		t.Error("last GC never ended")
	}
	return gcWindows(events), full, fullKnown
}

// liveCopies counts the copies of a run: all, those inside GC windows,
// those of Churn's live array, and those of it inside a GC into the heap.
type liveCopies struct{ all, inGC, big, bigInGC int }

// countCopies counts the copies of res and checks that each passed the
// BPF filter rightly: at least MinLen, from the heap.
func countCopies(t *testing.T, res runResult, wins [][2]uint64) liveCopies {
	t.Helper()
	var cc liveCopies
	for _, ev := range res.events {
		if ev.Kind != Copy {
			continue
		}
		cc.all++
		if ev.Len < 1024 {
			t.Errorf("copy of %d bytes passed MinLen 1024", ev.Len)
		}
		if !res.heap.Contains(ev.Src) {
			t.Errorf("copy source %#x outside the heap", ev.Src)
		}
		g := inWindows(wins, ev.Time)
		if g {
			cc.inGC++
		}
		if ev.Len >= liveLen-16 {
			cc.big++
			if g && res.heap.Contains(ev.Dst) {
				cc.bigInGC++
			}
		}
	}
	return cc
}

// pauseVariants are the copy probes BenchmarkLiveGCPause compares; nil
// config: untracked.
var pauseVariants = []struct {
	name string
	cfg  *Config
}{
	{"off", nil},
	{"sites", &Config{Copies: CopiesGCSites}},
	{"libc", &Config{Copies: CopiesLibc}},
	{"entry", &Config{Copies: CopiesGCSites, entryProbes: true}},
}

// BenchmarkLiveGCPause compares -Xlog:gc pause times per collector and JDK
// untracked ("off") and with each copy probe: the collectors' copy sites,
// libc's memmove, and (for comparison only) uprobes on the entries of the
// collectors' copy functions. The variants run alternately, b.N times
// each; the metrics are medians over the runs: mean young and full pause
// (ms), their ratio to "off", the uprobe hits per pause, and the run's
// wall time outside GC pauses (the mutator's; ms) with its ratio to "off".
// BENCH_PAUSE_VARIANTS (comma-separated) selects variants.
func BenchmarkLiveGCPause(b *testing.B) {
	jdks := liveJDKs(b)
	classes := compileChurn(b)
	variants := pauseVariants
	if v := os.Getenv("BENCH_PAUSE_VARIANTS"); v != "" {
		variants = nil
		for _, pv := range pauseVariants {
			if pv.name == "off" || strings.Contains(","+v+",", ","+pv.name+",") {
				variants = append(variants, pv)
			}
		}
	}
	for _, j := range jdks {
		for _, g := range gcFlags {
			b.Run(j.name+"/"+g.name, func(b *testing.B) {
				type sample struct{ young, full, hits, mut float64 }
				runs := map[string][]sample{}
				for i := 0; i < b.N; i++ {
					for _, v := range variants {
						var res runResult
						if v.cfg == nil {
							res = runChurn(b, j, classes, g.flag, 9)
						} else {
							res = runChurn(b, j, classes, g.flag, 9, *v.cfg)
						}
						n := res.gc.n["Young"] + res.gc.n["Full"]
						pauses := res.gc.total["Young"] + res.gc.total["Full"] + res.gc.total["Remark"] + res.gc.total["Cleanup"]
						runs[v.name] = append(runs[v.name], sample{
							young: res.gc.mean("Young"),
							full:  res.gc.mean("Full"),
							hits:  float64(res.counters.Hits) / float64(max(n, 1)),
							mut:   float64(res.elapsed.Microseconds())/1000 - pauses,
						})
					}
				}
				med := func(name string, f func(sample) float64) float64 {
					var xs []float64
					for _, s := range runs[name] {
						xs = append(xs, f(s))
					}
					sort.Float64s(xs)
					if len(xs) == 0 {
						return 0
					}
					if len(xs)%2 == 1 {
						return xs[len(xs)/2]
					}
					return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
				}
				young := func(s sample) float64 { return s.young }
				full := func(s sample) float64 { return s.full }
				mut := func(s sample) float64 { return s.mut }
				for _, v := range variants {
					y, f, m := med(v.name, young), med(v.name, full), med(v.name, mut)
					b.ReportMetric(y, v.name+"-young-ms")
					b.ReportMetric(f, v.name+"-full-ms")
					if v.name == "off" {
						continue
					}
					b.ReportMetric(med(v.name, func(s sample) float64 { return s.hits }), v.name+"-hits/pause")
					if y0 := med("off", young); y0 > 0 {
						b.ReportMetric(y/y0, v.name+"-young-ratio")
					}
					if f0 := med("off", full); f0 > 0 {
						b.ReportMetric(f/f0, v.name+"-full-ratio")
					}
					if m0 := med("off", mut); m0 > 0 {
						b.ReportMetric(m/m0, v.name+"-mutator-ratio")
					}
				}
			})
		}
	}
}

// copyKey identifies a copy.
type copyKey struct{ src, dst, len uint64 }

// gcWindows returns the [begin, end] times of the GC epochs of events.
func gcWindows(events []Event) [][2]uint64 {
	var wins [][2]uint64
	var begin uint64
	for _, ev := range events {
		switch ev.Kind {
		case GCBegin:
			begin = ev.Time
		case GCEnd:
			wins = append(wins, [2]uint64{begin, ev.Time})
		}
	}
	return wins
}

func inWindows(wins [][2]uint64, ts uint64) bool {
	i := sort.Search(len(wins), func(i int) bool { return wins[i][1] >= ts })
	return i < len(wins) && wins[i][0] <= ts
}

// checkSitesAgainstLibc compares the copies of the collector sites (res)
// with those the libc probe saw in the same run (truth): every copy of
// the heap inside a GC epoch that libc saw must be a site copy, and every
// site copy must be one libc saw.
func checkSitesAgainstLibc(t *testing.T, res runResult, truth trackResult) {
	t.Helper()
	if len(res.info.Sites) == 0 || len(truth.info.Copies) == 0 {
		t.Fatalf("want sites and libc: sites %d (%v), libc %v", len(res.info.Sites), res.info.SitesErr, truth.info.Copies)
	}
	wins := gcWindows(truth.events)
	want := map[copyKey]int{}
	outside := 0
	for _, ev := range truth.events {
		if ev.Kind != Copy {
			continue
		}
		if !inWindows(wins, ev.Time) {
			outside++
			continue
		}
		want[copyKey{ev.Src, ev.Dst, ev.Len}]++
	}
	got := map[copyKey]int{}
	sitesOutside := 0
	for _, ev := range res.events {
		if ev.Kind != Copy {
			continue
		}
		if !inWindows(wins, ev.Time) {
			sitesOutside++
		}
		got[copyKey{ev.Src, ev.Dst, ev.Len}]++
	}
	var matched, missed, extra int
	for k, n := range want {
		m := min(n, got[k])
		matched += m
		missed += n - m
	}
	for k, n := range got {
		extra += max(0, n-want[k])
	}
	cs, cl := res.counters, truth.counters
	t.Logf("accuracy: libc saw %d heap copies ≥1KiB in GC epochs (%d outside); sites matched %d, missed %d, extra %d, outside epochs %d",
		matched+missed, outside, matched, missed, extra, sitesOutside)
	t.Logf("traps: sites %d (%d in GC), libc %d (%d in GC): %.1f%% of libc's", cs.Hits, cs.HitsInGC, cl.Hits, cl.HitsInGC, 100*float64(cs.Hits)/float64(max(cl.Hits, 1)))
	if missed > 0 || extra > 0 {
		t.Errorf("sites missed %d and added %d of the %d GC copies libc saw", missed, extra, matched+missed)
	}
	if sitesOutside > 0 || cs.Hits != cs.HitsInGC {
		t.Errorf("site probes trapped outside GC epochs: %d copies, hits %d, in GC %d", sitesOutside, cs.Hits, cs.HitsInGC)
	}
	if matched == 0 {
		t.Error("no GC copy at all")
	}
}
