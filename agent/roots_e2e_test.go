package agent

import (
	"encoding/binary"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/djx-bpf/djx-bpf/hotspot/targetmem"
	"github.com/djx-bpf/djx-bpf/sources/agentwire"
)

// roots sends 'G' and collects the ROOT records up to the ROOTS_END.
func (v *jvm) roots() ([]*agentwire.Root, *agentwire.RootsEnd) {
	v.t.Helper()
	if _, err := v.conn.Write([]byte{agentwire.CommandRoots}); err != nil {
		v.t.Fatal(err)
	}
	var out []*agentwire.Root
	var last uint64
	timeout := time.After(5 * time.Minute)
	for {
		select {
		case be, ok := <-v.batches:
			if !ok || be.err != nil {
				v.t.Fatalf("stream ended before ROOTS_END: %v\nstderr: %s", be.err, v.stderr.String())
			}
			for _, r := range be.b.Records {
				switch r := r.(type) {
				case *agentwire.Root:
					if r.Time < last || r.Time > be.b.Watermark {
						v.t.Errorf("ROOT time %d out of order (previous %d, watermark %d)", r.Time, last, be.b.Watermark)
					}
					last = r.Time
					out = append(out, r)
				case *agentwire.RootsEnd:
					return out, r
				}
			}
		case <-timeout:
			v.t.Fatal("no ROOTS_END within 5 minutes")
		}
	}
}

// rootsLib builds RootsSite's JNI library (a global reference on
// RootsSite.pin), or returns "" without gcc.
func rootsLib(t *testing.T, j jdk) string {
	t.Helper()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Logf("no gcc: no JNI global to look for")
		return ""
	}
	lib := filepath.Join(t.TempDir(), "libRootsSite.so")
	out, err := exec.Command(gcc, "-shared", "-fPIC", "-O2", "-I"+filepath.Join(j.home, "include"),
		"-I"+filepath.Join(j.home, "include", "linux"), "-o", lib, "testdata/RootsSite.c").CombinedOutput()
	if err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	return lib
}

// arrayLength reads the length of the array at addr from the JVM's memory
// (offset 12 with compressed class pointers, the default).
func arrayLength(t *testing.T, v *jvm, addr uint64) uint32 {
	t.Helper()
	mem := targetmem.Open(v.cmd.Process.Pid)
	b := make([]byte, 4)
	if _, err := mem.ReadAt(b, int64(addr)+12); err != nil {
		t.Fatalf("read %#x: %v", addr, err)
	}
	return binary.LittleEndian.Uint32(b)
}

// TestRoots: on 'G' the agent sends one ROOT per object a root holds. Data
// that main holds in a local and passes down to hold, whose parameter holds
// it too, is named by main's frame (rank 0), reached by both (reach 2); an
// element of main's array that hold holds directly is hold's (rank 1: a
// walker from rank 0 names it through main's array first); the JNI global
// and the threads are there, the agent's own thread is not, and each
// address is the object's (its array length read from the JVM's memory),
// also after a full GC moved them.
func TestRoots(t *testing.T) {
	// ZGC: the handles hold colored references (17), or colorless ones
	// (25's local handles), sent decoded.
	zgc := []string{"-XX:+UseZGC", "-Xms1g", "-Xmx1g"}
	for _, j := range availableJDKs(t) {
		for _, flags := range [][]string{jvmFlags, zgc} {
			name := j.name
			if flags[0] == zgc[0] {
				name += "ZGC"
			}
			t.Run(name, func(t *testing.T) {
				var args []string
				lib := rootsLib(t, j)
				if lib != "" {
					args = append(args, lib)
				}
				v := startMain(t, j, "interval=1g,minsize=1g", true, flags, "RootsSite", args...)
				v.ready()
				call := siteLineIn(t, "RootsSite.java", "call")
				local := func(slot int) string {
					return fmt.Sprintf("RootsSite.main:%d local #%d (thread \"main\")", call, slot)
				}
				for round := 0; round < 2; round++ {
					roots, end := v.roots()
					t.Logf("round %d: %d ROOT records, %d root references, %d objects, %d threads; FollowReferences %.2f ms, GetObjectsWithTags %.2f ms (longest %.2f ms), status %#x %q",
						round, end.Roots, end.Refs, end.Objects, end.Threads, float64(end.FollowNanos)/1e6,
						float64(end.TagsNanos)/1e6, float64(end.TagsMaxNanos)/1e6, end.Status, end.Note)
					if end.Status&^agentwire.RootsNoVM != 0 || (j.name == "jdk17") != (end.Status&agentwire.RootsNoVM != 0) ||
						(end.Status != 0) != (end.Note != "") {
						t.Errorf("ROOTS_END status %#x (%q): want 0, or RootsNoVM before JDK 21", end.Status, end.Note)
					}
					if end.Roots != uint64(len(roots)) || end.Roots+end.Gone != end.Objects || end.Refs < end.Objects {
						t.Errorf("ROOTS_END counts %d roots, %d gone, %d objects, %d references; the stream has %d", end.Roots, end.Gone, end.Objects, end.Refs, len(roots))
					}
					byHop := map[string]*agentwire.Root{}
					addrs := map[uint64]bool{}
					var global, mainThread bool
					for _, r := range roots {
						if r.Addr == 0 || r.Addr%8 != 0 || addrs[r.Addr] {
							t.Errorf("ROOT %+v: zero, misaligned or repeated address", r)
						}
						addrs[r.Addr] = true
						if r.Reach == 0 || (r.Kind != agentwire.RootStackLocal && r.Kind != agentwire.RootJNILocal && r.Rank != 0) {
							t.Errorf("ROOT %+v: no reach, or a rank off a frame", r)
						}
						if strings.Contains(r.Hop, "djx-bpf") {
							t.Errorf("ROOT %+v: the agent's own thread", r)
						}
						byHop[r.Hop] = r
						switch {
						case r.Kind == agentwire.RootJNIGlobal && r.Hop == "JNI global" && lib != "" && arrayLength(t, v, r.Addr) == 12345:
							global = true
						case r.Kind == agentwire.RootThread && r.Hop == `thread "main"`:
							mainThread = true
						}
					}
					if lib != "" && !global {
						t.Errorf("no JNI global holding the int[12345]")
					}
					if !mainThread {
						t.Errorf("no ROOT for thread main's object")
					}
					for _, w := range []struct {
						hop          string
						rank, reach  uint32
						length       uint32
						what, holder string
					}{
						{local(1), 0, 2, 1 << 15, "main's data", "main's local and hold's d"},
						{local(2), 0, 2, 2, "main's rows", "main's local and hold's rows"},
						{local(3), 0, 2, 1, "main's nest", "main's local and hold's nest"},
					} {
						r := byHop[w.hop]
						if r == nil {
							t.Errorf("%s: no ROOT %q", w.what, w.hop)
							continue
						}
						if r.Kind != agentwire.RootStackLocal || r.Rank != w.rank || r.Reach != w.reach {
							t.Errorf("%s: %+v, want a stack local of rank %d reached by %s (%d)", w.what, r, w.rank, w.holder, w.reach)
						}
						if n := arrayLength(t, v, r.Addr); n != w.length {
							t.Errorf("%s: the array at %#x has length %d, want %d", w.what, r.Addr, n, w.length)
						}
					}
					// hold's r0 = rows[0]: hold holds it directly, main
					// through rows.
					var r0 *agentwire.Root
					for h, r := range byHop {
						if strings.HasPrefix(h, "RootsSite.hold:") && strings.HasSuffix(h, ` local #3 (thread "main")`) {
							r0 = r
						}
					}
					if r0 == nil || r0.Rank != 1 || r0.Reach != 1 || arrayLength(t, v, r0.Addr) != 4096 {
						t.Errorf("hold's r0: %+v, want rank 1, reach 1, a double[4096]", r0)
					}
					if round == 0 {
						v.send("gc") // a full GC (Serial) moves them; ZGC may relocate them
						v.line("GCDONE")
					}
				}
				v.send("exit")
				v.line("DONE")
				v.exit()
			})
		}
	}
}

// BenchmarkRootsPause measures a roots pass on a JVM with many threads and
// deep stacks (RootsLoad: DJX_ROOTS_THREADS threads [200] of DJX_ROOTS_DEPTH
// frames [100], each holding two objects of its own) over heaps of small
// objects (DJX_ROOTS_HEAP_MB [1024, 3072], filled to ~2/3 with nodes and
// items): FollowReferences (its first call, which also deoptimizes the C2
// frames whose objects escape analysis removed, and the later ones) and
// GetObjectsWithTags.
func BenchmarkRootsPause(b *testing.B) {
	threads := envInts(b, "DJX_ROOTS_THREADS", []int{200})[0]
	depth := envInts(b, "DJX_ROOTS_DEPTH", []int{100})[0]
	for _, j := range availableJDKs(b) {
		for _, mb := range envInts(b, "DJX_ROOTS_HEAP_MB", []int{1024, 3072}) {
			b.Run(fmt.Sprintf("%s/threads=%d/depth=%d/heap=%dMiB", j.name, threads, depth, mb), func(b *testing.B) {
				j.flags = nil
				heap := fmt.Sprintf("%dm", mb)
				small := mb << 20 / 36 // ~20 bytes an object, the table, and room for G1
				v := startMain(b, j, "interval=1g,minsize=1g,code=0", true,
					[]string{"-XX:+UseG1GC", "-Xmx" + heap, "-Xms" + heap}, "RootsLoad",
					strconv.Itoa(threads), strconv.Itoa(depth), strconv.Itoa(small))
				v.ready()
				_, first := v.roots()
				var follow, tags, tagsMax float64
				var end *agentwire.RootsEnd
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					_, end = v.roots()
					follow += float64(end.FollowNanos) / 1e6
					tags += float64(end.TagsNanos) / 1e6
					tagsMax = max(tagsMax, float64(end.TagsMaxNanos)/1e6)
				}
				b.StopTimer()
				n := float64(b.N)
				b.ReportMetric(float64(first.FollowNanos)/1e6, "first-follow-ms")
				b.ReportMetric(follow/n, "follow-ms")
				b.ReportMetric(tags/n, "tags-ms")
				b.ReportMetric(tagsMax, "tags-max-ms")
				b.ReportMetric(float64(end.Objects), "objects")
				b.ReportMetric(float64(end.Refs), "refs")
				if end.Status&^agentwire.RootsNoVM != 0 {
					b.Errorf("ROOTS_END status %#x %q", end.Status, end.Note)
				}
				v.send("exit")
				v.line("DONE")
				v.exit()
			})
		}
	}
}
