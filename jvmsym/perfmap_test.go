package jvmsym

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestParsePerfMap lists the ranges of testdata/perf-1234.map after
// overlaps are resolved.
func TestParsePerfMap(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "perf-1234.map"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pm, err := ParsePerfMap(f)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	for _, s := range pm.spans.s {
		fmt.Fprintf(&out, "%x-%x %s\n", s.start, s.end, s.v)
	}
	golden(t, "perf-1234.golden", out.Bytes())

	for _, tc := range []struct {
		pc   uint64
		want string
	}{
		{0x7f0000000fff, ""},
		{0x7f0000001000, "Interpreter"},
		{0x7f0000001040, "StubRoutines::catch_exception"},
		{0x7f000000105f, "StubRoutines::catch_exception"},
		{0x7f0000001060, "Interpreter"},
		{0x7f0000001100, "LJava/lang/String;::hashCode"},
		{0x7f0000001140, ""},
		{0x7f0000002000, "late"},
		{0x7f0000002040, "java.util.HashMap::putVal(int, Object, Object, boolean, boolean) [c2]"},
		{0x7f0000002100, "java.util.ArrayList::grow [reused]"},
		{0x7f00000022ff, "java.util.ArrayList::grow [reused]"},
		{0x7f0000002300, ""},
		{0x7f0000003000, "StubRoutines::call_stub"},
		{0x7f0000004000, ""},
		{0x7f0000005000, "tab separated"},
	} {
		got, ok := pm.Lookup(tc.pc)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("Lookup(%#x) = %q, %v, want %q", tc.pc, got, ok, tc.want)
		}
	}
}

func TestParsePerfMapMalformed(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"1000 10 ok\n1000 10\n", "perf map line 2: "},
		{"1000\n", "perf map line 1: "},
		{"\n\nxyz 10 name\n", "perf map line 3: bad start"},
		{"1000 -1 name\n", "perf map line 1: bad size"},
		{"ffffffffffffff00 1000 wraps\n", "perf map line 1: range"},
		{"10000000000000000 1 too big\n", "perf map line 1: bad start"},
	} {
		_, err := ParsePerfMap(strings.NewReader(tc.in))
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("ParsePerfMap(%q) error = %v, want prefix %q", tc.in, err, tc.want)
		}
	}
}

func TestLoadPerfMap(t *testing.T) {
	// Our own root is /, so a made-up namespace PID names a file in /tmp.
	nsPID := 1<<22 + os.Getpid()%1000
	path := fmt.Sprintf("/tmp/perf-%d.map", nsPID)
	if _, err := os.Stat(path); err == nil {
		t.Skipf("%s exists", path)
	}
	if err := os.WriteFile(path, []byte("1000 10 foo bar\n"), 0o644); err != nil {
		t.Skip(err)
	}
	t.Cleanup(func() { os.Remove(path) })
	pm, err := LoadPerfMap(os.Getpid(), nsPID)
	if err != nil {
		t.Fatal(err)
	}
	if name, ok := pm.Lookup(0x100f); !ok || name != "foo bar" {
		t.Errorf("Lookup = %q, %v", name, ok)
	}
	if _, err := LoadPerfMap(os.Getpid(), nsPID+1); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing map error = %v, want ErrNotExist", err)
	}
}

// TestLoadPerfMapHostile: a target controls its /tmp/perf-PID.map. A FIFO
// there must not block root (it did, for good, ignoring SIGTERM), a
// symlink must not lead out of its root, and a device must not be read.
func TestLoadPerfMapHostile(t *testing.T) {
	root := t.TempDir()
	os.Mkdir(filepath.Join(root, "tmp"), 0o1777)
	if err := unix.Mkfifo(filepath.Join(root, "tmp", "perf-1.map"), 0o666); err != nil {
		t.Fatal(err)
	}
	os.Symlink("/dev/zero", filepath.Join(root, "tmp", "perf-2.map"))
	outside := filepath.Join(t.TempDir(), "real.map")
	os.WriteFile(outside, []byte("1000 10 secret\n"), 0o644)
	os.Symlink(outside, filepath.Join(root, "tmp", "perf-3.map"))
	os.WriteFile(filepath.Join(root, "tmp", "perf-4.map"), []byte("1000 10 ok\n"), 0o644)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for pid := 1; pid <= 3; pid++ {
			if pm, err := loadPerfMap(root, pid); err == nil {
				t.Errorf("perf-%d.map: read %d ranges, want an error", pid, pm.Len())
			}
		}
		if pm, err := loadPerfMap(root, 4); err != nil || pm.Len() != 1 {
			t.Errorf("perf-4.map: %v", err)
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("LoadPerfMap blocked on a hostile perf map")
	}
}
