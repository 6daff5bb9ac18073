package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/djx-bpf/djx-bpf/internal/fusetest"
	"github.com/djx-bpf/djx-bpf/internal/testenv"
	"github.com/djx-bpf/djx-bpf/report"
)

// testRole makes the test binary djx-bpf itself ("djx-bpf") or a fake JVM
// ("fakejvm"), so that the tests see the very bytes a command prints.
const testRole = "DJX_BPF_TEST_ROLE"

func TestMain(m *testing.M) {
	fusetest.Main()
	switch os.Getenv(testRole) {
	case "djx-bpf":
		os.Exit(run(os.Args[1:]))
	case "fakejvm":
		os.Exit(fakeJVM())
	}
	os.Exit(m.Run())
}

// evilName is what a target can put in its names, command line and
// replies: a retitle of root's terminal (OSC 0 ... BEL), a screen clear,
// a colour (CSI 31 m), a C1 CSI (U+009B), a right-to-left override and DEL.
const evilName = "Evil\x1b]0;pwned\x07\x1b[2J\x1b[31m\u009b1m\u202eexe\x7f"

// fakeJVM maps a file named libjvm.so (DJX_FAKE_LIBJVM), which makes it a
// HotSpot JVM to discover, and answers the attach protocol at
// /tmp/.java_pid<pid> with evilName in every reply, until stdin closes.
func fakeJVM() int {
	time.AfterFunc(2*time.Minute, func() { os.Exit(97) }) // never outlives a failed test
	f, err := os.Open(os.Getenv("DJX_FAKE_LIBJVM"))
	if err != nil {
		fmt.Println(err)
		return 1
	}
	if _, err := unix.Mmap(int(f.Fd()), 0, 4096, unix.PROT_READ, unix.MAP_SHARED); err != nil {
		fmt.Println(err)
		return 1
	}
	sock := "/tmp/.java_pid" + strconv.Itoa(os.Getpid())
	os.Remove(sock)
	l, err := net.Listen("unix", sock)
	if err != nil {
		fmt.Println(err)
		return 1
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go serveEvil(c)
		}
	}()
	fmt.Println("ready")
	bufio.NewReader(os.Stdin).ReadString('\n')
	return 0
}

// serveEvil answers one attach request as a JVM whose every string is
// evilName: its version, VM.info's "# Java VM:" line, a flag, and a load
// that fails with it.
func serveEvil(c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	req := make([]byte, 0, 1024)
	buf := make([]byte, 1024)
	for strings.Count(string(req), "\x00") < 5 {
		n, err := c.Read(buf)
		if err != nil {
			return
		}
		req = append(req, buf[:n]...)
	}
	f := strings.Split(string(req), "\x00")
	cmd, arg := f[1], f[2]
	heapInfo := " garbage-first heap   total 65536K, used 1024K [0x0000000080000000, 0x0000000100000000)\n" +
		"  region size 1024K, 1 young (1024K), 0 survivors (0K)\n"
	var reply string
	switch {
	case cmd == "jcmd" && arg == "VM.version":
		reply = "0\nOpenJDK 64-Bit Server VM version " + evilName + "\nJDK 17.0.0\n"
	case cmd == "jcmd" && arg == "VM.flags":
		reply = "0\n-XX:MaxHeapSize=2147483648 -XX:+UseG1GC -XX:" + evilName + "=1\n"
	case cmd == "jcmd" && arg == "GC.heap_info":
		reply = "0\n" + heapInfo
	case cmd == "jcmd" && arg == "VM.info":
		reply = "0\n#\n# JRE version: " + evilName + "\n# Java VM: " + evilName + " (17, mixed mode, g1 gc, linux-amd64)\n#\n" +
			"Heap address: 0x0000000080000000, size: 2048 MB, Compressed Oops mode: 32-bit\n" +
			"Narrow klass base: 0x0000000800000000, Narrow klass shift: 0\n\nHeap:\n" + heapInfo
	case cmd == "load":
		reply = "-1\n" + evilName + " was not loaded.\n" + evilName + ": cannot open shared object file\n"
	default:
		reply = "1\n" + evilName + ": unknown command\n"
	}
	c.Write([]byte(reply))
}

// evilReport is a saved profile whose every string is evilName.
func evilReport() *report.Report {
	e := evilName
	r := &report.Report{
		PID: 7, JVM: e, Mode: "attach" + e, Event: "page-faults" + e,
		Objects: []report.Object{{
			Type: "T" + e, Site: "S" + e, AllocPath: []string{"alloc" + e}, Origin: report.OriginCensus,
			Holder: []string{"H" + e}, Objects: 1, Bytes: 64, Samples: 10,
			Accesses: []report.Access{{Path: []string{"m" + e, "n\nnote: fake line"}, Samples: 10}},
			Fields:   []report.FieldShare{{Field: "f" + e, Samples: 10}},
		}},
		DataTypes: []report.DataType{{Type: "D" + e, Field: "g" + e, Samples: 5,
			Accesses: []report.Access{{Path: []string{"p" + e}, Samples: 5}}}},
		Remainder: []report.Access{{Where: "mapped file /tmp/" + e, DataType: "R" + e, Path: []string{"q" + e}, Samples: 3}},
		Stats: report.Stats{
			SampleStats: report.SampleStats{Samples: 20, WithAddress: 20, InHeap: 15, Attributed: 10},
			StackStats:  report.StackStats{StackSignals: 1, Stacks: 1, StackErrors: map[string]uint64{"e" + e: 1}},
		},
		Notes: []string{"agent error: " + e},
	}
	r.Finish()
	return r
}

// rawControl returns the first character of out that a terminal would
// act on, other than newline and tab, or that is no UTF-8; "" if none.
func rawControl(out string) string {
	for i, r := range out {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(out[i:], "\uFFFD"):
			return fmt.Sprintf("byte %#x at %d (no UTF-8)", out[i], i)
		case r < 0x20 && r != '\n' && r != '\t', r == 0x7f, r >= 0x80 && r <= 0x9f,
			r == 0x061c, r == 0x200e, r == 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
			return fmt.Sprintf("%U at byte %d, in %q", r, i, out[max(0, i-40):min(len(out), i+20)])
		}
	}
	return ""
}

// TestEveryCommandHostile runs every command of djx-bpf against a fake JVM
// whose command line, attach replies and VM.info hold terminal escapes,
// and against a saved profile whose names do: none of what they print,
// on standard output or error, may reach root's terminal raw.
func TestEveryCommandHostile(t *testing.T) {
	testenv.Root(t)
	if testing.Short() {
		t.Skip("starts a fake JVM and runs every command")
	}
	parallel(t) // what the commands print, not how fast
	dir := t.TempDir()
	lib := filepath.Join(dir, "libjvm.so")
	if err := os.WriteFile(lib, make([]byte, 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	fake := exec.Command(os.Args[0], "-Xmx64m", "-cp", "/nonexistent", "org."+evilName+".Main", evilName)
	fake.Env = append(os.Environ(), testRole+"=fakejvm", "DJX_FAKE_LIBJVM="+lib)
	fake.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	in, err := fake.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := fake.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := fake.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		in.Close()
		fake.Process.Kill() // our own child, by its pid
		fake.Wait()
		os.Remove("/tmp/.java_pid" + strconv.Itoa(fake.Process.Pid))
	})
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "ready\n" {
		t.Fatalf("fake JVM: %q", line)
	}
	pid := strconv.Itoa(fake.Process.Pid)

	saved := filepath.Join(dir, "evil.json")
	f, err := os.Create(saved)
	if err != nil {
		t.Fatal(err)
	}
	if err := report.WriteJSON(f, evilReport(), 0); err != nil {
		t.Fatal(err)
	}
	f.Close()

	// Each command, and the escaped form of evilName its output must
	// show: termsafe's (\x1b) or JSON's (\u001b); "" where the command
	// may fail before it reads the target's text.
	const shown, shownJSON = `pwned\x07\x1b[2J\x1b[31m\u009b1m\u202eexe\x7f`, `pwned\u0007\u001b[2J\u001b[31m\u009b1m\u202eexe\u007f`
	for _, c := range []struct {
		args []string
		want string
		stop time.Duration // SIGINT after this long (commands that run until stopped)
	}{
		{args: []string{"list"}, want: shown},
		{args: []string{"list", "--format", "json"}, want: shownJSON},
		{args: []string{"heap", "--pid", pid}, want: `VM: Evil\x1b]0;` + shown},
		{args: []string{"heap", "--pid", pid, "--format", "json"}, want: shownJSON},
		{args: []string{"profile", "--pid", pid, "--duration", "2s"}, want: shown},
		{args: []string{"profile", "--pid", pid, "--duration", "2s", "--format", "json"}, want: shown},
		{args: []string{"scan", "--pids", pid, "--duration", "3s"}, want: shown},
		{args: []string{"scan", "--pids", pid, "--duration", "3s", "--format", "json"}, want: shownJSON},
		{args: []string{"scan", "--pids", pid, "--duration", "3s", "--format", "html"}, want: shownJSON},
		{args: []string{"scan", "--continuous", "--pids", pid, "--window", "1s", "--otlp-endpoint", "http://127.0.0.1:9/"}, want: shown, stop: 4 * time.Second},
		{args: []string{"report", saved}, want: shown},
		{args: []string{"report", "--format", "json", saved}, want: shownJSON},
		{args: []string{"report", "--format", "html", saved}, want: shownJSON},
		{args: []string{"report", "--format", "collapsed", saved}, want: shown},
		{args: []string{"events"}},
		{args: []string{"version"}},
	} {
		name := strings.Join(c.args, " ")
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		cmd := exec.CommandContext(ctx, os.Args[0], c.args...)
		cmd.Env = append(os.Environ(), testRole+"=djx-bpf")
		var stdout, stderr testenv.SyncBuffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Start(); err != nil {
			cancel()
			t.Fatal(err)
		}
		if c.stop > 0 {
			stop := time.AfterFunc(c.stop, func() { cmd.Process.Signal(os.Interrupt) })
			defer stop.Stop()
		}
		err := cmd.Wait()
		if ctx.Err() != nil {
			t.Errorf("%s: did not end: %v", name, err)
		}
		cancel()
		for _, o := range []struct{ what, text string }{{"stdout", stdout.String()}, {"stderr", stderr.String()}} {
			if bad := rawControl(o.text); bad != "" {
				t.Errorf("djx-bpf %s: %s: %s reaches the terminal", name, o.what, bad)
			}
		}
		if c.want != "" && !strings.Contains(stdout.String()+stderr.String(), c.want) {
			t.Errorf("djx-bpf %s (%v): the target's text is not shown escaped (%s):\nstdout:\n%s\nstderr:\n%s", name, err, c.want, stdout.String(), stderr.String())
		}
	}
}
