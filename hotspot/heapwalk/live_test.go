package heapwalk

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/djx-bpf/djx-bpf/hotspot/targetmem"
	"github.com/djx-bpf/djx-bpf/hotspot/vmstructs"
	"github.com/djx-bpf/djx-bpf/internal/testenv"
)

// groundTruth is a running testdata/GroundTruth.java.
type groundTruth struct {
	pid int
	// names maps "Class offset static|instance" to the field's name, as
	// the JVM printed it.
	names map[string]string
	// in is its stdin; lines has what it printed after "ready" (lines
	// nobody waits for are dropped).
	in    io.Writer
	lines chan string
}

// compileGroundTruth compiles GroundTruth.java with jdk's javac (JDK 17:
// its class files run on 25 too) into a directory of the test's.
func compileGroundTruth(t testing.TB, jdk testenv.JDK) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command(filepath.Join(jdk.Home, "bin", "javac"), "-nowarn", "-d", dir,
		filepath.Join("testdata", "GroundTruth.java")).CombinedOutput()
	if err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	return dir
}

// startGroundTruth runs GroundTruth on jdk with the collector gc
// ("Serial", "Parallel", "G1"), the JVM's flags and GroundTruth's
// arguments, and returns once it
// said ready. The JVM ends with the test, killed by its pid if it does
// not exit when its stdin closes.
func startGroundTruth(t testing.TB, jdk testenv.JDK, classes, gc string, flags []string, args ...string) *groundTruth {
	t.Helper()
	jargs := append(append(flags, "-XX:+Use"+gc+"GC", "-cp", classes, "GroundTruth"), args...)
	cmd := exec.Command(jdk.Java(), jargs...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr testenv.SyncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", jdk.Java(), err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() {
		stdin.Close() // GroundTruth exits at the end of its stdin
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill() // by its pid: the JVM this test started
			<-done
		}
	})
	gt := &groundTruth{pid: pid, names: map[string]string{}, in: stdin, lines: make(chan string, 16)}
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			switch {
			case len(f) == 5 && f[0] == "field":
				gt.names[f[1]+" "+f[3]+" "+f[4]] = f[1] + "." + f[2]
			case len(f) == 2 && f[0] == "ready":
				ready <- nil
				for sc.Scan() {
					select {
					case gt.lines <- sc.Text():
					default:
					}
				}
				return
			}
		}
		ready <- fmt.Errorf("GroundTruth ended before it was ready: %v", sc.Err())
	}()
	select {
	case err := <-ready:
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", jdk.Name, gc, err, stderr.String())
		}
	case <-time.After(5 * time.Minute):
		t.Fatalf("%s %s: GroundTruth not ready in 5 minutes\n%s", jdk.Name, gc, stderr.String())
	}
	return gt
}

// fieldName names fields from what GroundTruth printed, as the agent's
// field names would.
func (gt *groundTruth) fieldName(f FieldRef) string {
	kind := "instance"
	if f.Static {
		kind = "static"
	}
	return gt.names[f.Class+" "+strconv.Itoa(int(f.Offset))+" "+kind]
}

// liveWalk opens pid's tables and walks its heap, again when a
// collection overlapped the walk; reset runs before each walk (to drop
// what OnObject kept of the last).
func liveWalk(t testing.TB, pid int, cfg Config, reset ...func()) (*Layout, *Result) {
	t.Helper()
	l, mem, err := Open(pid, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for try := 0; ; try++ {
		for _, f := range reset {
			f()
		}
		res, err := Walk(context.Background(), l, mem, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if !res.GC.Overlapped || try == 2 {
			return l, res
		}
		t.Logf("a collection overlapped the walk (%+v): again", res.GC)
	}
}

func TestLive(t *testing.T) {
	testenv.Root(t)
	jdks := testenv.JDKs(t)
	classes := compileGroundTruth(t, jdks[0])
	const mapN, treeN, listN = 5000, 20000, 1_000_000
	for _, jdk := range jdks {
		for _, mode := range headerModes(jdk) {
			for _, gc := range []string{"Serial", "Parallel", "G1", "Shenandoah", "Z"} {
				testLive(t, jdk, classes, gc, mode, mapN, treeN, listN)
			}
		}
	}
}

// headerMode is a -XX setting of the object header's layout.
type headerMode struct {
	name  string // "" for the default
	flags []string
}

// headerModes are the header layouts jdk runs: compact object headers
// from JDK 25 (a product flag since then) besides the default.
func headerModes(jdk testenv.JDK) []headerMode {
	modes := []headerMode{{}}
	if jdk.Name != "jdk17" {
		modes = append(modes, headerMode{"compact", []string{"-XX:+UseCompactObjectHeaders"}})
	}
	return modes
}

func testLive(t *testing.T, jdk testenv.JDK, classes, gc string, mode headerMode, mapN, treeN, listN int) {
	name := jdk.Name + "/" + gc
	if mode.name != "" {
		name += "/" + mode.name
	}
	t.Run(name, func(t *testing.T) {
		gt := startGroundTruth(t, jdk, classes, gc, append([]string{"-Xmx512m", "-Xms512m"}, mode.flags...),
			strconv.Itoa(mapN), "16", strconv.Itoa(treeN), strconv.Itoa(listN), "2", "64")
		var large []Object
		l, res := liveWalk(t, gt.pid, Config{
			FieldName: gt.fieldName,
			MinSize:   1 << 20,
			OnObject:  func(o Object) { large = append(large, o) },
		}, func() { large = large[:0] })
		st := res.Stats
		t.Logf("%s %s, %s: %d objects, %d MiB, %d rows, %d chains, %d classes in %d CLDs; %d reads, %d MiB read; "+
			"invalid %d, unreadable %d, out of heap %d; %v (roots %v); gc %+v",
			l.Release, l.GC, heapDesc(l), st.Objects, st.Bytes>>20, st.Rows, st.Chains, st.Classes, st.CLDs, st.Reads,
			st.BytesRead>>20, st.Invalid, st.Unreadable, st.OutOfHeap, st.Time.Round(time.Millisecond),
			st.RootsTime.Round(time.Millisecond), res.GC)
		if l.GC != strings.ToLower(gc) || l.CompactHeaders != (mode.name == "compact") {
			t.Errorf("layout says GC %q, compact headers %v", l.GC, l.CompactHeaders)
		}
		checkLive(t, l, res, large, mapN, treeN, listN)
		if t.Failed() {
			logTop(t, res, 40)
		}
	})
}

// TestLiveGeometry walks G1 heaps of other oop and klass encodings:
// narrow oops shifted, full-width oops, full-width klass pointers.
func TestLiveGeometry(t *testing.T) {
	testenv.Root(t)
	jdks := testenv.JDKs(t)
	classes := compileGroundTruth(t, jdks[0])
	const mapN, treeN, listN = 2000, 5000, 100_000
	for _, jdk := range jdks {
		for _, tc := range []struct {
			name  string
			flags []string
			check func(l *Layout) bool
		}{
			{"shift3", []string{"-Xmx6g"}, func(l *Layout) bool { return l.CompressedOops && l.OopShift == 3 }},
			{"no-coops", []string{"-Xmx512m", "-XX:-UseCompressedOops"}, func(l *Layout) bool { return !l.CompressedOops && l.OopSize == 8 }},
			{"no-ccp", []string{"-Xmx512m", "-XX:-UseCompressedClassPointers"},
				func(l *Layout) bool { return !l.CompressedClassPointers && l.HeaderSize == 16 }},
			{"align16", []string{"-Xmx512m", "-XX:ObjectAlignmentInBytes=16"}, func(l *Layout) bool { return l.Alignment == 16 }},
		} {
			t.Run(jdk.Name+"/"+tc.name, func(t *testing.T) {
				gt := startGroundTruth(t, jdk, classes, "G1", tc.flags,
					strconv.Itoa(mapN), "16", strconv.Itoa(treeN), strconv.Itoa(listN), "2", "64")
				var large []Object
				l, res := liveWalk(t, gt.pid, Config{
					FieldName: gt.fieldName,
					MinSize:   1 << 20,
					OnObject:  func(o Object) { large = append(large, o) },
				})
				t.Logf("%s: %s: %d objects, %v", l.Release, heapDesc(l), res.Stats.Objects, res.Stats.Time.Round(time.Millisecond))
				if !tc.check(l) {
					t.Errorf("layout %+v", l)
				}
				checkLive(t, l, res, large, mapN, treeN, listN)
				if t.Failed() {
					logTop(t, res, 20)
				}
			})
		}
	}
}

// TestLiveChurn walks heaps that change and are collected during the
// walks: each walk must end, say whether a collection overlapped it,
// and skip what it could not parse; a walk no collection overlapped
// must find the statics' data.
func TestLiveChurn(t *testing.T) {
	testenv.Root(t)
	jdks := testenv.JDKs(t)
	classes := compileGroundTruth(t, jdks[0])
	const mapN, treeN, listN = 50_000, 20_000, 200_000
	for _, jdk := range jdks {
		for _, gc := range []string{"Parallel", "G1", "Shenandoah", "Z"} {
			t.Run(jdk.Name+"/"+gc, func(t *testing.T) {
				flags := []string{"-Xmx256m", "-Xmn32m"}
				switch gc {
				case "Shenandoah":
					flags = flags[:1] // no young generation to size
				case "Z":
					// ZGC sizes its own young generation; in 256 MiB the
					// churn ran a cycle every walk on a loaded host.
					flags = []string{"-Xmx1g"}
				}
				gt := startGroundTruth(t, jdk, classes, gc, flags,
					strconv.Itoa(mapN), "16", strconv.Itoa(treeN), strconv.Itoa(listN), "2", "16", "churn")
				tab, err := vmstructs.Open(gt.pid)
				if err != nil {
					t.Fatal(err)
				}
				mem := targetmem.Open(gt.pid)
				l, err := NewLayout(tab, mem, Options{})
				if err != nil {
					t.Fatal(err)
				}
				clean, overlapped, stopped := 0, 0, 0
				// Twelve walks, and up to twelve more until one ran clean.
				for i := 0; i < 12 || clean == 0 && i < 24; i++ {
					time.Sleep(50 * time.Millisecond)
					res, err := Walk(context.Background(), l, mem, Config{FieldName: gt.fieldName, StopOnGC: i%2 == 1})
					if err != nil {
						t.Fatal(err)
					}
					st := res.Stats
					switch {
					case st.StoppedOnGC:
						stopped++
					case res.GC.Overlapped:
						overlapped++
					default:
						clean++
						rows := rowsBy(res)
						key := "GroundTruth.map (static) -> java.util.HashMap.table -> [] -> java.util.HashMap$Node.value | long[]"
						// ZGC: stale references are read through its
						// forwarding tables, and a cycle's phase change is
						// seen by its colors; a walk still missed 1 of
						// 50,000 once, on a loaded host.
						want := mapN
						if gc == "Z" {
							want = mapN * 99 / 100
						}
						if r := rows[key]; int(r.Count) < want || r.Count > mapN {
							t.Errorf("walk %d, no collection: %d map values, want %d", i, r.Count, mapN)
						}
					}
					t.Logf("walk %d: %d objects in %v, gc %d→%d, overlapped %v, stopped %v; invalid %d, unreadable %d, forwarded %d (read there %d), out of heap %d",
						i, st.Objects, st.Time.Round(time.Millisecond), res.GC.Before, res.GC.After, res.GC.Overlapped, st.StoppedOnGC,
						st.Invalid, st.Unreadable, st.Forwarded, st.ReadForwarded, st.OutOfHeap)
				}
				t.Logf("%d walks clean, %d overlapped a collection, %d stopped at one", clean, overlapped, stopped)
				if clean == 0 {
					t.Errorf("no walk ran without a collection")
				}
			})
		}
	}
}

func heapDesc(l *Layout) string {
	s := fmt.Sprintf("heap [%#x, %#x)", l.Heap[0].Start, l.Heap[len(l.Heap)-1].End)
	if l.CompressedOops {
		s += fmt.Sprintf(", oops %#x<<%d", l.OopBase, l.OopShift)
	}
	if l.CompressedClassPointers {
		s += fmt.Sprintf(", klass %#x<<%d", l.KlassBase, l.KlassShift)
	}
	return s
}

func checkLive(t *testing.T, l *Layout, res *Result, large []Object, mapN, treeN, listN int) {
	t.Helper()
	// long[]'s elements start after the length, at a word.
	longBase := (l.HeaderSize + 4 + 7) &^ 7
	if res.GC.Overlapped {
		t.Errorf("collections overlapped three walks: %+v", res.GC)
	}
	rows := rowsBy(res)
	// recursive: 1 yes, 0 no, -1 either.
	want := func(key string, count, slack int, recursive int) Row {
		t.Helper()
		r, ok := rows[key]
		if !ok {
			t.Errorf("no row %q", key)
			return r
		}
		if int(r.Count) < count || int(r.Count) > count+slack || (recursive >= 0 && r.Recursive != (recursive == 1)) {
			t.Errorf("row %q: %d objects (recursive %v), want %d (+%d) (%d)", key, r.Count, r.Recursive, count, slack, recursive)
		}
		return r
	}
	want("GroundTruth.table (static) | long[]", 1, 0, 0)
	// Consecutive Long keys take a bucket each: no node needs next.
	want("GroundTruth.map (static) -> java.util.HashMap.table -> [] | java.util.HashMap$Node", mapN, 0, -1)
	want("GroundTruth.map (static) -> java.util.HashMap.table -> [] -> java.util.HashMap$Node.value | long[]", mapN, 0, 0)
	want("GroundTruth.map (static) -> java.util.HashMap.table -> [] -> java.util.HashMap$Node.key | java.lang.Long", mapN, 0, 0)
	tr := want("GroundTruth.tree (static) -> java.util.TreeMap.root | java.util.TreeMap$Entry", treeN, 0, 1)
	want("GroundTruth.tree (static) -> java.util.TreeMap.root -> java.util.TreeMap$Entry.value | GroundTruth$Small", treeN, 0, 0)
	want("GroundTruth.tree (static) -> java.util.TreeMap.root -> java.util.TreeMap$Entry.key | java.lang.Integer", treeN, 0, 0)
	// Under ZGC a walk may still miss a stale reference's object now and
	// then, its forwarding not found (design.md, concurrent relocation;
	// JDK 17 missed 1 of the million once): the bar is 99.9% there.
	miss := 0
	if l.GC == "z" {
		miss = listN / 1000
	}
	lr := want("GroundTruth.list (static) -> java.util.ArrayList.elementData -> [] | long[]", listN-miss, 16+miss, 0)
	if i := indexOf(res, tr); i >= 0 {
		if got := res.Name(i); got != "GroundTruth.tree (static) -> java.util.TreeMap.root -> java.util.TreeMap$Entry..." {
			t.Errorf("tree row named %q", got)
		}
	}
	if want := longBase + 16; lr.Bytes != lr.Count*want {
		t.Errorf("list arrays: %d bytes for %d, want %d each", lr.Bytes, lr.Count, want)
	}
	var table []Object
	for _, o := range large {
		switch {
		case o.Size == (longBase+8*1_000_003+l.Alignment-1)&^(l.Alignment-1):
			t.Errorf("found the weakly held array at %#x: %s", o.Addr, res.ChainString(o.Chain))
		case o.Class == "long[]" && o.Size >= 64<<20:
			table = append(table, o)
		}
	}
	if len(table) != 1 || res.ChainString(table[0].Chain) != "GroundTruth.table (static)" || table[0].Size != 64<<20+longBase {
		t.Errorf("the table: %+v", table)
	}
	// A profiler's sample in a list element names the list.
	if i := indexOf(res, lr); i >= 0 {
		for _, a := range lr.Sample {
			if got, exact := res.Lookup(a + 20); got != i || !exact {
				t.Errorf("lookup %#x: row %d exact %v, want %d", a+20, got, exact, i)
			}
		}
	}
	if res.Stats.Invalid+res.Stats.Unreadable > res.Stats.Objects/1000 {
		t.Errorf("%d invalid, %d unreadable of %d objects", res.Stats.Invalid, res.Stats.Unreadable, res.Stats.Objects)
	}
}

// logTop logs the largest rows.
func logTop(t testing.TB, res *Result, n int) {
	t.Helper()
	idx := make([]int, len(res.Rows))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return res.Rows[idx[a]].Bytes > res.Rows[idx[b]].Bytes })
	for _, i := range idx[:min(n, len(idx))] {
		r := res.Rows[i]
		t.Logf("%10d objects %12d bytes  %s | %s", r.Count, r.Bytes, res.Name(i), r.Class)
	}
}

// rss reads the test process's resident and peak resident set sizes.
func rss() (cur, peak int64) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			cur = v << 10
		case "VmHWM:":
			peak = v << 10
		}
	}
	return cur, peak
}

// TestLiveFullCollections: the count of full collections the walk reads
// beside CollectedHeap::_total_collections (the tables leave it out)
// stays put through a young collection and counts each full one, under
// each collector that moves objects in its pauses.
func TestLiveFullCollections(t *testing.T) {
	testenv.Root(t)
	jdks := testenv.JDKs(t)
	classes := compileGroundTruth(t, jdks[0])
	for _, jdk := range jdks {
		for _, gc := range []string{"Serial", "Parallel", "G1"} {
			t.Run(jdk.Name+"/"+gc, func(t *testing.T) {
				gt := startGroundTruth(t, jdk, classes, gc, []string{"-Xmx256m", "-Xmn32m"}, "10", "1", "10", "10", "1", "1", "gcs")
				l, mem, err := Open(gt.pid, Options{})
				if err != nil {
					t.Fatal(err)
				}
				if !l.off.hasFull {
					t.Fatal("the layout has no count of full collections")
				}
				r := &reader{mem: mem, stats: &Stats{}}
				counts := func() (uint32, uint32) {
					n, full, _, err := l.collectionsFull(r)
					if err != nil {
						t.Fatal(err)
					}
					return n, full
				}
				ask := func(what string) {
					if _, err := io.WriteString(gt.in, what+"\n"); err != nil {
						t.Fatal(err)
					}
					select {
					case line := <-gt.lines:
						if line != "done" {
							t.Fatalf("GroundTruth said %q to %q", line, what)
						}
					case <-time.After(time.Minute):
						t.Fatalf("no answer to %q in a minute", what)
					}
				}
				n0, f0 := counts()
				if f0 == 0 || f0 > n0 {
					t.Fatalf("%d collections, %d full: want at least the one before ready, and no more than all", n0, f0)
				}
				for range 3 {
					ask("young")
				}
				n1, f1 := counts()
				if n1 < n0+3 || f1 != f0 {
					t.Errorf("after 3 young collections: %d collections (from %d), %d full (from %d): want 3 more, and the full ones alike", n1, n0, f1, f0)
				}
				for range 2 {
					ask("full")
				}
				n2, f2 := counts()
				if n2 < n1+2 || f2 != f1+2 {
					t.Errorf("after 2 full collections: %d collections (from %d), %d full (from %d): want 2 more of each", n2, n1, f2, f1)
				}
				t.Logf("collections %d, %d, %d; full %d, %d, %d", n0, n1, n2, f0, f1, f2)
			})
		}
	}
}
