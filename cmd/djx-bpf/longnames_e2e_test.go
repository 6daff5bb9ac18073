package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/djx-bpf/djx-bpf/jvmsym"
)

// longNamesJVM compiles testdata/java/LongNames.java with its two
// methods' names made n characters long and starts it as user nobody,
// the target's user the issue reproduced with, in a directory nobody can
// read.
func longNamesJVM(t *testing.T, n int) *jvm {
	t.Helper()
	src, err := os.ReadFile("../../testdata/java/LongNames.java")
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "djx-longnames")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s := strings.ReplaceAll(string(src), "pingLONGNAME", "p"+strings.Repeat("i", n-1))
	s = strings.ReplaceAll(s, "pongLONGNAME", "p"+strings.Repeat("o", n-1))
	if err := os.WriteFile(filepath.Join(dir, "LongNames.java"), []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	home := jdks()["jdk17"]
	if out, err := exec.Command(filepath.Join(home, "bin", "javac"), "-d", dir, filepath.Join(dir, "LongNames.java")).CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	os.Chmod(filepath.Join(dir, "LongNames.class"), 0o644)
	cmd := exec.Command(filepath.Join(home, "bin", "java"), "-Xmx256m", "-cp", dir, "LongNames", "0")
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	return startCmd(t, cmd)
}

// TestLongMethodNames is issue 39's first finding, end to end: a JVM run
// by nobody whose two methods, named 60,000 characters each, call each
// other at random 100 deep, profiled at the defaults for 10 s. Root grew
// 80-130 MiB/s, never ended and wrote no report; it must end on time,
// write its report with the names cut, and stay under 600 MiB.
func TestLongMethodNames(t *testing.T) {
	setup(t)
	j := longNamesJVM(t, 60000)
	out := filepath.Join(t.TempDir(), "r.json")
	const duration = 10 * time.Second
	cmd := exec.Command(binPath, "profile", "--pid", fmt.Sprint(j.cmd.Process.Pid), "--duration", duration.String(), "--format", "json", "-o", out)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// Ending on time: the attach, the profile and the report, with room
	// for a busy machine; the old code was still growing at 60 s.
	const limit = duration + 30*time.Second
	var err error
	select {
	case err = <-done:
	case <-time.After(limit):
		cmd.Process.Kill()
		<-done
		t.Fatalf("profile still running %v after it started (duration %v):\n%s", limit, duration, stderr.String())
	}
	elapsed := time.Since(start)
	maxRSS := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10
	t.Logf("profile of %v took %v, peak RSS %d MiB", duration, elapsed.Round(time.Millisecond), maxRSS>>20)
	if err != nil {
		t.Fatalf("profile: %v\n%s", err, stderr.String())
	}
	if maxRSS > 600<<20 {
		t.Errorf("peak RSS %d MiB, want under 600 MiB", maxRSS>>20)
	}
	r := readReport(t, out)
	if r.Stats.Samples == 0 {
		t.Fatalf("no samples:\n%s", stderr.String())
	}
	// The names are in the report, cut and marked as cut.
	cut, long := 0, 0
	for _, o := range r.Objects {
		for _, a := range o.Accesses {
			for _, f := range a.Path {
				if strings.Contains(f, "piii") || strings.Contains(f, "pooo") {
					if strings.HasSuffix(f, jvmsym.NameCut) {
						cut++
					}
					if len(f) > jvmsym.MaxName {
						long++
					}
				}
			}
		}
	}
	if cut == 0 || long > 0 {
		t.Errorf("frames of the long names: %d cut, %d longer than %d bytes", cut, long, jvmsym.MaxName)
	}
	t.Logf("samples %d (own BPF stack %d), caps cut %v", r.Stats.Samples, r.Stats.SamplesBPFStack, r.Stats.CapsCut)
	if err := j.cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the JVM is gone: %v", err)
	}
}
