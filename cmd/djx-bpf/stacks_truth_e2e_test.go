package main

// Ground knownStacksOf for --stacks bpf beyond HotPaths (issue 29): deep
// recursion, C2-inlined code, lambdas and streams; HotPaths under Serial,
// Parallel and ZGC; and a scan of several JVMs with BPF stacks.

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/djx-bpf/djx-bpf/internal/testenv"
	"github.com/djx-bpf/djx-bpf/report"
)

var (
	knownOnce sync.Once
	knownErr  error
)

// setupKnownStacks is setup, and the ground knownStacksOf of this file compiled into
// classDir.
func setupKnownStacks(t *testing.T) {
	t.Helper()
	setupBuild(t)
	knownOnce.Do(func() {
		javac := filepath.Join(jdks()["jdk17"], "bin", "javac")
		if out, err := exec.Command(javac, "-d", classDir, "../../testdata/java/DeepRecursion.java",
			"../../testdata/java/StreamTruth.java", "../../testdata/java/InlineTruth.java").CombinedOutput(); err != nil {
			knownErr = fmt.Errorf("javac: %v\n%s", err, out)
		}
	})
	if knownErr != nil {
		t.Fatal(knownErr)
	}
}

// pathStep is one frame of a known path: "Class.method" (a name ending in
// $, such as "StreamTruth.lambda$revenue$", is a prefix: javac numbers
// lambdas) at the line of a comment marker ("": any line).
type pathStep struct{ method, marker string }

// knownStacks is a program whose stacks are known: its frames, from the
// first one (the leaf side) to main, are a suffix of one of its chains.
// The first own frame may be at any line of its method; the callers must
// be at their markers. Frames below the first own one (native code, the
// JDK's) may be anything; with jdkBetween, JDK frames (not the program's,
// not "[...]" marks) may also sit between the program's frames, but the
// path must still end at the program's main.
type knownStacks struct {
	main       string // the class, also the file's name
	chains     [][]pathStep
	jdkBetween bool
}

func (tr knownStacks) file() string { return tr.main + ".java" }

// own says whether frame is the program's: its class or a nested class,
// not a lambda's hidden class.
func (tr knownStacks) own(frame string) bool {
	return (strings.HasPrefix(frame, tr.main+".") || strings.HasPrefix(frame, tr.main+"$")) && !strings.Contains(frame, "$$Lambda")
}

func (s pathStep) matches(t *testing.T, file, frame string, leaf bool) bool {
	method, line, ok := strings.Cut(frame, ":")
	if !ok && !leaf {
		return false // a caller's frame always has its line
	}
	if strings.HasSuffix(s.method, "$") {
		if !strings.HasPrefix(method, s.method) {
			return false
		}
	} else if method != s.method {
		return false
	}
	return leaf || s.marker == "" || line == fmt.Sprint(markerLine(t, file, s.marker))
}

// known says whether path (leaf first) holds a known whole stack of tr.
func (tr knownStacks) known(t *testing.T, path []string) bool {
	i := 0
	for i < len(path) && !tr.own(path[i]) {
		i++
	}
	rest := path[i:]
	if len(rest) == 0 || !tr.own(rest[len(rest)-1]) {
		return false
	}
	var fr []string
	for _, f := range rest {
		switch {
		case tr.own(f):
			fr = append(fr, f)
		case !tr.jdkBetween || strings.HasPrefix(f, "["):
			return false
		}
	}
	for _, c := range tr.chains {
	next:
		for k := range c {
			if len(c)-k != len(fr) {
				continue
			}
			for j, f := range fr {
				if !c[k+j].matches(t, tr.file(), f, j == 0) {
					continue next
				}
			}
			return true
		}
	}
	return false
}

// tally is a profile's samples against a program's known stacks.
type tally struct {
	java, whole uint64 // samples with the program's frames; of them, known whole stacks
	// hot, hotWhole: samples whose first own frame is a chain's leaf at
	// its marker (a known load, named at its line); of them, known whole
	// stacks.
	hot, hotWhole uint64
	// short: paths with no "[...]" mark (whole, for the unwinder) that
	// do not reach the program's main: a walk that left the code cache
	// before the thread's entry.
	short uint64
}

// count tallies the samples of r; the paths that are not known are
// logged (8 of them).
func (tr knownStacks) count(t *testing.T, r *report.Report) tally {
	t.Helper()
	paths := append([]report.Access(nil), r.Remainder...)
	for _, o := range r.Objects {
		paths = append(paths, o.Accesses...)
	}
	var n tally
	bad := map[string]uint64{}
	for _, a := range paths {
		if !tr.ownPath(a.Path) {
			continue
		}
		n.java += a.Samples
		hot := tr.hotLeaf(t, a.Path)
		if hot {
			n.hot += a.Samples
		}
		if tr.known(t, a.Path) {
			n.whole += a.Samples
			if hot {
				n.hotWhole += a.Samples
			}
		} else {
			bad[shortPath(a.Path)] += a.Samples
			if last := a.Path[len(a.Path)-1]; !strings.HasPrefix(last, tr.main+".main:") && !slices.ContainsFunc(a.Path, func(f string) bool { return strings.HasPrefix(f, "[") }) {
				n.short += a.Samples
			}
		}
	}
	logged := 0
	for p, k := range bad {
		if logged++; logged > 8 {
			t.Logf("... %d more paths not known", len(bad)-8)
			break
		}
		t.Logf("not a known stack: %d %s", k, p)
	}
	return n
}

// hotLeaf says whether path's first own frame is a chain's leaf at its
// marker.
func (tr knownStacks) hotLeaf(t *testing.T, path []string) bool {
	for _, f := range path {
		if !tr.own(f) {
			continue
		}
		for _, c := range tr.chains {
			if c[0].marker != "" && c[0].matches(t, tr.file(), f, false) {
				return true
			}
		}
		return false
	}
	return false
}

func (tr knownStacks) ownPath(path []string) bool {
	for _, f := range path {
		if tr.own(f) {
			return true
		}
	}
	return false
}

// shortPath joins a path, runs of one frame written once with a count.
func shortPath(p []string) string {
	var b strings.Builder
	for i := 0; i < len(p); {
		j := i
		for j < len(p) && p[j] == p[i] {
			j++
		}
		if i > 0 {
			b.WriteString(" <- ")
		}
		b.WriteString(p[i])
		if j-i > 1 {
			fmt.Fprintf(&b, " x%d", j-i)
		}
		i = j
	}
	return b.String()
}

// heaviest is the heaviest access path of r's top object, its program's
// frames only, and that object's share of the samples.
func (tr knownStacks) heaviest(r *report.Report) (string, *report.Object) {
	if len(r.Objects) == 0 || len(r.Objects[0].Accesses) == 0 {
		return "", nil
	}
	var fr []string
	for _, f := range r.Objects[0].Accesses[0].Path {
		if tr.own(f) {
			fr = append(fr, f)
		}
	}
	return shortPath(fr), &r.Objects[0]
}

func repeatStep(s pathStep, n int) []pathStep {
	out := make([]pathStep, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func joinSteps(parts ...[]pathStep) []pathStep {
	var out []pathStep
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// deepRecursionDepth is DeepRecursion.DEPTH.
const deepRecursionDepth = 96

var knownStacksOf = map[string]knownStacks{
	// DeepRecursion: sum's loop at the bottom of DEPTH + 1 eval frames
	// (a constant's eval is called from CALL-RIGHT at any depth).
	"deep": func() knownStacks {
		tr := knownStacks{main: "DeepRecursion"}
		root := []pathStep{{"DeepRecursion.query", "CALL-EVAL"}, {"DeepRecursion.main", "CALL-QUERY"}}
		tr.chains = append(tr.chains, joinSteps([]pathStep{{"DeepRecursion.sum", "ACCESS"}, {"DeepRecursion.eval", "CALL-SUM"}},
			repeatStep(pathStep{"DeepRecursion.eval", "CALL-LEFT"}, deepRecursionDepth), root))
		for k := 0; k < deepRecursionDepth; k++ {
			tr.chains = append(tr.chains, joinSteps([]pathStep{{"DeepRecursion.eval", ""}, {"DeepRecursion.eval", "CALL-RIGHT"}},
				repeatStep(pathStep{"DeepRecursion.eval", "CALL-LEFT"}, k), root))
		}
		return tr
	}(),
	// InlineTruth: LongMap's accessors inlined into countMatches' loop.
	"inline": {main: "InlineTruth", chains: [][]pathStep{
		{{"InlineTruth$LongMap.keyAt", "KEY"}, {"InlineTruth$LongMap.slot", "CALL-KEYAT"}, {"InlineTruth$LongMap.get", "CALL-SLOT"},
			{"InlineTruth.countMatches", "CALL-GET"}, {"InlineTruth.main", "CALL-JOIN"}},
		{{"InlineTruth$LongMap.mix", ""}, {"InlineTruth$LongMap.slot", "CALL-MIX"}, {"InlineTruth$LongMap.get", "CALL-SLOT"},
			{"InlineTruth.countMatches", "CALL-GET"}, {"InlineTruth.main", "CALL-JOIN"}},
		{{"InlineTruth$LongMap.get", "VALUE"}, {"InlineTruth.countMatches", "CALL-GET"}, {"InlineTruth.main", "CALL-JOIN"}},
	}},
	// StreamTruth: lambdas in a stream pipeline, JDK frames between.
	"streams": {main: "StreamTruth", jdkBetween: true, chains: [][]pathStep{
		{{"StreamTruth.lambda$revenue$", "ACCESS"}, {"StreamTruth.revenue", "CALL-SUM"}, {"StreamTruth.total", "CALL-REGION"},
			{"StreamTruth.main", "CALL-REPORT"}},
		{{"StreamTruth.lambda$revenue$", "ORDERS"}, {"StreamTruth.revenue", "CALL-SUM"}, {"StreamTruth.total", "CALL-REGION"},
			{"StreamTruth.main", "CALL-REPORT"}},
	}},
}

// knownRun is one profile's figures against a program's known stacks.
type knownRun struct {
	tally
	top string // the top object's heaviest path, the program's frames
	r   *report.Report
}

// profileKnown runs djx-bpf profile with --stacks mode and args (--pid
// or a command) and counts the samples against tr. It skips, saying why,
// when the kernel refuses the unwinding program.
func profileKnown(t *testing.T, tr knownStacks, mode string, args ...string) knownRun {
	t.Helper()
	out := filepath.Join(t.TempDir(), "r.json")
	args = append([]string{"profile", "--stacks", mode, "--format", "json", "-o", out}, args...)
	code, stdout, stderr := djx(t, args...)
	if code != 0 && mode == "bpf" && strings.Contains(stderr, "--stacks bpf:") {
		t.Skipf("the kernel refuses the BPF unwinder: %s", stderr)
	}
	if code != 0 {
		t.Fatalf("djx-bpf %v exited %d:\n%s\n%s", args, code, stdout, stderr)
	}
	return knownFigures(t, tr, mode, readReport(t, out))
}

func knownFigures(t *testing.T, tr knownStacks, mode string, r *report.Report) knownRun {
	t.Helper()
	run := knownRun{tally: tr.count(t, r), r: r}
	var hot *report.Object
	run.top, hot = tr.heaviest(r)
	s := r.Stats
	share := 0.0
	if hot != nil {
		share = 100 * hot.Share
	}
	t.Logf("--stacks %s: samples %d, with %s frames %d, known whole stack %d (%.1f%%); at a known load %d, known whole %d (%.1f%%); whole but short of main %d; own stacks: bpf %d (complete %d), agent %d, borrowed %d; bpf ends %v; top object %.1f%%, its heaviest path %s",
		mode, s.Samples, tr.main, run.java, run.whole, pct(run.whole, run.java), run.hot, run.hotWhole, pct(run.hotWhole, run.hot), run.short,
		s.SamplesBPFStack, s.SamplesBPFComplete, s.SamplesJavaStack, s.SamplesStackBorrowed, s.BPFStackEnds, share, run.top)
	return run
}

// checkBPFKnown asserts a --stacks bpf run: at least 95% of the samples
// with the program's frames have a known whole stack of their own, at
// most 1% a whole one short of main, and the top object's heaviest path
// is a known one.
func checkBPFKnown(t *testing.T, tr knownStacks, b knownRun) {
	t.Helper()
	// Samples taken before the code cache was known (the first second of
	// an attach) have no stack to judge; they are bounded apart.
	early := min(b.r.Stats.BPFStackEnds["code cache unknown"], b.java-b.whole)
	if early*10 > b.java {
		t.Errorf("--stacks bpf: %d of %d samples with %s frames came before the code cache was known, want at most 10%%", early, b.java, tr.main)
	}
	if b.java == 0 || pct(b.whole, b.java-early) < 95 {
		t.Errorf("--stacks bpf: %d of %d samples with %s frames (and a known code cache) have a known whole stack (%.1f%%), want at least 95%%",
			b.whole, b.java-early, tr.main, pct(b.whole, b.java-early))
	}
	// A walk that leaves the code cache after a Java frame ends whole
	// (the thread's entry); a frame unwound wrongly (a sample in an
	// epilogue) can leave it early: a few per thousand at most.
	if b.short*100 > b.java {
		t.Errorf("--stacks bpf: %d of %d samples with %s frames have a whole stack short of main", b.short, b.java, tr.main)
	}
	if b.r.Stats.StackSignals != 0 {
		t.Errorf("--stacks bpf sent %d stack signals", b.r.Stats.StackSignals)
	}
	if len(b.r.Objects) == 0 || len(b.r.Objects[0].Accesses) == 0 || !tr.known(t, b.r.Objects[0].Accesses[0].Path) {
		var p []string
		if len(b.r.Objects) > 0 && len(b.r.Objects[0].Accesses) > 0 {
			p = b.r.Objects[0].Accesses[0].Path
		}
		t.Errorf("--stacks bpf: the top object's heaviest path is not known: %s", shortPath(p))
	}
}

// Deep recursion, C2-inlined code, lambdas and streams: each program is
// started once (DebugNonSafepoints: the lines of code compiled before the
// attach are exact), warmed up, and profiled attached with --stacks bpf,
// then with --stacks agent. At least 95% of the bpf run's samples with the
// program's frames must have a known whole stack; the agent run's figures
// and its heaviest path are logged beside them.
func TestBPFStacksTruth(t *testing.T) {
	setupKnownStacks(t)
	testenv.Alone(t) // the attach runs count samples lost to a code cache not yet known
	for _, name := range []string{"deep", "inline", "streams"} {
		tr := knownStacksOf[name]
		for jn, home := range jdks() {
			t.Run(name+"/"+jn, func(t *testing.T) {
				j := startJVM(t, home, []string{"-XX:+UnlockDiagnosticVMOptions", "-XX:+DebugNonSafepoints"}, "-main="+tr.main, "20")
				time.Sleep(2 * time.Second) // warm-up: the hot code compiled before the attach
				pid := fmt.Sprint(j.cmd.Process.Pid)
				b := profileKnown(t, tr, "bpf", "--pid", pid, "--duration", "3s")
				a := profileKnown(t, tr, "agent", "--pid", pid, "--duration", "3s")
				t.Logf("%s %s: known whole stacks: bpf %d/%d (%.1f%%), agent paths %d/%d (%.1f%%, own stacks %.1f%%); at known loads: bpf %.1f%%, agent %.1f%%; heaviest paths agree: %v",
					name, jn, b.whole, b.java, pct(b.whole, b.java), a.whole, a.java, pct(a.whole, a.java),
					pct(a.r.Stats.SamplesJavaStack, a.java), pct(b.hotWhole, b.hot), pct(a.hotWhole, a.hot), b.top == a.top)
				if b.top != a.top {
					t.Logf("heaviest path: bpf %s; agent %s", b.top, a.top)
				}
				checkBPFKnown(t, tr, b)
				if name == "deep" && len(b.r.Objects) > 0 {
					var deepest int
					for _, acc := range b.r.Objects[0].Accesses {
						deepest = max(deepest, len(acc.Path))
					}
					t.Logf("deepest path of the top object: %d frames (the known one: %d)", deepest, deepRecursionDepth+4)
				}
			})
		}
	}
}

// hotPathsKnown is HotPaths' known stacks (stackTruth's), each method's
// load at its marker.
func hotPathsKnown() knownStacks {
	loads := map[string]string{"scanA": "ACCESS-A", "scanB": "ACCESS-B", "scanCold": "ACCESS-COLD"}
	tr := knownStacks{main: "HotPaths"}
	for m, callers := range hotPathsCallers {
		c := []pathStep{{"HotPaths." + m, loads[m]}}
		for _, cl := range callers {
			c = append(c, pathStep{"HotPaths." + cl[0], cl[1]})
		}
		tr.chains = append(tr.chains, c)
	}
	return tr
}

// collectorWorks says why java cannot run with gc, or "".
func collectorWorks(home, gc string) string {
	out, err := exec.Command(filepath.Join(home, "bin", "java"), "-XX:+Use"+gc, "-version").CombinedOutput()
	if err != nil {
		return fmt.Sprintf("%v: %s", err, strings.TrimSpace(string(out)))
	}
	return ""
}

// HotPaths launched under Serial, Parallel and ZGC (G1 is
// TestBPFStacksGroundTruth's) with --stacks bpf: at least 95% of the
// samples with HotPaths frames have their own whole known stack, and
// scanA's paths have about 3/4 of the scans' samples.
func TestBPFStacksCollectors(t *testing.T) {
	setupBuild(t)
	t.Parallel() // launched: the code cache is known from the start, unlike an attach's first second
	for jn, home := range jdks() {
		for _, gc := range []string{"SerialGC", "ParallelGC", "ZGC"} {
			t.Run(jn+"/"+gc, func(t *testing.T) {
				parallel(t)
				if why := collectorWorks(home, gc); why != "" {
					t.Skipf("%s has no %s: %s", jn, gc, why)
				}
				tr := hotPathsKnown()
				b := profileKnown(t, tr, "bpf", "--", filepath.Join(home, "bin", "java"), "-Xmx1g", "-XX:+Use"+gc, "-cp", classDir, "HotPaths", "4")
				checkBPFKnown(t, tr, b)
				if java, whole := stackTruth(t, b.r); java != b.java || whole != b.whole {
					t.Errorf("stackTruth gives %d of %d, the known stacks %d of %d", whole, java, b.whole, b.java)
				}
				if pct(b.r.Stats.SamplesBPFComplete, b.java) < 95 {
					t.Errorf("--stacks bpf: %d stacks walked to the thread's entry for %d samples with HotPaths frames", b.r.Stats.SamplesBPFComplete, b.java)
				}
				// The loads' split, over every path: which object a sample
				// lands in after a full GC moved it is the relocation
				// tests' concern (Parallel and Serial re-find moved arrays
				// late), not the stacks'.
				if a, b := scanLeaves(b.r); a+b == 0 || pct(a, a+b) < 60 || pct(a, a+b) > 90 {
					t.Errorf("scanA has %d of the %d scanA and scanB samples; its loads are 3/4 of them", a, a+b)
				}
			})
		}
	}
}

// scanLeaves counts the samples whose path starts in HotPaths.scanA and
// in HotPaths.scanB, in every object and the remainder.
func scanLeaves(r *report.Report) (a, b uint64) {
	paths := slices.Clone(r.Remainder)
	for _, o := range r.Objects {
		paths = append(paths, o.Accesses...)
	}
	for _, p := range paths {
		if len(p.Path) == 0 {
			continue
		}
		switch {
		case strings.HasPrefix(p.Path[0], "HotPaths.scanA:"):
			a += p.Samples
		case strings.HasPrefix(p.Path[0], "HotPaths.scanB:"):
			b += p.Samples
		}
	}
	return a, b
}

// scan --stacks bpf: one sampler and one unwinding program for several
// JVMs, each with its own code cache. HotPaths under Serial, InlineTruth
// under Parallel (Temurin 25 when present) and StreamTruth under ZGC,
// attached after a second (DebugNonSafepoints, as for TestBPFStacksTruth):
// each JVM's report has at least 95% known whole stacks of its own
// program and no frames of the others'.
func TestBPFStacksScan(t *testing.T) {
	setupKnownStacks(t)
	testenv.Alone(t) // as TestBPFStacksTruth, for several JVMs at once
	marker := fmt.Sprintf("-Ddjx.bpfscan.test=%d", time.Now().UnixNano())
	home25 := jdks()["jdk17"]
	if h, ok := jdks()["temurin25"]; ok {
		home25 = h
	}
	type member struct {
		tr   knownStacks
		home string
		gc   string
	}
	members := []member{{hotPathsKnown(), jdks()["jdk17"], "SerialGC"}, {knownStacksOf["inline"], home25, "ParallelGC"}, {knownStacksOf["streams"], jdks()["jdk17"], "ZGC"}}
	byPID := map[int]member{}
	for _, m := range members {
		if why := collectorWorks(m.home, m.gc); why != "" {
			t.Skipf("no %s: %s", m.gc, why)
		}
		j := startJVM(t, m.home, []string{marker, "-XX:+Use" + m.gc, "-XX:+UnlockDiagnosticVMOptions", "-XX:+DebugNonSafepoints"}, "-main="+m.tr.main, "20")
		byPID[j.cmd.Process.Pid] = m
	}
	time.Sleep(time.Second) // warm-up
	out := filepath.Join(t.TempDir(), "scan.json")
	code, stdout, stderr := djx(t, "scan", "--stacks", "bpf", "--duration", "5s", "--match", regexp.QuoteMeta(marker), "--format", "json", "-o", out)
	if code != 0 && strings.Contains(stderr, "--stacks bpf:") {
		t.Skipf("the kernel refuses the BPF unwinder: %s", stderr)
	}
	if code != 0 {
		t.Fatalf("scan exited %d:\n%s\n%s", code, stdout, stderr)
	}
	sc := readScan(t, out)
	if len(sc.JVMs) != len(members) {
		t.Errorf("scan profiled %d JVMs, want %d; skipped %+v\n%s", len(sc.JVMs), len(members), sc.Skipped, stderr)
	}
	if sc.Stats.StackSignals != 0 {
		t.Errorf("scan --stacks bpf sent %d stack signals", sc.Stats.StackSignals)
	}
	for _, r := range sc.JVMs {
		m, ok := byPID[r.PID]
		if !ok {
			t.Errorf("pid %d profiled, not one of the test's", r.PID)
			continue
		}
		t.Run(m.tr.main+"/"+m.gc, func(t *testing.T) {
			checkBPFKnown(t, m.tr, knownFigures(t, m.tr, "bpf", r))
			for _, o := range members {
				if o.tr.main == m.tr.main {
					continue
				}
				if n := o.tr.count(t, r); n.java != 0 {
					t.Errorf("pid %d (%s): %d samples with %s frames", r.PID, m.tr.main, n.java, o.tr.main)
				}
			}
			if len(r.Notes) > 0 {
				t.Logf("notes: %q", r.Notes)
			}
		})
	}
}
