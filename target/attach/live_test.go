package attach

// Privileged tests against real JVMs. They need root (to attach to any JVM
// and to create namespaces) and a JDK 17 at jdk17Home; Temurin 25 is also
// used when installed. Every JVM started here is killed in t.Cleanup.

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/djx-bpf/djx-bpf/hotspot/heap"
	"github.com/djx-bpf/djx-bpf/internal/fusetest"

	"github.com/djx-bpf/djx-bpf/internal/testenv"

	"github.com/djx-bpf/djx-bpf/safety/procfs"
)

var update = flag.Bool("update", false, "rewrite testdata/replies from live JVMs")

var (
	jdk17Home = testenv.JDK17.Home
	jdk25Home = testenv.JDK25.Home
)

type jdk struct{ name, home string }

func (j jdk) java() string { return filepath.Join(j.home, "bin", "java") }

// liveJDKs skips the test unless it can start and attach to real JVMs.
func liveJDKs(t *testing.T) []jdk {
	t.Helper()
	testenv.Root(t)
	var jdks []jdk
	for _, j := range testenv.JDKs(t) {
		jdks = append(jdks, jdk{j.Name, j.Home})
	}
	return jdks
}

var (
	classesOnce sync.Once
	classesDir  string
	classesErr  error
)

// sleeperClasses compiles testdata/Sleeper.java once per test binary.
func sleeperClasses(t *testing.T) string {
	t.Helper()
	classesOnce.Do(func() {
		// Not under /tmp: the namespace test mounts a private /tmp.
		classesDir, classesErr = os.MkdirTemp("/var/tmp", "djx-attach-classes-")
		if classesErr != nil {
			return
		}
		out, err := exec.Command(filepath.Join(jdk17Home, "bin", "javac"), "--release", "17",
			"-d", classesDir, "testdata/Sleeper.java").CombinedOutput()
		if err != nil {
			classesErr = errors.New("javac: " + err.Error() + ": " + string(out))
		}
	})
	if classesErr != nil {
		t.Fatal(classesErr)
	}
	return classesDir
}

func TestMain(m *testing.M) {
	fusetest.Main()
	flag.Parse()
	code := m.Run()
	if classesDir != "" {
		os.RemoveAll(classesDir)
	}
	os.Exit(code)
}

// jvm is a started Sleeper; pid is the host pid of the java process.
type jvm struct {
	pid int
	cwd string
}

// startJVM starts Sleeper under j with extra JVM options and waits until main
// runs. The JVM is killed when the test ends, also on failure.
func startJVM(t *testing.T, j jdk, opts ...string) *jvm {
	t.Helper()
	classes := sleeperClasses(t)
	args := append(append([]string{}, opts...), "-cp", classes, "Sleeper")
	cmd := exec.Command(j.java(), args...)
	cmd.Dir = t.TempDir() // where the cwd trigger file goes
	return startAndWait(t, cmd, func() int { return cmd.Process.Pid })
}

// startAndWait starts cmd, registers its cleanup and waits for "ready" on its
// stdout. javaPID finds the java process (cmd may be a wrapper).
func startAndWait(t *testing.T, cmd *exec.Cmd, javaPID func() int) *jvm {
	t.Helper()
	stdin, err := cmd.StdinPipe() // Sleeper exits when this closes
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		// Closing stdin lets Sleeper exit normally, so the JVM removes its
		// attach socket; kill it if that does not work promptly.
		stdin.Close()
		select {
		case <-exited:
		case <-time.After(3 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() && sc.Text() == "ready" {
			ready <- nil
			// Drain: SIGQUIT without a trigger makes the JVM print a thread dump.
			io.Copy(io.Discard, stdout)
			return
		}
		ready <- errors.New("JVM exited before ready")
	}()
	select {
	case err := <-ready:
		if err != nil {
			<-exited
			t.Fatalf("%s: %v; stderr:\n%s", cmd, err, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: not ready after 20s; stderr:\n%s", cmd, stderr.String())
	}
	return &jvm{pid: javaPID(), cwd: cmd.Dir}
}

func inspect(t *testing.T, pid int) *Target {
	t.Helper()
	tg, err := Inspect(pid)
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// captureReply runs one raw exchange and, with -update, stores the reply as
// a fixture for TestReplyFixtures.
func captureReply(t *testing.T, tg *Target, name string, cmd string, args ...string) []byte {
	t.Helper()
	raw, err := tg.exchange(ctxTimeout(t, 10*time.Second), cmd, args...)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.MkdirAll("testdata/replies", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join("testdata/replies", name+".reply"), raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return raw
}

// buildAgent compiles testdata/retagent.c, or returns "" without a compiler.
func buildAgent(t *testing.T) string {
	t.Helper()
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Logf("no C compiler (%v): agent success paths not tested", err)
		return ""
	}
	lib := filepath.Join(t.TempDir(), "libretagent.so")
	if out, err := exec.Command(cc, "-shared", "-fPIC", "-o", lib, "testdata/retagent.c").CombinedOutput(); err != nil {
		t.Fatalf("build agent: %v\n%s", err, out)
	}
	return lib
}

func TestLiveJVM(t *testing.T) {
	jdks := liveJDKs(t)
	agent := buildAgent(t)
	for _, j := range jdks {
		t.Run(j.name, func(t *testing.T) {
			opts := []string{"-Xmx256m"}
			if j.name != "jdk17" {
				opts = append(opts, "-XX:+EnableDynamicAgentLoading") // no warning on stderr
			}
			vm := startJVM(t, j, opts...)
			tg := inspect(t, vm.pid)
			if tg.NSPID != tg.PID || tg.UID != 0 || tg.Root != "/proc/"+strconv.Itoa(vm.pid)+"/root" {
				t.Errorf("Inspect = %+v", tg)
			}
			ctx := ctxTimeout(t, 10*time.Second)

			// The first operation starts the listener (trigger + SIGQUIT).
			out, err := tg.Jcmd(ctx, "VM.version")
			if err != nil {
				t.Fatal(err)
			}
			if want := "JDK " + strings.TrimPrefix(j.name, "jdk"); !strings.Contains(out, want) {
				t.Errorf("VM.version = %q, want %q", out, want)
			}
			for _, dir := range []string{vm.cwd, "/tmp"} {
				if _, err := os.Lstat(filepath.Join(dir, ".attach_pid"+strconv.Itoa(tg.NSPID))); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("trigger file left in %s: %v", dir, err)
				}
			}

			out, err = tg.Jcmd(ctx, "GC.heap_info")
			if err != nil {
				t.Fatal(err)
			}
			info, err := heap.ParseHeapInfo(out)
			if err != nil {
				t.Fatal(err)
			}
			if info.GC != "G1" || len(info.Ranges) != 1 || info.Ranges[0].End-info.Ranges[0].Start != 256<<20 {
				t.Errorf("heap info = %+v, want one 256 MiB G1 range", info)
			}

			_, err = tg.Jcmd(ctx, "No.such.command")
			var ce *CommandError
			if !errors.As(err, &ce) || ce.Code == 0 {
				t.Errorf("unknown jcmd: err = %v, want CommandError", err)
			}

			err = tg.LoadAgent(ctx, missingAgent, true, "")
			var ae *AgentError
			if !errors.As(err, &ae) || !strings.Contains(err.Error(), missingAgent) {
				t.Errorf("LoadAgent(missing) = %v, want AgentError mentioning the path", err)
			}
			t.Logf("LoadAgent(missing): %v", err)

			captureReply(t, tg, j.name+"-jcmd-version", "jcmd", "VM.version")
			captureReply(t, tg, j.name+"-jcmd-unknown", "jcmd", "No.such.command")
			captureReply(t, tg, j.name+"-load-missing", "load", missingAgent, "true", "")
			if agent == "" {
				return
			}
			if err := tg.LoadAgent(ctx, agent, true, "0"); err != nil {
				t.Errorf("LoadAgent(ok) = %v", err)
			}
			err = tg.LoadAgent(ctx, agent, true, "7")
			if !errors.As(err, &ae) || !ae.Attached || ae.ReturnCode != 7 {
				t.Errorf("LoadAgent(returns 7) = %v, want AgentError with return code 7", err)
			}
			captureReply(t, tg, j.name+"-load-ok", "load", agent, "true", "0")
			captureReply(t, tg, j.name+"-load-agent7", "load", agent, "true", "7")
		})
	}
}

func TestLiveDynamicAgentLoadingDisabled(t *testing.T) {
	for _, j := range liveJDKs(t) {
		t.Run(j.name, func(t *testing.T) {
			vm := startJVM(t, j, "-XX:-EnableDynamicAgentLoading")
			tg := inspect(t, vm.pid)
			err := tg.LoadAgent(ctxTimeout(t, 10*time.Second), missingAgent, true, "")
			if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "djx-bpf profile --") {
				t.Errorf("LoadAgent = %v, want ErrRefused advising djx-bpf profile", err)
			}
			t.Logf("LoadAgent: %v", err)
			captureReply(t, tg, j.name+"-load-disabled", "load", missingAgent, "true", "")
		})
	}
}

func TestLiveAttachDisabled(t *testing.T) {
	j := liveJDKs(t)[0]

	t.Run("cmdline", func(t *testing.T) {
		vm := startJVM(t, j, "-XX:+DisableAttachMechanism")
		tg := inspect(t, vm.pid)
		start := time.Now()
		_, err := tg.Jcmd(ctxTimeout(t, 10*time.Second), "VM.version")
		if !errors.Is(err, ErrRefused) {
			t.Errorf("Jcmd = %v, want ErrRefused", err)
		}
		t.Logf("Jcmd: %v", err)
		if d := time.Since(start); d > time.Second {
			t.Errorf("refusal took %v; the flag on the command line should be seen up front", d)
		}
	})

	t.Run("argfile", func(t *testing.T) {
		// Hidden in an @argfile, the flag is only noticed by the timeout.
		argfile := filepath.Join(t.TempDir(), "args")
		if err := os.WriteFile(argfile, []byte("-XX:+DisableAttachMechanism\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		vm := startJVM(t, j, "@"+argfile)
		tg := inspect(t, vm.pid)
		_, err := tg.Jcmd(ctxTimeout(t, 1500*time.Millisecond), "VM.version")
		if !errors.Is(err, ErrRefused) {
			t.Errorf("Jcmd = %v, want ErrRefused", err)
		}
		t.Logf("Jcmd: %v", err)
		if err := syscall.Kill(vm.pid, 0); err != nil {
			t.Errorf("JVM died after SIGQUIT: %v", err)
		}
	})

	t.Run("exits-mid-attach", func(t *testing.T) {
		argfile := filepath.Join(t.TempDir(), "args")
		if err := os.WriteFile(argfile, []byte("-XX:+DisableAttachMechanism\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		vm := startJVM(t, j, "@"+argfile)
		tg := inspect(t, vm.pid)
		time.AfterFunc(300*time.Millisecond, func() { syscall.Kill(vm.pid, syscall.SIGKILL) })
		_, err := tg.Jcmd(ctxTimeout(t, 5*time.Second), "VM.version")
		if !errors.Is(err, ErrNoProcess) {
			t.Errorf("Jcmd = %v, want ErrNoProcess", err)
		}
		t.Logf("Jcmd: %v", err)
	})
}

func TestLiveNotJVM(t *testing.T) {
	liveJDKs(t)
	cmd := exec.Command("sleep", "100")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})

	if _, err := Inspect(cmd.Process.Pid); !errors.Is(err, ErrNotJVM) {
		t.Errorf("Inspect(sleep) = %v, want ErrNotJVM", err)
	}
	// Even when forced past Inspect, a process without a SIGQUIT handler is
	// never signalled: the attempt times out and sleep keeps running.
	st, err := procfs.StartTime(procRoot, cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	tg := &Target{Process: procfs.Process{PID: cmd.Process.Pid, NSPID: cmd.Process.Pid, Start: st}, Root: "/proc/" + strconv.Itoa(cmd.Process.Pid) + "/root"}
	if _, err := tg.Jcmd(ctxTimeout(t, 500*time.Millisecond), "VM.version"); !errors.Is(err, ErrRefused) {
		t.Errorf("Jcmd(sleep) = %v, want ErrRefused", err)
	}
	select {
	case err := <-exited:
		t.Errorf("sleep exited: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
}

func TestLiveExited(t *testing.T) {
	liveJDKs(t)
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if _, err := Inspect(cmd.Process.Pid); !errors.Is(err, ErrNoProcess) {
		t.Errorf("Inspect(exited) = %v, want ErrNoProcess", err)
	}
}

// TestLiveNamespace attaches to a JVM in its own pid and mount namespaces
// with a private /tmp, as in a container: the socket and trigger are only
// reachable through /proc/PID/root and /proc/PID/cwd, and the JVM knows
// itself as pid 1.
func TestLiveNamespace(t *testing.T) {
	jdks := liveJDKs(t)
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skipf("skipping: no unshare: %v", err)
	}
	classes := sleeperClasses(t)
	for _, j := range jdks {
		t.Run(j.name, func(t *testing.T) {
			// cd before mounting: the cwd keeps the class directory reachable
			// even though it then lies under nothing visible in the namespace.
			cmd := exec.Command("unshare", "--mount", "--pid", "--fork", "--mount-proc", "--kill-child",
				"sh", "-c", `cd "$1" && mount -t tmpfs tmpfs /tmp && exec "$2" -Xmx128m -cp . Sleeper`,
				"sh", classes, j.java())
			vm := startAndWait(t, cmd, func() int {
				data, err := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/task/" + strconv.Itoa(cmd.Process.Pid) + "/children")
				if err != nil {
					t.Fatal(err)
				}
				pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
				if err != nil {
					t.Fatalf("children of unshare: %q", data)
				}
				return pid
			})
			t.Cleanup(func() { syscall.Kill(vm.pid, syscall.SIGKILL) })

			tg := inspect(t, vm.pid)
			if tg.NSPID == tg.PID || tg.NSPID != 1 {
				t.Errorf("NSPID = %d, PID = %d; want NSPID 1", tg.NSPID, tg.PID)
			}
			out, err := tg.Jcmd(ctxTimeout(t, 10*time.Second), "VM.version")
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, "VM version") {
				t.Errorf("VM.version = %q", out)
			}
			// The socket lives in the JVM's private /tmp, not the host's.
			sock := filepath.Join(tg.Root, "tmp", ".java_pid1")
			if fi, err := os.Lstat(sock); err != nil || fi.Mode()&os.ModeSocket == 0 {
				t.Errorf("socket %s: %v %v", sock, fi, err)
			}
		})
	}
}

// TestLiveStaleSocket: a socket file left by a killed JVM that had the same
// pid refuses connections; the listener must be started anyway (jattach 2.1
// gives up with "Connection refused" here).
func TestLiveStaleSocket(t *testing.T) {
	j := liveJDKs(t)[0]
	vm := startJVM(t, j)
	path := "/tmp/.java_pid" + strconv.Itoa(vm.pid)
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	t.Cleanup(func() { os.Remove(path) }) // in case the JVM did not replace it

	out, err := inspect(t, vm.pid).Jcmd(ctxTimeout(t, 10*time.Second), "VM.version")
	if err != nil || !strings.Contains(out, "VM version") {
		t.Errorf("Jcmd = %q, %v", out, err)
	}
}
