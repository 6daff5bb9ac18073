package reloc

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/djx-bpf/djx-bpf/elfsafe"
)

// buildFake compiles testdata/fakejvm.c into dir/libjvm.so and
// testdata/fakemain.c into dir/fakemain, skipping without gcc.
// eventLines writes events as "gc-begin [full]", "gc-end" and
// "copy SRC->DST LEN", for comparison with the expected sequence.
func eventLines(events []Event) []string {
	var out []string
	for _, ev := range events {
		switch ev.Kind {
		case GCBegin:
			s := "gc-begin"
			if ev.Full {
				s += " full"
			}
			out = append(out, s)
		case GCEnd:
			out = append(out, "gc-end")
		case Copy:
			out = append(out, fmt.Sprintf("copy %#x->%#x %d", ev.Src, ev.Dst, ev.Len))
		}
	}
	return out
}

func buildFake(t *testing.T) string { return buildFakeFrom(t, "testdata/fakejvm.c") }

// buildFakeFrom is buildFake with another libjvm.so source.
func buildFakeFrom(t *testing.T, src string) string {
	t.Helper()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("skipping synthetic ELF test: no gcc")
	}
	dir := t.TempDir()
	for _, args := range [][]string{
		{"-O2", "-shared", "-fPIC", "-Wl,-z,now", "-Wall", "-Werror", "-o", filepath.Join(dir, "libjvm.so"), src},
		{"-O2", "-o", filepath.Join(dir, "fakemain"), "testdata/fakemain.c", "-L" + dir, "-ljvm", "-Wl,-rpath," + dir},
	} {
		if out, err := exec.Command(gcc, args...).CombinedOutput(); err != nil {
			t.Fatalf("gcc %v: %v\n%s", args, err, out)
		}
	}
	return dir
}

func TestSyntheticELF(t *testing.T) {
	dir := buildFake(t)
	f, err := elfsafe.OpenPath(filepath.Join(dir, "libjvm.so"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	slots, err := gotSlots(f, copyImports)
	if err != nil {
		t.Fatal(err)
	}
	// memmove through the PLT (JUMP_SLOT), memcpy's address taken
	// (GLOB_DAT); both versioned in .dynsym.
	if len(slots["memmove"]) != 1 || len(slots["memcpy"]) != 1 {
		t.Fatalf("slots %v, want one each for memmove and memcpy", slots)
	}

	begin, end, err := gcProbes(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(begin) != 1 || len(end) != 1 {
		t.Fatalf("probes: begin %v end %v", begin, end)
	}
	if begin[0].Args != "1@$1" || end[0].Args != "" {
		t.Errorf("args %q %q", begin[0].Args, end[0].Args)
	}
	text := f.Section(".text")
	b := make([]byte, 1)
	for _, p := range []Probe{begin[0], end[0]} {
		if _, err := text.ReadAt(b, int64(p.PC-text.Addr)); err != nil || b[0] != 0x90 {
			t.Errorf("%s at %#x: %#x, %v; want nop", p.Name, p.PC, b[0], err)
		}
	}

	// The executable has no notes.
	m, err := elfsafe.OpenPath(filepath.Join(dir, "fakemain"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, _, err := gcProbes(m); !errors.Is(err, ErrNoUSDT) {
		t.Errorf("gcProbes without notes: %v, want ErrNoUSDT", err)
	}
}

// TestLiveSynthetic runs the whole path (GOT in the live process, copy
// uprobes, USDT uprobes with a constant argument) on the fake libjvm,
// without a JVM.
func TestLiveSynthetic(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping live BPF test: needs root")
	}
	dir := buildFake(t)
	cmd := exec.Command(filepath.Join(dir, "fakemain"))
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
	exited := make(chan error, 1)
	t.Cleanup(func() {
		stdin.Close()
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	sc := bufio.NewScanner(stdout)
	var lo, hi uint64
	if !sc.Scan() {
		t.Fatal("fakemain printed nothing")
	}
	if _, err := fmt.Sscanf(sc.Text(), "heap %v %v", &lo, &hi); err != nil {
		t.Fatalf("%q: %v", sc.Text(), err)
	}
	if !sc.Scan() || sc.Text() != "ready" {
		t.Fatalf("want ready, got %q", sc.Text())
	}
	go func() { exited <- cmd.Wait() }()

	tr, err := Open(Config{MinLen: 4096})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	if _, err := tr.AddJVM(os.Getpid(), []Range{{lo, hi}}); !errors.Is(err, ErrNoJVM) {
		t.Errorf("AddJVM(self): %v, want ErrNoJVM", err)
	}
	info, err := tr.AddJVM(cmd.Process.Pid, []Range{{lo, hi}})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(info.SitesErr, ErrNoSites) || len(info.Sites) != 0 {
		t.Errorf("fake libjvm without collector functions: sites %v, %v; want the libc fallback for ErrNoSites", info.Sites, info.SitesErr)
	}
	if len(info.Copies) != 1 || len(info.Copies[0].Imports) != 2 || !strings.HasSuffix(info.Copies[0].Lib, "/libc.so.6") {
		t.Errorf("copies %+v, want memmove and memcpy sharing one libc implementation", info.Copies)
	}
	col := collect(tr)
	const rounds = 3
	for range rounds {
		io.WriteString(stdin, "gc\n")
		if !sc.Scan() || sc.Text() != "done" {
			t.Fatalf("want done, got %q", sc.Text())
		}
	}
	if err := tr.RemoveJVM(cmd.Process.Pid); err != nil {
		t.Error(err)
	}
	events := col.stop(t, tr)
	cn, err := tr.Counters()
	if err != nil {
		t.Fatal(err)
	}
	const n = 64 * 1024
	var want []string
	for range rounds {
		want = append(want, "gc-begin full", fmt.Sprintf("copy %#x->%#x %d", lo, lo+2*n, n), fmt.Sprintf("copy %#x->%#x %d", lo, lo+3*n, n), "gc-end")
	}
	for _, ev := range events {
		if ev.PID != uint32(cmd.Process.Pid) {
			t.Errorf("event of pid %d", ev.PID)
		}
		if ev.Kind == GCBegin && !ev.FullKnown {
			t.Error("constant gc__begin argument not read")
		}
	}
	got := eventLines(events)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	t.Logf("counters %+v", cn)
	if cn.Kept != 2*rounds || cn.HitsInGC != 2*rounds || cn.GCEvents != 2*rounds {
		t.Errorf("counters %+v", cn)
	}
	stdin.Close()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("fakemain: %v", err)
		}
		exited <- err // for the cleanup
	case <-time.After(5 * time.Second):
		t.Error("fakemain did not exit")
	}
}
