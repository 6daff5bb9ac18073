package jvmsym

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
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
		fmt.Fprintf(&out, "%x-%x %s\n", s.start, s.end, pm.name(s.v))
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

// synthPerfMap is a perf map of n JIT'd methods as a big service's JVM
// writes it (about 80 bytes a line), one in 20 lines reusing the code
// memory of an earlier one.
func synthPerfMap(n int) []byte {
	var b bytes.Buffer
	addr := uint64(0x7f0000000000)
	for i := range n {
		start := addr
		if i%20 == 19 {
			start -= 0x800
		}
		fmt.Fprintf(&b, "%x %x com.example.service.Class%d::method%d(int, java.lang.String) [c2]\n", start, 0x200+i%7*0x40, i/20, i%20)
		addr += 0x400
	}
	return b.Bytes()
}

// BenchmarkParsePerfMap: a perf map of 100k methods (8 MiB), about what
// jcmd Compiler.perfmap writes for a large service.
func BenchmarkParsePerfMap(b *testing.B) {
	data := synthPerfMap(100_000)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParsePerfMap(bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
	}
}

// TestParsePerfMapCaps: lines past the entry cap and bytes past the byte
// cap are left out and counted, a line cut at the byte cap is dropped
// rather than refused, and long names are cut on a rune boundary.
func TestParsePerfMapCaps(t *testing.T) {
	lines := "1000 10 a\n2000 10 b\n3000 10 c\n4000 10 d\n"
	for _, tc := range []struct {
		name       string
		in         string
		maxBytes   int64
		maxEntries int
		want       PerfMapStats
		found      string // the names Lookup finds at 0x1000, 0x2000, ...
	}{
		{"under the caps", lines, int64(len(lines)), 4, PerfMapStats{Entries: 4}, "abcd"},
		{"entries", lines + "\n5000 10 e\n", 1 << 20, 2, PerfMapStats{Entries: 2, Dropped: 3}, "ab"},
		{"bytes at a line's end", lines, 20, 10, PerfMapStats{Entries: 2, Truncated: true}, "ab"},
		{"bytes inside a line", lines, 25, 10, PerfMapStats{Entries: 2, Truncated: true}, "ab"},
		{"both", lines, 30, 1, PerfMapStats{Entries: 1, Dropped: 2, Truncated: true}, "a"},
	} {
		pm, err := parsePerfMap(strings.NewReader(tc.in), tc.maxBytes, tc.maxEntries)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got := pm.Stats(); got != tc.want {
			t.Errorf("%s: stats %+v, want %+v", tc.name, got, tc.want)
		}
		var found string
		for pc := uint64(0x1000); pc <= 0x5000; pc += 0x1000 {
			if name, ok := pm.Lookup(pc); ok {
				found += name
			}
		}
		if found != tc.found {
			t.Errorf("%s: found %q, want %q", tc.name, found, tc.found)
		}
	}

	long := strings.Repeat("x", maxPerfName-1) + "é tail"
	pm, err := ParsePerfMap(strings.NewReader("1000 10 " + long + "\n2000 10 short\n"))
	if err != nil {
		t.Fatal(err)
	}
	if name, _ := pm.Lookup(0x1000); name != long[:maxPerfName-1] {
		t.Errorf("long name kept as %d bytes %q...", len(name), name[max(0, len(name)-8):])
	}
	if name, _ := pm.Lookup(0x2000); name != "short" {
		t.Errorf("Lookup after a long name = %q", name)
	}
	if st := pm.Stats(); st.NamesCut != 1 {
		t.Errorf("NamesCut = %d", st.NamesCut)
	}
}

// TestLoadPerfMapBig: a target's perf map of millions of tiny lines, or
// of long names, is read up to MaxPerfMap and kept within maxPerfEntries
// ranges and maxPerfName bytes a name (28 MiB of tiny lines once took
// 690 MiB).
func TestLoadPerfMapBig(t *testing.T) {
	root := t.TempDir()
	os.Mkdir(filepath.Join(root, "tmp"), 0o755)
	var tiny []byte
	for a := uint64(0x10000); len(tiny) <= MaxPerfMap; a += 2 {
		tiny = append(strconv.AppendUint(tiny, a, 16), " 1 a\n"...)
	}
	longNames := new(bytes.Buffer)
	name := strings.Repeat("n", maxPerfLine-100)
	for a := uint64(0x10000); longNames.Len() < MaxPerfMap; a += 0x100 {
		fmt.Fprintf(longNames, "%x 80 %s\n", a, name)
	}
	for i, tc := range []struct {
		name string
		data []byte
	}{
		{"tiny lines", tiny},
		{"long names", longNames.Bytes()},
	} {
		lines := bytes.Count(tc.data[:MaxPerfMap], []byte("\n"))
		want := PerfMapStats{Entries: min(lines, maxPerfEntries), Truncated: true}
		want.Dropped = lines - want.Entries
		if tc.name == "long names" {
			want.NamesCut = want.Entries
		}
		pid := 10 + i
		if err := os.WriteFile(filepath.Join(root, "tmp", fmt.Sprintf("perf-%d.map", pid)), tc.data, 0o644); err != nil {
			t.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		pm, err := loadPerfMap(root, pid)
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		st := pm.Stats()
		t.Logf("%s: %d bytes: %+v, %d ranges, keeps %d bytes, allocated %d MiB", tc.name, len(tc.data), st, pm.Len(), pm.size(), (after.TotalAlloc-before.TotalAlloc)>>20)
		if st != want {
			t.Errorf("%s: stats %+v, want %+v", tc.name, st, want)
		}
		if pm.Len() > st.Entries {
			t.Errorf("%s: %d ranges of %d entries", tc.name, pm.Len(), st.Entries)
		}
		// 24 bytes a range and its name (cut to maxPerfName), in chunks.
		if limit := st.Entries*(24+maxPerfName) + nameChunk; pm.size() > limit || pm.size() > 8<<20 {
			t.Errorf("%s: keeps %d bytes, want at most %d", tc.name, pm.size(), min(limit, 8<<20))
		}
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
			t.Errorf("%s: allocated %d MiB", tc.name, grew>>20)
		}
	}
}

// FuzzParsePerfMapCaps: whatever the map, small caps hold: no more ranges
// than entries kept, no name longer than maxPerfName, ranges disjoint and
// sorted, and every line read is kept or counted.
func FuzzParsePerfMapCaps(f *testing.F) {
	f.Add([]byte("1000 10 a\n2000 10 b\n3000 10 c\n"), uint16(25), uint8(2))
	f.Add([]byte("1000 100 outer\n1010 10 inner\n1000 100 outer\n"), uint16(100), uint8(2))
	f.Add([]byte("0x1000 0x10 "+strings.Repeat("é", maxPerfName)+"\n"), uint16(4000), uint8(1))
	f.Add([]byte("1 1 a\n3 1 a\n5 1 a\n7 1 a"), uint16(23), uint8(3))
	f.Fuzz(func(t *testing.T, data []byte, maxBytes uint16, maxEntries uint8) {
		pm, err := parsePerfMap(bytes.NewReader(data), int64(maxBytes), int(maxEntries))
		if err != nil {
			return
		}
		st := pm.Stats()
		if st.Entries > int(maxEntries) || st.Truncated != (len(data) > int(maxBytes)) {
			t.Fatalf("stats %+v for %d bytes, caps %d bytes, %d entries", st, len(data), maxBytes, maxEntries)
		}
		if pm.Len() > 2*st.Entries {
			t.Fatalf("%d ranges of %d entries", pm.Len(), st.Entries)
		}
		for i, s := range pm.spans.s {
			if s.end <= s.start || i > 0 && pm.spans.s[i-1].end > s.start {
				t.Fatalf("range %d: %#x-%#x after %+v", i, s.start, s.end, pm.spans.s[max(i-1, 0)])
			}
			if name, ok := pm.Lookup(s.start); !ok || len(name) > maxPerfName || name != pm.name(s.v) {
				t.Fatalf("Lookup(%#x) = %q, %v", s.start, name, ok)
			}
		}
	})
}
