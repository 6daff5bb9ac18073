package vmcode

import (
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/djx-bpf/djx-bpf/hotspot/targetmem"
	"github.com/djx-bpf/djx-bpf/internal/testenv"
)

// parked is an interpreter frame found on a live thread's stack, with
// the line jstack gives it.
type parked struct {
	Method, BCP uint64
	Line        int // jstack's
}

// findParked finds the interpreter frame of Hot.waitHere on the stack of
// the thread "parked", blocked in sleep: the thread's stack pointer from
// /proc/PID/task/TID/syscall, then the stack words above it for
// waitHere's Method* with, a few words away, a pointer into its
// bytecodes: the bcp the interpreter saved before the call.
func findParked(t testing.TB, s *Symbolizer, jdk testenv.JDK, pid int, method uint64) parked {
	t.Helper()
	m, err := s.Method(method)
	if err != nil {
		t.Fatal(err)
	}
	sp := threadSP(t, pid, "parked")
	stack := make([]byte, 256<<10)
	// Read outside s.mem: a fixture keeps only what the symbolizer reads.
	n, _ := targetmem.Open(pid).ReadAt(stack, int64(sp))
	words := make([]uint64, n/8)
	for i := range words {
		words[i] = binary.LittleEndian.Uint64(stack[8*i:])
	}
	for i, w := range words {
		if w != method {
			continue
		}
		for j := max(0, i-12); j < min(len(words), i+12); j++ {
			if b := words[j]; b >= m.CodeBase && b < m.CodeBase+uint64(m.CodeSize) {
				return parked{Method: method, BCP: b, Line: jstackLine(t, jdk, pid, "parked", "Hot.waitHere")}
			}
		}
	}
	t.Fatalf("no interpreter frame of Hot.waitHere within %d KiB of the parked thread's sp %#x", n>>10, sp)
	return parked{}
}

// threadSP is the stack pointer of pid's thread named name, blocked in a
// system call.
func threadSP(t testing.TB, pid int, name string) uint64 {
	t.Helper()
	tasks, err := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/comm")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range tasks {
		comm, err := os.ReadFile(c)
		if err != nil || strings.TrimSpace(string(comm)) != name {
			continue
		}
		sc, err := os.ReadFile(filepath.Join(filepath.Dir(c), "syscall"))
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Fields(string(sc))
		if len(f) < 9 {
			t.Fatalf("thread %s is not in a system call: %q", name, sc)
		}
		sp, err := strconv.ParseUint(strings.TrimPrefix(f[7], "0x"), 16, 64)
		if err != nil {
			t.Fatal(err)
		}
		return sp
	}
	t.Fatalf("pid %d has no thread %s", pid, name)
	return 0
}

// jstackLine is the line jcmd Thread.print gives the frame of method in
// the thread name.
func jstackLine(t testing.TB, jdk testenv.JDK, pid int, name, method string) int {
	t.Helper()
	out, err := exec.Command(filepath.Join(jdk.Home, "bin", "jcmd"), strconv.Itoa(pid), "Thread.print").CombinedOutput()
	if err != nil {
		t.Fatalf("jcmd Thread.print: %v: %s", err, out)
	}
	_, thread, ok := strings.Cut(string(out), "\""+name+"\"")
	if !ok {
		t.Fatalf("jcmd Thread.print lists no thread %s", name)
	}
	thread, _, _ = strings.Cut(thread, "\n\n")
	re := regexp.MustCompile(`at ` + regexp.QuoteMeta(method) + `\(Hot\.java:(\d+)\)`)
	m := re.FindStringSubmatch(thread)
	if m == nil {
		t.Fatalf("thread %s has no frame of %s: %s", name, method, thread)
	}
	line, _ := strconv.Atoi(m[1])
	return line
}

// checkParked: the parked thread's interpreter frame is at waitHere's
// call to sleep, by jstack and by Hot.java's mark.
func checkParked(t *testing.T, s *Symbolizer, tr *truth) {
	p := tr.Parked
	want := tr.Marks["park-call"]
	if p.Line != want {
		t.Errorf("jstack puts Hot.waitHere at line %d, Hot.java's mark at %d", p.Line, want)
	}
	f, err := s.InterpretedFrame(p.Method, p.BCP)
	if err != nil || f.String() != "Hot.waitHere:"+strconv.Itoa(want) || f.Source != "Hot.java" {
		t.Errorf("interpreted frame at bcp %#x: %v (%s) %v, want Hot.waitHere:%d", p.BCP, f, f.Source, err, want)
	}
}
