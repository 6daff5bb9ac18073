package launch

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/djx-bpf/djx-bpf/internal/testenv"
)

// launchHelper is the environment variable that makes this test binary play
// a part in a test (TestHelperProcess) instead of running tests.
const launchHelper = "DJX_LAUNCH_HELPER"

// TestHelperProcess is not a test: it is the parent (djx-bpf, root, on a
// terminal) or the child (the launched application, as nobody) of
// TestLaunchChildHasNoTerminal.
func TestHelperProcess(t *testing.T) {
	switch os.Getenv(launchHelper) {
	case "parent":
		os.Exit(launchParent())
	case "child":
		os.Exit(launchChild())
	}
}

// launchParent plays djx-bpf: it launches the child as nobody with its own
// stdio, which is a terminal, and passes on the child's exit code.
func launchParent() int {
	sid, _ := unix.Getsid(0)
	fmt.Printf("parent sid=%d\n", sid)
	os.Setenv(launchHelper, "child")
	bin := os.Args[0]
	c, err := Start(bin, []string{bin, "-test.run=^TestHelperProcess$"}, &RunAs{UID: 65534, GID: 65534}, os.Stdin, os.Stdout, os.Stderr)
	if err != nil {
		fmt.Printf("start child: %v\n", err)
		return 99
	}
	code, err := c.ExitCode()
	if err != nil {
		fmt.Printf("wait child: %v\n", err)
		return 98
	}
	return code
}

// launchChild plays a hostile application: it tries to push input into
// the terminal of whoever launched it, then reports what it saw.
func launchChild() int {
	time.AfterFunc(30*time.Second, func() { os.Exit(97) }) // never outlives a failed test
	sid, _ := unix.Getsid(0)
	fmt.Printf("child pid=%d sid=%d uid=%d\n", os.Getpid(), sid, os.Getuid())
	if fd, err := unix.Open("/dev/tty", unix.O_RDWR|unix.O_NOCTTY, 0); err == nil {
		unix.Close(fd)
		fmt.Println("devtty: opened")
	} else {
		fmt.Printf("devtty: %v\n", err)
	}
	for fd := 0; fd < 3; fd++ {
		b := byte('#') // a comment to the shell, should it get through
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TIOCSTI, uintptr(unsafe.Pointer(&b)))
		if errno == 0 {
			fmt.Printf("tiocsti fd %d: pushed\n", fd)
		} else {
			fmt.Printf("tiocsti fd %d: %v\n", fd, errno)
		}
	}
	fmt.Println("out-1")
	fmt.Fprintln(os.Stderr, "err-2")
	fmt.Println("out-3")
	ints := make(chan os.Signal, 1)
	signal.Notify(ints, os.Interrupt)
	fmt.Println("reading")
	line, err := bufio.NewReader(os.Stdin).ReadString('\n')
	fmt.Printf("got %q %v\n", line, err)
	fmt.Println("waiting")
	<-ints
	fmt.Println("interrupted")
	return 7
}

// openPty returns a new pseudo-terminal's master and slave.
func openPty(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals: %v", err)
	}
	master = os.NewFile(uintptr(m), "ptmx")
	t.Cleanup(func() { master.Close() })
	if err := unix.IoctlSetPointerInt(m, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(m, unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("ptsname: %v", err)
	}
	s, err := unix.Open("/dev/pts/"+strconv.Itoa(n), unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	slave = os.NewFile(uintptr(s), "pts")
	t.Cleanup(func() { slave.Close() })
	return master, slave
}

// TestLaunchChildHasNoTerminal: a launched application run as another user
// (--user) is in a session of its own with no controlling terminal and no
// terminal on its stdio, so it cannot push input into the terminal of
// root's shell (TIOCSTI) or open it as /dev/tty. Its output still reaches
// the terminal in order, a line typed there reaches it, Ctrl-C there reaches
// it through djx-bpf, and its exit code comes back.
func TestLaunchChildHasNoTerminal(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run the child as nobody")
	}
	bin := testenv.HelperBinary(t)
	master, slave := openPty(t)
	parent := exec.Command(bin, "-test.run=^TestHelperProcess$")
	parent.Env = append(os.Environ(), launchHelper+"=parent")
	parent.Stdin, parent.Stdout, parent.Stderr = slave, slave, slave
	// Ctty 0: the parent's stdin, the terminal, becomes its controlling
	// terminal, with the parent's group in the foreground.
	parent.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	var out testenv.SyncBuffer
	copied := make(chan struct{})
	go func() { io.Copy(&out, master); close(copied) }()
	exited := make(chan struct{})
	go func() { parent.Wait(); close(exited) }()
	childPID := 0
	t.Cleanup(func() {
		parent.Process.Kill()
		<-exited
		if childPID > 0 {
			unix.Kill(childPID, unix.SIGKILL)
		}
	})
	waitFor := func(what string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !strings.Contains(out.String(), what) {
			if time.Now().After(deadline) {
				t.Fatalf("no %q on the terminal; it shows:\n%s", what, out.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFor("reading")
	if _, err := fmt.Sscanf(out.String()[strings.Index(out.String(), "child pid="):], "child pid=%d", &childPID); err != nil {
		t.Fatalf("no child pid: %v\n%s", err, out.String())
	}
	master.WriteString("hello\n")
	waitFor("waiting")
	master.Write([]byte{0x03}) // Ctrl-C: SIGINT to the terminal's foreground group
	select {
	case <-exited:
	case <-time.After(20 * time.Second):
		t.Fatalf("parent did not end after Ctrl-C; terminal:\n%s", out.String())
	}
	slave.Close()
	select {
	case <-copied:
	case <-time.After(2 * time.Second):
	}
	text := strings.ReplaceAll(out.String(), "\r\n", "\n")
	t.Logf("terminal:\n%s", text)
	checkNoTerminal(t, text, parent.ProcessState.ExitCode())
}

// checkNoTerminal checks what TestLaunchChildHasNoTerminal's terminal
// showed, and the exit code the parent passed on.
func checkNoTerminal(t *testing.T, text string, code int) {
	t.Helper()
	var parentSID, childPID, childSID, uid int
	fmt.Sscanf(text[strings.Index(text, "parent sid="):], "parent sid=%d", &parentSID)
	fmt.Sscanf(text[strings.Index(text, "child pid="):], "child pid=%d sid=%d uid=%d", &childPID, &childSID, &uid)
	if uid != 65534 {
		t.Errorf("child uid %d, want 65534", uid)
	}
	if childSID == parentSID || childSID != childPID {
		t.Errorf("child session %d (pid %d), parent's %d: want a session of its own", childSID, childPID, parentSID)
	}
	if strings.Contains(text, "devtty: opened") {
		t.Error("the child opened /dev/tty: it has a controlling terminal")
	}
	if strings.Contains(text, "pushed") {
		t.Error("the child pushed input into the terminal with TIOCSTI")
	}
	for _, want := range []string{"tiocsti fd 0: inappropriate ioctl", "out-1\nerr-2\nout-3\n", `got "hello\n" <nil>`, "interrupted"} {
		if !strings.Contains(text, want) {
			t.Errorf("terminal lacks %q", want)
		}
	}
	if code != 7 {
		t.Errorf("exit code %d, want the child's 7", code)
	}
}

// TestStartChildRelays: without a terminal too, output reaches the writers
// (one pipe when both are the same writer, so in order), input reaches the
// child, and a child killed by a signal exits 128+N, as a shell says.
func TestStartChildRelays(t *testing.T) {
	var out bytes.Buffer
	c, err := Start("/bin/sh", []string{"sh", "-c", "echo a; echo b >&2; cat; echo c >&2"}, nil, strings.NewReader("in\n"), &out, &out)
	if err != nil {
		t.Fatal(err)
	}
	if code, err := c.ExitCode(); code != 0 || err != nil {
		t.Errorf("exit %d, %v", code, err)
	}
	if out.String() != "a\nb\nin\nc\n" {
		t.Errorf("output %q, want a b in c in order", out.String())
	}
	c, err = Start("/bin/sh", []string{"sh", "-c", "kill -9 $$"}, nil, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if code, err := c.ExitCode(); code != 128+9 || err != nil {
		t.Errorf("killed child: exit %d, %v; want 137", code, err)
	}
}

// TestStartChildDaemonHoldsOutput: a child whose own child keeps its
// stdout open does not hold the launch past outputGrace.
func TestStartChildDaemonHoldsOutput(t *testing.T) {
	defer func(g time.Duration) { outputGrace = g }(outputGrace)
	outputGrace = 200 * time.Millisecond
	var out bytes.Buffer
	pidFile := filepath.Join(t.TempDir(), "pid")
	c, err := Start("/bin/sh", []string{"sh", "-c", "sleep 30 & echo $! > " + pidFile + "; echo started"}, nil, nil, &out, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if b, err := os.ReadFile(pidFile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				unix.Kill(pid, unix.SIGKILL)
			}
		}
	}()
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		t.Fatal("launch still waits for the daemon's output")
	}
	if !strings.Contains(out.String(), "started") {
		t.Errorf("output %q", out.String())
	}
}
