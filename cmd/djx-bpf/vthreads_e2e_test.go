package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/djx-bpf/djx-bpf/internal/testenv"
	"github.com/djx-bpf/djx-bpf/report"
)

// vtEntry is the first frame of a virtual thread (below it: enterSpecial,
// then the carrier's frames), as jstack and JFR end its stack.
const vtEntry = "jdk.internal.vm.Continuation.enter:"

// carrierFrames are frames of a carrier thread, never of the virtual
// thread it runs.
var carrierFrames = []string{"jdk.internal.vm.Continuation.run:", "jdk.internal.vm.Continuation.enterSpecial",
	"java.lang.VirtualThread.runContinuation", "java.util.concurrent.ForkJoin"}

// vtWhole says whether path (leaf first) is the known whole stack of a
// VirtualTable task: own, the known chain from its leaf (own frames at
// their markers, the lambda's at SUBMIT), then JDK frames down to the
// virtual thread's entry, and none of its carrier's.
func vtWhole(path, own []string) bool {
	if len(path) < len(own)+1 || !strings.HasPrefix(path[len(path)-1], vtEntry) {
		return false
	}
	for i, f := range own {
		if path[i] != f && !(strings.HasSuffix(f, "$") && strings.HasPrefix(path[i], f)) {
			return false
		}
	}
	for _, f := range path {
		if strings.HasPrefix(f, "[") {
			return false
		}
		for _, c := range carrierFrames {
			if strings.HasPrefix(f, c) {
				return false
			}
		}
	}
	return true
}

// Virtual threads (issue 41): VirtualTable's tasks, virtual threads that
// yield every few sweeps and so migrate between carriers, read a static
// table and allocate, launched at the defaults on Temurin 25. At least 90%
// of the samples of the table's load and of the tracked objects of the
// tasks' allocation site have the task's whole known stack ending at the
// virtual thread's entry (Continuation.enter), with no carrier frames and
// no "[stack cut: ...]". JDK 17 has no virtual threads.
func TestVirtualThreadStacks(t *testing.T) {
	setup(t)
	home, ok := jdks()["temurin25"]
	if !ok {
		t.Skip("virtual threads need JDK 21+: Temurin 25 is not installed (JDK 17 has none)")
	}
	classes := t.TempDir()
	if out, err := exec.Command(filepath.Join(home, "bin", "javac"), "-d", classes, "../../testdata/java/VirtualTable.java").CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	at := func(method, marker string) string {
		return fmt.Sprintf("VirtualTable.%s:%d", method, markerLine(t, "VirtualTable.java", marker))
	}
	lambda := "VirtualTable.lambda$main$" // a prefix (javac numbers lambdas), at SUBMIT
	submit := fmt.Sprintf(":%d", markerLine(t, "VirtualTable.java", "SUBMIT"))
	access := []string{at("sweep", "ACCESS"), at("work", "CALL-SWEEP"), at("task", "CALL-WORK"), lambda}
	alloc := []string{at("chunk", "SITE"), at("work", "CALL-CHUNK"), at("task", "CALL-WORK"), lambda}
	whole := func(path, own []string) bool {
		return vtWhole(path, own) && strings.HasSuffix(path[len(own)-1], submit)
	}

	out := filepath.Join(t.TempDir(), "r.json")
	code, stdout, stderr := djx(t, "profile", "--format", "json", "-o", out, "--",
		filepath.Join(home, "bin", "java"), "-Xmx512m", "-cp", classes, "VirtualTable", "6")
	if code != 0 {
		testenv.Skip(t, "profile exited %d:\n%s\n%s", code, stdout, stderr)
	}
	r := readReport(t, out)
	if r.Stats.SamplesBPFStack == 0 {
		t.Skipf("no BPF stacks (the kernel refuses the unwinder?): notes %q", r.Notes)
	}

	var loads, loadsWhole uint64
	bad := map[string]uint64{}
	paths := append([]report.Access(nil), r.Remainder...)
	for _, o := range r.Objects {
		paths = append(paths, o.Accesses...)
	}
	for _, a := range paths {
		if len(a.Path) == 0 || a.Path[0] != access[0] {
			continue
		}
		loads += a.Samples
		if whole(a.Path, access) {
			loadsWhole += a.Samples
		} else {
			bad[shortPath(a.Path)] += a.Samples
		}
	}
	var objs, objsWhole uint64
	for _, o := range r.Objects {
		if o.Origin != report.OriginAllocation || len(o.AllocPath) == 0 || o.AllocPath[0] != alloc[0] {
			continue
		}
		objs += o.Objects
		if whole(o.AllocPath, alloc) {
			objsWhole += o.Objects
		} else {
			bad["alloc: "+shortPath(o.AllocPath)] += o.Objects
		}
	}
	for p, n := range bad {
		t.Logf("not whole: %d %s", n, p)
	}
	t.Logf("table loads: %d of %d samples whole to the virtual thread's entry (%.1f%%); allocations: %d of %d tracked objects (%.1f%%); bpf ends %v; allocation stacks walked %d, fell back %d",
		loadsWhole, loads, pct(loadsWhole, loads), objsWhole, objs, pct(objsWhole, objs), r.Stats.BPFStackEnds, r.Stats.AllocRawStacks, r.Stats.AllocRawFallbacks)
	if loads < 200 || pct(loadsWhole, loads) < 90 {
		t.Errorf("table loads: %d of %d samples have the task's whole stack to Continuation.enter, want 90%% of at least 200", loadsWhole, loads)
	}
	if objs < 20 || pct(objsWhole, objs) < 90 {
		t.Errorf("allocations: %d of %d tracked objects have the task's whole stack to Continuation.enter, want 90%% of at least 20", objsWhole, objs)
	}
}
