package objindex

import (
	"maps"
	"math"
	"slices"
)

// radix is a two-level table keyed by address: 1 GiB chunks split into
// 64 KiB buckets, each holding the objects that start in it as a sorted
// slice. A lookup indexes straight to its bucket and binary-searches a few
// dozen entries; it never walks a tree.
//
// Objects larger than a bucket (humongous arrays) live in a separate blocks
// tree instead, so that an object of any size costs one entry. Every object
// left in the buckets is at most one bucket long and so reaches at most into
// the next bucket: a lookup that finds no object starting at or before addr
// in its own bucket only has to check the last object of the previous one.
//
// Why radix: benchmarked against blocks (a two-level B+-tree over all
// objects, 256 entries per leaf) behind the same tests (bench_test.go;
// 2 vCPU AMD EPYC VM shared with other work, so ±40% noise; objects of
// 1–2 KiB in 2 KiB slots, half of the slots live; ApplyMoves = one batch of
// 64 copies of 8-object runs; Compact = every object slides 1 KiB):
//
//	ns/op, 0 allocs/op   10k: radix blocks   1M: radix blocks   10M: radix blocks
//	Lookup                     48    118          317    664          367   1247
//	Insert                    181    818          310    719         1406   1184
//	Remove                     35    101           60    129          305    365
//	ApplyMoves (batch)        41µs  105µs         51µs   93µs         57µs  206µs
//	  per object moved          80    205          101    181          110    403
//	Compact, per object         63    161           71    224            -      -
//
// At 1M objects that is ~3.2M lookups/s and ~3.2M inserts/s (repeated runs:
// 190–320 ns per lookup, 90–310 ns per insert, i.e. 3–5M lookups/s and
// 3–10M inserts/s). Misses in DRAM dominate from 1M objects up: a lookup is
// a chunk pointer, a bucket header and a short slice, where the tree takes
// two binary searches over arrays far larger than the cache. blocks only
// allocates at leaf splits (Insert shows 0 allocs/op for both; radix
// amortizes slice growth). 16 KiB buckets (bucketShift 14) looked faster at
// 10M (~200 ns lookups) but not at 1M and cost 1.5 MiB of bucket headers per
// GiB of heap instead of 384 KiB; tracked objects are sparse (sampled), so
// 64 KiB buckets are kept. The 10M radix index uses ~350 MB RSS.
type radix struct {
	low  []*chunk          // chunks below 1<<lowBits, indexed by address>>chunkShift
	high map[uint64]*chunk // chunks above (57-bit user space)
	big  blocks            // objects larger than a bucket
	n    int               // objects in buckets
}

const (
	bucketShift     = 16
	bucketSize      = 1 << bucketShift
	chunkShift      = 30
	bucketsPerChunk = 1 << (chunkShift - bucketShift)
	lowBits         = 47 // x86-64 user space with 4-level paging
	lowChunks       = 1 << (lowBits - chunkShift)
)

// chunk holds the buckets of one 1 GiB range; each is sorted by start.
type chunk [bucketsPerChunk][]entry

func newRadix() *radix { return &radix{} }

func (r *radix) len() int { return r.n + r.big.len() }

func (r *radix) chunk(c uint64) *chunk {
	if c < uint64(len(r.low)) {
		return r.low[c]
	}
	if c < lowChunks {
		return nil
	}
	return r.high[c]
}

func (r *radix) newChunk(c uint64) *chunk {
	p := new(chunk)
	if c < lowChunks {
		if c >= uint64(len(r.low)) {
			r.low = append(r.low, make([]*chunk, c+1-uint64(len(r.low)))...)
		}
		r.low[c] = p
		return p
	}
	if r.high == nil {
		r.high = make(map[uint64]*chunk)
	}
	r.high[c] = p
	return p
}

// bucket returns a pointer to bucket number b (address>>bucketShift), or nil
// if its chunk does not exist.
func (r *radix) bucket(b uint64) *[]entry {
	c := r.chunk(b >> (chunkShift - bucketShift))
	if c == nil {
		return nil
	}
	return &c[b&(bucketsPerChunk-1)]
}

// floor returns the index of the last entry in objs with start ≤ addr, or -1.
func floor(objs []entry, addr uint64) int {
	lo, hi := 0, len(objs)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if objs[m].start <= addr {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo - 1
}

func (r *radix) containing(addr uint64) *entry {
	n := addr >> bucketShift
	if b := r.bucket(n); b != nil {
		if i := floor(*b, addr); i >= 0 {
			// Nothing in the buckets that starts earlier can reach past
			// this object, as objects do not overlap.
			if e := &(*b)[i]; e.contains(addr) {
				return e
			}
			goto big
		}
	}
	if n > 0 {
		if b := r.bucket(n - 1); b != nil && len(*b) > 0 {
			if e := &(*b)[len(*b)-1]; e.contains(addr) {
				return e
			}
		}
	}
big:
	if r.big.n == 0 {
		return nil
	}
	return r.big.containing(addr)
}

func (r *radix) find(start uint64) *entry {
	if b := r.bucket(start >> bucketShift); b != nil {
		if i := floor(*b, start); i >= 0 && (*b)[i].start == start {
			return &(*b)[i]
		}
	}
	if r.big.n == 0 {
		return nil
	}
	return r.big.find(start)
}

func (r *radix) insert(e entry) {
	if e.size > bucketSize {
		r.big.insert(e)
		return
	}
	n := e.start >> bucketShift
	b := r.bucket(n)
	if b == nil {
		c := r.newChunk(n >> (chunkShift - bucketShift))
		b = &c[n&(bucketsPerChunk-1)]
	}
	i := floor(*b, e.start) + 1
	*b = slices.Insert(*b, i, e)
	r.n++
}

func (r *radix) remove(start uint64) (entry, bool) {
	if b := r.bucket(start >> bucketShift); b != nil {
		if i := floor(*b, start); i >= 0 && (*b)[i].start == start {
			e := (*b)[i]
			*b = slices.Delete(*b, i, i+1)
			r.n--
			return e, true
		}
	}
	if r.big.n == 0 {
		return entry{}, false
	}
	return r.big.remove(start)
}

func (r *radix) extract(lo, last uint64, sel func(*entry) bool, out []entry) []entry {
	// Merge the bucket and big entries so that out stays in start order.
	mark := len(out)
	out = r.extractBuckets(lo, last, sel, out)
	if r.big.n > 0 {
		k := len(out)
		out = r.big.extract(lo, last, sel, out)
		if k > mark && len(out) > k {
			slices.SortFunc(out[mark:], func(a, b entry) int {
				if a.start < b.start {
					return -1
				}
				return 1
			})
		}
	}
	return out
}

func (r *radix) extractBuckets(lo, last uint64, sel func(*entry) bool, out []entry) []entry {
	first, end := lo>>bucketShift, last>>bucketShift
	r.eachChunk(first>>(chunkShift-bucketShift), end>>(chunkShift-bucketShift), func(cn uint64, c *chunk) bool {
		base := cn << (chunkShift - bucketShift)
		i, j := uint64(0), uint64(bucketsPerChunk-1)
		if first > base {
			i = first - base
		}
		if end < base+j {
			j = end - base
		}
		for ; i <= j; i++ {
			b := c[i]
			if len(b) == 0 {
				continue
			}
			k := floor(b, lo-1) + 1
			if lo == 0 {
				k = 0
			}
			keep := b[:k]
			for ; k < len(b); k++ {
				e := &b[k]
				if e.start <= last && (sel == nil || sel(e)) {
					out = append(out, *e)
					r.n--
				} else {
					keep = append(keep, *e)
				}
			}
			c[i] = keep
		}
		return true
	})
	return out
}

// eachChunk calls f on the existing chunks numbered first..last in order.
func (r *radix) eachChunk(first, last uint64, f func(uint64, *chunk) bool) {
	for c := first; c <= last && c < uint64(len(r.low)); c++ {
		if r.low[c] != nil && !f(c, r.low[c]) {
			return
		}
	}
	if last < lowChunks || len(r.high) == 0 {
		return
	}
	for _, c := range slices.Sorted(maps.Keys(r.high)) {
		if c >= first && c <= last && !f(c, r.high[c]) {
			return
		}
	}
}

func (r *radix) each(f func(*entry) bool) {
	// Merge the buckets with the big objects, both in start order.
	var big []entry
	r.big.each(func(e *entry) bool { big = append(big, *e); return true })
	stop := false
	r.eachChunk(0, uint64(math.MaxUint64)>>chunkShift, func(_ uint64, c *chunk) bool {
		for _, b := range c {
			for k := range b {
				for len(big) > 0 && big[0].start < b[k].start {
					if stop = !f(&big[0]); stop {
						return false
					}
					big = big[1:]
				}
				if stop = !f(&b[k]); stop {
					return false
				}
			}
		}
		return true
	})
	for k := 0; k < len(big) && !stop; k++ {
		if !f(&big[k]) {
			return
		}
	}
}
