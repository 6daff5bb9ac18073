package vmcode

import (
	"fmt"
)

// Caps on the code cache's geometry as read from the target.
const (
	maxHeaps = 16 // CodeCache has at most 3 heaps (non-nmethod, profiled, non-profiled)
	// maxBlob caps one code blob; HotSpot's largest are a few MiB.
	maxBlob = 64 << 20
	// segmapWindow is the first read of the segment map around a pc;
	// a walk that leaves it reads segmapWindowMax bytes at a time.
	segmapWindow    = 256
	segmapWindowMax = 4096
	maxSegmapReads  = 64
	maxSegmapHops   = 1 << 14
	freeSegment     = 0xFF // CodeHeap's free_sentinel
)

// Heap is one CodeHeap of the code cache: the address range it reserved
// and its segment map, which finds the start of the block holding any
// address in it.
type Heap struct {
	Start, End      uint64 // reserved range, _memory's boundaries
	Low, High       uint64 // committed range; segment 0 is at Low
	Segmap          uint64 // segment map: one byte per segment
	SegmapLen       uint64 // committed bytes of the segment map
	Log2SegmentSize uint
}

func (h Heap) contains(pc uint64) bool { return pc >= h.Start && pc < h.High && pc >= h.Low }

// readHeaps reads CodeCache::_heaps: a GrowableArray<CodeHeap*>.
func (s *Symbolizer) readHeaps(r *reader) ([]Heap, error) {
	l := s.l
	arr, err := r.u64(l.heapsAddr + s.bias)
	if err != nil {
		return nil, fmt.Errorf("read CodeCache::_heaps: %w", err)
	}
	if arr == 0 {
		return nil, fmt.Errorf("%w: CodeCache::_heaps is null (the JVM is starting)", ErrMalformed)
	}
	ga := make([]byte, max(l.gaLen.off+uint64(l.gaLen.width), l.gaData.off+8))
	if err := r.read(ga, arr); err != nil {
		return nil, fmt.Errorf("read code heap array: %w", err)
	}
	n := sget(ga, l.gaLen)
	if n <= 0 || n > maxHeaps {
		return nil, malformed("%d code heaps", n)
	}
	ptrs, err := r.bytesAt(get(ga, l.gaData), uint64(n)*8, maxHeaps*8, "code heap pointers")
	if err != nil {
		return nil, err
	}
	heaps := make([]Heap, 0, n)
	for i := range n {
		h, err := s.readHeap(r, get(ptrs[i*8:], field{0, 8}))
		if err != nil {
			return nil, fmt.Errorf("code heap %d: %w", i, err)
		}
		heaps = append(heaps, h)
	}
	return heaps, nil
}

func (s *Symbolizer) readHeap(r *reader, addr uint64) (Heap, error) {
	l := s.l
	vsEnd := max(l.vsLowBoundary.off, l.vsHighBoundary.off, l.vsLow.off, l.vsHigh.off) + 8
	size := max(l.heapMemory.off, l.heapSegmap.off) + vsEnd
	size = max(size, l.heapLog2.off+4)
	buf, err := r.bytesAt(addr, size, maxStruct, "CodeHeap")
	if err != nil {
		return Heap{}, err
	}
	vs := func(base, f field) uint64 { return get(buf, field{base.off + f.off, f.width}) }
	h := Heap{
		Start:           vs(l.heapMemory, l.vsLowBoundary),
		End:             vs(l.heapMemory, l.vsHighBoundary),
		Low:             vs(l.heapMemory, l.vsLow),
		High:            vs(l.heapMemory, l.vsHigh),
		Segmap:          vs(l.heapSegmap, l.vsLow),
		Log2SegmentSize: uint(sget(buf, l.heapLog2)),
	}
	smHigh := vs(l.heapSegmap, l.vsHigh)
	switch {
	case !plausible(h.Start, 0) || h.End <= h.Start || h.End-h.Start > 1<<40:
		return Heap{}, malformed("reserved range %#x-%#x", h.Start, h.End)
	case h.Low < h.Start || h.High < h.Low || h.High > h.End:
		return Heap{}, malformed("committed range %#x-%#x outside %#x-%#x", h.Low, h.High, h.Start, h.End)
	case h.Log2SegmentSize < 4 || h.Log2SegmentSize > 16:
		return Heap{}, malformed("segment size 2^%d", h.Log2SegmentSize)
	case !plausible(h.Segmap, 0) || smHigh < h.Segmap:
		return Heap{}, malformed("segment map %#x-%#x", h.Segmap, smHigh)
	}
	h.SegmapLen = smHigh - h.Segmap
	return h, nil
}

// heapOf returns the heap holding pc, reading the heaps on first use.
func (s *Symbolizer) heapOf(r *reader, pc uint64) (Heap, error) {
	if s.heaps == nil {
		hs, err := s.readHeaps(r)
		if err != nil {
			return Heap{}, err
		}
		s.heaps = hs
	}
	for _, h := range s.heaps {
		if h.contains(pc) {
			return h, nil
		}
	}
	// A heap commits more of its reservation as code grows: a pc in the
	// reserved part reads the heaps again.
	for _, h := range s.heaps {
		if pc >= h.Start && pc < h.End {
			hs, err := s.readHeaps(r)
			if err != nil {
				return Heap{}, err
			}
			s.heaps = hs
			for _, h := range hs {
				if h.contains(pc) {
					return h, nil
				}
			}
			break
		}
	}
	return Heap{}, fmt.Errorf("%w: %#x", ErrNotCode, pc)
}

// blockStart walks the segment map back from pc's segment to the first
// segment of its block (CodeHeap::find_start): each byte is the distance
// to a segment nearer the start, 0 at the start, 0xFF where free.
func blockStart(r *reader, h Heap, pc uint64) (uint64, error) {
	seg := (pc - h.Low) >> h.Log2SegmentSize
	if seg >= h.SegmapLen {
		return 0, malformed("segment %d past the segment map's %d", seg, h.SegmapLen)
	}
	var win []byte
	var winStart uint64
	size := uint64(segmapWindow)
	reads := 0
	for hops := 0; hops < maxSegmapHops; hops++ {
		if win == nil || seg < winStart {
			if reads == maxSegmapReads {
				break
			}
			reads++
			winStart = seg + 1 - min(seg+1, size)
			win = make([]byte, seg+1-winStart)
			if err := r.read(win, h.Segmap+winStart); err != nil {
				return 0, fmt.Errorf("read segment map: %w", err)
			}
			size = segmapWindowMax
		}
		v := uint64(win[seg-winStart])
		switch {
		case v == freeSegment:
			return 0, fmt.Errorf("%w: %#x is in a free block", ErrNotCode, pc)
		case v == 0:
			return seg, nil
		case v > seg:
			return 0, malformed("segment map hops before the heap's start")
		}
		seg -= v
	}
	return 0, malformed("segment map walk did not end within %d hops", maxSegmapHops)
}
