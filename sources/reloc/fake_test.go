package reloc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/djx-bpf/djx-bpf/safety/elfsafe"
)

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

// buildFake compiles testdata/fakejvm.c into dir/libjvm.so and
// testdata/fakemain.c into dir/fakemain, skipping without gcc.
func buildFake(t *testing.T) string { return buildFakeFrom(t, "testdata/fakejvm.c") }

// buildFakeFrom is buildFake with another libjvm.so source.
func buildFakeFrom(t *testing.T, src string) string {
	t.Helper()
	dir := t.TempDir()
	buildLib(t, dir, src)
	gcc(t, "-O2", "-o", filepath.Join(dir, "fakemain"), "testdata/fakemain.c", "-L"+dir, "-ljvm", "-Wl,-rpath,"+dir)
	return dir
}

// buildLib compiles src into dir/libjvm.so, linked -z now as a JDK's
// libjvm.so is, and returns its path.
func buildLib(t *testing.T, dir, src string) string {
	t.Helper()
	lib := filepath.Join(dir, "libjvm.so")
	gcc(t, "-O2", "-shared", "-fPIC", "-Wl,-z,now", "-Wall", "-Werror", "-o", lib, src)
	return lib
}

// gcc runs gcc, skipping the test on a machine without it.
func gcc(t *testing.T, args ...string) {
	t.Helper()
	path, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("skipping synthetic ELF test: no gcc")
	}
	if out, err := exec.Command(path, args...).CombinedOutput(); err != nil {
		t.Fatalf("gcc %v: %v\n%s", args, err, out)
	}
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
	r := startFake(t, buildFake(t))
	tr, err := Open(Config{MinLen: 4096})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	if _, err := tr.AddJVM(os.Getpid(), []Range{{r.lo, r.hi}}); !errors.Is(err, ErrNoJVM) {
		t.Errorf("AddJVM(self): %v, want ErrNoJVM", err)
	}
	const rounds = 3
	info, events, cn := r.track(t, tr, rounds)
	if !errors.Is(info.SitesErr, ErrNoSites) || len(info.Sites) != 0 {
		t.Errorf("fake libjvm without collector functions: sites %v, %v; want the libc fallback for ErrNoSites", info.Sites, info.SitesErr)
	}
	if len(info.Copies) != 1 || len(info.Copies[0].Imports) != 2 || !strings.HasSuffix(info.Copies[0].Lib, "/libc.so.6") {
		t.Errorf("copies %+v, want memmove and memcpy sharing one libc implementation", info.Copies)
	}
	for _, ev := range events {
		if ev.PID != uint32(r.cmd.Process.Pid) {
			t.Errorf("event of pid %d", ev.PID)
		}
		if ev.Kind == GCBegin && !ev.FullKnown {
			t.Error("constant gc__begin argument not read")
		}
	}
	var want []string
	for range rounds {
		want = append(want, r.gcEvents()...)
	}
	checkEvents(t, events, want)
	t.Logf("counters %+v", cn)
	if cn.Kept != 2*rounds || cn.HitsInGC != 2*rounds || cn.GCEvents != 2*rounds {
		t.Errorf("counters %+v", cn)
	}
	r.finish(t)
}

// checkEvents compares events, as eventLines writes them, with want.
func checkEvents(t *testing.T, events []Event, want []string) {
	t.Helper()
	got := eventLines(events)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
