package vmcode

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/djx-bpf/djx-bpf/hotspot/targetmem"
	"github.com/djx-bpf/djx-bpf/hotspot/vmstructs"
	"github.com/djx-bpf/djx-bpf/internal/testenv"
	"github.com/djx-bpf/djx-bpf/safety/procfs"
)

// -capture records the fixtures again from live JVMs (as root):
//
//	go test ./vmcode -run TestCapture -capture
var capture = flag.Bool("capture", false, "record testdata/jdk*.json.gz from live Hot JVMs (needs root)")

// fixture is a Hot JVM's memory as the symbolizer and pin read it, with
// what the tests expect of it. Its vmStructs are vmstructs' fixture of
// the same release; Base rebases that table's statics to this run.
type fixture struct {
	JDK, Release string
	Base         uint64 // libjvm's load bias in the recorded run
	Truth        *truth
	Segments     []segment // sorted, disjoint
}

type segment struct {
	Addr uint64
	Data []byte
}

func (f *fixture) ReadAt(p []byte, off int64) (int, error) {
	a := uint64(off)
	i := sort.Search(len(f.Segments), func(i int) bool {
		s := f.Segments[i]
		return s.Addr+uint64(len(s.Data)) > a
	})
	if i == len(f.Segments) || f.Segments[i].Addr > a {
		return 0, syscall.EFAULT
	}
	s := f.Segments[i]
	n := copy(p, s.Data[a-s.Addr:])
	if n < len(p) {
		return n, syscall.EFAULT
	}
	return n, nil
}

func fixturePath(jdk string) string { return filepath.Join("testdata", jdk+".json.gz") }

func vmstructsFixture(jdk string) string {
	return filepath.Join("..", "vmstructs", "testdata", jdk+".json.gz")
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

// merged joins overlapping and adjacent reads into sorted segments.
func merged(reads []segment) []segment {
	slices.SortFunc(reads, func(a, b segment) int { return cmp.Compare(a.Addr, b.Addr) })
	var out []segment
	for _, r := range reads {
		if n := len(out); n > 0 {
			last := &out[n-1]
			end := last.Addr + uint64(len(last.Data))
			if r.Addr <= end {
				if rEnd := r.Addr + uint64(len(r.Data)); rEnd > end {
					last.Data = append(last.Data, r.Data[end-r.Addr:]...)
				}
				continue
			}
		}
		out = append(out, segment{r.Addr, slices.Clone(r.Data)})
	}
	return out
}

// TestCapture records each JDK's fixture from a live Hot JVM, checking
// it live on the way.
func TestCapture(t *testing.T) {
	if !*capture {
		t.Skip("records fixtures only with -capture")
	}
	testenv.Root(t)
	for _, jdk := range testenv.JDKs(t) {
		t.Run(jdk.Name, func(t *testing.T) {
			classes := compileHot(t, jdk)
			pid := startHot(t, jdk, classes)
			syms, err := vmstructs.FindSymbols(procfs.Mount, pid)
			if err != nil {
				t.Fatal(err)
			}
			tab, err := vmstructs.Open(pid)
			if err != nil {
				t.Fatal(err)
			}
			rec := &recorder{mem: targetmem.Open(pid)}
			s, err := New(tab, rec)
			if err != nil {
				t.Fatal(err)
			}
			tr := liveTruth(t, jdk, pid, classes)
			tr.Code = keepCode(tr.Code)
			pin(t, s, tab, tr, jdk, pid)
			check(t, s, tr, false)
			if t.Failed() {
				return
			}
			fx := fixture{JDK: jdk.Name, Release: tab.Release, Base: syms.Base, Truth: tr, Segments: merged(rec.reads)}
			writeFixture(t, &fx)
		})
	}
}

// keepCode keeps Hot's nmethods and a few of the JDK's of each level,
// so that the fixture stays small.
func keepCode(es []codeEntry) []codeEntry {
	var out []codeEntry
	perLevel := map[int64]int{}
	for _, e := range es {
		hot := len(e.Method) > 4 && e.Method[:4] == "Hot."
		if hot || perLevel[e.Level] < 3 {
			out = append(out, e)
			if !hot {
				perLevel[e.Level]++
			}
		}
	}
	return out
}

func writeFixture(t *testing.T, fx *fixture) {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err := json.NewEncoder(zw).Encode(fx); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fixturePath(fx.JDK), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range fx.Segments {
		n += len(s.Data)
	}
	t.Logf("%s: %d segments, %d KiB read, %d KiB compressed", fixturePath(fx.JDK), len(fx.Segments), n>>10, buf.Len()>>10)
}

func loadFixture(t testing.TB, jdk string) *fixture {
	t.Helper()
	raw, err := os.ReadFile(fixturePath(jdk))
	if err != nil {
		t.Fatalf("%v (go test ./vmcode -run TestCapture -capture records it)", err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	var fx fixture
	if err := json.NewDecoder(zr).Decode(&fx); err != nil {
		t.Fatal(err)
	}
	return &fx
}

// fixtureSymbolizer replays a fixture: vmstructs' table of the same
// release, rebased to the recorded run.
func fixtureSymbolizer(t testing.TB, jdk string) (*Symbolizer, *fixture) {
	t.Helper()
	fx := loadFixture(t, jdk)
	tab, err := vmstructs.ReadFixture(vmstructsFixture(jdk))
	if err != nil {
		t.Fatal(err)
	}
	if tab.Release != fx.Release {
		t.Fatalf("vmstructs fixture is %s, vmcode's %s: record both again", tab.Release, fx.Release)
	}
	return replay(t, tab, fx), fx
}

// replay is a symbolizer of fx's memory with tab, its statics rebased.
func replay(t testing.TB, tab *vmstructs.Table, fx *fixture) *Symbolizer {
	t.Helper()
	s, err := New(tab, fx)
	if err != nil {
		t.Fatal(err)
	}
	s.bias = fx.Base - tab.Base
	return s
}

// TestFixture replays each JDK's recorded JVM and checks it as the live
// test does, without root or a JVM.
func TestFixture(t *testing.T) {
	for _, jdk := range []string{"jdk17", "jdk25"} {
		t.Run(jdk, func(t *testing.T) {
			s, fx := fixtureSymbolizer(t, jdk)
			check(t, s, fx.Truth, false)
		})
	}
}

func killPid(t testing.TB, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// It stays a zombie until the cleanup's Wait: give the kernel a
	// moment to tear its memory down.
	time.Sleep(300 * time.Millisecond)
}

// TestOffsets pins the layout facts an unwinder gets on each JDK to what
// HotSpot's sources give: a blob after a 16-byte (JDK 17) or 8-byte
// (JDK 25) HeapBlock, code pointers then offsets.
func TestOffsets(t *testing.T) {
	for jdk, want := range map[string]struct {
		hb       uint64
		isOffset bool
		kind     bool
		x        byte
	}{"jdk17": {16, false, false, 0}, "jdk25": {8, true, true, 1}} {
		s, _ := fixtureSymbolizer(t, jdk)
		o := s.Offsets()
		if o.HeapBlockSize != want.hb || o.CodeIsOffset != want.isOffset || (o.BlobKind.Width != 0) != want.kind || o.Unsigned5X != want.x {
			t.Errorf("%s: %+v", jdk, o)
		}
		if o.BlobFrameSize.Width != 4 || o.NMethodMethod.Width != 8 || o.NMethodCompileID.Width != 4 || o.ConstMethodSize == 0 {
			t.Errorf("%s: %+v", jdk, o)
		}
	}
}

// TestConcurrent queries one symbolizer from several goroutines (run
// with -race): answers stay those of check.
func TestConcurrent(t *testing.T) {
	s, fx := fixtureSymbolizer(t, "jdk25")
	tr := fx.Truth
	done := make(chan []string, 4)
	for range 4 {
		go func() {
			var got []string
			for range 50 {
				for _, pc := range tr.ChainPCs {
					fs, _, err := s.Frames(pc)
					if err != nil {
						got = append(got, err.Error())
						continue
					}
					got = frameStrings(fs)
				}
				s.Method(tr.Methods["outer"])
				if len(got) > 0 && got[0] != tr.Chain[0] {
					break
				}
			}
			done <- got
		}()
	}
	for range 4 {
		if got := <-done; !slices.Equal(got, tr.Chain) {
			t.Errorf("concurrent frames %v, want %v", got, tr.Chain)
		}
	}
}
