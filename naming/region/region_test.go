package region

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// fixture is one capture of testdata/gen.sh.
type fixture struct {
	name                       string
	maps, vminfo, nmt, threads string
	codelist                   string
	tasks                      []Task
	pid                        uint32
	mapped, direct             uint64
	mappedPath, worker         string
}

func read(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func loadFixtures(t testing.TB) []fixture {
	t.Helper()
	paths, _ := filepath.Glob("testdata/*.maps")
	if len(paths) == 0 {
		t.Fatal("no fixtures (testdata/gen.sh makes them)")
	}
	var out []fixture
	for _, p := range paths {
		base := strings.TrimSuffix(p, ".maps")
		f := fixture{name: filepath.Base(base), maps: read(t, p), vminfo: read(t, base+".vminfo"),
			nmt: read(t, base+".nmt"), threads: read(t, base+".threads"), codelist: read(t, base+".codelist")}
		for _, l := range strings.Split(strings.TrimSpace(read(t, base+".tasks")), "\n") {
			fs := strings.SplitN(l, "\t", 3)
			tid, err := strconv.ParseUint(fs[0], 10, 32)
			if err != nil || len(fs) != 3 {
				t.Fatalf("%s.tasks: %q", base, l)
			}
			sp, _ := ParseSyscallSP(fs[2])
			f.tasks = append(f.tasks, Task{TID: uint32(tid), Comm: fs[1], SP: sp})
			if f.pid == 0 || uint32(tid) < f.pid {
				f.pid = uint32(tid)
			}
		}
		f.mapped, f.direct, f.mappedPath, f.worker = parseTruth(t, read(t, base+".truth"))
		out = append(out, f)
	}
	return out
}

// parseTruth reads RegionTruth's output.
func parseTruth(t testing.TB, text string) (mapped, direct uint64, path, thread string) {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		switch {
		case len(fs) == 4 && fs[0] == "mapped":
			mapped = hex(t, fs[1])
			path = fs[3]
		case len(fs) == 3 && fs[0] == "direct":
			direct = hex(t, fs[1])
		case len(fs) == 2 && fs[0] == "thread":
			thread = fs[1]
		}
	}
	if mapped == 0 || direct == 0 || thread == "" {
		t.Fatalf("truth incomplete: %q", text)
	}
	return
}

func hex(t testing.TB, s string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

var (
	codeRE = regexp.MustCompile(`RegionTruth\.hot\S* \[(0x[0-9a-f]+), (0x[0-9a-f]+) - (0x[0-9a-f]+)\]`)
	nmtRE  = regexp.MustCompile(`(?m)^\[(0x[0-9a-f]+) - (0x[0-9a-f]+)\] reserved (?:and committed )?\d+KB for ([A-Za-z ]+) from`)
)

// truthChecks are what every fixture, and the live test, must name right.
func truthChecks(t *testing.T, lookup func(uint64) Region, f fixture, withNMT bool) {
	t.Helper()
	want := func(what string, addr uint64, name string) {
		t.Helper()
		if got := lookup(addr); got.Name != name {
			t.Errorf("%s %#x: %q, want %q", what, addr, got.Name, name)
		}
	}
	want("mapped file", f.mapped, MappedFile+f.mappedPath)
	want("mapped file end", f.mapped+1<<20-1, MappedFile+f.mappedPath)
	// A 1 MiB direct buffer is a malloc that glibc serves with its own
	// mmap (past M_MMAP_THRESHOLD): an anonymous mapping, not an arena.
	want("direct buffer", f.direct, Anonymous)
	want("direct buffer end", f.direct+1<<20-1, Anonymous)
	ms := codeRE.FindAllStringSubmatch(f.codelist, -1)
	if len(ms) == 0 {
		t.Errorf("no RegionTruth.hot in Compiler.codelist")
	}
	for _, c := range ms {
		want("RegionTruth.hot code", hex(t, c[2]), CodeCache)
	}
	// The worker's last Java sp (Thread.print) is in its stack.
	found := false
	for _, jt := range parseThreads(f.threads) {
		if jt.name != f.worker {
			continue
		}
		found = true
		got := lookup(jt.sp)
		if got.Name != Stack || got.Thread != f.worker || got.TID != jt.tid {
			t.Errorf("worker's sp %#x: %+v, want the stack of %q (%d)", jt.sp, got, f.worker, jt.tid)
		}
	}
	if !found {
		t.Errorf("no %q in Thread.print", f.worker)
	}
	// Every blocked thread's sp is in its own stack.
	for _, tk := range f.tasks {
		if tk.SP == 0 {
			continue
		}
		if got := lookup(tk.SP); got.Name != Stack || got.TID != tk.TID || got.Thread == "" {
			t.Errorf("thread %d %q sp %#x: %+v", tk.TID, tk.Comm, tk.SP, got)
		}
	}
	vm := parseVMInfo(f.vminfo)
	seen := map[string]bool{}
	for _, c := range vm.claims {
		want("VM.info "+c.name, c.start, c.name)
		seen[c.name] = true
	}
	for _, n := range []string{CodeCache, ClassSpace, CDS, CardTable, MarkBitmap} {
		if !seen[n] {
			t.Errorf("VM.info: no %s", n)
		}
	}
	want("Java heap", 0xf0000000, JavaHeap)
	for _, l := range strings.Split(f.maps, "\n") {
		if strings.HasSuffix(l, "[heap]") {
			want("[heap]", hex(t, l[:strings.IndexByte(l, '-')]), Malloc)
		}
	}
	// NMT, the independent view: no JVM reservation may be called malloc;
	// with NMT, each has its tag's region (where VM.info says nothing
	// more specific).
	for _, r := range nmtRE.FindAllStringSubmatch(f.nmt, -1) {
		lo, hi, tag := hex(t, r[1]), hex(t, r[2]), r[3]
		for a := lo; a < hi; a += 4096 {
			got := lookup(a)
			if got.Name == Malloc || got.Name == Unknown {
				t.Errorf("NMT %s [%#x,%#x): %#x is %q", tag, lo, hi, a, got.Name)
				break
			}
		}
		if !withNMT {
			continue
		}
		switch tag {
		case "Metaspace":
			want("NMT metaspace", lo, Metaspace)
		case "Class":
			want("NMT class space", lo, ClassSpace)
		case "Thread Stack":
			want("NMT thread stack", hi-1, Stack)
		}
	}
}

func TestFixtures(t *testing.T) {
	for _, f := range loadFixtures(t) {
		for _, withNMT := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/nmt=%v", f.name, withNMT), func(t *testing.T) {
				text := JVMText{VMInfo: f.vminfo, Threads: f.threads}
				if withNMT {
					text.NMT = f.nmt
				}
				m := Build(f.maps, text, f.tasks, f.pid)
				truthChecks(t, m.Lookup, f, withNMT)
				counts := map[string]int{}
				for i := range m.starts {
					if n := m.regions[m.reg[i]].Name; !strings.HasPrefix(n, MappedFile) {
						counts[n]++
					}
				}
				t.Logf("%d segments: %v", m.Len(), counts)
				if counts[Malloc] < 2 {
					t.Errorf("%d malloc segments, want [heap] and arenas", counts[Malloc])
				}
				if withNMT && counts[Metaspace] == 0 {
					t.Errorf("no metaspace with NMT")
				}
			})
		}
	}
}
