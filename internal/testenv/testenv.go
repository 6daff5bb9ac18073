// Package testenv finds what the end-to-end tests need (root, JDKs) and
// skips a test that lacks it, saying why. CI runs as root with JDK 17
// installed, so there (CI=true) such a skip is a broken set-up and fails
// the test instead.
package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// JDK is one JDK to test on.
type JDK struct {
	Name string // "jdk17", "jdk25"
	Home string
}

// Java is the JDK's java binary.
func (j JDK) Java() string { return filepath.Join(j.Home, "bin", "java") }

// JDK17 is Debian's JDK 17, which the machine has and `make deps` installs;
// JAVA_HOME overrides it. JDK25 is Temurin 25, tested when installed.
var (
	JDK17 = JDK{"jdk17", "/usr/lib/jvm/java-17-openjdk-amd64"}
	JDK25 = JDK{"jdk25", "/usr/lib/jvm/temurin-25-jdk-amd64"}
)

// Skip skips t with the reason, or fails it under CI.
func Skip(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI has root and a JDK, but: "+format, args...)
	}
	t.Skipf(format, args...)
}

// Root skips t unless it runs as root. Beside cmd/djx-bpf (SlotLowEnv),
// it takes a test slot for t.
func Root(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		Skip(t, "needs root (it loads BPF programs or attaches to JVMs)")
	}
	lowSlot(t)
}

// lowSlot takes a slot for a live test of a package tested beside
// cmd/djx-bpf, whose own tests take theirs explicitly.
func lowSlot(t testing.TB) {
	t.Helper()
	if os.Getenv(SlotLowEnv) != "" {
		Slot(t)
	}
}

// JDKs returns the JDKs to test on: JDK 17 (its javac too, for the
// workloads), and Temurin 25 when installed. It skips t without JDK 17.
// Beside cmd/djx-bpf (SlotLowEnv), it takes a test slot for t.
func JDKs(t testing.TB) []JDK {
	t.Helper()
	j17 := JDK17
	if h := os.Getenv("JAVA_HOME"); h != "" {
		j17.Home = h
	}
	if _, err := os.Stat(filepath.Join(j17.Home, "bin", "javac")); err != nil {
		Skip(t, "no JDK 17 with javac (make deps installs openjdk-17-jdk-headless): %v", err)
	}
	lowSlot(t)
	out := []JDK{j17}
	if Has25() {
		out = append(out, JDK25)
		t.Cleanup(func() {
			if !t.Skipped() {
				Ran(t, JDK25)
			}
		})
	} else {
		t.Logf("Temurin 25 not installed: testing JDK 17 only")
	}
	return out
}

// Has25 says whether Temurin 25 is installed. Its tests are never
// required: not every machine has one.
func Has25() bool {
	_, err := os.Stat(JDK25.Java())
	return err == nil
}

// JDKLogEnv names the file where tests note each JDK they ran a JVM of, one
// "package test jdk" line each; `make test` sets it and says at its end
// whether JDK 25's tests ran (scripts/jdk-summary.sh).
const JDKLogEnv = "DJX_TEST_JDK_LOG"

// Ran notes that t ran a JVM of j, in the file JDKLogEnv names, if any.
func Ran(t testing.TB, j JDK) {
	t.Helper()
	path := os.Getenv(JDKLogEnv)
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Errorf("note the JDK the test ran in %s: %v", path, err)
		return
	}
	defer f.Close()
	// One write of a short line: O_APPEND keeps the parallel packages'
	// lines whole.
	if _, err := fmt.Fprintf(f, "%s %s %s\n", pkgDir(), t.Name(), j.Name); err != nil {
		t.Errorf("note the JDK the test ran in %s: %v", path, err)
	}
}

// pkgDir is the test's package directory (go test runs a test binary
// there), relative to the module root.
func pkgDir() string {
	wd, err := os.Getwd()
	if err != nil {
		return "?"
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			if rel, err := filepath.Rel(d, wd); err == nil {
				return rel
			}
			return wd
		}
		if filepath.Dir(d) == d {
			return wd
		}
	}
}
