package agent

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/djx-bpf/djx-bpf/sources/agentwire"
)

// census asks the agent for a census and collects the stream up to its
// CENSUS_END.
func (v *jvm) census() ([]agentwire.Record, *agentwire.CensusEnd) {
	v.t.Helper()
	if _, err := v.conn.Write([]byte{agentwire.CommandCensus}); err != nil {
		v.t.Fatal(err)
	}
	var recs []agentwire.Record
	timeout := time.After(5 * time.Minute)
	for {
		select {
		case be, ok := <-v.batches:
			if !ok || be.err != nil {
				v.t.Fatalf("stream ended before CENSUS_END: %v\nstderr: %s", be.err, v.stderr.String())
			}
			for _, r := range be.b.Records {
				recs = append(recs, r)
				if e, ok := r.(*agentwire.CensusEnd); ok {
					return recs, e
				}
			}
		case <-timeout:
			v.t.Fatal("no CENSUS_END within 5 minutes")
		}
	}
}

// censusObjects resolves each CENSUS record's holder chain, GC root first.
func censusObjects(t testing.TB, recs []agentwire.Record) ([]*agentwire.Census, map[uint64][]string) {
	t.Helper()
	paths := map[uint32]*agentwire.CensusPath{}
	var objs []*agentwire.Census
	chains := map[uint64][]string{}
	started := false
	for _, r := range recs {
		switch r := r.(type) {
		case *agentwire.CensusStart:
			started = true
		case *agentwire.CensusPath:
			if r.Parent != 0 && paths[r.Parent] == nil {
				t.Errorf("CENSUS_PATH %d names parent %d before it was sent", r.ID, r.Parent)
			}
			paths[r.ID] = r
		case *agentwire.Census:
			if !started {
				t.Errorf("CENSUS before CENSUS_START")
			}
			if r.Path != 0 && paths[r.Path] == nil {
				t.Errorf("CENSUS of %s names path %d before it was sent", r.TypeSig, r.Path)
			}
			var rev []string
			for id := r.Path; id != 0 && paths[id] != nil && len(rev) < 64; id = paths[id].Parent {
				rev = append(rev, paths[id].Hop)
			}
			slices.Reverse(rev)
			chains[r.Tag] = rev
			objs = append(objs, r)
		}
	}
	return objs, chains
}

const censusN, censusLen = 200, 512 // 200 long[512] of 4 KiB in the map

// TestCensusHolders: objects allocated before the census are found, with
// their types, sizes and the reference chains that hold them (a static
// map, fields declared in a class and its superclass past an interface's
// constant, a local of main), and followed through the full GC after it.
func TestCensusHolders(t *testing.T) {
	for _, j := range availableJDKs(t) {
		for _, gc := range gcFlags {
			t.Run(j.name+"/"+gc.name, func(t *testing.T) {
				// interval=1g: the heap sampler takes nothing, only the census tracks.
				v := startMain(t, j, "interval=1g,minsize=1024,reconcile=1,census=2,census_budget=0", true, gc.flags,
					"CensusSite", strconv.Itoa(censusN), strconv.Itoa(censusLen))
				v.ready()
				recs, end := v.census()
				objs, chains := censusObjects(t, recs)
				t.Logf("census: %d objects (%d bytes) of %d in the heap; pauses %.1f ms heap walk, %.1f ms holder walk; %d paths, %d unreachable, %d unplaced",
					end.Objects, end.Bytes, end.HeapObjects, float64(end.HeapWalkNanos)/1e6, float64(end.HolderWalkNanos)/1e6, end.Paths, end.Unreachable, end.Unplaced)
				if end.Status != agentwire.CensusHolders {
					t.Fatalf("CENSUS_END status %#x (%q), want holders only", end.Status, end.Note)
				}
				if end.Objects != uint64(len(objs)) {
					t.Errorf("CENSUS_END counts %d objects, the stream has %d", end.Objects, len(objs))
				}
				mapChain := []string{"CensusSite.table (static)", "java.util.HashMap.table", "[]", "java.util.HashMap$Node.value"}
				var inMap, data, more, big int
				tags := map[uint64]bool{}
				held := map[uint64]bool{} // the workload's own objects, which it keeps
				for _, o := range objs {
					if o.Tag == 0 || tags[o.Tag] {
						t.Fatalf("CENSUS of %s: zero or duplicate tag %d", o.TypeSig, o.Tag)
					}
					tags[o.Tag] = true
					// A class's mirror holds its statics: the heap walk
					// counts them, GetObjectSize may not.
					if (o.Size < 1024 && o.TypeSig != "Ljava/lang/Class;") || o.Addr == 0 || o.Addr%8 != 0 {
						t.Errorf("CENSUS of %s: size %d, address %#x", o.TypeSig, o.Size, o.Addr)
					}
					c := chains[o.Tag]
					held[o.Tag] = o.TypeSig == "[J" || (o.TypeSig == "[B" && (o.Size == 16+49152 || o.Size == 16+32768))
					switch {
					case o.TypeSig == "[J" && o.Size == 16+8*censusLen:
						if slices.Equal(c, mapChain) {
							inMap++
						} else {
							t.Errorf("a map value's holder is %q, want %q", c, mapChain)
						}
					case o.TypeSig == "[J" && o.Size == 16+8<<17:
						big++
						if len(c) != 1 || !strings.HasPrefix(c[0], "CensusSite.main:") || !strings.Contains(c[0], " local ") ||
							!strings.Contains(c[0], `thread "main"`) {
							t.Errorf("main's local array is held by %q, want CensusSite.main's local in thread main", c)
						}
					case o.TypeSig == "[B" && o.Size == 16+49152:
						data++
						if !slices.Equal(c, []string{"CensusSite.holder (static)", "CensusSite$Base.data"}) {
							t.Errorf("Base.data is held by %q", c)
						}
					case o.TypeSig == "[B" && o.Size == 16+32768:
						more++
						if !slices.Equal(c, []string{"CensusSite.holder (static)", "CensusSite$Sub.more"}) {
							t.Errorf("Sub.more is held by %q", c)
						}
					}
				}
				if inMap != censusN || data != 1 || more != 1 || big != 1 {
					t.Errorf("found %d/%d map values, %d Base.data, %d Sub.more, %d main locals; want all, one each", inMap, censusN, data, more, big)
				}

				// The full GC moves them (the young generation is emptied);
				// none dies.
				v.send("gc")
				v.line("GCDONE")
				var after []agentwire.Record
				deadline := time.After(30 * time.Second)
				for moved := 0; moved == 0; {
					select {
					case be := <-v.batches:
						if be.err != nil {
							t.Fatal(be.err)
						}
						for _, r := range be.b.Records {
							after = append(after, r)
							if rc, ok := r.(*agentwire.Reconcile); ok {
								moved += len(rc.Objects)
							}
						}
					case <-deadline:
						t.Fatalf("no RECONCILE after the GC")
					}
				}
				moved := 0
				for _, r := range after {
					switch r := r.(type) {
					case *agentwire.Free:
						if held[r.Tag] {
							t.Errorf("FREE of census tag %d, which main still holds", r.Tag)
						}
					case *agentwire.Reconcile:
						for _, o := range r.Objects {
							if tags[o.Tag] {
								moved++
							}
						}
					}
				}
				t.Logf("after the full GC: %d census objects moved", moved)
				if gc.name != "g1" && moved == 0 {
					t.Errorf("no census object moved in the full GC")
				}
				v.send("exit")
				if got := v.line("DONE"); got != 1<<17+censusN {
					t.Errorf("the workload saw %d, want %d: its data changed under the census", got, 1<<17+censusN)
				}
				v.exit()
			})
		}
	}
}

// envInts reads a comma-separated list of integers from the environment.
func envInts(b *testing.B, name string, def []int) []int {
	e := os.Getenv(name)
	if e == "" {
		return def
	}
	var out []int
	for _, f := range strings.Split(e, ",") {
		n, err := strconv.Atoi(f)
		if err != nil {
			b.Fatalf("%s: %v", name, err)
		}
		out = append(out, n)
	}
	return out
}

// measureCensus runs b.N censuses in a JVM running main args, then one GC,
// and reports the census's pauses and work and the GC scan's time.
func measureCensus(b *testing.B, j jdk, holders int, flags []string, main string, args ...string) {
	j.flags = nil // nothing is sampled: JDK 17's TLAB flags only clash with G1's small regions
	v := startMain(b, j, fmt.Sprintf("interval=1g,minsize=1024,reconcile=1,census=%d,census_budget=0", holders), true,
		flags, main, args...)
	v.ready()
	var walk, hold, emit float64
	var end *agentwire.CensusEnd
	var st0, st *agentwire.Stats
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var recs []agentwire.Record
		recs, end = v.census()
		walk += float64(end.HeapWalkNanos) / 1e6
		hold += float64(end.HolderWalkNanos) / 1e6
		emit += float64(end.EmitNanos) / 1e6
		for _, r := range recs {
			if s, ok := r.(*agentwire.Stats); ok {
				st0 = s
			}
		}
	}
	b.StopTimer()
	if st0 == nil {
		st0 = &agentwire.Stats{}
	}
	// One GC: the agent reads every tracked object's reference.
	v.send("gc")
	v.line("GCDONE")
	deadline := time.After(5 * time.Minute)
	for st == nil || st.Reconciles == st0.Reconciles {
		select {
		case be := <-v.batches:
			if be.err != nil {
				b.Fatal(be.err)
			}
			for _, r := range be.b.Records {
				if s, ok := r.(*agentwire.Stats); ok {
					st = s
				}
			}
		case <-deadline:
			b.Fatal("no scan after the GC")
		}
	}
	n := float64(b.N)
	b.ReportMetric(walk/n, "heapwalk-ms")
	b.ReportMetric(hold/n, "holderwalk-ms")
	b.ReportMetric(emit/n, "after-ms")
	b.ReportMetric(float64(st.ReconcileNanos-st0.ReconcileNanos)/1e6/float64(st.Reconciles-st0.Reconciles), "gcscan-ms")
	b.ReportMetric(float64(end.HeapObjects), "heap-objects")
	b.ReportMetric(float64(end.Objects), "census-objects")
	b.ReportMetric(float64(st.TrackedLive), "tracked")
	v.send("exit")
	v.line("DONE")
	v.exit()
}

// BenchmarkCensus measures the census and the scan that follows tracked
// objects after a GC at 10k, 100k and 1M tracked objects of 1 KiB, with
// and without holder chains (DJX_CENSUS_N=10000,... picks the counts).
func BenchmarkCensus(b *testing.B) {
	for _, j := range availableJDKs(b) {
		for _, gc := range []string{"Serial", "Parallel", "G1"} {
			for _, n := range envInts(b, "DJX_CENSUS_N", []int{10_000, 100_000, 1_000_000}) {
				for _, holders := range []int{2, 1} {
					b.Run(fmt.Sprintf("%s/%s/n=%d/holders=%v", j.name, gc, n, holders == 2), func(b *testing.B) {
						heap := fmt.Sprintf("%dm", 512+n*3/1000)
						measureCensus(b, j, holders, []string{"-XX:+Use" + gc + "GC", "-Xmx" + heap, "-Xms" + heap},
							"HeapFill", "0", strconv.Itoa(n), "0")
					})
				}
			}
		}
	}
}

// BenchmarkCensusPause measures the census's pauses by heap size and
// object count: DJX_PAUSE_HEAP_MB (heap sizes) and DJX_PAUSE_SMALL (small
// objects, pairwise), DJX_PAUSE_GCS=Serial,Parallel,G1 (1, 2, 3 pick them).
// Each heap also holds 10k tracked objects of 1 KiB and is filled to 60%
// with 1 MiB arrays.
func BenchmarkCensusPause(b *testing.B) {
	heaps := envInts(b, "DJX_PAUSE_HEAP_MB", []int{256, 1024})
	smalls := envInts(b, "DJX_PAUSE_SMALL", []int{1_000_000, 5_000_000})
	gcs := map[int]string{1: "Serial", 2: "Parallel", 3: "G1"}
	for _, j := range availableJDKs(b) {
		for _, g := range envInts(b, "DJX_PAUSE_GCS", []int{3}) {
			for i, mb := range heaps {
				small := smalls[i]
				for _, holders := range []int{2, 1} {
					b.Run(fmt.Sprintf("%s/%s/heap=%dMiB/objects=%d/holders=%v", j.name, gcs[g], mb, small, holders == 2), func(b *testing.B) {
						// A node and its item take ~40 bytes in all.
						pad := max(0, mb*6/10-small*20/(1<<20)-10)
						heap := fmt.Sprintf("%dm", mb)
						measureCensus(b, j, holders, []string{"-XX:+Use" + gcs[g] + "GC", "-Xmx" + heap, "-Xms" + heap},
							"HeapFill", strconv.Itoa(small), "10000", strconv.Itoa(pad))
					})
				}
			}
		}
	}
}

// TestCensusOuterFrame: data that main holds in a local and passes down
// to a deeper frame, which holds it in a local too, is named by main's
// local, the caller that owns it: directly (main's data, hold's d), and
// through an array main holds when the deeper frame holds an element
// itself (main's rows, hold's r0 = rows[0]), also for what the element
// holds (main's nest, hold's n0 = nest[0], and the byte[] in it).
func TestCensusOuterFrame(t *testing.T) {
	for _, j := range availableJDKs(t) {
		t.Run(j.name, func(t *testing.T) {
			v := startMain(t, j, "interval=1g,minsize=1024,census=2,census_budget=0", true, jvmFlags, "RootsSite")
			v.ready()
			recs, end := v.census()
			if end.Status != agentwire.CensusHolders {
				t.Fatalf("CENSUS_END status %#x (%q), want holders only", end.Status, end.Note)
			}
			objs, chains := censusObjects(t, recs)
			call := siteLineIn(t, "RootsSite.java", "call")
			local := func(slot int) string {
				return fmt.Sprintf("RootsSite.main:%d local #%d (thread \"main\")", call, slot)
			}
			var data, rows, nest int
			for _, o := range objs {
				c := chains[o.Tag]
				switch {
				case o.TypeSig == "[J" && o.Size == 16+8<<15:
					data++
					if !slices.Equal(c, []string{local(1)}) {
						t.Errorf("main's data is held by %q, want %q", c, local(1))
					}
				case o.TypeSig == "[D" && o.Size == 16+8*4096:
					rows++
					if want := []string{local(2), "[]"}; !slices.Equal(c, want) {
						t.Errorf("a row of main's rows is held by %q, want %q", c, want)
					}
				case o.TypeSig == "[B" && o.Size == 16+40000:
					nest++
					// "[]" twice is a cycle to the census: it stops at the first.
					if want := []string{local(3), "[]"}; !slices.Equal(c, want) {
						t.Errorf("the byte[] in main's nest is held by %q, want %q", c, want)
					}
				}
			}
			if data != 1 || rows != 2 || nest != 1 {
				t.Errorf("found %d data arrays, %d rows, %d nested arrays; want 1, 2, 1", data, rows, nest)
			}
			v.send("exit")
			v.line("DONE")
			v.exit()
		})
	}
}

// Censuses after GCs on a churning heap back off: AllocSite's bench loop
// keeps only a ring of the latest 16 arrays of 64 KiB, so what a census
// finds is dead by the next one's turn (but the few long-lived objects as
// large, of the JVM's start, found once), and the least time between
// censuses doubles to its cap: recensus=100 ms, so 800 ms. Without the
// backoff they came every 100-200 ms. Few and large objects: the
// censuses' time share does not space them first.
func TestRecensusBacksOffOnChurn(t *testing.T) {
	j := availableJDKs(t)[0]
	flags := []string{"-XX:+UseSerialGC", "-Xmx64m", "-Xmn8m"}
	v := startMain(t, j, "interval=16m,minsize=32k,census=1,recensus=100", true, flags, "AllocSite", "bench", "big", "4", "16")
	var starts []uint64
	var found []uint64
	timeout := time.After(30 * time.Second)
	for done := false; !done; {
		select {
		case be, ok := <-v.batches:
			if !ok || be.err != nil {
				done = true
				break
			}
			for _, r := range be.b.Records {
				switch r := r.(type) {
				case *agentwire.CensusStart:
					if r.Kind == agentwire.CensusAfterGC {
						starts = append(starts, r.Time)
					}
				case *agentwire.CensusEnd:
					if r.Kind == agentwire.CensusAfterGC {
						found = append(found, r.Objects)
					}
				}
			}
		case <-timeout:
			t.Fatal("the workload did not end")
		}
	}
	var gaps []time.Duration
	for i := 1; i < len(starts); i++ {
		gaps = append(gaps, time.Duration(starts[i]-starts[i-1]))
	}
	t.Logf("%s: %d censuses after GCs, new objects %v, gaps %v", j.name, len(starts), found, gaps)
	if len(gaps) < 3 {
		t.Fatalf("%d censuses after GCs in 5 s, want at least 4", len(starts))
	}
	// A find that lives on starts the backoff again (one run of 19
	// censuses kept finding 17-37 live objects): the gap must reach the
	// cap, three doublings, somewhere in the run rather than at its end.
	capped := 0
	for _, g := range gaps {
		if g >= 720*time.Millisecond {
			capped++
		}
	}
	if capped == 0 {
		t.Errorf("no gap of %v at the cap (800 ms): the finds died, the censuses must back off", gaps)
	}
}
