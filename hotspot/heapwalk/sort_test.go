package heapwalk

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestRadixRuns checks the runs' radix sort against a comparison sort,
// on heap spans needing one, two and three passes.
func TestRadixRuns(t *testing.T) {
	const lo = 0x7_0000_0000
	for _, span := range []uint64{1 << 12, 1 << 20, 1 << 30, 1 << 40} {
		rng := rand.New(rand.NewPCG(1, span))
		var segs [][]run
		var want []run
		seen := map[uint64]bool{}
		for n := 0; n < 3*runSeg/2; n++ {
			a := lo + rng.Uint64N(span>>3)<<3
			if seen[a] {
				continue
			}
			seen[a] = true
			r := run{a, uint32(rng.IntN(9) + 2), uint32(n)}
			if len(segs) == 0 || len(segs[len(segs)-1]) == runSeg {
				segs = append(segs, make([]run, 0, runSeg))
			}
			segs[len(segs)-1] = append(segs[len(segs)-1], r)
			want = append(want, r)
		}
		slices.SortFunc(want, byStart)
		if got := radixRuns(segs, len(want), lo); !slices.Equal(got, want) {
			t.Errorf("span %#x: radix sort differs from a comparison sort", span)
		}
	}
}

// TestSortEntries checks the batch's radix sort against slices.Sort.
func TestSortEntries(t *testing.T) {
	for _, width := range []int{1, 11, 12, 27, 35} {
		rng := rand.New(rand.NewPCG(2, uint64(width)))
		seen := map[uint64]bool{}
		var b []uint64
		for len(b) < 5000 && len(seen) < 1<<width {
			off := rng.Uint64N(1 << width)
			if seen[off] {
				continue
			}
			seen[off] = true
			b = append(b, off<<edgeBits|rng.Uint64N(maxEdges+1))
		}
		want := slices.Clone(b)
		slices.Sort(want)
		sortEntries(b, make([]uint64, len(b)), width)
		if !slices.Equal(b, want) {
			t.Errorf("width %d: radix sort differs from slices.Sort", width)
		}
	}
}

// BenchmarkRadixRuns sorts 2.5M runs spread over 100 MiB of heap, in
// batches of 4096 shuffled as a walk records them.
func BenchmarkRadixRuns(b *testing.B) {
	const lo = 0x7_0000_0000
	rng := rand.New(rand.NewPCG(1, 2))
	n := 2_500_000
	base := make([]run, n)
	for i := range base {
		base[i] = run{lo + uint64(i)*40 + uint64(rng.IntN(4))*8, 2, uint32(i)}
	}
	rng.Shuffle(n/4096, func(i, j int) {
		for k := 0; k < 4096; k++ {
			base[i*4096+k], base[j*4096+k] = base[j*4096+k], base[i*4096+k]
		}
	})
	for b.Loop() {
		b.StopTimer()
		var segs [][]run
		for i := 0; i < n; i += runSeg {
			segs = append(segs, append([]run(nil), base[i:min(n, i+runSeg)]...))
		}
		b.StartTimer()
		radixRuns(segs, n, lo)
	}
}
