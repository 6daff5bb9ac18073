package heap

// Live test against real HotSpot JVMs: for several -Xmx and compressed-oops
// settings, the geometry parsed from `jcmd <pid> VM.info` must match what
// the same JVM printed at startup with -Xlog:gc+heap+coops=debug (two
// independent views) and the -Xmx it was given. Needs root (CI runs as
// root) and JDK 17; Temurin 25 is used too when installed.

import (
	"bufio"
	"errors"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/djx-bpf/djx-bpf/internal/testenv"
)

func TestLiveHotSpotGeometry(t *testing.T) {
	testenv.Root(t)
	jdks := testenv.JDKs(t)
	classes := t.TempDir()
	out, err := exec.Command(filepath.Join(jdks[0].Home, "bin", "javac"), "--release", "17",
		"-d", classes, "testdata/hotspot/Idle.java").CombinedOutput()
	if err != nil {
		t.Fatalf("javac: %v: %s", err, out)
	}
	cases := []struct {
		name  string
		flags []string
		mode  RefMode // expected, as a sanity check on the two views
	}{
		{"xmx64m", []string{"-Xmx64m"}, RefsUnscaled},
		{"xmx4g", []string{"-Xmx4g"}, RefsZeroBased},
		{"xmx31g", []string{"-Xmx31g"}, RefsUnknown}, // zero based or disjoint, the JVM decides
		{"base36g", []string{"-Xmx2g", "-XX:HeapBaseMinAddress=36g"}, RefsHeapBased},
		{"align16", []string{"-Xmx40g", "-XX:ObjectAlignmentInBytes=16"}, RefsZeroBased},
		{"xmx40g", []string{"-Xmx40g"}, RefsFull},
		{"nocoops", []string{"-Xmx2g", "-XX:-UseCompressedOops"}, RefsFull},
	}
	for _, jdk := range jdks {
		for _, tc := range cases {
			t.Run(jdk.Name+"/"+tc.name, func(t *testing.T) {
				log, vminfo := runAndInspect(t, jdk.Home, classes, tc.flags)
				g, err := ParseVMInfo(vminfo)
				if err != nil {
					t.Fatalf("%v\n%s", err, vminfo)
				}
				if tc.mode != RefsUnknown && g.Mode != tc.mode {
					t.Errorf("mode %v, want %v", g.Mode, tc.mode)
				}
				coops, err := ParseCompressedOops(log)
				if errors.Is(err, ErrNoCompressedOops) {
					if g.Mode != RefsFull {
						t.Errorf("startup log has no compressed oops, VM.info parsed to %v", g.String())
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if coops.Mode != g.Mode || coops.Base != g.Base || coops.Shift != g.Shift ||
					coops.HeapStart != g.Reserved.Start || coops.HeapStart+coops.HeapMB<<20 != g.Reserved.End {
					t.Errorf("startup log says %q, VM.info parsed to %v", coops.Line, g.String())
				}
				if want := xmxBytes(t, strings.Join(tc.flags, " ")); g.Reserved.End-g.Reserved.Start != want {
					t.Errorf("reserved %d MiB, -Xmx %d MiB", (g.Reserved.End-g.Reserved.Start)>>20, want>>20)
				}
				t.Logf("%s", g.String())
			})
		}
	}
}

// runAndInspect starts Idle with flags, returns its startup coops log and
// `jcmd <pid> VM.info`, and stops the JVM.
func runAndInspect(t *testing.T, home, classes string, flags []string) (log, vminfo string) {
	t.Helper()
	args := append(append([]string{}, flags...), "-Xlog:gc+heap+coops=debug:stdout:level,tags", "-cp", classes, "Idle")
	cmd := exec.Command(filepath.Join(home, "bin", "java"), args...)
	stdin, err := cmd.StdinPipe() // Idle exits when stdin closes
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var b strings.Builder
	timeout := time.After(30 * time.Second)
wait:
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("JVM exited before ready:\n%s", b.String())
			}
			if l == "ready" {
				break wait
			}
			b.WriteString(l + "\n")
		case <-timeout:
			t.Fatalf("JVM not ready after 30s:\n%s", b.String())
		}
	}
	go func() { // keep draining so the JVM never blocks on stdout
		for range lines {
		}
	}()
	out, err := exec.Command(filepath.Join(home, "bin", "jcmd"), strconv.Itoa(cmd.Process.Pid), "VM.info").CombinedOutput()
	if err != nil {
		t.Fatalf("jcmd VM.info: %v: %s", err, out)
	}
	return b.String(), string(out)
}
