package jvmsym

import (
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
)

// fixtureSyms reads the symbol addresses of a fixture directly, by raw
// name, as the expectations for the symbolizer.
func fixtureSyms(t *testing.T, path string) (loads []elf.ProgHeader, syms map[string]elf.Symbol) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD {
			loads = append(loads, p.ProgHeader)
		}
	}
	all, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	syms = make(map[string]elf.Symbol)
	for _, s := range all {
		syms[s.Name] = s
	}
	return loads, syms
}

// fakeProc lays out a /proc with process pid mapping lib at bias the way
// the dynamic loader does, plus anonymous memory, and returns its root.
func fakeProc(t *testing.T, pid int, lib, path string, bias uint64) string {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, fmt.Sprint(pid))
	target := filepath.Join(dir, "root", path)
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		t.Fatal(err)
	}
	// A copy, not a symlink: a target's paths are not followed out of its root.
	data, err := os.ReadFile(lib)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(target, data, 0o644); err != nil {
		t.Fatal(err)
	}
	loads, _ := fixtureSyms(t, "testdata/native/libfixture.so")
	const page = 0x1000
	var maps strings.Builder
	fmt.Fprintf(&maps, "%x-%x rw-p 00000000 00:00 0 \n", bias+0x100000, bias+0x110000)
	for _, p := range loads {
		perms := []byte("---p")
		for i, fl := range []elf.ProgFlag{elf.PF_R, elf.PF_W, elf.PF_X} {
			if p.Flags&fl != 0 {
				perms[i] = "rwx"[i]
			}
		}
		start := bias + p.Vaddr&^(page-1)
		end := (bias + p.Vaddr + p.Memsz + page - 1) &^ (page - 1)
		fmt.Fprintf(&maps, "%x-%x %s %08x fd:01 4242                       %s\n", start, end, perms, p.Off&^(page-1), path)
	}
	fmt.Fprintf(&maps, "7ffc00000000-7ffc00021000 rw-p 00000000 00:00 0                          [stack]\n")
	if err := os.WriteFile(filepath.Join(dir, "maps"), []byte(maps.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

func newTestNative(proc string, pid int, now func() time.Time) *Native {
	n := NewNative(pid)
	n.proc, n.now = proc, now
	return n
}

func TestNativeFixture(t *testing.T) {
	const bias = 0x7f1234000000
	_, syms := fixtureSyms(t, "testdata/native/libfixture.so")
	addr := func(name string, delta int64) uint64 {
		s, ok := syms[name]
		if !ok {
			t.Fatalf("fixture lacks %s", name)
		}
		return bias + uint64(int64(s.Value)+delta)
	}
	trim := "_ZN2gc20G1ParScanThreadState23trim_queue_to_thresholdEi"
	trimEnd := int64(syms[trim].Size)
	trimVaddr := syms[trim].Value

	for _, tc := range []struct {
		lib  string
		ip   uint64
		want string // NativeFrame.String(), "" for no frame
		off  uint64
	}{
		{"libfixture.so", addr(trim, 0), "libfixture.so`gc::G1ParScanThreadState::trim_queue_to_threshold", 0},
		{"libfixture.so", addr(trim, 2), "libfixture.so`gc::G1ParScanThreadState::trim_queue_to_threshold", 2},
		{"libfixture.so", addr(trim, trimEnd), fmt.Sprintf("libfixture.so+%#x", trimVaddr+uint64(trimEnd)), trimVaddr + uint64(trimEnd)},
		{"libfixture.so", addr("_ZN2gc7ClosureIlE5applyEl", 1), "libfixture.so`gc::Closure<long>::apply", 1},
		{"libfixture.so", addr("plain_c_function", 5), "libfixture.so`plain_c_function", 5},
		{"libfixture.so", addr("_ZL12local_helperi", 3), "libfixture.so`local_helper", 3},
		{"libfixture.so", bias + 0x100000, "", 0},     // anonymous memory
		{"libfixture.so", bias + 0x200000 - 1, "", 0}, // unmapped
		{"libfixture.so", 0x7ffc00000100, "", 0},      // [stack]
		// Only .dynsym: the exported functions keep their names, the local
		// one falls into a gap.
		{"libfixture-stripped.so", addr(trim, 2), "libfixture-stripped.so`gc::G1ParScanThreadState::trim_queue_to_threshold", 2},
		{"libfixture-stripped.so", addr("_ZL12local_helperi", 3), fmt.Sprintf("libfixture-stripped.so+%#x", syms["_ZL12local_helperi"].Value+3), syms["_ZL12local_helperi"].Value + 3},
	} {
		proc := fakeProc(t, 42, filepath.Join("testdata/native", tc.lib), "/opt/my app/lib/"+tc.lib, bias)
		n := newTestNative(proc, 42, time.Now)
		f, ok := n.Lookup(tc.ip)
		if tc.want == "" {
			if ok {
				t.Errorf("%s: Lookup(%#x) = %v, want no frame", tc.lib, tc.ip, f)
			}
			continue
		}
		if !ok || f.String() != tc.want || f.Off != tc.off || f.Lib != tc.lib {
			t.Errorf("%s: Lookup(%#x) = %+v, %v, want %q off %#x", tc.lib, tc.ip, f, ok, tc.want, tc.off)
		}
	}
}

func TestNativeMapsReread(t *testing.T) {
	const bias = 0x7f1234000000
	proc := fakeProc(t, 7, "testdata/native/libfixture.so", "/lib/libfixture.so", bias)
	mapsPath := filepath.Join(proc, "7", "maps")
	full, err := os.ReadFile(mapsPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mapsPath, []byte("1000-2000 r-xp 00000000 fd:01 1 /bin/true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	n := newTestNative(proc, 7, func() time.Time { return now })
	ip := uint64(bias + 0x201302) // in plain_c_function
	if _, ok := n.Lookup(ip); ok {
		t.Fatal("found before the library is mapped")
	}
	// The library appears (dlopen), but the miss was just now.
	if err := os.WriteFile(mapsPath, full, 0o644); err != nil {
		t.Fatal(err)
	}
	now = now.Add(mapsRereadInterval / 2)
	if _, ok := n.Lookup(ip); ok {
		t.Fatal("maps reread within the rate limit")
	}
	now = now.Add(mapsRereadInterval / 2)
	if f, ok := n.Lookup(ip); !ok || f.Func != "plain_c_function" {
		t.Fatalf("after reread Lookup = %+v, %v", f, ok)
	}
	// Unchanged mappings keep their symbols across rereads, and two
	// processes mapping one file share them.
	before := n.find(ip).syms
	now = now.Add(2 * mapsRereadInterval)
	n.Lookup(1) // a miss that rereads
	if n.find(ip).syms != before {
		t.Error("symbols reloaded for an unchanged mapping")
	}
	n2 := newTestNative(proc, 7, time.Now)
	n2.Lookup(ip)
	if n2.find(ip).syms != before {
		t.Error("symbols of one file not shared")
	}
}

func TestParseMaps(t *testing.T) {
	text := `00400000-00452000 r-xp 00000000 08:02 173521      /usr/bin/dbus-daemon
7f2c8c000000-7f2c8c021000 rw-p 00000000 00:00 0 
7f2c8d3d4000-7f2c8d59b000 r-xp 00001000 fd:00 1048708                    /usr/lib/libjvm with space.so (deleted)
7fff5e7d2000-7fff5e7d4000 r-xp 00000000 00:00 0                          [vdso]
`
	maps, err := parseMaps(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range maps {
		got = append(got, fmt.Sprintf("%x-%x@%x %s %d %q %v", m.start, m.end, m.off, m.dev, m.inode, m.path, m.fileBacked()))
	}
	want := []string{
		`400000-452000@0 08:02 173521 "/usr/bin/dbus-daemon" true`,
		`7f2c8c000000-7f2c8c021000@0 00:00 0 "" false`,
		`7f2c8d3d4000-7f2c8d59b000@1000 fd:00 1048708 "/usr/lib/libjvm with space.so (deleted)" true`,
		`7fff5e7d2000-7fff5e7d4000@0 00:00 0 "[vdso]" false`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("parseMaps =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, bad := range []string{"zz-1000 r-xp 0 00:00 0\n", "1000 r-xp 0 00:00 0\n", "2000-1000 r-xp 0 00:00 0\n", "1000-2000 r-xp 0 00:00\n"} {
		if _, err := parseMaps(strings.NewReader("1000-2000 r-xp 0 00:00 0\n" + bad)); err == nil || !strings.HasPrefix(err.Error(), "maps line 2: ") {
			t.Errorf("parseMaps(%q) error = %v", bad, err)
		}
	}
}

//go:noinline
func liveTarget(x int) int { return x*x + 1 }

// TestNativeLive symbolizes a function of this test binary in our own
// process, through the real /proc.
func TestNativeLive(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	ef, err := elf.Open(exe)
	if err != nil {
		t.Skip(err)
	}
	_, symErr := ef.Symbols()
	text := ef.Section(".text")
	ef.Close()
	pc := uint64(reflect.ValueOf(liveTarget).Pointer())
	n := NewNative(os.Getpid())
	f, ok := n.Lookup(pc + 1)
	if !ok || f.Lib != filepath.Base(exe) {
		t.Fatalf("Lookup(%#x) = %+v, %v, want a frame in %s", pc+1, f, ok, filepath.Base(exe))
	}
	t.Logf("Lookup(%#x) = %+v", pc+1, f)
	if symErr != nil {
		// go test strips test binaries: no name, but the ELF address.
		if f.Func != "" || text == nil || f.Off < text.Addr || f.Off >= text.Addr+text.Size {
			t.Errorf("stripped binary: Lookup = %+v, want an address in .text", f)
		}
	} else if want := runtime.FuncForPC(uintptr(pc)).Name(); f.Func != want || f.Off != 1 {
		t.Errorf("Lookup = %+v, want %s`%s+1", f, filepath.Base(exe), want)
	}
	// The Go heap is anonymous memory.
	if f, ok := n.Lookup(uint64(reflect.ValueOf(new(int)).Pointer())); ok {
		t.Errorf("heap address resolved to %v", f)
	}
}
