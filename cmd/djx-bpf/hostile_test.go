package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/djx-bpf/djx-bpf/internal/testenv"
	"github.com/djx-bpf/djx-bpf/safety/procfs"
	"github.com/djx-bpf/djx-bpf/safety/safefs"
	"github.com/djx-bpf/djx-bpf/target/discover"
)

func plantFifo(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := syscall.Mkfifo(p, 0o666); err != nil {
		t.Fatal(err)
	}
	return p
}

// A FIFO planted at the -o path neither receives root's report nor blocks
// it (with no reader, root waited forever).
func TestOutputFifoRefused(t *testing.T) {
	fifo := plantFifo(t, "report.json")
	var err error
	testenv.Within(t, 5*time.Second, "-o on a fifo with no reader", func() {
		err = writeFileAtomic(fifo, func(w io.Writer) error { _, err := io.WriteString(w, "secret"); return err })
	})
	if err == nil || !strings.Contains(err.Error(), "not a regular file") || !strings.Contains(err.Error(), "omit -o") {
		t.Errorf("-o on a fifo: %v", err)
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the fifo was replaced: %v", err)
	}
	// Said before any work, not after a profile.
	var stdout, stderr bytes.Buffer
	testenv.Within(t, 5*time.Second, "djx-bpf report -o FIFO", func() {
		if code := cmdReport([]string{"-o", fifo, filepath.Join(t.TempDir(), "missing")}, &stdout, &stderr); code != 2 {
			t.Errorf("exit %d, want 2 before reading the profiles", code)
		}
	})
	if !strings.Contains(stderr.String(), "-o: write "+fifo+": not a regular file (a named pipe)") {
		t.Errorf("stderr: %q", stderr.String())
	}
	// With a reader waiting, it still gets nothing.
	got := make(chan []byte, 1)
	r, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	testenv.Within(t, 5*time.Second, "-o on a fifo with a reader", func() {
		err = writeFileAtomic(fifo, func(w io.Writer) error { _, err := io.WriteString(w, "secret"); return err })
	})
	if err == nil {
		t.Error("-o wrote into a fifo")
	}
	go func() { b := make([]byte, 16); n, _ := r.Read(b); got <- b[:max(n, 0)] }()
	select {
	case b := <-got:
		if len(b) > 0 {
			t.Errorf("the fifo's reader got %q", b)
		}
	case <-time.After(200 * time.Millisecond):
	}
}

// A device other than the null device is refused, and not opened.
func TestOutputDeviceRefused(t *testing.T) {
	testenv.Within(t, 5*time.Second, "-o /dev/zero", func() {
		if err := writeFileAtomic("/dev/zero", func(io.Writer) error { return nil }); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("-o /dev/zero: %v", err)
		}
	})
}

// Root does not replace another user's file: nobody could have left it at
// the path to make root write where nobody says.
func TestOutputOtherUsersFileRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give a file to another user")
	}
	p := filepath.Join(t.TempDir(), "r.json")
	os.WriteFile(p, []byte("nobody's"), 0o644)
	if err := os.Chown(p, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	err := writeFileAtomic(p, func(w io.Writer) error { _, err := io.WriteString(w, "root's"); return err })
	if err == nil || !strings.Contains(err.Error(), "owned by uid 65534") || !strings.Contains(err.Error(), "give another -o path") {
		t.Errorf("another user's file: %v", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "nobody's" {
		t.Errorf("another user's file replaced: %q", b)
	}
	// Under sudo, the invoking user's own file is theirs to replace.
	sudo := func(k string) string { return map[string]string{"SUDO_UID": "65534"}[k] }
	if null, err := checkOutput(p, trustedUIDs(sudo)); err != nil || null != nil {
		t.Errorf("the invoking user's file: %v", err)
	}
}

// `report FILE` on a FIFO fails at once instead of waiting for a writer.
func TestReportFifoRefused(t *testing.T) {
	fifo := plantFifo(t, "profile.pb.gz")
	var err error
	testenv.Within(t, 5*time.Second, "report on a fifo", func() { _, err = readReports(fifo) })
	if !errors.Is(err, safefs.ErrNotRegular) || !strings.Contains(err.Error(), "saved with -o") {
		t.Errorf("report on a fifo: %v", err)
	}
	var stdout, stderr bytes.Buffer
	testenv.Within(t, 5*time.Second, "djx-bpf report FIFO", func() {
		if code := cmdReport([]string{fifo}, &stdout, &stderr); code != 1 {
			t.Errorf("exit %d", code)
		}
	})
	if !strings.Contains(stderr.String(), "not a regular file") {
		t.Errorf("stderr: %q", stderr.String())
	}
}

// hostileText is what a target can put in its command line or VM name: a
// retitle of root's terminal (OSC 0 ... BEL), a screen clear and a
// right-to-left override.
const (
	hostileText  = "App\x1b]0;title\x07\x1b[2J\u202eexe.\xff"
	hostileShown = `App\x1b]0;title\x07\x1b[2J\u202eexe.\xff`
)

func assertSafe(t *testing.T, what, out string) {
	t.Helper()
	for _, bad := range []string{"\x1b", "\x07", "\u202e", "\xff"} {
		if strings.Contains(out, bad) {
			t.Errorf("%s: %q reaches the terminal:\n%s", what, bad, out)
		}
	}
	if !strings.Contains(out, hostileShown) {
		t.Errorf("%s: the escaped text is not shown:\n%s", what, out)
	}
}

func TestListHostileStrings(t *testing.T) {
	rows := []listed{{
		JVM:     discover.JVM{Process: procfs.Process{PID: 42, NSPID: 42, Kind: discover.HotSpot}, User: hostileText, Main: hostileText, Cmdline: hostileText},
		Details: discover.Details{VM: hostileText, GC: hostileText, Oops: hostileText, Attach: "attach failed: " + hostileText},
	}}
	var b bytes.Buffer
	if err := writeList(&b, rows); err != nil {
		t.Fatal(err)
	}
	assertSafe(t, "list", b.String())
}

// Errors printed to stderr quote what targets control.
func TestEprintfEscapes(t *testing.T) {
	var b bytes.Buffer
	eprintf(&b, "djx-bpf: %v; %s; %d\n", fmt.Errorf("attach: reply %q... %w", "x", errors.New(hostileText)), hostileText, 7)
	assertSafe(t, "stderr", b.String())
	if !strings.HasSuffix(b.String(), "; 7\n") {
		t.Errorf("format lost: %q", b.String())
	}
	b.Reset()
	eprintf(&b, "djx-bpf: %v\n", errors.Join(errors.New("one"), errors.New("two")))
	if b.String() != "djx-bpf: one; two\n" {
		t.Errorf("joined error: %q", b.String())
	}
}

// list asks few JVMs at a time, takes users in turns, caps one user's
// JVMs, and stops asking when its budget is up, saying so in each row.
func TestListDescribeCaps(t *testing.T) {
	var rows []listed
	for i := range 100 { // a user's swarm of fake JVMs, lowest pids first
		rows = append(rows, listed{JVM: discover.JVM{Process: procfs.Process{PID: 1000 + i, UID: 65534}, User: "nobody"}})
	}
	for i := range 3 {
		rows = append(rows, listed{JVM: discover.JVM{Process: procfs.Process{PID: 5000 + i, UID: 1000}, User: "alice"}})
	}
	var inFlight, peak atomic.Int32
	var mu sync.Mutex
	asked := map[int]bool{}
	describe := func(ctx context.Context, j discover.JVM) discover.Details {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		mu.Lock()
		asked[j.PID] = true
		mu.Unlock()
		time.Sleep(2 * time.Millisecond)
		return discover.Details{Attach: "ok"}
	}
	var skipped int
	testenv.Within(t, 20*time.Second, "describeAll", func() { skipped = describeAll(context.Background(), rows, describe) })
	if p := peak.Load(); p > listParallel {
		t.Errorf("%d JVMs asked at once, want at most %d", p, listParallel)
	}
	if skipped != 100-listPerUser {
		t.Errorf("skipped %d, want %d", skipped, 100-listPerUser)
	}
	for _, r := range rows {
		if r.UID == 1000 && !asked[r.PID] {
			t.Errorf("alice's pid %d not asked", r.PID)
		}
		if !asked[r.PID] && !strings.Contains(r.Attach, "not asked: user nobody has more than") {
			t.Errorf("pid %d: attach %q", r.PID, r.Attach)
		}
	}

	// JVMs that never answer: the budget ends the asking.
	old := listBudget
	listBudget = 300 * time.Millisecond
	defer func() { listBudget = old }()
	for i := range rows {
		rows[i].Details = discover.Details{}
	}
	stall := func(ctx context.Context, j discover.JVM) discover.Details {
		<-ctx.Done()
		return discover.Details{Attach: ctx.Err().Error()}
	}
	testenv.Within(t, 10*time.Second, "describeAll of stalling JVMs", func() { skipped = describeAll(context.Background(), rows, stall) })
	if skipped != len(rows)-listParallel {
		t.Errorf("skipped %d, want all but the first %d", skipped, listParallel)
	}
	up := 0
	for _, r := range rows {
		if strings.Contains(r.Attach, "were up") {
			up++
		}
	}
	if up == 0 {
		t.Error("no row says the budget was up")
	}
}
