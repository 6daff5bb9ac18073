package main

import (
	"math"
	"strings"
	"testing"
	"time"
)

// Lines as JDK 17 and Temurin 25 log them with -Xlog:safepoint=info:file=F:timemillis.
const safepointLog = `[1796205296678ms] Safepoint "G1CollectForAllocation", Time since last: 111494307 ns, Reaching safepoint: 5588 ns, Cleanup: 7572 ns, At safepoint: 23814839 ns, Total: 23827999 ns
[1796205012551ms] Safepoint "SetNotifyJvmtiEventsMode", Time since last: 6088572840 ns, Reaching safepoint: 607426 ns, At safepoint: 14281 ns, Leaving safepoint: 4627 ns, Total: 626334 ns, Threads: 1 runnable, 11 total
[1796205012594ms] Safepoint "HeapWalkOperation", Time since last: 42916650 ns, Reaching safepoint: 5368 ns, At safepoint: 428930 ns, Leaving safepoint: 2133 ns, Total: 436431 ns, Threads: 0 runnable, 12 total
[1796205025791ms] Safepoint "G1PauseRemark", Time since last: 71008788 ns, Reaching safepoint: 406457 ns, At safepoint: 628247 ns, Leaving safepoint: 15983 ns, Total: 1050687 ns, Threads: 1 runnable, 11 total
[1796205025800ms] Safepoint synchronization initiated using futex wait barrier. (17 threads)
not a log line
`

func TestParseSafepoints(t *testing.T) {
	sps, err := parseSafepoints(strings.NewReader(safepointLog))
	if err != nil {
		t.Fatal(err)
	}
	if len(sps) != 4 {
		t.Fatalf("%d safepoints, want 4: %+v", len(sps), sps)
	}
	if sp := sps[2]; sp.name != "HeapWalkOperation" || sp.totalMs != 0.436431 || sp.at.UnixMilli() != 1796205012594 {
		t.Errorf("third safepoint %+v", sp)
	}
}

func TestGCOperation(t *testing.T) {
	for _, n := range []string{"G1CollectForAllocation", "G1CollectFull", "G1PauseRemark", "G1PauseCleanup", "G1TryInitiateConcMark",
		"GenCollectForAllocation", "GenCollectFull", "SerialCollectForAllocation", "ParallelGCFailedAllocation", "ParallelGCSystemGC",
		"CollectForMetadataAllocation"} {
		if !gcOperation(n) {
			t.Errorf("%s is a collector's operation", n)
		}
	}
	for _, n := range []string{"HeapWalkOperation", "SetNotifyJvmtiEventsMode", "Cleanup", "JFRSafepointClear", "ClassLoaderStatsOperation", "HandshakeAllThreads"} {
		if gcOperation(n) {
			t.Errorf("%s is not a collector's operation", n)
		}
	}
}

func TestSlowest(t *testing.T) {
	sps, _ := parseSafepoints(strings.NewReader(safepointLog))
	from, to := time.UnixMilli(1796205012000), time.UnixMilli(1796205030000)
	w := slowest(sps, from, to)
	if w.Name != "SetNotifyJvmtiEventsMode" || w.MaxMs != 0.626334 || w.Count != 2 || w.GCs != 1 {
		t.Errorf("slowest %+v, want SetNotifyJvmtiEventsMode 0.626334 ms of 2, 1 GC", w)
	}
	if w := slowest(sps, from, time.UnixMilli(1796205012560)); w.Count != 1 || w.GCs != 0 {
		t.Errorf("window cut at the first: %+v", w)
	}
}

func TestParseProcStat(t *testing.T) {
	stat := "1234 (java main) S 1 1234 1234 0 -1 4194560 98765 0 12 0 150 50 0 0 20 0 30 0 1000 1000000 5000"
	if f, cpu := parseProcStat(stat); f != 98765 || cpu != 2 {
		t.Errorf("minflt %d, cpu %v s, want 98765 and 2", f, cpu)
	}
	if f, cpu := parseProcStat("garbage"); f != 0 || cpu != 0 {
		t.Errorf("garbage: %d %v, want nothing", f, cpu)
	}
}

func TestParseBusy(t *testing.T) {
	stat := "cpu  1000 10 200 5000 300 5 5 80 0 0\ncpu0 500 5 100 2500 150 2 3 40 0 0\n"
	if got := parseBusy(stat); got != 13 {
		t.Errorf("busy %v s, want 13 (idle and iowait left out)", got)
	}
}

func TestOtherCPU(t *testing.T) {
	t0 := time.Unix(1000, 0)
	a := mark{t: t0, busy: 100, jvmCPU: 10}
	b := mark{t: t0.Add(2 * time.Second), busy: 103.5, jvmCPU: 11.5}
	if got := otherCPU(a, b, 0.5); math.Abs(got-0.75) > 1e-9 {
		t.Errorf("other CPUs %v, want 0.75", got)
	}
}

func TestAround(t *testing.T) {
	t0 := time.Unix(1000, 0)
	l := &opsLog{}
	for i := 0; i <= 6; i++ {
		l.t = append(l.t, t0.Add(time.Duration(i)*time.Second))
		l.ops = append(l.ops, float64(100*i+map[bool]int{true: -50, false: 0}[i >= 3]))
	}
	// [2.3 s, 3.4 s] lies within the lines at 2 s and 4 s: 150 ops in 2 s.
	rate, span, ok := l.around(t0.Add(2300*time.Millisecond), t0.Add(3400*time.Millisecond))
	if !ok || span != 2 || rate != 75 {
		t.Errorf("around: %v %v %v, want 75/s over 2 s", rate, span, ok)
	}
	if _, _, ok := l.around(t0.Add(-time.Second), t0.Add(time.Second)); ok {
		t.Error("around before the first line: want no rate")
	}
	if _, _, ok := l.around(t0.Add(5*time.Second), t0.Add(7*time.Second)); ok {
		t.Error("around past the last line: want no rate")
	}
}

func TestSlowdown(t *testing.T) {
	if got := slowdown(100, 80); math.Abs(got-25) > 1e-9 {
		t.Errorf("slowdown(100, 80) %v, want 25", got)
	}
	if got := slowdown(100, 0); got != 0 {
		t.Errorf("slowdown with no work %v, want 0", got)
	}
}

func TestStampedLines(t *testing.T) {
	var s stampedLines
	s.Write([]byte("djx-bpf: attaching to pid 1\ndjx-bpf: walking the he"))
	if _, ok := s.at("walking the heap"); ok {
		t.Error("a partial line was taken")
	}
	s.Write([]byte("ap of pid 1\n"))
	if _, ok := s.at("walking the heap of pid"); !ok {
		t.Errorf("line not found in %q", s.String())
	}
}

func TestHeldPct(t *testing.T) {
	r := &wcReport{Stats: map[string]any{"in_heap": 200.0}}
	add := func(origin string, holder []string, n float64) {
		r.Objects = append(r.Objects, struct {
			Origin  string   `json:"origin"`
			Holder  []string `json:"holder"`
			Samples float64  `json:"samples"`
		}{origin, holder, n})
	}
	add("census", []string{"ServiceTruth.table (static)"}, 100)
	add("structure", []string{"ServiceTruth.tree (static)", "java.util.TreeMap.root"}, 50)
	add("allocation", nil, 30)
	add("structure", nil, 10)
	if got := heldPct(r); got != 75 {
		t.Errorf("held %v%%, want 75", got)
	}
}

func TestPlan(t *testing.T) {
	jdks := []*wcJDK{{Name: "java-17-openjdk-amd64"}, {Name: "temurin-25-jdk-amd64"}}
	o := walkcostOpts{gcs: "Serial,G1", sizes: "256m-1M,25:G1:8g-50M"}
	ps, err := o.plan(jdks)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range ps {
		got = append(got, p.jdk.Name[:6]+" "+p.gc+" "+p.size.Name)
	}
	want := "java-1 Serial 256m-1M,java-1 G1 256m-1M,temuri Serial 256m-1M,temuri G1 256m-1M,temuri G1 8g-50M"
	if strings.Join(got, ",") != want {
		t.Errorf("plan %q, want %q", strings.Join(got, ","), want)
	}
	o.sizes = "1g"
	if _, err := o.plan(jdks); err == nil {
		t.Error("an unknown size was taken")
	}
}
