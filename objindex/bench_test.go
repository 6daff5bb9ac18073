package objindex

import (
	"fmt"
	"math/rand"
	"testing"
)

// The benchmark heap: 2n slots of slotSize bytes from benchBase, each holding
// an object of 1–2 KiB (the typical tracked size). Even slots are live in the
// pre-built index; odd slots are free for Insert. Freed or filled slots are
// restored after each sub-benchmark, so one index per (store, n) is built
// once and shared.
//
// Keep runs short; an op of Compact moves every object:
//
//	go test -run xxx -bench 'Lookup|Insert|Remove' -benchtime 200000x ./objindex/
//	go test -run xxx -bench ApplyMoves -benchtime 2000x ./objindex/
//	go test -run xxx -bench Compact -benchtime 4x ./objindex/
const (
	benchBase = 0x7f00_0000_0000
	slotSize  = 2048
	hashPrime = 1_000_003 // coprime with every n used, so k*p mod n permutes
)

var benchSizes = []struct {
	name string
	n    int
}{{"10k", 10_000}, {"1M", 1_000_000}, {"10M", 10_000_000}}

func slotAddr(i int) uint64 { return benchBase + uint64(i)*slotSize }

func slotSizeOf(i int) uint64 { return 1024 + uint64(i*2654435761)%1024&^7 }

type benchIndex struct {
	x      *Index
	n      int
	probes []uint64
}

var benchCache = map[string]*benchIndex{}

func getBench(b *testing.B, store string, mk func() store, n int) *benchIndex {
	key := fmt.Sprint(store, n)
	if bi := benchCache[key]; bi != nil {
		return bi
	}
	b.StopTimer()
	defer b.StartTimer()
	x := &Index{s: mk()}
	for i := 0; i < n; i++ {
		x.Insert(slotAddr(2*i), slotSizeOf(2*i), ID(2*i))
	}
	// 90% of probes hit a live object at a random offset, 10% land anywhere
	// in the heap (mostly misses), as samples outside tracked objects do.
	rng := rand.New(rand.NewSource(1))
	probes := make([]uint64, 1<<20)
	for i := range probes {
		if rng.Intn(10) == 0 {
			probes[i] = benchBase + uint64(rng.Int63n(int64(2*n*slotSize)))
		} else {
			s := 2 * rng.Intn(n)
			probes[i] = slotAddr(s) + uint64(rng.Int63n(int64(slotSizeOf(s))))
		}
	}
	bi := &benchIndex{x: x, n: n, probes: probes}
	benchCache[key] = bi
	return bi
}

func runSizes(b *testing.B, f func(b *testing.B, bi *benchIndex)) {
	for _, s := range stores {
		for _, sz := range benchSizes {
			b.Run(s.name+"/"+sz.name, func(b *testing.B) {
				bi := getBench(b, s.name, s.new, sz.n)
				b.ReportAllocs()
				b.ResetTimer()
				f(b, bi)
			})
		}
	}
}

func BenchmarkLookup(b *testing.B) {
	runSizes(b, func(b *testing.B, bi *benchIndex) {
		hits := 0
		mask := len(bi.probes) - 1
		for i := 0; i < b.N; i++ {
			if _, ok := bi.x.Lookup(bi.probes[i&mask]); ok {
				hits++
			}
		}
		if hits == 0 {
			b.Fatal("no hits")
		}
	})
}

// BenchmarkInsert fills free (odd) slots in pseudo-random order.
func BenchmarkInsert(b *testing.B) {
	runSizes(b, func(b *testing.B, bi *benchIndex) {
		done := 0
		undo := func() {
			for k := 0; k < done; k++ {
				bi.x.Remove(slotAddr(2*(k*hashPrime%bi.n) + 1))
			}
			done = 0
		}
		for i := 0; i < b.N; i++ {
			if done == bi.n {
				b.StopTimer()
				undo()
				b.StartTimer()
			}
			s := 2*(done*hashPrime%bi.n) + 1
			bi.x.Insert(slotAddr(s), slotSizeOf(s), ID(s))
			done++
		}
		b.StopTimer()
		undo()
	})
}

// BenchmarkRemove frees live (even) slots in pseudo-random order.
func BenchmarkRemove(b *testing.B) {
	runSizes(b, func(b *testing.B, bi *benchIndex) {
		done := 0
		undo := func() {
			for k := 0; k < done; k++ {
				s := 2 * (k * hashPrime % bi.n)
				bi.x.Insert(slotAddr(s), slotSizeOf(s), ID(s))
			}
			done = 0
		}
		for i := 0; i < b.N; i++ {
			if done == bi.n {
				b.StopTimer()
				undo()
				b.StartTimer()
			}
			if !bi.x.Remove(slotAddr(2 * (done * hashPrime % bi.n))) {
				b.Fatal("remove missed")
			}
			done++
		}
		b.StopTimer()
		undo()
	})
}

// BenchmarkApplyMoves applies one young-GC-like batch per op: 64 copies,
// each carrying a run of 8 adjacent live objects to free space above the
// heap; every other op moves them back, keeping the index steady.
func BenchmarkApplyMoves(b *testing.B) {
	const runs, runLen = 64, 8
	runSizes(b, func(b *testing.B, bi *benchIndex) {
		nruns := bi.n / runLen
		top := slotAddr(2 * bi.n)
		fwd := make([]Move, runs)
		back := make([]Move, runs)
		moved := 0
		for i := 0; i < b.N; i++ {
			if i%2 == 0 {
				dst := top
				for m := range fwd {
					r := ((i/2)*runs + m) * hashPrime % nruns
					first, last := 2*r*runLen, 2*(r*runLen+runLen-1)
					src := slotAddr(first)
					n := slotAddr(last) + slotSizeOf(last) - src
					fwd[m] = Move{Src: src, Dst: dst, Len: n}
					back[m] = Move{Src: dst, Dst: src, Len: n}
					dst += n
				}
				moved += bi.x.ApplyMoves(fwd).Moved
			} else {
				moved += bi.x.ApplyMoves(back).Moved
			}
		}
		if b.N%2 == 1 {
			b.StopTimer()
			bi.x.ApplyMoves(back)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(moved), "ns/object")
	})
}

// BenchmarkCompact applies a full sliding compaction per op: every live
// object, in runs of 32, slides down by 1 KiB (ascending), then back up
// (descending) on the next op.
func BenchmarkCompact(b *testing.B) {
	const runLen = 32
	for _, s := range stores {
		for _, sz := range benchSizes[:2] {
			b.Run(s.name+"/"+sz.name, func(b *testing.B) {
				bi := getBench(b, s.name, s.new, sz.n)
				var down, up []Move
				for r := 0; r < bi.n/runLen; r++ {
					first, last := 2*r*runLen, 2*(r*runLen+runLen-1)
					src := slotAddr(first)
					n := slotAddr(last) + slotSizeOf(last) - src
					down = append(down, Move{Src: src, Dst: src - 1024, Len: n})
					up = append(up, Move{Src: src - 1024, Dst: src, Len: n})
				}
				for i, j := 0, len(up)-1; i < j; i, j = i+1, j-1 {
					up[i], up[j] = up[j], up[i]
				}
				b.ReportAllocs()
				b.ResetTimer()
				moved := 0
				for i := 0; i < b.N; i++ {
					batch := down
					if i%2 == 1 {
						batch = up
					}
					st := bi.x.ApplyMoves(batch)
					if st.Evicted+st.Collisions != 0 {
						b.Fatalf("compaction evicted: %+v", st)
					}
					moved += st.Moved
				}
				if b.N%2 == 1 {
					b.StopTimer()
					bi.x.ApplyMoves(up)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(moved), "ns/object")
			})
		}
	}
}
