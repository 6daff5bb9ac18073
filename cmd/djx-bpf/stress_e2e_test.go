package main

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Stress tests, sized for CI: DJX_STRESS_CYCLES and DJX_STRESS_KILLS
// raise them (a full-size run: 100 cycles and 20 kills).

func stressN(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// stormJVM starts Storm with threads threads in its own directory (where
// an hs_err file would land), its heap touched at start-up so that its RSS
// moves only with what else it maps.
func stormJVM(t *testing.T, threads int) (*jvm, string) {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(filepath.Join(jdks()["jdk17"], "bin", "java"), "-XX:+UseG1GC", "-Xms256m", "-Xmx256m", "-XX:+AlwaysPreTouch",
		"-cp", classDir, "Storm", strconv.Itoa(threads))
	cmd.Dir = dir
	return startCmd(t, cmd), dir
}

func procCount(pid int, what string) int {
	if what == "fd" {
		ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		return len(ents)
	}
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	return bytes.Count(data, []byte("\n"))
}

func rssKiB(pid int) int {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	return 0
}

// checkAlive fails unless the JVM still runs and wrote no crash report.
func checkAlive(t *testing.T, j *jvm, dir string) {
	t.Helper()
	if err := j.cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("JVM gone: %v\n%s", err, j.output())
	}
	if hs, _ := filepath.Glob(filepath.Join(dir, "hs_err_pid*.log")); len(hs) > 0 {
		data, _ := os.ReadFile(hs[0])
		t.Fatalf("JVM crashed: %s\n%.3000s", hs[0], data)
	}
}

// TestStressAttachDetachCycles: profile one G1 JVM with 200 threads and a
// GC storm again and again: no crash, fds back where they were, mappings
// too (every attach reuses the one agent copy the first loaded), each
// cycle right after the last, and RSS close to an unprofiled twin's.
func TestStressAttachDetachCycles(t *testing.T) {
	setupBuild(t)
	parallel(t) // its JVM against an unprofiled twin started beside it
	cycles := stressN("DJX_STRESS_CYCLES", 8)
	j, dir := stormJVM(t, 200)
	twin, _ := stormJVM(t, 200)
	pid := j.cmd.Process.Pid
	out := t.TempDir()
	var fd0, maps0, rss0, twin0 int
	for i := 0; i < cycles; i++ {
		code, _, stderr := djx(t, "profile", "--pid", strconv.Itoa(pid), "--duration", "1s", "--format", "json", "-o", filepath.Join(out, "r.json"))
		if code != 0 {
			t.Fatalf("cycle %d: profile exited %d:\n%s\nJVM:\n%s", i, code, stderr, j.output())
		}
		// The next cycle starts at once: the agent gave the heap sampler
		// back before djx-bpf exited.
		checkAlive(t, j, dir)
		if i == 0 {
			fd0, maps0, rss0, twin0 = procCount(pid, "fd"), procCount(pid, "maps"), rssKiB(pid), rssKiB(twin.cmd.Process.Pid)
		}
	}
	fd, maps := procCount(pid, "fd"), procCount(pid, "maps")
	rss, twinRSS := rssKiB(pid), rssKiB(twin.cmd.Process.Pid)
	ratio := float64(rss) / float64(twinRSS)
	t.Logf("%d cycles: fds %d -> %d, mappings %d -> %d, RSS %d -> %d KiB (unprofiled twin %d -> %d), profiled/twin %.3f", cycles, fd0, fd, maps0, maps, rss0, rss, twin0, twinRSS, ratio)
	if fd > fd0+4 {
		t.Errorf("fds grew from %d to %d over %d cycles", fd0, fd, cycles-1)
	}
	// A copy of the library per attach would add about 5 mappings each.
	if maps > maps0+32 {
		t.Errorf("mappings grew from %d to %d over %d cycles", maps0, maps, cycles-1)
	}
	// A leak of the agent's buffers (8 MiB a session) grows the profiled
	// JVM's own RSS by that much each cycle after the first. Both heaps are
	// touched at start-up (AlwaysPreTouch), so G1 touching more of its heap
	// in one JVM than in the other is no noise here: over 7 cycles the
	// profiled JVM grew 1-6 MiB more than its twin in six runs (without
	// pre-touch, -19 to +38 MiB). The ratio still catches only gross leaks.
	if grow := (rss - rss0) - (twinRSS - twin0); grow > 4<<10*(cycles-1) {
		t.Errorf("RSS grew by %d KiB more than the twin's over %d cycles after the first", grow, cycles-1)
	}
	if ratio > 1.3 {
		t.Errorf("RSS of the profiled JVM is %.2f times its unprofiled twin's", ratio)
	}
}

// TestStressKill9: djx-bpf killed with SIGKILL at random points of its
// profile leaves the JVM running and able to be profiled again, and the
// next run removes the channel directories the killed ones left.
func TestStressKill9(t *testing.T) {
	setupBuild(t)
	parallel(t) // its own JVM, and the channel directories of the runs it killed
	kills := stressN("DJX_STRESS_KILLS", 5)
	j, dir := stormJVM(t, 50)
	pid := strconv.Itoa(j.cmd.Process.Pid)
	killed := map[int]bool{}
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	for i := 0; i < kills; i++ {
		cmd := exec.Command(binPath, "profile", "--pid", pid, "--duration", "30s", "--format", "json", "-o", filepath.Join(t.TempDir(), "r.json"))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		killed[cmd.Process.Pid] = true
		time.Sleep(time.Duration(100+rng.Intn(2500)) * time.Millisecond)
		cmd.Process.Kill() // our own child, by PID
		cmd.Wait()
		checkAlive(t, j, dir)
		time.Sleep(200 * time.Millisecond) // the agent sees the socket close
	}
	code, _, stderr := djx(t, "profile", "--pid", pid, "--duration", "2s", "--format", "json", "-o", filepath.Join(t.TempDir(), "r.json"))
	if code != 0 {
		t.Fatalf("profile after %d kills exited %d:\n%s\nJVM:\n%s", kills, code, stderr, j.output())
	}
	checkAlive(t, j, dir)
	dirs, _ := filepath.Glob("/tmp/djx-bpf-*")
	for _, d := range dirs {
		data, err := os.ReadFile(filepath.Join(d, "owner"))
		var p, start int
		if err == nil {
			fmt.Sscanf(string(data), "djx-bpf %d %d", &p, &start)
		}
		if killed[p] {
			t.Errorf("%s of killed djx-bpf %d left behind after the next run", d, p)
		}
	}
}

// TestStressStoppedTarget: a target stopped with SIGSTOP does not hold
// djx-bpf: a timed profile ends close to its duration, SIGTERM ends one
// within seconds, and the JVM runs on once continued.
func TestStressStoppedTarget(t *testing.T) {
	setupBuild(t)
	parallel(t) // mostly waits on its own stopped JVM
	j, dir := stormJVM(t, 20)
	pid := j.cmd.Process.Pid
	defer j.cmd.Process.Signal(syscall.SIGCONT)
	cmd := exec.Command(binPath, "profile", "--pid", strconv.Itoa(pid), "--duration", "60s", "--format", "json", "-o", filepath.Join(t.TempDir(), "r.json"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	defer func() {
		select {
		case <-done:
		default:
			cmd.Process.Kill() // our own child, by PID
			<-done
		}
	}()
	time.Sleep(3 * time.Second) // attached and sampling
	if err := j.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	start := time.Now()
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("djx-bpf still running %v after SIGTERM with its target stopped:\n%s", time.Since(start), stderr.String())
	}
	t.Logf("djx-bpf ended %v after SIGTERM (target stopped), exit %d", time.Since(start).Round(100*time.Millisecond), cmd.ProcessState.ExitCode())
	time.Sleep(5 * time.Second) // the target stays stopped 10 s in all
	j.cmd.Process.Signal(syscall.SIGCONT)
	time.Sleep(time.Second)
	checkAlive(t, j, dir)
	code, _, errOut := djx(t, "profile", "--pid", strconv.Itoa(pid), "--duration", "1s", "--format", "json", "-o", filepath.Join(t.TempDir(), "r.json"))
	if code != 0 {
		t.Fatalf("profile after the stop exited %d:\n%s", code, errOut)
	}
}
