package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/djx-bpf/djx-bpf/report"
)

// ServiceTruth's data (testdata/java/ServiceTruth.java), at the sizes the
// tests build it.
const (
	serviceList  = 1_000_000
	serviceTree  = 200_000
	serviceTable = 64 // MiB
)

var (
	serviceTableChain = []string{"ServiceTruth.table (static)"}
	serviceTreeChain  = []string{"ServiceTruth.tree (static)", "java.util.TreeMap.root"}
	serviceListChain  = []string{"ServiceTruth.list (static)", "java.util.ArrayList.elementData", "[]"}
)

// checkServiceTruth asserts what a heap walk names of ServiceTruth: the
// table allocated last first, by its static; the tree's entries and the
// list's arrays each one data structure of the right count; main's buffer
// by main's local although a deeper frame holds it too; and most in-heap
// samples in rows named by a holder chain.
func checkServiceTruth(t *testing.T, r *report.Report) {
	t.Helper()
	s := r.Stats
	var held uint64
	for i, o := range r.Objects {
		if i < 8 {
			t.Logf("#%d %s %s %q objects %d samples %d (%.1f%%), %d other roots, retains %d", i+1, o.Type, o.Origin, o.Holder, o.Objects, o.Samples, 100*o.Share,
				o.OtherRoots, o.RetainedBytes)
		}
		if len(o.Holder) > 0 {
			held += o.Samples
		}
	}
	var typed uint64
	for _, d := range r.DataTypes {
		typed += d.Samples
	}
	t.Logf("samples %d, with address %d (at ip %d, look-back %d, base %d), unjoined %d, gcs %d, untracked %d",
		s.Samples, s.WithAddress, s.DecodedAtIP, s.DecodedLookBack, s.DecodedBase, s.Unjoined, s.GCs, s.HeapUntracked)
	t.Logf("in heap %d, attributed %d, held %d (%.1f%%), typed %d (%.1f%%); walk %.0f ms, %d objects, %d structures, overlapped %v; census pause %.1f ms; notes %q",
		s.InHeap, s.Attributed, held, pct(held, s.InHeap), typed, pct(typed, s.InHeap), s.WalkMs, s.WalkObjects, s.WalkStructures, s.WalkOverlapped, s.CensusPauseMs, r.Notes)
	if len(r.Objects) == 0 {
		t.Fatal("no objects")
	}
	top := r.Objects[0]
	if !slices.Equal(top.Holder, serviceTableChain) || top.Type != "long[]" || top.Bytes != serviceTable<<20+16 {
		t.Errorf("top object %s %q %d bytes, want the table held by %q", top.Type, top.Holder, top.Bytes, serviceTableChain)
	}
	if top.RetainedBytes != top.Bytes {
		t.Errorf("table: retains %d of its %d bytes, want itself", top.RetainedBytes, top.Bytes)
	}
	find := func(typ string, chain []string) *report.Object {
		for i := range r.Objects {
			if r.Objects[i].Type == typ && slices.Equal(r.Objects[i].Holder, chain) {
				return &r.Objects[i]
			}
		}
		return nil
	}
	// The entries retain their keys and rows too (the keys past
	// Integer's cache, the rows' columns). A lookup's frame may hold an
	// entry when the roots are taken: other roots are not asserted.
	// A walk a full GC overlapped reads some references before the GC
	// and their objects after it: a moved entry may be counted twice
	// (200,002 once), and the retained bytes are then approximate. The
	// report says the walk overlapped; the entries must still all be
	// found, all but 0.1% under the tree.
	if o := find("java.util.TreeMap$Entry", serviceTreeChain); o == nil || o.Origin != report.OriginStructure ||
		(!s.WalkOverlapped && (o.Objects != serviceTree || o.RetainedBytes < o.Bytes*2)) {
		t.Errorf("tree entries %+v, want one structure of %d entries, retaining their keys and rows", o, serviceTree)
	} else if s.WalkOverlapped {
		var all uint64
		for _, e := range r.Objects {
			if e.Type == "java.util.TreeMap$Entry" && e.Origin == report.OriginStructure {
				all += e.Objects
			}
		}
		if all < serviceTree*999/1000 || all > serviceTree*1001/1000 || o.Objects < serviceTree*999/1000 {
			t.Errorf("overlapped walk: %d tree entries in all, %d under the tree, want %d in all and under the tree", all, o.Objects, serviceTree)
		}
	}
	// Which of the tree's objects a lookup's samples land on (entries,
	// keys, rows) is the JIT's choice; together they have about a fifth.
	var tree uint64
	for _, o := range r.Objects {
		if len(o.Holder) > 0 && o.Holder[0] == serviceTreeChain[0] {
			tree += o.Samples
		}
	}
	if pct(tree, s.InHeap) < 5 {
		t.Errorf("%.1f%% of in-heap samples in the tree's structures, want about 20%%", pct(tree, s.InHeap))
	}
	most := uint64(serviceList)
	if s.WalkOverlapped {
		most = serviceList * 1001 / 1000
	}
	if o := find("long[]", serviceListChain); o == nil || o.Objects < serviceList*99/100 || o.Objects > most {
		t.Errorf("list arrays %+v, want one structure of about %d", o, serviceList)
	}
	var buf *report.Object
	for i := range r.Objects {
		if o := &r.Objects[i]; o.Type == "long[]" && o.Bytes == 8<<20+16 {
			buf = o
		}
	}
	if buf == nil || len(buf.Holder) != 1 || !strings.HasPrefix(buf.Holder[0], "ServiceTruth.main:") || !strings.Contains(buf.Holder[0], " local ") {
		t.Errorf("main's buffer %+v, want it held by a local of ServiceTruth.main", buf)
	} else {
		// A tenth of the loads (5.8-12.9% of in-heap samples measured;
		// once 0% on Temurin 25's Shenandoah, not yet explained).
		t.Logf("main's buffer has %.1f%% of in-heap samples", pct(buf.Samples, s.InHeap))
	}
	if pct(held, s.InHeap) < 80 {
		t.Errorf("%.1f%% of in-heap samples in rows named by a holder chain, want >= 80%%", pct(held, s.InHeap))
	}
	if s.CensusPauseMs != 0 {
		t.Errorf("census pause %.1f ms: the walk needs none", s.CensusPauseMs)
	}
}

// safepointLine is a line of -Xlog:safepoint (JDK 17 and 25).
var safepointLine = regexp.MustCompile(`Safepoint "([^"]+)".* Total: (\d+) ns`)

// gcOperation says whether a safepoint's VM operation is a collector's
// pause: G1's, Parallel's and Serial's (…Collect…, …GC…), Shenandoah's
// (ShenandoahInitMark, ShenandoahFinalMarkStartEvac, ...) and ZGC's
// (ZMarkStart, ZRelocateStartYoung, ...).
func gcOperation(name string) bool {
	return strings.Contains(name, "Collect") || strings.Contains(name, "GC") || strings.HasPrefix(name, "Shenandoah") ||
		len(name) > 1 && name[0] == 'Z' && name[1] >= 'A' && name[1] <= 'Z'
}

// longestSafepoint is the longest safepoint in the log at path from byte
// offset from on that is not a collection's, and its name.
func longestSafepoint(t *testing.T, path string, from int64) (string, time.Duration) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(from, 0); err != nil {
		t.Fatal(err)
	}
	name, longest := "", time.Duration(0)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := safepointLine.FindStringSubmatch(sc.Text())
		if m == nil || gcOperation(m[1]) {
			continue
		}
		ns, _ := strconv.ParseInt(m[2], 10, 64)
		if d := time.Duration(ns); d > longest {
			name, longest = m[1], d
		}
	}
	return name, longest
}

// TestWalkServiceTruth: attached to a service whose data was built at
// start-up, the default census walks its heap from outside, with no
// stop-the-world pause of its own, and names every hot object and data
// structure by what holds it, under each collector, also while full GCs
// move the data every second; on JDK 25 with compact object headers too,
// and under Shenandoah and ZGC (JDK 17's single generation, JDK 25's
// generational), whose concurrent relocation the walk reads through.
func TestWalkServiceTruth(t *testing.T) {
	alone(t)
	type run struct {
		jdk, gc, mode string
		flags         []string
	}
	runs := []run{{"jdk17", "G1", "", nil}, {"jdk17", "Serial", "gc", nil}, {"jdk17", "Parallel", "gc", nil}, {"jdk17", "Shenandoah", "gc", nil}, {"jdk17", "Z", "gc", nil}}
	if _, ok := jdks()["temurin25"]; ok {
		runs = append(runs, run{"temurin25", "G1", "gc", nil})
		compact := []string{"-XX:+UseCompactObjectHeaders"}
		runs = append(runs, run{"temurin25", "G1", "", compact}, run{"temurin25", "Parallel", "gc", compact}, run{"temurin25", "Serial", "", compact},
			run{"temurin25", "Shenandoah", "gc", nil}, run{"temurin25", "Shenandoah", "", compact}, run{"temurin25", "Z", "gc", nil})
	}
	for _, rn := range runs {
		t.Run(rn.jdk+"/"+rn.gc+"/"+rn.mode+strings.Join(rn.flags, ""), func(t *testing.T) {
			log := filepath.Join(t.TempDir(), "safepoint.log")
			args := []string{"-main=ServiceTruth", fmt.Sprint(serviceList), fmt.Sprint(serviceTree), fmt.Sprint(serviceTable), "40"}
			if rn.mode != "" {
				args = append(args, rn.mode)
			}
			j := startJVM(t, jdks()[rn.jdk], append([]string{"-Xmx2g", "-XX:+Use" + rn.gc + "GC", "-Xlog:safepoint:file=" + log}, rn.flags...), args...)
			time.Sleep(time.Second) // start-up is long over when a user attaches
			var from int64
			if fi, err := os.Stat(log); err == nil {
				from = fi.Size()
			}
			out := filepath.Join(t.TempDir(), "r.json")
			code, _, stderr := djx(t, "profile", "--pid", fmt.Sprint(j.cmd.Process.Pid), "--duration", "6s", "--format", "json", "-o", out)
			if code != 0 {
				t.Fatalf("profile exited %d:\n%s", code, stderr)
			}
			checkServiceTruth(t, readReport(t, out))
			// The goal is 50 ms, and its figures are the benchmarks'
			// (docs/benchmarks.md). This bar catches the census's
			// pauses (470-780 ms) coming back; Temurin 25's Shenandoah
			// runs measured 0.4-101 ms, a DeoptimizeFrame of the roots
			// pass at 88-101 ms in about half of them (once 141 ms).
			name, d := longestSafepoint(t, log, from)
			t.Logf("longest non-GC safepoint while profiled: %q %v", name, d)
			if d > 250*time.Millisecond {
				t.Errorf("safepoint %q took %v while profiled, want <= 50 ms (the census paused 470-780 ms)", name, d)
			}
			select {
			case <-j.done:
				t.Fatalf("the JVM ended after the profile:\n%s", j.output())
			default:
			}
		})
	}
}

// TestWalkCensusTruth: the walk names what the agent's census named on
// CensusTruth: its table by main's local and its map's 32 values, objects
// of min size each, by the map's chain.
func TestWalkCensusTruth(t *testing.T) {
	setupBuild(t)
	parallel(t) // shares and names, with margins for a busy host: beside one other test (-parallel)
	j := startJVM(t, jdks()["jdk17"], nil, "-main=CensusTruth", "30")
	time.Sleep(time.Second)
	out := filepath.Join(t.TempDir(), "r.json")
	code, _, stderr := djx(t, "profile", "--pid", fmt.Sprint(j.cmd.Process.Pid), "--duration", "5s", "--format", "json", "-o", out)
	if code != 0 {
		t.Fatalf("profile exited %d:\n%s", code, stderr)
	}
	r := readReport(t, out)
	var m, top *report.Object
	for i := range r.Objects {
		o := &r.Objects[i]
		if slices.Equal(o.Holder, censusMapChain) && o.Type == "long[]" {
			m = o
		}
		if o.Type == "long[]" && o.Bytes == 16<<20+16 {
			top = o
		}
	}
	if m == nil || m.Objects != 32 || m.Origin != report.OriginCensus {
		t.Errorf("map values %+v, want the 32 long[] by %q", m, censusMapChain)
	}
	if top == nil || len(top.Holder) != 1 || !strings.HasPrefix(top.Holder[0], "CensusTruth.main:") {
		t.Errorf("table %+v, want it held by a local of CensusTruth.main", top)
	}
	if pct(r.Stats.Attributed, r.Stats.InHeap) < 90 {
		t.Errorf("attributed %.1f%% of in-heap samples, want >= 90%%", pct(r.Stats.Attributed, r.Stats.InHeap))
	}
}

// TestWalkScan: scan walks the heap of every JVM it attaches to.
func TestWalkScan(t *testing.T) {
	setup(t)
	marker := fmt.Sprintf("-Ddjx.walk.test=%d", time.Now().UnixNano())
	home := jdks()["jdk17"]
	if h, ok := jdks()["temurin25"]; ok {
		home = h
	}
	args := []string{"-main=ServiceTruth", fmt.Sprint(serviceList), fmt.Sprint(serviceTree), fmt.Sprint(serviceTable), "40"}
	a := startJVM(t, jdks()["jdk17"], []string{marker, "-Xmx2g"}, args...)
	b := startJVM(t, home, []string{marker, "-Xmx2g", "-XX:+UseParallelGC"}, args...)
	out := filepath.Join(t.TempDir(), "scan.json")
	code, _, stderr := djx(t, "scan", "--duration", "6s", "--match", regexp.QuoteMeta(marker), "--format", "json", "-o", out)
	if code != 0 {
		t.Fatalf("scan exited %d:\n%s", code, stderr)
	}
	checkScanned(t, readScan(t, out), checkServiceTruth, a, b)
}

// TestWalkRefusedFallsBack: a heap the walk refuses (reserved past its
// 256 GiB span) gets the agent's census instead, and a note says why.
func TestWalkRefusedFallsBack(t *testing.T) {
	setupBuild(t)
	parallel(t) // shares and names, with margins for a busy host: beside one other test (-parallel)
	j := startJVM(t, jdks()["jdk17"], []string{"-Xmx300g"}, "-main=CensusTruth", "30")
	time.Sleep(time.Second)
	out := filepath.Join(t.TempDir(), "r.json")
	code, _, stderr := djx(t, "profile", "--pid", fmt.Sprint(j.cmd.Process.Pid), "--duration", "3s", "--format", "json", "-o", out)
	if code != 0 {
		t.Fatalf("profile exited %d:\n%s", code, stderr)
	}
	r := readReport(t, out)
	notes := strings.Join(r.Notes, "\n")
	t.Logf("walk %d objects, census %d objects, holders %q; notes %q", r.Stats.WalkObjects, r.Stats.CensusObjects, r.Stats.CensusHolders, r.Notes)
	if r.Stats.WalkObjects != 0 || !strings.Contains(notes, "census in a pause instead of a heap walk") || !strings.Contains(notes, "over the walk's") {
		t.Errorf("walked %d objects; notes %q: want no walk and a note naming the heap's size", r.Stats.WalkObjects, notes)
	}
	if r.Stats.CensusHolders == "" {
		t.Errorf("no census ran in the walk's place: stats %+v", r.Stats.CensusStats)
	}
}

// TestWalkLaunched: a service launched under the profiler builds its
// data after the profile starts, too small to be tracked one by one;
// once the in-heap samples are mostly on objects nothing tracks, its
// heap is walked as an attached one's, and its tree's rows are named by
// their holder chain (before, only their types were).
func TestWalkLaunched(t *testing.T) {
	setupBuild(t)
	parallel(t) // shares and names, with margins for a busy host: beside one other test (-parallel)
	out := filepath.Join(t.TempDir(), "r.json")
	java := filepath.Join(jdks()["jdk17"], "bin", "java")
	code, _, stderr := djx(t, "profile", "--duration", "10s", "--format", "json", "-o", out, "--", java, "-Xmx2g", "-cp", classDir,
		"ServiceTruth", fmt.Sprint(serviceList), fmt.Sprint(serviceTree), fmt.Sprint(serviceTable), "12")
	if code != 0 {
		t.Fatalf("profile exited %d:\n%s", code, stderr)
	}
	r := readReport(t, out)
	s := r.Stats
	var held, tree uint64
	for i, o := range r.Objects {
		if i < 8 {
			t.Logf("#%d %s %s %q objects %d samples %d (%.1f%%)", i+1, o.Type, o.Origin, o.Holder, o.Objects, o.Samples, 100*o.Share)
		}
		if len(o.Holder) > 0 {
			held += o.Samples
			if o.Holder[0] == serviceTreeChain[0] {
				tree += o.Samples
			}
		}
	}
	t.Logf("in heap %d, attributed %d, held %d (%.1f%%), tree %d (%.1f%%); walk %.0f ms, %d objects; notes %q",
		s.InHeap, s.Attributed, held, pct(held, s.InHeap), tree, pct(tree, s.InHeap), s.WalkMs, s.WalkObjects, r.Notes)
	if s.WalkObjects < serviceList {
		t.Fatalf("walked %d objects, want the launched service's heap walked", s.WalkObjects)
	}
	if pct(tree, s.InHeap) < 5 {
		t.Errorf("%.1f%% of in-heap samples in the tree's rows named by its holder, want about 20%%", pct(tree, s.InHeap))
	}
	// The table, allocated after the launch and tracked by the agent's
	// sampler, keeps its allocation site: the rest is what the walk named.
	if pct(s.Attributed, s.InHeap) < 80 {
		t.Errorf("%.1f%% of in-heap samples attributed, want >= 80%%", pct(s.Attributed, s.InHeap))
	}
}
