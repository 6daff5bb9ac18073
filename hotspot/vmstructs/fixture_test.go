package vmstructs

import (
	"bufio"
	"bytes"
	"cmp"
	"compress/gzip"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/djx-bpf/djx-bpf/hotspot/targetmem"
	"github.com/djx-bpf/djx-bpf/internal/testenv"
)

// -record captures the fixtures again from the installed JDKs (as root):
//
//	go test ./vmstructs -run TestRecord -record
var record = flag.Bool("record", false, "capture testdata/*.json.gz and their .txt listings from live JVMs (needs root)")

// fixture is a JVM's vmStructs as Read saw them: the symbols' addresses and
// the memory it read, each byte Read did not decode zeroed (so the gzip
// stays small: the pages around the names are the bulk of what is read).
type fixture struct {
	JDK      string            // testenv's name: jdk17, jdk25
	Java     string            // the java binary it ran
	Release  string            // the table's own release string
	Lib      string            // libjvm's path
	Base     uint64            // libjvm's load bias in that run
	Symbols  map[string]uint64 // runtime addresses
	Segments []segment         // sorted, disjoint, not adjacent
}

func (f *fixture) symbols() Symbols {
	return Symbols{Lib: f.Lib, Base: f.Base, Addrs: f.Symbols}
}

// ReadAt serves the recorded memory (readSegments).
func (f *fixture) ReadAt(p []byte, off int64) (int, error) { return readSegments(f.Segments, p, off) }

var fixtureJDKs = []string{"jdk17", "jdk25"}

func fixturePath(jdk string) string { return filepath.Join("testdata", jdk+".json.gz") }
func listingPath(jdk string) string { return filepath.Join("testdata", jdk+".txt") }

func loadFixture(t testing.TB, jdk string) *fixture {
	t.Helper()
	f, err := loadFixtureFile(jdk)
	if err != nil {
		t.Fatalf("%v (go test ./vmstructs -run TestRecord -record makes it)", err)
	}
	return f
}

func loadFixtureFile(jdk string) (*fixture, error) {
	raw, err := os.ReadFile(fixturePath(jdk))
	if err != nil {
		return nil, err
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fixturePath(jdk), err)
	}
	var f fixture
	if err := json.NewDecoder(zr).Decode(&f); err != nil {
		return nil, fmt.Errorf("%s: %w", fixturePath(jdk), err)
	}
	return &f, nil
}

// fixtureTable reads the table of a fixture.
func fixtureTable(t testing.TB, jdk string) *Table {
	t.Helper()
	f := loadFixture(t, jdk)
	tab, err := Read(f, f.symbols())
	if err != nil {
		t.Fatalf("%s: %v", jdk, err)
	}
	return tab
}

// recorder is a Mem that keeps what it read.
type recorder struct {
	mem   Mem
	reads []segment
}

func (r *recorder) ReadAt(p []byte, off int64) (int, error) {
	n, err := r.mem.ReadAt(p, off)
	if n > 0 {
		r.reads = append(r.reads, segment{uint64(off), slices.Clone(p[:n])})
	}
	return n, err
}

// spans is a set of byte ranges [start, end).
type spans [][2]uint64

func (s spans) has(a uint64) bool {
	i := sort.Search(len(s), func(i int) bool { return s[i][1] > a })
	return i < len(s) && s[i][0] <= a
}

func (s spans) merged() spans {
	slices.SortFunc(s, func(a, b [2]uint64) int { return cmp.Compare(a[0], b[0]) })
	var out spans
	for _, x := range s {
		if n := len(out); n > 0 && x[0] <= out[n-1][1] {
			out[n-1][1] = max(out[n-1][1], x[1])
			continue
		}
		out = append(out, x)
	}
	return out
}

// segments merges the reads into disjoint segments, zeroing every byte
// outside used.
func segments(reads []segment, used spans) []segment {
	var rs spans
	for _, r := range reads {
		rs = append(rs, [2]uint64{r.Addr, r.Addr + uint64(len(r.Data))})
	}
	rs = rs.merged()
	out := make([]segment, len(rs))
	for i, r := range rs {
		out[i] = segment{r[0], make([]byte, r[1]-r[0])}
	}
	for _, r := range reads {
		i := sort.Search(len(out), func(i int) bool { return out[i].Addr+uint64(len(out[i].Data)) > r.Addr })
		copy(out[i].Data[r.Addr-out[i].Addr:], r.Data)
	}
	for _, s := range out {
		for j := range s.Data {
			if !used.has(s.Addr + uint64(j)) {
				s.Data[j] = 0
			}
		}
	}
	return out
}

// startIdle runs testdata/Idle.java on jdk and returns its pid once it
// runs; the JVM ends with the test.
func startIdle(t testing.TB, jdk testenv.JDK) int {
	t.Helper()
	cmd := exec.Command(jdk.Java(), "-Xmx64m", "-Xshare:auto", filepath.Join("testdata", "Idle.java"))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", jdk.Java(), err)
	}
	t.Cleanup(func() {
		stdin.Close() // Idle exits at the end of its stdin
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	ready := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err == nil && line != "ready\n" {
			err = fmt.Errorf("said %q", line)
		}
		ready <- err
		io.Copy(io.Discard, stdout)
	}()
	select {
	case err := <-ready:
		if err != nil {
			t.Fatalf("%s Idle: %v", jdk.Name, err)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("%s Idle did not start in 60 s", jdk.Name)
	}
	return cmd.Process.Pid
}

// TestRecord captures the fixtures from live JVMs; it runs only with
// -record.
func TestRecord(t *testing.T) {
	if !*record {
		t.Skip("refreshes the fixtures only with -record")
	}
	testenv.Root(t)
	for _, jdk := range testenv.JDKs(t) {
		pid := startIdle(t, jdk)
		syms, err := FindSymbols("/proc", pid)
		if err != nil {
			t.Fatal(err)
		}
		rec := &recorder{mem: targetmem.Open(pid)}
		var used spans
		tab, err := read(rec, syms, func(a, n uint64) { used = append(used, [2]uint64{a, a + n}) })
		if err != nil {
			t.Fatalf("%s: %v", jdk.Name, err)
		}
		f := fixture{JDK: jdk.Name, Java: jdk.Java(), Release: tab.Release, Lib: syms.Lib, Base: syms.Base,
			Symbols: syms.Addrs, Segments: segments(rec.reads, used.merged())}
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		enc := json.NewEncoder(zw)
		enc.SetIndent("", " ")
		if err := enc.Encode(f); err != nil {
			t.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(fixturePath(jdk.Name), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(listingPath(jdk.Name), []byte(listing(tab)), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %s, %d bytes (%d reads, %d bytes read)", jdk.Name, tab.Release, buf.Len(), tab.Stats.Reads, tab.Stats.Bytes)
	}
}

// listing prints a table one entry a line, sorted, static addresses
// relative to libjvm's base: the same for every run of one libjvm, and
// what `diff testdata/jdk17.txt testdata/jdk25.txt` compares.
func listing(t *Table) string {
	var lines []string
	for _, f := range t.Fields() {
		ts := f.TypeString
		if ts == "" {
			ts = "(opaque)"
		}
		if f.Static {
			lines = append(lines, fmt.Sprintf("static %s::%s at base+%#x %s", f.Type, f.Name, f.Address-t.Base, ts))
		} else {
			lines = append(lines, fmt.Sprintf("field %s::%s at %d %s", f.Type, f.Name, f.Offset, ts))
		}
	}
	for _, ty := range t.Types() {
		var flags string
		if ty.Oop {
			flags += " oop"
		}
		if ty.Integer {
			flags += " integer"
		}
		if ty.Unsigned {
			flags += " unsigned"
		}
		super := ""
		if ty.Superclass != "" {
			super = " : " + ty.Superclass
		}
		lines = append(lines, fmt.Sprintf("type %s%s size %d%s", ty.Name, super, ty.Size, flags))
	}
	for n, v := range t.IntConsts() {
		lines = append(lines, fmt.Sprintf("int %s %d", n, v))
	}
	for n, v := range t.LongConsts() {
		lines = append(lines, fmt.Sprintf("long %s %#x", n, v))
	}
	slices.Sort(lines)
	return "release " + t.Release + "\n" + strings.Join(lines, "\n") + "\n"
}

// TestFixtureListings reads each fixture and compares the table with its
// listing, so a change in how tables are read shows as a diff there.
func TestFixtureListings(t *testing.T) {
	for _, jdk := range fixtureJDKs {
		t.Run(jdk, func(t *testing.T) {
			tab := fixtureTable(t, jdk)
			want, err := os.ReadFile(listingPath(jdk))
			if err != nil {
				t.Fatal(err)
			}
			if got := listing(tab); got != string(want) {
				t.Errorf("%s reads differently from %s:\n%s", fixturePath(jdk), listingPath(jdk), firstDiff(got, string(want)))
			}
		})
	}
}

// firstDiff shows the first line where got and want differ.
func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range min(len(g), len(w)) {
		if g[i] != w[i] {
			return fmt.Sprintf("line %d: got %q, want %q", i+1, g[i], w[i])
		}
	}
	return fmt.Sprintf("got %d lines, want %d", len(g), len(w))
}
