package scan

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/djx-bpf/djx-bpf/internal/testenv"
	"github.com/djx-bpf/djx-bpf/report"
	"github.com/djx-bpf/djx-bpf/target/discover"
)

// fakeLibJVM names the file a fake JVM maps (TestHelperProcess).
const fakeLibJVM = "DJX_FAKE_LIBJVM"

// helperRole is the environment variable that makes this test binary play
// a part in a test (TestHelperProcess) instead of running tests.
const helperRole = "DJX_HELPER_ROLE"

// TestHelperProcess is not a test: it is a fake JVM for the scan tests.
func TestHelperProcess(t *testing.T) {
	if os.Getenv(helperRole) == "fakejvm" {
		os.Exit(fakeJVM(os.Getenv(fakeLibJVM)))
	}
}

// fakeJVM maps lib, a file named libjvm.so, which is all discover needs to
// call a process a JVM, says so and waits for its stdin to close.
func fakeJVM(lib string) int {
	time.AfterFunc(60*time.Second, func() { os.Exit(97) }) // never outlives a failed test
	f, err := os.Open(lib)
	if err != nil {
		fmt.Println(err)
		return 1
	}
	if _, err := unix.Mmap(int(f.Fd()), 0, 4096, unix.PROT_READ, unix.MAP_SHARED); err != nil {
		fmt.Println(err)
		return 1
	}
	fmt.Println("mapped")
	bufio.NewReader(os.Stdin).ReadString('\n')
	return 0
}

// startFakeJVMs starts n fake JVMs as uid, closed when the test ends.
func startFakeJVMs(t *testing.T, bin, lib string, n int, uid uint32) []int {
	t.Helper()
	var pids []int
	for i := 0; i < n; i++ {
		cmd := exec.Command(bin, "-test.run=^TestHelperProcess$", "org.example.Fake"+fmt.Sprint(i))
		cmd.Env = append(os.Environ(), helperRole+"=fakejvm", fakeLibJVM+"="+lib)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			in.Close()
			cmd.Process.Kill()
			cmd.Wait()
		})
		if line, _ := bufio.NewReader(out).ReadString('\n'); line != "mapped\n" {
			t.Fatalf("fake JVM %d: %q", i, line)
		}
		pids = append(pids, cmd.Process.Pid)
	}
	return pids
}

// TestScanCapsFakeJVMs: one user who starts many processes that map a file
// named libjvm.so gets sessions for DefaultMaxPerUser of them; the rest are
// skipped with the reason, and not tried again at the next look.
func TestScanCapsFakeJVMs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run fake JVMs as nobody")
	}
	bin := testenv.HelperBinary(t)
	lib := filepath.Join(filepath.Dir(bin), "libjvm.so")
	if err := os.WriteFile(lib, make([]byte, 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	pids := startFakeJVMs(t, bin, lib, DefaultMaxPerUser+3, 65534)
	time.Sleep(minAge + 100*time.Millisecond) // past their startup
	jvms, err := discover.Find()
	if err != nil {
		t.Fatal(err)
	}
	so := Config{PIDs: pids}
	known := map[int]bool{}
	gate := newScanGate(so.MaxJVMs, so.MaxPerUser)
	sc := &report.Scan{}
	start := so.admit(jvms, known, gate, sc)
	if len(start) != DefaultMaxPerUser || sc.Stats.Discovered != len(pids) || len(sc.Skipped) != 3 {
		t.Fatalf("%d fake JVMs of one user: %d started, %d discovered, skipped %+v; want %d started, 3 skipped",
			len(pids), len(start), sc.Stats.Discovered, sc.Skipped, DefaultMaxPerUser)
	}
	for _, s := range sc.Skipped {
		if !strings.Contains(s.Reason, "uid 65534") || !strings.Contains(s.Reason, "--max-jvms-per-user") || !strings.HasPrefix(s.Main, "org.example.Fake") {
			t.Errorf("skipped %+v: want the per-user cap named", s)
		}
	}
	// The next look starts nothing more, even with a session freed.
	gate.release(65534)
	if again := so.admit(jvms, known, gate, sc); len(again) != 0 || len(sc.Skipped) != 3 {
		t.Errorf("second look started %d, skipped %d", len(again), len(sc.Skipped))
	}
}

// TestScanGate: the total and per-user caps, sessions given back, no cap
// when negative, and a skipped list that stays short.
func TestScanGate(t *testing.T) {
	g := newScanGate(3, 2)
	for i, c := range []struct {
		uid  int
		ok   bool
		flag string
	}{
		{1, true, ""}, {1, true, ""}, {1, false, "--max-jvms-per-user"}, {2, true, ""}, {2, false, "--max-jvms "}, {3, false, "--max-jvms "},
	} {
		ok, reason := g.admit(c.uid)
		if ok != c.ok || !strings.Contains(reason+" ", c.flag) {
			t.Errorf("admit %d (uid %d): %v %q, want %v naming %q", i, c.uid, ok, reason, c.ok, c.flag)
		}
	}
	g.release(1)
	if ok, reason := g.admit(3); !ok {
		t.Errorf("after a release: %q", reason)
	}
	open := newScanGate(-1, -1)
	for i := 0; i < 1000; i++ {
		if ok, _ := open.admit(0); !ok {
			t.Fatalf("no caps: refused the %dth", i)
		}
	}

	var jvms []discover.JVM
	for pid := 1; pid <= 100; pid++ {
		jvms = append(jvms, discover.JVM{})
		jvms[len(jvms)-1].PID, jvms[len(jvms)-1].UID = pid, 7
	}
	so := Config{MaxPerUser: 1}
	g = newScanGate(so.MaxJVMs, so.MaxPerUser)
	sc := &report.Scan{}
	if start := so.admit(jvms, map[int]bool{}, g, sc); len(start) != 1 {
		t.Errorf("per-user cap 1: started %d", len(start))
	}
	if len(sc.Skipped) != maxCapSkipsListed || g.unlisted != 99-maxCapSkipsListed {
		t.Errorf("skipped list %d, unlisted %d; want %d and %d", len(sc.Skipped), g.unlisted, maxCapSkipsListed, 99-maxCapSkipsListed)
	}
}
