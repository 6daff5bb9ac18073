package reloc

import (
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/djx-bpf/djx-bpf/safety/elfsafe"
)

// buildPlanLibs builds the libjvm.so files the plan tests read, each named
// libjvm.so in a folder of its own: "gc" is testdata/fakegc.c (a copy
// function per collector and phase, the USDT probes), "stripped" without
// its .symtab, "nousdt" without its .note.stapsdt (a JDK built without
// DTrace), "bare" without either, and "jvm" is testdata/fakejvm.c (symbols
// but no collector functions, the USDT probes).
func buildPlanLibs(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	libs := map[string]string{}
	for _, name := range []string{"gc", "stripped", "nousdt", "bare", "jvm"} {
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		libs[name] = filepath.Join(dir, name, "libjvm.so")
	}
	buildLib(t, filepath.Join(dir, "gc"), "testdata/fakegc.c")
	buildLib(t, filepath.Join(dir, "jvm"), "testdata/fakejvm.c")
	for _, c := range [][]string{
		{"strip", "-o", libs["stripped"], libs["gc"]},
		{"objcopy", "--remove-section", ".note.stapsdt", libs["gc"], libs["nousdt"]},
		{"strip", "--remove-section", ".note.stapsdt", "-o", libs["bare"], libs["gc"]},
	} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Skipf("skipping: %s: %v %s", c[0], err, out)
		}
	}
	return libs
}

// libcImpl is where the fake process's GOT slots of memmove and memcpy
// point: an implementation in the text of fakeMaps' libc.
const libcImpl = fakeLibc + 0x9a000

// countMem is a fakeMem that counts its reads.
type countMem struct {
	fakeMem
	reads int
}

func (m *countMem) ReadAt(p []byte, off int64) (int, error) {
	m.reads++
	return m.fakeMem.ReadAt(p, off)
}

// planFile plans cfg's probes for the libjvm.so at path in a process that
// maps it as fakeMaps does. If bound, its GOT slots of memmove and memcpy
// hold libcImpl; else they cannot be read. It returns the plan, how many
// times the process's memory was read, and planJVM's error.
func planFile(t *testing.T, path string, cfg Config, bound bool) (plan, int, error) {
	t.Helper()
	f, err := elfsafe.OpenPath(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mem := &countMem{fakeMem: fakeMem{}}
	if bound {
		pointSlots(t, f, mem.fakeMem, libcImpl, copyImports...)
	}
	ms := fakeMaps(path)
	p, err := planJVM(cfg, f, process{maps: ms, jvm: ms[0], mem: mem})
	return p, mem.reads, err
}

// probeLines writes the uprobes of p one a line: "copy G1 young memcpy"
// for a copy site (named by p.info.Sites), "copy libjvm+OFFSET" for
// another place in libjvm.so, "copy libc.so.6+OFFSET memmove/memcpy" for a
// libc implementation, "gc-begin cookie COOKIE" for a USDT probe. It checks
// the instruction at each libjvm.so offset (lib is the file): a call or
// jmp rel32 at a site, a USDT probe's nop.
func probeLines(t *testing.T, p plan, lib io.ReaderAt) []string {
	t.Helper()
	sites := map[uint64]Site{}
	for _, s := range p.info.Sites {
		sites[s.Offset] = s
	}
	var out []string
	for _, u := range p.probes {
		if u.libc >= 0 {
			c := p.info.Copies[u.libc]
			out = append(out, fmt.Sprintf("copy %s+%#x %s", filepath.Base(u.libcMap.path), u.offset, strings.Join(c.Imports, "/")))
			continue
		}
		var b [1]byte
		if _, err := lib.ReadAt(b[:], int64(u.offset)); err != nil {
			t.Errorf("%s: %v", u.what, err)
			continue
		}
		op := b[0]
		switch s, ok := sites[u.offset]; {
		case u.kind != Copy:
			if op != 0x90 {
				t.Errorf("%s: byte %#x, want a USDT probe's nop", u.what, op)
			}
			out = append(out, fmt.Sprintf("%s cookie %#x", u.kind, u.cookie))
		case ok:
			if op != 0xe8 && op != 0xe9 {
				t.Errorf("%s: byte %#x, want a call or jmp rel32", u.what, op)
			}
			out = append(out, fmt.Sprintf("copy %s %s %s", s.GC, s.Phase, s.Callee))
		default:
			out = append(out, fmt.Sprintf("copy libjvm+%#x", u.offset))
		}
	}
	return out
}

// What the plans of the fake libraries hold.
var (
	// One site per collector and phase, in fakegc.c's order.
	fakeSites = []string{
		"copy Serial young memcpy", "copy Serial full memmove",
		"copy Parallel young memcpy", "copy Parallel full memmove",
		"copy G1 young memcpy", "copy G1 full memmove",
	}
	// libc's implementation, which memmove and memcpy share.
	fakeLibcCopy = []string{fmt.Sprintf("copy libc.so.6+%#x memmove/memcpy", libcImpl-fakeLibc)}
	// gc__begin reads its constant argument "1@$1"; gc__end has none.
	fakeUSDT = []string{"gc-begin cookie 0x100010001", "gc-end cookie 0x0"}
)

// TestPlan plans the fake libraries in each copy mode: which probes, which
// part is missing and why, and whether the process's memory was read
// (only the libc fallback reads it).
func TestPlan(t *testing.T) {
	libs := buildPlanLibs(t)
	const noSymtab = "libjvm.so has no symbol table (stripped)"
	const noUSDT = "libjvm.so has no hotspot gc__begin/gc__end USDT probes (JDK built without --enable-dtrace)"
	const noSites = "libjvm.so has no GC copy sites for some collectors: none for Serial young, Serial full, Parallel young, Parallel full, G1 young, G1 full"
	for _, c := range []struct {
		name, lib string
		copies    CopyProbe
		unbound   bool // the GOT slots cannot be read
		// The parts missing, each wrapping its sentinel, as Info says.
		sitesErr, copyErr, gcErr error
		want                     []string
		readsMem                 bool
		// planJVM's error: %[1]s is the library's path, %#[2]x the
		// address of its memmove GOT slot in the process.
		err string
	}{
		{name: "sites", lib: "gc", want: slices.Concat(fakeSites, fakeUSDT)},
		{name: "sites only", lib: "gc", copies: CopiesGCSites, want: slices.Concat(fakeSites, fakeUSDT)},
		{name: "libc", lib: "gc", copies: CopiesLibc, want: slices.Concat(fakeLibcCopy, fakeUSDT), readsMem: true},
		{name: "no collector functions", lib: "jvm", sitesErr: ErrNoSites, want: slices.Concat(fakeLibcCopy, fakeUSDT), readsMem: true},
		{name: "stripped", lib: "stripped", sitesErr: ErrNoSymtab, want: slices.Concat(fakeLibcCopy, fakeUSDT), readsMem: true},
		{name: "no collector functions, sites only", lib: "jvm", copies: CopiesGCSites, sitesErr: ErrNoSites, copyErr: ErrNoSites, want: fakeUSDT},
		{name: "stripped, sites only", lib: "stripped", copies: CopiesGCSites, sitesErr: ErrNoSymtab, copyErr: ErrNoSymtab, want: fakeUSDT},
		{name: "no usdt", lib: "nousdt", gcErr: ErrNoUSDT, want: fakeSites},
		{name: "no usdt, libc", lib: "nousdt", copies: CopiesLibc, gcErr: ErrNoUSDT, want: fakeLibcCopy, readsMem: true},
		{name: "stripped, no usdt, sites only", lib: "bare", copies: CopiesGCSites, sitesErr: ErrNoSymtab, copyErr: ErrNoSymtab, gcErr: ErrNoUSDT,
			err: "%[1]s gives neither copies (gc copy sites: " + noSymtab + ") nor GC epochs (" + noUSDT + ")"},
		{name: "stripped, no usdt, GOT unreadable", lib: "bare", unbound: true, sitesErr: ErrNoSymtab, copyErr: ErrGOT, gcErr: ErrNoUSDT, readsMem: true,
			err: "%[1]s gives neither copies (cannot resolve libjvm's memmove/memcpy through its GOT: read memmove slot at %#[2]x: unmapped) nor GC epochs (" + noUSDT + ")"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := libs[c.lib]
			p, reads, err := planFile(t, path, Config{Copies: c.copies}, !c.unbound)
			if want := planErr(t, c.err, path); fmt.Sprint(err) != want {
				t.Errorf("error %v\nwant  %s", err, want)
			}
			if err != nil && (!errors.Is(err, c.copyErr) || !errors.Is(err, c.gcErr)) {
				t.Errorf("error %v, want it to wrap %v and %v", err, c.copyErr, c.gcErr)
			}
			for _, e := range []struct {
				what      string
				got, want error
			}{{"SitesErr", p.info.SitesErr, c.sitesErr}, {"CopyErr", p.info.CopyErr, c.copyErr}, {"GCErr", p.info.GCErr, c.gcErr}} {
				if (e.got == nil) != (e.want == nil) || !errors.Is(e.got, e.want) {
					t.Errorf("%s %v, want %v", e.what, e.got, e.want)
				}
			}
			if errors.Is(c.sitesErr, ErrNoSites) && p.info.SitesErr.Error() != noSites {
				t.Errorf("SitesErr %q\nwant %q", p.info.SitesErr, noSites)
			}
			if (reads > 0) != c.readsMem {
				t.Errorf("the process's memory read %d times, want reads %v", reads, c.readsMem)
			}
			if p.info.LibJVM != path {
				t.Errorf("LibJVM %q, want %q", p.info.LibJVM, path)
			}
			if got := probeLines(t, p, openFile(t, path)); strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Errorf("probes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
		})
	}
}

// planErr formats a TestPlan error for the library at path ("<nil>" for
// none).
func planErr(t *testing.T, format, path string) string {
	t.Helper()
	if format == "" {
		return "<nil>"
	}
	f, err := elfsafe.OpenPath(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	slots, err := gotSlots(f, []string{"memmove"})
	if err != nil || len(slots["memmove"]) == 0 {
		t.Fatalf("memmove's GOT slot: %v, %v", slots, err)
	}
	return fmt.Sprintf(format, path, fakeBase+slots["memmove"][0])
}

// TestPlanEntryProbes: measured against the sites, the copy probes go on
// the entries of the functions holding the sites, one each, as debug/elf
// reads them.
func TestPlanEntryProbes(t *testing.T) {
	path := buildLib(t, t.TempDir(), "testdata/fakegc.c")
	p, _, err := planFile(t, path, Config{Copies: CopiesGCSites, entryProbes: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	ef, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	syms, err := ef.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	funcs := map[string]bool{}
	for _, s := range p.info.Sites {
		funcs[s.Func] = true
	}
	var want, got []uint64
	for _, s := range syms {
		if !funcs[s.Name] {
			continue
		}
		for _, pr := range ef.Progs {
			if pr.Type == elf.PT_LOAD && s.Value >= pr.Vaddr && s.Value < pr.Vaddr+pr.Filesz {
				want = append(want, s.Value-pr.Vaddr+pr.Off)
			}
		}
	}
	var gc []string
	for _, u := range p.probes {
		if u.kind == Copy {
			got = append(got, u.offset)
		} else {
			gc = append(gc, fmt.Sprintf("%s cookie %#x", u.kind, u.cookie))
		}
	}
	slices.Sort(want)
	slices.Sort(got)
	if len(want) != 6 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("entry probes at %#x, want the 6 functions' entries %#x", got, want)
	}
	if strings.Join(gc, "\n") != strings.Join(fakeUSDT, "\n") {
		t.Errorf("usdt probes %q, want %q", gc, fakeUSDT)
	}
}

// openFile opens path for reading until the test ends.
func openFile(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestPlanRealLibJVM plans the installed JDKs' libjvm.so as AddJVM does by
// default: copy sites for every collector and phase, each a call or jmp,
// nothing read from the process, and the USDT probes, each a nop, with
// gc__begin's argument readable.
func TestPlanRealLibJVM(t *testing.T) {
	for _, home := range []string{jdk17Home, jdk25Home} {
		t.Run(filepath.Base(home), func(t *testing.T) {
			path := filepath.Join(home, "lib", "server", "libjvm.so")
			if _, err := os.Stat(path); err != nil {
				t.Skipf("skipping: no %s: %v", path, err)
			}
			p, reads, err := planFile(t, path, Config{}, true)
			if err != nil {
				t.Fatal(err)
			}
			info := p.info
			if info.SitesErr != nil || info.CopyErr != nil || info.GCErr != nil || len(info.Copies) > 0 || reads > 0 {
				t.Errorf("sites %v, copies %v, gc %v, libc %v, memory read %d times; want the sites alone",
					info.SitesErr, info.CopyErr, info.GCErr, info.Copies, reads)
			}
			// By collector and phase, or USDT probe; "copy" would be a
			// copy probe elsewhere than at a site.
			per := map[string]int{}
			for _, l := range probeLines(t, p, openFile(t, path)) {
				f := strings.Fields(l)
				if f[0] == "copy" && len(f) == 4 {
					f[0] = f[1] + " " + f[2]
				}
				per[f[0]]++
			}
			t.Logf("%d probes: %v", len(p.probes), per)
			for _, k := range []string{"Serial young", "Serial full", "Parallel young", "Parallel full", "G1 young", "G1 full", "gc-begin", "gc-end"} {
				if per[k] == 0 {
					t.Errorf("no %s probe", k)
				}
			}
			if per["copy"] > 0 {
				t.Errorf("%d copy probes outside the sites", per["copy"])
			}
			for _, u := range p.probes {
				if u.refCtr != 0 {
					t.Errorf("%s: semaphore %#x, want none", u.what, u.refCtr)
				}
				if u.kind == GCBegin && u.cookie&0xff == argNone {
					t.Errorf("%s: argument unreadable", u.what)
				}
			}
		})
	}
}

// TestHeapFilter: the BPF filter entry holds MinLen and the heap ranges
// merged; a heap of no range, or of more than the BPF map holds, is
// refused.
func TestHeapFilter(t *testing.T) {
	tg, err := heapFilter(1024, []Range{{0x2000, 0x3000}, {0x1000, 0x2000}, {0x5000, 0x6000}})
	var ranges []Range
	for _, r := range tg.Ranges[:min(tg.Nranges, maxRanges)] {
		ranges = append(ranges, Range{r.Start, r.End})
	}
	if got := fmt.Sprintf("%d %#x", tg.MinLen, ranges); err != nil || got != "1024 [{0x1000 0x3000} {0x5000 0x6000}]" {
		t.Errorf("filter %s, %v; want MinLen 1024 and two ranges", got, err)
	}
	var five []Range
	for i := range uint64(5) {
		five = append(five, Range{i * 0x2000, i*0x2000 + 0x1000})
	}
	for _, c := range []struct {
		heap []Range
		want string
	}{
		{nil, "no heap range"},
		{[]Range{{0x1000, 0x1000}}, "no heap range"},
		{five, "5 heap ranges, at most 4 supported"},
	} {
		if _, err := heapFilter(0, c.heap); fmt.Sprint(err) != c.want {
			t.Errorf("heapFilter(%v): %v, want %s", c.heap, err, c.want)
		}
	}
}
