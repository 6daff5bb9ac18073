package vmcode

import (
	"bufio"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/djx-bpf/djx-bpf/internal/testenv"
)

// hotFlags make C2 inline mid and leaf into outer, keep sink a call and
// waitHere interpreted.
var hotFlags = []string{
	"-XX:CompileCommand=quiet",
	"-XX:CompileCommand=dontinline,Hot::sink",
	"-XX:CompileCommand=inline,Hot::leaf",
	"-XX:CompileCommand=inline,Hot::mid",
	"-XX:CompileCommand=exclude,Hot::waitHere",
	"-Xmx64m", "-XX:+UseSerialGC", "-XX:CICompilerCount=2",
}

// compileHot compiles testdata/Hot.java with JDK 17's javac (its class
// files run on every later JDK) into a temporary directory.
func compileHot(t testing.TB, jdk testenv.JDK) string {
	t.Helper()
	dir := t.TempDir()
	javac := filepath.Join(jdk.Home, "bin", "javac")
	out, err := exec.Command(javac, "-g", "-d", dir, filepath.Join("testdata", "Hot.java")).CombinedOutput()
	if err != nil {
		t.Fatalf("javac: %v: %s", err, out)
	}
	return dir
}

// startHot starts Hot on jdk and waits until it is warm. The JVM is
// killed by its pid when the test ends, failed or not.
func startHot(t testing.TB, jdk testenv.JDK, classDir string) int {
	t.Helper()
	args := append(append([]string{}, hotFlags...), "-cp", classDir, "Hot", "2000")
	cmd := exec.Command(jdk.Java(), args...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		ok := false
		for sc.Scan() {
			if strings.TrimSpace(sc.Text()) == "ready" && !ok {
				ok = true
				ready <- true
			}
		}
		if !ok {
			ready <- false
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatalf("%s: Hot exited before it was ready", jdk.Name)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("%s: Hot not ready after 60s", jdk.Name)
	}
	return cmd.Process.Pid
}

// liveTruth asks the JVM pid, and javap, for what the tests expect.
func liveTruth(t testing.TB, jdk testenv.JDK, pid int, classDir string) *truth {
	t.Helper()
	out, err := exec.Command(filepath.Join(jdk.Home, "bin", "jcmd"), itoa(pid), "Compiler.codelist").CombinedOutput()
	if err != nil {
		t.Fatalf("jcmd Compiler.codelist: %v: %s", err, out)
	}
	tr := &truth{Code: parseCodelist(string(out))}
	if len(tr.Code) < 10 {
		t.Fatalf("jcmd Compiler.codelist listed %d nmethods: %s", len(tr.Code), out)
	}
	tr.Lines = javapLines(t, filepath.Join(jdk.Home, "bin", "javap"), classDir)
	tr.Chain, tr.Marks, tr.LineCount = expectedChain(t)
	return tr
}
