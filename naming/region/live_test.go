package region

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/djx-bpf/djx-bpf/internal/testenv"
)

// TestLive starts testdata/RegionTruth.java on every JDK, with and
// without NMT, and names what it printed: its memory-mapped file, its
// direct buffer, its JIT-compiled method and its worker thread's stack,
// plus every blocked thread's stack pointer and every JVM range VM.info
// and NMT state.
func TestLive(t *testing.T) {
	testenv.Root(t) // /proc/PID/task/TID/syscall needs ptrace access
	jdks := testenv.JDKs(t)
	classes := t.TempDir()
	javac := exec.Command(filepath.Join(jdks[0].Home, "bin", "javac"), "--add-exports", "java.base/sun.nio.ch=ALL-UNNAMED",
		"-XDignore.symbol.file", "-nowarn", "-d", classes, "testdata/RegionTruth.java")
	if out, err := javac.CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	for _, jdk := range jdks {
		for _, withNMT := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/nmt=%v", jdk.Name, withNMT), func(t *testing.T) {
				live(t, jdk, classes, withNMT)
			})
		}
	}
}

func live(t *testing.T, jdk testenv.JDK, classes string, withNMT bool) {
	file := filepath.Join(t.TempDir(), "mapped.dat")
	args := []string{"--add-exports", "java.base/sun.nio.ch=ALL-UNNAMED", "-Xmx256m"}
	if withNMT {
		args = append(args, "-XX:NativeMemoryTracking=detail")
	}
	cmd := exec.Command(jdk.Java(), append(args, "-cp", classes, "RegionTruth", file)...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill() // by its PID, also when the test failed
		cmd.Wait()
	})
	ready := make(chan string, 1)
	go func() {
		var b strings.Builder
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == "ready" {
				ready <- b.String()
				io.Copy(io.Discard, stdout)
				return
			}
			b.WriteString(sc.Text() + "\n")
		}
		close(ready)
	}()
	var truth string
	select {
	case s, ok := <-ready:
		if !ok {
			t.Fatal("RegionTruth exited before it was ready")
		}
		truth = s
	case <-time.After(60 * time.Second):
		t.Fatal("RegionTruth not ready after 60s")
	}
	jcmd := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(filepath.Join(jdk.Home, "bin", "jcmd"), append([]string{fmt.Sprint(pid)}, args...)...).Output()
		if err != nil {
			t.Fatalf("jcmd %v: %v", args, err)
		}
		return string(out)
	}
	f := fixture{name: jdk.Name, vminfo: jcmd("VM.info"), threads: jcmd("Thread.print"), codelist: jcmd("Compiler.codelist")}
	if withNMT {
		f.nmt = jcmd("VM.native_memory", "detail")
	}
	f.mapped, f.direct, f.mappedPath, f.worker = parseTruth(t, truth)
	n, err := New(pid, JVMText{VMInfo: f.vminfo, NMT: f.nmt, Threads: f.threads})
	if err != nil {
		t.Fatal(err)
	}
	// Every miss re-reads (a compiler thread may start between the reads).
	clock := time.Now()
	n.now = func() time.Time { clock = clock.Add(maxReloadWait); return clock }
	f.tasks = readTasks(pid)
	f.maps = read(t, fmt.Sprintf("/proc/%d/maps", pid))
	// Tasks read after the Namer's snapshot: their stacks are learned
	// from the sp as a sample's rsp would teach them.
	for _, tk := range f.tasks {
		if tk.SP != 0 {
			n.Name(tk.SP, tk.TID, tk.SP)
		}
	}
	truthChecks(t, func(a uint64) Region { return n.Name(a, 0, 0) }, f, withNMT)
	t.Logf("%s: stats %+v, %d segments", jdk.Name, n.Stats(), n.Map().Len())
}
