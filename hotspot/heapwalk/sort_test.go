package heapwalk

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestRadixRuns checks the runs' sort, a MiB of heap at a time,
// against a comparison sort, on heap spans of one MiB, many and a
// sparse TiB; and that runs of one row that meet merge, also across
// MiBs, as a merge of the sorted runs would.
func TestRadixRuns(t *testing.T) {
	const lo = 0x7_0000_0000
	for _, span := range []uint64{1 << 12, 1 << 20, 1 << 30, 1 << 40} {
		for _, rows := range []int{0, 3} {
			rng := rand.New(rand.NewPCG(1, span))
			w := &walker{runs: newRunStore(lo, lo+span)}
			var want []run
			seen := map[uint64]bool{}
			for n := 0; n < 3*runChunk*64; n++ {
				a := lo + rng.Uint64N(span>>3)<<3
				if seen[a] {
					continue
				}
				seen[a] = true
				r := run{a, uint32(rng.IntN(9) + 2), uint32(n)}
				if rows > 0 {
					// Few rows and runs that meet: some merge.
					r.row = uint32(rng.IntN(rows))
					r.words = 1
				}
				if _, ok := w.runs.add(r); !ok {
					t.Fatalf("run at %#x not kept", a)
				}
				want = append(want, r)
			}
			slices.SortFunc(want, byStart)
			merged := want[:0]
			for _, r := range want {
				if n := len(merged); n > 0 {
					p := &merged[n-1]
					if p.row == r.row && p.start+uint64(p.words)<<3 == r.start {
						p.words += r.words
						continue
					}
				}
				merged = append(merged, r)
			}
			l := w.finishRuns()
			var got []run
			for i, seg := range l.segs {
				if len(seg) == 0 || l.first[i] != seg[0].start {
					t.Fatalf("span %#x: segment %d empty or its first start wrong", span, i)
				}
				got = append(got, seg...)
			}
			if l.n != len(got) || !slices.Equal(got, merged) {
				t.Errorf("span %#x rows %d: %d runs sorted and merged, want %d (the same: %v)", span, rows, len(got), len(merged), slices.Equal(got, merged))
			}
			// The runs of random lengths overlap; those of one word do not,
			// and are found by any address in them.
			for _, r := range merged[:min(len(merged), 2000)] {
				addrs := []uint64{r.start}
				if rows > 0 {
					addrs = append(addrs, r.start+uint64(r.words)<<3-8)
				}
				for _, a := range addrs {
					if ru, ok := l.find(a); !ok || ru != r {
						t.Fatalf("span %#x: find(%#x) = %+v, want %+v", span, a, ru, r)
					}
				}
			}
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
		w := &walker{runs: newRunStore(lo, lo+200<<20)}
		for _, r := range base {
			w.runs.add(r)
		}
		b.StartTimer()
		w.finishRuns()
	}
}
