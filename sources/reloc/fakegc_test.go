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

	"github.com/djx-bpf/djx-bpf/safety/elfsafe"
)

// TestSyntheticSites finds the copy sites of testdata/fakegc.c: one per
// collector function, none in the mutator's copy.
func TestSyntheticSites(t *testing.T) {
	dir := buildFakeFrom(t, "testdata/fakegc.c")
	f, err := elfsafe.OpenPath(filepath.Join(dir, "libjvm.so"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sites, err := gcCopySites(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkSites(sites); err != nil {
		t.Error(err)
	}
	var got []string
	for _, s := range sites {
		got = append(got, fmt.Sprintf("%s %s %s", s.GC, s.Phase, s.Callee))
		b := make([]byte, 1)
		text := f.Section(".text")
		if _, err := text.ReadAt(b, int64(s.Addr-text.Addr)); err != nil || (b[0] != 0xe8 && b[0] != 0xe9) {
			t.Errorf("site %#x in %s: byte %#x, %v; want a call or jmp rel32", s.Addr, s.Func, b[0], err)
		}
	}
	want := "Serial young memcpy,Serial full memmove,Parallel young memcpy,Parallel full memmove,G1 young memcpy,G1 full memmove"
	if strings.Join(got, ",") != want {
		t.Errorf("sites %s\nwant %s", strings.Join(got, ","), want)
	}

	// The stripped library has none, and says why.
	stripped := filepath.Join(dir, "stripped.so")
	if out, err := exec.Command("strip", "-o", stripped, filepath.Join(dir, "libjvm.so")).CombinedOutput(); err != nil {
		t.Skipf("strip: %v %s", err, out)
	}
	sf, err := elfsafe.OpenPath(stripped)
	if err != nil {
		t.Fatal(err)
	}
	defer sf.Close()
	if _, err := gcCopySites(sf); !errors.Is(err, ErrNoSymtab) {
		t.Errorf("stripped: %v, want ErrNoSymtab", err)
	}
}

// fakeRun is a started fakemain.
type fakeRun struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	sc     *bufio.Scanner
	lo, hi uint64
	exited chan struct{}
	err    error // how fakemain exited, once exited is closed
}

func startFake(t *testing.T, dir string) *fakeRun {
	t.Helper()
	r := &fakeRun{cmd: exec.Command(filepath.Join(dir, "fakemain")), exited: make(chan struct{})}
	var err error
	if r.stdin, err = r.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := r.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.err = r.cmd.Wait(); close(r.exited) }()
	t.Cleanup(func() {
		r.stdin.Close()
		select {
		case <-r.exited:
		case <-time.After(5 * time.Second):
			r.cmd.Process.Kill()
			<-r.exited
		}
	})
	r.sc = bufio.NewScanner(stdout)
	if !r.sc.Scan() {
		t.Fatal("fakemain printed nothing")
	}
	if _, err := fmt.Sscanf(r.sc.Text(), "heap %v %v", &r.lo, &r.hi); err != nil {
		t.Fatalf("%q: %v", r.sc.Text(), err)
	}
	if !r.sc.Scan() || r.sc.Text() != "ready" {
		t.Fatalf("want ready, got %q", r.sc.Text())
	}
	return r
}

// track has tr track fakemain (its heap, 4 KiB copies and up) while it
// runs rounds fake GCs, and returns what AddJVM attached, the events and
// the counters.
func (r *fakeRun) track(t *testing.T, tr *Tracker, rounds int) (Info, []Event, Counters) {
	t.Helper()
	info, err := tr.AddJVM(r.cmd.Process.Pid, []Range{{r.lo, r.hi}})
	if err != nil {
		t.Fatal(err)
	}
	col := collect(tr)
	for range rounds {
		io.WriteString(r.stdin, "gc\n")
		if !r.sc.Scan() || r.sc.Text() != "done" {
			t.Fatalf("want done, got %q", r.sc.Text())
		}
	}
	if err := tr.RemoveJVM(r.cmd.Process.Pid); err != nil {
		t.Error(err)
	}
	events := col.stop(t, tr)
	cn, err := tr.Counters()
	if err != nil {
		t.Fatal(err)
	}
	return info, events, cn
}

// fakeCopy is fake_gc's copy of fakeN bytes from the heap's start to dst,
// as eventLines writes it.
func (r *fakeRun) fakeCopy(dst uint64) string {
	return fmt.Sprintf("copy %#x->%#x %d", r.lo, dst, fakeN)
}

// fakeN is N of fakemain.c, the length of every copy.
const fakeN = 64 * 1024

// gcEvents are the events of one fake_gc between its probes: a young
// copy to the heap's third block and a full one to its fourth.
func (r *fakeRun) gcEvents() []string {
	return []string{"gc-begin full", r.fakeCopy(r.lo + 2*fakeN), r.fakeCopy(r.lo + 3*fakeN), "gc-end"}
}

// finish closes fakemain's stdin and checks that it exits cleanly.
func (r *fakeRun) finish(t *testing.T) {
	t.Helper()
	r.stdin.Close()
	select {
	case <-r.exited:
		if r.err != nil {
			t.Errorf("fakemain: %v", r.err)
		}
	case <-time.After(5 * time.Second):
		t.Error("fakemain did not exit")
	}
}

// TestLiveSyntheticSites runs the copy-site probes on the fake libjvm with
// collector functions: the collectors' copies are reported and the
// mutator's copy, of the same size from the same heap, does not even trap;
// the libc probe traps and reports all three.
func TestLiveSyntheticSites(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping live BPF test: needs root")
	}
	dir := buildFakeFrom(t, "testdata/fakegc.c")
	const rounds = 3
	for _, probe := range []CopyProbe{CopiesAuto, CopiesLibc} {
		t.Run(map[CopyProbe]string{CopiesAuto: "sites", CopiesLibc: "libc"}[probe], func(t *testing.T) {
			r := startFake(t, dir)
			tr, err := Open(Config{MinLen: 4096, Copies: probe})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { tr.Close() })
			info, events, cn := r.track(t, tr, rounds)
			if probe == CopiesAuto && (info.SitesErr != nil || len(info.Sites) != 6 || len(info.Copies) != 0) {
				t.Fatalf("sites %v (%v), libc %v; want the 6 sites", info.Sites, info.SitesErr, info.Copies)
			}
			if probe == CopiesLibc && (len(info.Sites) != 0 || len(info.Copies) != 1) {
				t.Fatalf("sites %v, libc %v; want libc only", info.Sites, info.Copies)
			}
			var want []string
			for range rounds {
				if probe == CopiesLibc {
					want = append(want, r.fakeCopy(r.lo+3*fakeN)) // the mutator's
				}
				want = append(want, r.gcEvents()...)
			}
			checkEvents(t, events, want)
			t.Logf("counters %+v", cn)
			if probe == CopiesAuto && (cn.Hits != 2*rounds || cn.HitsInGC != 2*rounds) {
				t.Errorf("hits %d (in GC %d), want %d: only the collectors' copies trap", cn.Hits, cn.HitsInGC, 2*rounds)
			}
			if probe == CopiesLibc && cn.Hits < 3*rounds {
				t.Errorf("libc hits %d, want ≥ %d", cn.Hits, 3*rounds)
			}
		})
	}
}
