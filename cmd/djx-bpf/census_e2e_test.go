package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/djx-bpf/djx-bpf/report"
)

// censusMapChain holds CensusTruth's 32 map values.
var censusMapChain = []string{"CensusTruth.index (static)", "java.util.HashMap.table", "[]", "java.util.HashMap$Node.value"}

// checkCensusTruth asserts what testdata/java/CensusTruth.java builds
// before any attach: its 16 MiB table (a local of main) first, the 32
// values of its static map as one row named by the map's chain, both from
// the census, and nearly every in-heap sample on them.
func checkCensusTruth(t *testing.T, r *report.Report) {
	t.Helper()
	s := r.Stats
	t.Logf("samples %d, in heap %d, attributed %d (%.1f%% of in heap); census %d objects, pause %.1f ms (holder walk %.1f), holders %s; gcs %d, moves missed %d verified %d",
		s.Samples, s.InHeap, s.Attributed, pct(s.Attributed, s.InHeap), s.CensusObjects, s.CensusPauseMs, s.CensusHolderMs, s.CensusHolders, s.GCs, s.MovesMissed, s.MovesVerified)
	for i, o := range r.Objects {
		if i < 4 {
			t.Logf("#%d %s %s %q objects %d samples %d (%.1f%%)", i+1, o.Type, o.Site, o.Holder, o.Objects, o.Samples, 100*o.Share)
		}
	}
	if len(r.Objects) < 2 {
		t.Fatalf("%d objects in the report, want the table and the map's values", len(r.Objects))
	}
	top := r.Objects[0]
	if top.Origin != report.OriginCensus || top.Type != "long[]" || top.Bytes != 16<<20+16 || top.Site != "[allocated before attach]" {
		t.Errorf("top object %+v, want CensusTruth's 16 MiB table from the census", top)
	}
	if len(top.Holder) != 1 || !strings.HasPrefix(top.Holder[0], "CensusTruth.main:") || !strings.Contains(top.Holder[0], " local ") {
		t.Errorf("the table is held by %q, want a local of CensusTruth.main", top.Holder)
	}
	var m *report.Object
	for i := range r.Objects {
		if slices.Equal(r.Objects[i].Holder, censusMapChain) {
			m = &r.Objects[i]
		}
	}
	if m == nil {
		t.Fatalf("no row held by %q", censusMapChain)
	}
	if m.Objects != 32 || m.Type != "long[]" || m.Samples == 0 {
		t.Errorf("map values %+v, want 32 long[] with samples", m)
	}
	if s.CensusObjects < 33 || s.CensusPauseMs <= 0 || s.CensusHolders != "all" {
		t.Errorf("census stats: %d objects, pause %.1f ms, holders %q", s.CensusObjects, s.CensusPauseMs, s.CensusHolders)
	}
	// Before the census, none of these samples could be attributed.
	if pct(s.Attributed, s.InHeap) < 90 {
		t.Errorf("attributed %.1f%% of in-heap samples, want >= 90%%", pct(s.Attributed, s.InHeap))
	}
	if top.Share < 0.5 || m.Share >= top.Share {
		t.Errorf("shares: table %.1f%%, map values %.1f%%; want the table first with most", 100*top.Share, 100*m.Share)
	}
}

// TestCensusAttachGroundTruth: a service's data, allocated at start-up long
// before the attach, is tracked and named by what holds it, by the agent's
// census (--census jvmti; the default walks the heap, walk_e2e_test.go).
func TestCensusAttachGroundTruth(t *testing.T) {
	setupBuild(t)
	t.Parallel() // shares and names, with margins for a busy host: beside one other test (-parallel)
	for name, home := range jdks() {
		t.Run(name, func(t *testing.T) {
			parallel(t)
			j := startJVM(t, home, nil, "-main=CensusTruth", "30")
			time.Sleep(time.Second) // start-up is long over when a user attaches
			out := filepath.Join(t.TempDir(), "r.json")
			code, _, stderr := djx(t, "profile", "--pid", fmt.Sprint(j.cmd.Process.Pid), "--duration", "5s", "--census", "jvmti", "--format", "json", "-o", out)
			if code != 0 {
				t.Fatalf("profile exited %d:\n%s", code, stderr)
			}
			checkCensusTruth(t, readReport(t, out))
			select {
			case <-j.done:
				t.Fatalf("the JVM ended after the profile:\n%s", j.output())
			default:
			}
		})
	}
}

// TestCensusGCMoves: census objects moved by full GCs (System.gc() every
// 500 ms) and young GCs (small garbage) after the census are followed,
// under each collector.
func TestCensusGCMoves(t *testing.T) {
	setupBuild(t)
	t.Parallel() // shares and names, with margins for a busy host: beside one other test (-parallel)
	for _, gc := range []string{"Serial", "Parallel", "G1"} {
		t.Run(gc, func(t *testing.T) {
			parallel(t)
			j := startJVM(t, jdks()["jdk17"], []string{"-XX:+Use" + gc + "GC"}, "-main=CensusTruth", "30", "gc", "churn")
			out := filepath.Join(t.TempDir(), "r.json")
			code, _, stderr := djx(t, "profile", "--pid", fmt.Sprint(j.cmd.Process.Pid), "--duration", "5s", "--census", "jvmti", "--format", "json", "-o", out)
			if code != 0 {
				t.Fatalf("profile exited %d:\n%s", code, stderr)
			}
			r := readReport(t, out)
			checkCensusTruth(t, r)
			if r.Stats.GCs < 5 {
				t.Errorf("%d GCs in 5 s, want ~10 (System.gc() every 500 ms)", r.Stats.GCs)
			}
			// Serial and Parallel compact the map's values into the old
			// generation's start; G1 may leave them where they are.
			if gc != "G1" && r.Stats.MovesMissed == 0 {
				t.Errorf("no census object moved under %s's full GCs", gc)
			}
		})
	}
}

// TestCensusScan: scan takes the census of every JVM it attaches to.
func TestCensusScan(t *testing.T) {
	setup(t)
	marker := fmt.Sprintf("-Ddjx.census.test=%d", time.Now().UnixNano())
	a := startJVM(t, jdks()["jdk17"], []string{marker}, "-main=CensusTruth", "30")
	home := jdks()["jdk17"]
	if h, ok := jdks()["temurin25"]; ok {
		home = h
	}
	b := startJVM(t, home, []string{marker, "-XX:+UseParallelGC"}, "-main=CensusTruth", "30", "gc")
	out := filepath.Join(t.TempDir(), "scan.json")
	cmd := exec.Command(binPath, "scan", "--duration", "6s", "--census", "jvmti", "--match", regexp.QuoteMeta(marker), "--format", "json", "-o", out)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scan: %v\n%s", err, msg)
	}
	checkScanned(t, readScan(t, out), checkCensusTruth, a, b)
}

// checkScanned runs check on each JVM a scan profiled, and asserts that
// it profiled each of want.
func checkScanned(t *testing.T, sc *report.Scan, check func(*testing.T, *report.Report), want ...*jvm) {
	t.Helper()
	seen := map[int]bool{}
	for _, r := range sc.JVMs {
		t.Run(fmt.Sprint(r.PID), func(t *testing.T) { check(t, r) })
		seen[r.PID] = true
	}
	for _, j := range want {
		if !seen[j.cmd.Process.Pid] {
			t.Errorf("scan profiled %v, want pid %d", seen, j.cmd.Process.Pid)
		}
	}
}

// TestCensusOffAndBudget: --census off tracks nothing that predates the
// attach, and a budget no heap walk can meet stops the census at its first
// check and says so.
func TestCensusOffAndBudget(t *testing.T) {
	setupBuild(t)
	parallel(t) // shares and names, with margins for a busy host: beside one other test (-parallel)
	j := startJVM(t, jdks()["jdk17"], nil, "-main=CensusTruth", "30")
	for _, tc := range []struct {
		flags []string
		note  string
	}{
		{[]string{"--census", "off"}, ""},
		{[]string{"--census", "jvmti", "--census-budget", "1us"}, "the heap walk passed the pause budget"},
	} {
		out := filepath.Join(t.TempDir(), "r.json")
		args := append([]string{"profile", "--pid", fmt.Sprint(j.cmd.Process.Pid), "--duration", "2s", "--format", "json", "-o", out}, tc.flags...)
		if code, _, stderr := djx(t, args...); code != 0 {
			t.Fatalf("%v: exited %d:\n%s", tc.flags, code, stderr)
		}
		r := readReport(t, out)
		// The walk checks its deadline every 1024 objects: it keeps the
		// few that the first 1024 held at most.
		if tc.note == "" && (r.Stats.CensusObjects != 0 || r.Stats.Attributed*10 > r.Stats.InHeap) {
			t.Errorf("%v: %d census objects, %d of %d in-heap samples attributed; want none", tc.flags, r.Stats.CensusObjects, r.Stats.Attributed, r.Stats.InHeap)
		}
		if tc.note != "" && (r.Stats.CensusHeapObjects > 1024 || r.Stats.CensusObjects > r.Stats.CensusHeapObjects) {
			t.Errorf("%v: the walk saw %d objects and kept %d; want it stopped at its first check", tc.flags, r.Stats.CensusHeapObjects, r.Stats.CensusObjects)
		}
		if notes := strings.Join(r.Notes, "\n"); tc.note != "" && !strings.Contains(notes, tc.note) {
			t.Errorf("%v: notes %q lack %q", tc.flags, notes, tc.note)
		}
	}
	if code, _, stderr := djx(t, "profile", "--pid", fmt.Sprint(j.cmd.Process.Pid), "--census", "sometimes"); code == 0 || !strings.Contains(stderr, "use auto, jvmti, on, objects or off") {
		t.Errorf("--census sometimes: exit %d, %q", code, stderr)
	}
}

// TestCensusPartial: a heap walk that passes its budget keeps the objects
// it reached: part of a cache built at start-up, interleaved with small
// objects, without holders, and a note says so.
func TestCensusPartial(t *testing.T) {
	setup(t)
	const entries = 128 << 10 // cache=128: 1.4M objects, a walk of 70-120 ms
	j := startJVM(t, jdks()["jdk17"], []string{"-Xmx1g"}, "-main=CensusTruth", "30", "cache=128")
	var r *report.Report
	// The walk checks its budget every 1024 objects. On a busy host the VM
	// thread can be preempted past the budget before the first check; the
	// census then keeps nothing. Give such a run a larger budget.
	for budget := 20; ; budget *= 2 {
		out := filepath.Join(t.TempDir(), "r.json")
		code, _, stderr := djx(t, "profile", "--pid", fmt.Sprint(j.cmd.Process.Pid), "--duration", "2s", "--census", "jvmti", "--census-budget", fmt.Sprintf("%dms", budget), "--format", "json", "-o", out)
		if code != 0 {
			t.Fatalf("profile exited %d:\n%s", code, stderr)
		}
		r = readReport(t, out)
		if r.Stats.CensusHeapObjects > 1024 || budget >= 160 {
			break
		}
		t.Logf("budget %d ms passed before the walk's first check (pause %.0f ms): again with twice the budget", budget, r.Stats.CensusPauseMs)
	}
	var values uint64 // the cache's long[160]: 1296 bytes each
	for _, o := range r.Objects {
		if o.Origin == "census" && o.Type == "long[]" && o.Objects > 0 && o.Bytes == o.Objects*1296 {
			values += o.Objects
		}
	}
	s := r.Stats
	t.Logf("census: %d objects, %d cache values; walk saw %d objects in %d passes, pause %.0f ms (max %.0f); holders %q; notes %q",
		s.CensusObjects, values, s.CensusHeapObjects, s.CensusPasses, s.CensusPauseMs, s.CensusPauseMaxMs, s.CensusHolders, r.Notes)
	if !s.CensusPartial || s.CensusHolders != "skipped" || !strings.Contains(strings.Join(r.Notes, "\n"), "census partial") {
		t.Fatalf("partial %v, holders %q, notes %q: want a partial census without holders, noted", s.CensusPartial, s.CensusHolders, r.Notes)
	}
	// How far the walk got depends on how much CPU its pause had (a busy
	// host preempts the VM thread): compare with what it reached. The
	// cache's values are the only objects above the min size, so they are
	// the objects it kept, and the walk stopped well short of them all.
	if values == 0 || values < s.CensusObjects*9/10 || values > entries*9/10 {
		t.Errorf("%d of the cache's %d values tracked, of %d census objects; want the values the walk reached, and not all", values, entries, s.CensusObjects)
	}
}

// TestLargeObjectsMissedBySampler: an allocation-heavy program raises the
// heap sampling interval to MiBs within a second; its hot 256 KiB array,
// allocated after that, is still found (the census after GCs) and ranked.
// The censuses after GCs take 20 ms plus 1/400 of the session: in 6 s a
// first one before the array existed, slow on a loaded host, left no room
// for another (CI: 1 census, 0 samples attributed); 12 s leave 50 ms.
func TestLargeObjectsMissedBySampler(t *testing.T) {
	setup(t)
	r := launchJSON(t, []string{"--duration", "12s"}, "-Xmx512m", "-cp", classDir, "LateBig", "14")
	s := r.Stats
	t.Logf("samples %d, in heap %d, attributed %d; interval %d..%d; recensuses %d, census objects %d; notes %q",
		s.Samples, s.InHeap, s.Attributed, r.AllocInterval, r.AllocIntervalMax, s.Recensuses, s.CensusObjects, r.Notes)
	if r.AllocIntervalMax < 1<<20 {
		t.Fatalf("the interval rose only to %d: the workload is not allocation-heavy enough to test this", r.AllocIntervalMax)
	}
	if len(r.Objects) == 0 {
		t.Fatal("no objects")
	}
	top := r.Objects[0]
	if top.Type != "long[]" || top.Bytes != 32768*8+16 || top.Share < 0.8 {
		t.Errorf("top object %+v (%.1f%%), want the 256 KiB long[] with most of the attributed samples", top, 100*top.Share)
	}
}

// A census interrupted: Ctrl-C during it ends djx-bpf at once with a
// report, and the JVM runs on; a JVM that exits during it is reported with
// what was collected.
func TestCensusInterrupted(t *testing.T) {
	setup(t)
	for _, tc := range []string{"ctrl-c", "jvm exits"} {
		t.Run(tc, func(t *testing.T) {
			// 8M small objects: the holder walk takes seconds.
			j := startJVM(t, jdks()["jdk17"], []string{"-Xmx2g"}, "-main=CensusTruth", "60", "fill=8")
			out := filepath.Join(t.TempDir(), "r.json")
			cmd := exec.Command(binPath, "profile", "--pid", fmt.Sprint(j.cmd.Process.Pid), "--census", "on", "--format", "json", "-o", out)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			t.Cleanup(func() {
				if cmd.ProcessState == nil {
					cmd.Process.Kill()
					<-done
				}
			})
			time.Sleep(3 * time.Second) // attached, in the census
			start := time.Now()
			if tc == "ctrl-c" {
				cmd.Process.Signal(os.Interrupt)
			} else {
				j.cmd.Process.Kill() // ours, by pid
			}
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("djx-bpf: %v\n%s", err, stderr.String())
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("djx-bpf still running 20 s after the %s\n%s", tc, stderr.String())
			}
			r := readReport(t, out)
			t.Logf("%s: djx-bpf ended %.1f s after it; census %d objects, pause %.0f ms, holders %q; notes %q",
				tc, time.Since(start).Seconds(), r.Stats.CensusObjects, r.Stats.CensusPauseMs, r.Stats.CensusHolders, r.Notes)
			if tc == "jvm exits" {
				if !strings.Contains(strings.Join(r.Notes, "\n"), "exited") {
					t.Errorf("the report does not say the JVM exited: %q", r.Notes)
				}
				return
			}
			// The JVM runs on after the profile, doing its work.
			before := strings.Count(j.output(), "ops ")
			time.Sleep(2500 * time.Millisecond)
			select {
			case <-j.done:
				t.Fatalf("the JVM ended after the interrupted census:\n%s", j.output())
			default:
			}
			if after := strings.Count(j.output(), "ops "); after < before+2 {
				t.Errorf("the JVM printed %d ops lines in 2.5 s after the profile, want 2", after-before)
			}
		})
	}
}
