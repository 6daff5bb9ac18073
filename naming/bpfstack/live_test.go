package bpfstack

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/djx-bpf/djx-bpf/internal/testenv"
	"github.com/djx-bpf/djx-bpf/loader"
)

// startHotPaths starts testdata/java/HotPaths.java on jdk for secs seconds
// and waits for its "ready" and a warm-up; the JVM is killed by its pid
// when the test ends, failed or not.
func startHotPaths(t *testing.T, jdk testenv.JDK, secs string) int {
	pid := startJava(t, jdk, "HotPaths", nil, secs)
	time.Sleep(2 * time.Second) // the scans compiled
	return pid
}

// startJava compiles and starts testdata/java/CLASS.java on jdk with the
// JVM's flags and the program's args, and waits for its "ready".
func startJava(t *testing.T, jdk testenv.JDK, class string, flags []string, args ...string) int {
	t.Helper()
	dir := t.TempDir()
	javac := filepath.Join(testenv.JDK17.Home, "bin", "javac")
	if out, err := exec.Command(javac, "-d", dir, filepath.Join("..", "..", "testdata", "java", class+".java")).CombinedOutput(); err != nil {
		t.Fatalf("javac: %v: %s", err, out)
	}
	cmd := exec.Command(jdk.Java(), append(append(append([]string{"-Xmx1g", "-cp", dir}, flags...), class), args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.TrimSpace(sc.Text()) == "ready" {
				close(ready)
				break
			}
		}
		for sc.Scan() {
		}
	}()
	select {
	case <-ready:
	case <-time.After(20 * time.Second):
		t.Fatalf("%s did not start", class)
	}
	return cmd.Process.Pid
}

// window is one sampling window's figures.
type window struct {
	runs    uint64
	runTime time.Duration
	java    int // samples with the program's frames (HotPaths')
	whole   int // ... whose frames from the first HotPaths one are its known stack
	frames  int // Java frames of the samples counted in java
	resolve time.Duration
}

// sampleWindow samples pid for d with the default program or the
// unwinding one, naming each stack with r and judging its path with
// judge (HotPaths' known stacks when nil).
func sampleWindow(t *testing.T, pid int, unwind bool, r *Resolver, d time.Duration, judge func(*window, Path)) window {
	t.Helper()
	s, err := loader.Open(loader.Config{Source: loader.Decode, Unwind: unwind})
	if err != nil {
		t.Fatalf("open sampler (unwind %v): %v", unwind, err)
	}
	defer s.Close()
	if err := s.AddPID(pid); err != nil {
		t.Fatal(err)
	}
	if unwind {
		heaps, l, err := r.Target()
		if err != nil {
			t.Fatal(err)
		}
		if err := s.SetUnwind(pid, heaps, l); err != nil {
			t.Fatal(err)
		}
	}
	var w window
	t0, n0, _ := s.RunStats()
	end := time.Now().Add(d)
	s.SetDeadline(end)
	for {
		var smp loader.Sample
		if err := s.Read(&smp); err != nil {
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatal(err)
			}
			break
		}
		if smp.Stack == nil {
			continue
		}
		start := time.Now()
		p := r.Resolve(smp.Stack, Sample{IP: smp.IP(), R13: smp.Regs[2]})
		w.resolve += time.Since(start)
		if judge == nil {
			judge = (*window).count
		}
		judge(&w, p)
	}
	t1, n1, ok := s.RunStats()
	if !ok {
		t.Skip("kernel keeps no BPF run-time statistics")
	}
	w.runTime, w.runs = t1-t0, n1-n0
	return w
}

// hotCallers is HotPaths' stack above each of its methods, by name.
var hotCallers = map[string]string{
	"scanA": "run main", "scanB": "run main", "scanCold": "run main", "run": "main",
	"allocHot": "main", "allocCold": "main", "main": "",
}

func (w *window) count(p Path) {
	var ms []string
	for _, f := range p.Frames {
		if f.Class == "HotPaths" || len(ms) > 0 {
			ms = append(ms, f.Class+"."+f.Name)
		}
	}
	if len(ms) == 0 {
		return
	}
	w.java++
	want, ok := hotCallers[strings.TrimPrefix(ms[0], "HotPaths.")]
	got := strings.ReplaceAll(strings.Join(ms[1:], " "), "HotPaths.", "")
	if ok && got == want && p.Missing == "" {
		w.whole++
	}
}

// TestLiveUnwind samples a live HotPaths with the default program and the
// unwinding one in alternate windows: at least 95% of the samples with
// HotPaths frames get their whole known stack, and the logs give the BPF
// time per run of each program and the naming time per stack.
func TestLiveUnwind(t *testing.T) {
	testenv.Root(t)
	if err := loader.Preflight(); err != nil {
		testenv.Skip(t, "needs BPF: %v", err)
	}
	for _, jdk := range testenv.JDKs(t) {
		t.Run(jdk.Name, func(t *testing.T) {
			t.Parallel() // stack truth of one JVM's own samples
			pid := startHotPaths(t, jdk, "60")
			r, err := Open(pid)
			if err != nil {
				t.Fatal(err)
			}
			var def, uw window
			for range 3 {
				d := sampleWindow(t, pid, false, r, 2*time.Second, nil)
				u := sampleWindow(t, pid, true, r, 2*time.Second, nil)
				def.runs, def.runTime = def.runs+d.runs, def.runTime+d.runTime
				uw.runs, uw.runTime, uw.java, uw.whole, uw.resolve = uw.runs+u.runs, uw.runTime+u.runTime, uw.java+u.java, uw.whole+u.whole, uw.resolve+u.resolve
			}
			if def.runs == 0 || uw.runs == 0 || uw.java == 0 {
				t.Fatalf("no samples: default %+v, unwind %+v", def, uw)
			}
			t.Logf("BPF per run: default %.2f µs (%d runs), unwinding %.2f µs (%d runs); stacks named in %.1f µs each; whole known stacks %d of %d with HotPaths frames (%.1f%%); stats %+v, last error %v",
				us(def.runTime, def.runs), def.runs, us(uw.runTime, uw.runs), uw.runs, us(uw.resolve, uint64(uw.java)),
				uw.whole, uw.java, 100*float64(uw.whole)/float64(uw.java), r.Stats(), r.LastError())
			if 100*uw.whole < 95*uw.java {
				t.Errorf("%d of %d samples with HotPaths frames have their whole known stack, want at least 95%%", uw.whole, uw.java)
			}
		})
	}
}

func us(d time.Duration, n uint64) float64 { return float64(d.Microseconds()) / float64(max(n, 1)) }

// deepJudge judges DeepStack's paths: the known stack is scan, depth + 1
// downs and main, whole; deeper than the unwinder walks, scan and only
// downs, cut for depth after MaxUnwindFrames physical frames (each Java
// frame one: DeepStack runs without inlining).
func deepJudge(depth int) func(*window, Path) {
	return func(w *window, p Path) {
		var ms []string
		for _, f := range p.Frames {
			if f.Class == "DeepStack" {
				ms = append(ms, f.Name)
			}
		}
		if len(ms) == 0 {
			return
		}
		w.java++
		w.frames += len(p.Frames)
		if ms[0] != "scan" {
			return
		}
		downs := 0
		for _, m := range ms[1:] {
			if m != "down" {
				break
			}
			downs++
		}
		if depth+3 <= loader.MaxUnwindFrames {
			if downs == depth+1 && len(ms) == depth+3 && ms[len(ms)-1] == "main" && p.Missing == "" {
				w.whole++
			}
			return
		}
		if p.Missing == endReason(loader.UnwindDepth) && len(ms) == loader.MaxUnwindFrames && downs == len(ms)-1 {
			w.whole++
		}
	}
}

// TestLiveUnwindDeep samples DeepStack (testdata/java) at depths below,
// around and above the unwinder's cap: at least 90% of its samples have
// their whole known stack, or, above the cap, one cut for depth after
// MaxUnwindFrames frames. The logs give both programs' BPF time per run
// (alternate windows, as TestLiveUnwind).
func TestLiveUnwindDeep(t *testing.T) {
	testenv.Root(t)
	if err := loader.Preflight(); err != nil {
		testenv.Skip(t, "needs BPF: %v", err)
	}
	for _, jdk := range testenv.JDKs(t) {
		// Shallow stacks are TestLiveUnwind's; 100 is past the old cap
		// of 32, 200 past the 128-frame cap.
		for _, depth := range []int{100, 200} {
			t.Run(fmt.Sprintf("%s/depth%d", jdk.Name, depth), func(t *testing.T) {
				t.Parallel() // stack truth of one JVM's own samples
				pid := startJava(t, jdk, "DeepStack", []string{"-XX:CompileCommand=quiet", "-XX:CompileCommand=dontinline,DeepStack::*"}, strconv.Itoa(depth), "60")
				r, err := Open(pid)
				if err != nil {
					t.Fatal(err)
				}
				var def, uw window
				for range 2 {
					d := sampleWindow(t, pid, false, r, time.Second, deepJudge(depth))
					u := sampleWindow(t, pid, true, r, time.Second, deepJudge(depth))
					def.runs, def.runTime = def.runs+d.runs, def.runTime+d.runTime
					uw.runs, uw.runTime, uw.java, uw.whole, uw.frames = uw.runs+u.runs, uw.runTime+u.runTime, uw.java+u.java, uw.whole+u.whole, uw.frames+u.frames
				}
				if def.runs == 0 || uw.runs == 0 || uw.java == 0 {
					t.Fatalf("no samples: default %+v, unwind %+v", def, uw)
				}
				t.Logf("BPF per run: default %.2f µs (%d runs), unwinding %.2f µs (%d runs); %d of %d samples with DeepStack frames as expected (%.1f%%), %.1f Java frames each; stats %+v, last error %v",
					us(def.runTime, def.runs), def.runs, us(uw.runTime, uw.runs), uw.runs,
					uw.whole, uw.java, 100*float64(uw.whole)/float64(uw.java), float64(uw.frames)/float64(uw.java), r.Stats(), r.LastError())
				if 100*uw.whole < 90*uw.java {
					t.Errorf("%d of %d samples with DeepStack frames have the expected stack, want at least 90%%", uw.whole, uw.java)
				}
			})
		}
	}
}
