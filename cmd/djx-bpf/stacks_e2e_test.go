package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/djx-bpf/djx-bpf/internal/testenv"
	"github.com/djx-bpf/djx-bpf/report"
)

// hotPathsCallers is HotPaths' known stack above each of its methods: the
// callers, by method and marker (an empty marker: any line).
var hotPathsCallers = map[string][][2]string{
	"scanA":     {{"run", "CALL-A"}, {"main", "CALL-RUN"}},
	"scanB":     {{"run", "CALL-B"}, {"main", "CALL-RUN"}},
	"scanCold":  {{"run", "CALL-COLD"}, {"main", "CALL-RUN"}},
	"run":       {{"main", "CALL-RUN"}},
	"allocHot":  {{"main", ""}},
	"allocCold": {{"main", ""}},
	"main":      {},
}

// stackTruth counts the samples of r whose path has a HotPaths frame
// (java) and those whose frames from the first HotPaths one on are its
// whole known stack, with nothing after (own and whole; frames below it,
// native code or the JDK's, may be anything).
func stackTruth(t *testing.T, r *report.Report) (java, whole uint64) {
	t.Helper()
	var paths []report.Access
	for _, o := range r.Objects {
		paths = append(paths, o.Accesses...)
	}
	paths = append(paths, r.Remainder...)
	bad := map[string]uint64{}
	for _, a := range paths {
		i := 0
		for i < len(a.Path) && !strings.HasPrefix(a.Path[i], "HotPaths.") {
			i++
		}
		if i == len(a.Path) {
			continue
		}
		java += a.Samples
		if matchesTruth(t, a.Path[i:]) {
			whole += a.Samples
		} else {
			bad[strings.Join(a.Path, " <- ")] += a.Samples
		}
	}
	for p, n := range bad {
		t.Logf("not the known stack: %d %s", n, p)
	}
	return java, whole
}

func matchesTruth(t *testing.T, fr []string) bool {
	method, _, _ := strings.Cut(strings.TrimPrefix(fr[0], "HotPaths."), ":")
	callers, ok := hotPathsCallers[method]
	if !ok || len(fr) != 1+len(callers) {
		return false
	}
	for i, c := range callers {
		want := "HotPaths." + c[0] + ":"
		if c[1] != "" {
			want += fmt.Sprint(markerLine(t, "HotPaths.java", c[1]))
		}
		if !strings.HasPrefix(fr[1+i], want) || (c[1] != "" && fr[1+i] != want) {
			return false
		}
	}
	return true
}

// stacksRun is one profile of HotPaths with a --stacks mode.
type stacksRun struct {
	name        string
	java, whole uint64
	hotShare    float64 // scanA's share of the hot object's samples (its leaf)
	bpfUsPerS   float64 // BPF µs per target sample
	r           *report.Report
}

// profileStacks profiles HotPaths on home with --stacks mode: launched
// (with jvmArgs), or attached after warm-up. It skips, saying why, when
// the kernel refuses the unwinding program.
func profileStacks(t *testing.T, home, how, mode string, jvmArgs []string) stacksRun {
	t.Helper()
	out := filepath.Join(t.TempDir(), "r.json")
	args := []string{"profile", "--stacks", mode, "--format", "json", "-o", out}
	if how == "attach" {
		j := startJVM(t, home, append([]string{"-XX:+UnlockDiagnosticVMOptions", "-XX:+DebugNonSafepoints"}, jvmArgs...), "-main=HotPaths", "12")
		time.Sleep(3 * time.Second) // warm-up: the scans compiled before the attach
		args = append(args, "--pid", fmt.Sprint(j.cmd.Process.Pid), "--duration", "5s")
	} else {
		args = append(append(append(args, "--", filepath.Join(home, "bin", "java"), "-Xmx1g"), jvmArgs...), "-cp", classDir, "HotPaths", "6")
	}
	code, stdout, stderr := djx(t, args...)
	if code != 0 && mode == "bpf" && strings.Contains(stderr, "--stacks bpf:") {
		t.Skipf("the kernel refuses the BPF unwinder: %s", stderr)
	}
	if code != 0 {
		t.Fatalf("djx-bpf %v exited %d:\n%s\n%s", args, code, stdout, stderr)
	}
	r := readReport(t, out)
	run := stacksRun{name: mode, r: r}
	run.java, run.whole = stackTruth(t, r)
	if len(r.Objects) > 0 {
		byLeaf := report.MergeAccesses(r.Objects[0].Accesses, 1, r.Objects[0].Samples)
		if len(byLeaf) > 0 {
			run.hotShare = byLeaf[0].Share
		}
	}
	if r.Stats.Samples > 0 {
		run.bpfUsPerS = 1000 * r.Stats.CostBPFMs / float64(r.Stats.Samples)
	}
	s := r.Stats
	t.Logf("--stacks %s: samples %d, with HotPaths frames %d, their own whole known stack %d (%.1f%%); scanA %.1f%% of the hot object; BPF %.2f µs per sample; bpf stacks %d complete %d ends %v; agent stacks %d borrowed %d",
		mode, s.Samples, run.java, run.whole, pct(run.whole, run.java), 100*run.hotShare, run.bpfUsPerS,
		s.SamplesBPFStack, s.SamplesBPFComplete, s.BPFStackEnds, s.SamplesJavaStack, s.SamplesStackBorrowed)
	return run
}

// Every sample's own stack, unwound in BPF, against HotPaths' known
// stacks: at least 95% of the samples with HotPaths frames have their own
// whole stack, the hot object's access paths are those of the agent's
// test (checkAccessPaths), and the agent's stacks on the same run shape
// are measured beside them (the agent's borrowed callers count as not
// their own). Launched, attached after warm-up, and interpreted (-Xint).
func TestBPFStacksGroundTruth(t *testing.T) {
	setupBuild(t)
	type shape struct {
		how     string
		jvmArgs []string
	}
	for name, home := range jdks() {
		shapes := map[string]shape{"launch": {"launch", nil}, "attach": {"attach", nil}}
		if name == "jdk17" {
			shapes["xint"] = shape{"launch", []string{"-Xint"}}
		}
		for sn, sh := range shapes {
			t.Run(name+"/"+sn, func(t *testing.T) {
				if sh.how == "attach" {
					// Its first second's samples, before the code cache
					// is known, must stay few: no other JVM beside it.
					testenv.Alone(t)
				} else {
					testenv.Slot(t)
				}
				b := profileStacks(t, home, sh.how, "bpf", sh.jvmArgs)
				a := profileStacks(t, home, sh.how, "agent", sh.jvmArgs)
				// The agent's paths match as well, but most borrow their
				// callers: its own stacks are SamplesJavaStack.
				t.Logf("paths with the whole known stack: bpf %.1f%%, agent %.1f%%; their own stack: bpf %.1f%%, agent %.1f%%; scanA's share: bpf %.1f%%, agent %.1f%%; BPF µs per sample: bpf %.2f, agent %.2f",
					pct(b.whole, b.java), pct(a.whole, a.java), pct(b.r.Stats.SamplesBPFComplete, b.java), pct(a.r.Stats.SamplesJavaStack, a.java),
					100*b.hotShare, 100*a.hotShare, b.bpfUsPerS, a.bpfUsPerS)
				if b.java == 0 || pct(b.whole, b.java) < 95 {
					t.Errorf("--stacks bpf: %d of %d samples with HotPaths frames have their own whole stack (%.1f%%), want at least 95%%",
						b.whole, b.java, pct(b.whole, b.java))
				}
				if pct(b.r.Stats.SamplesBPFComplete, b.java) < 95 {
					t.Errorf("--stacks bpf: %d stacks walked to the thread's entry for %d samples with HotPaths frames", b.r.Stats.SamplesBPFComplete, b.java)
				}
				if b.r.Stats.StackSignals != 0 {
					t.Errorf("--stacks bpf sent %d stack signals", b.r.Stats.StackSignals)
				}
				if sn == "xint" {
					// Interpreted loads seldom decode to a data address:
					// the hot object's share is not the stacks' to prove.
					return
				}
				checkAccessPaths(t, b.r)
				// The agent's AsyncGetCallTrace path, on the same shape.
				checkAccessPaths(t, a.r)
			})
		}
	}
}
