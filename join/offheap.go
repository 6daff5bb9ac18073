package join

import (
	"cmp"
	"slices"

	"github.com/djx-bpf/djx-bpf/sources/agentwire"
)

// OffHeapOwner is a Java object that owns memory outside the heap (a
// direct buffer or an FFM native segment), as a heap walk found it.
type OffHeapOwner struct {
	Start, End uint64 // the memory: [Start, End)
	TypeSig    string // the owner's class: "Ljava/nio/DirectByteBuffer;"
	Path       uint32 // its holder chain, an ID of HeapWalk.Paths
	// Mapped says it maps a file: its samples keep the file's name.
	Mapped bool
}

// offRange is one owner's memory and the site it charges.
type offRange struct {
	start, end uint64
	site       int32
	mapped     bool
}

// offHeapState is what the last walk found outside the heap.
type offHeapState struct {
	offRanges []offRange // sorted by start, not overlapping
	offRows   []walkRowCount
}

// setOffHeap takes walk w's off-heap owners in place of the last walk's:
// one site per type and holder chain (a pool's chunks fold into one row),
// whose objects are the owners and bytes their memory.
func (j *JVM) setOffHeap(w *HeapWalk) {
	j.takeBackRows(j.offRows)
	j.offRows, j.offRanges = j.offRows[:0], j.offRanges[:0]
	if len(w.OffHeap) == 0 {
		return
	}
	counts := make(map[int32]int)
	for _, o := range w.OffHeap {
		if o.End <= o.Start || j.heap.Contains(o.Start) || j.heap.Contains(o.End-1) {
			continue
		}
		path := o.Path
		if path != 0 {
			path += walkPathBase
		}
		si := j.offHeapSite(o.TypeSig, path)
		if si < 0 {
			continue
		}
		s := j.sites[si]
		size := o.End - o.Start
		s.objects++
		s.bytes += size
		s.estObjects++
		s.estBytes += float64(size)
		if i, ok := counts[si]; ok {
			j.offRows[i].objects++
			j.offRows[i].bytes += size
		} else {
			counts[si] = len(j.offRows)
			j.offRows = append(j.offRows, walkRowCount{si, 1, size})
		}
		j.offRanges = append(j.offRanges, offRange{o.Start, o.End, si, o.Mapped})
	}
	// Overlapping owners (two buffers made over one native address by
	// JNI): the first by address keeps the overlap.
	slices.SortFunc(j.offRanges, func(a, b offRange) int { return cmp.Compare(a.start, b.start) })
	out := j.offRanges[:0]
	for _, r := range j.offRanges {
		if n := len(out); n > 0 && r.start < out[n-1].end {
			if r.end <= out[n-1].end {
				continue
			}
			r.start = out[n-1].end
		}
		out = append(out, r)
	}
	j.offRanges = out
}

func (j *JVM) offHeapSite(sig string, path uint32) int32 {
	k := append(j.keyBuf[:0], "offheap\x00"...)
	k = append(k, sig...)
	k = append(k, 0, byte(path), byte(path>>8), byte(path>>16), byte(path>>24))
	return j.internSite(k, 0, func() *site {
		return &site{typeSig: sig, census: agentwire.CensusAttach, holder: path, offHeap: true}
	})
}

// chargeOffHeap charges sample p, at an address outside the heap, to the
// off-heap owner whose memory holds it; a mapped owner's site keeps the
// file's name from the regions.
func (j *JVM) chargeOffHeap(p *pending, fr []pathFrame) bool {
	rs := j.offRanges
	if len(rs) == 0 || (j.heapKnown && j.heap.Contains(p.addr)) {
		return false
	}
	i, _ := slices.BinarySearchFunc(rs, p.addr, func(r offRange, a uint64) int {
		if r.end <= a {
			return -1
		}
		if r.start > a {
			return 1
		}
		return 0
	})
	if i >= len(rs) || p.addr < rs[i].start || p.addr >= rs[i].end {
		return false
	}
	s := j.sites[rs[i].site]
	if rs[i].mapped && s.file == "" && j.regions != nil {
		s.file = j.regions.Name(p.addr, p.tid, p.rsp).Name
	}
	j.stats.OffHeapSamples++
	// As chargeSite, but not by data type: the data types are the
	// heap's, their shares of the samples in it.
	c := j.chargeOf(p)
	s.samples++
	s.estSamples++
	j.stats.Attributed++
	if s.accesses == nil {
		s.accesses = make(accessSet)
	}
	a := j.addAccess(s.accesses, "", "", fr)
	j.charge(c, &s.mem, &s.numa)
	j.charge(c, &a.mem, &a.numa)
	return true
}
