package heapwalk

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// The heap is copied in pieces. Reading each object's first bytes with
// its own iovec costs the kernel about half a microsecond an iovec (it
// pins the page for each), which made the reads, not the parsing, most
// of a walk's CPU: HSQLDB's 3.66M objects lie tens of KiB apart in a
// batch, so a batch's spans hardly merge. A piece is an aligned
// pieceSize bytes of the heap, copied whole the first time a batch
// needs an object in it and parsed in place from then on, up to
// Config.MaxCopy bytes of pieces; past that, objects are read one span
// each as before. Pieces are kept for the walk: the JVM runs on, so an
// object whose copy does not parse (a header forwarded or not a class,
// a length past its range) is read again from the JVM, and before each
// batch and after each copy the walk reads the collection count and
// whether one runs (walker.copyStable): after a collection the pieces
// are copied again as batches need them (a collection moves objects
// where the copy holds others that parse), and none is parsed while one
// runs or that one overlapped.

const (
	pieceShift = 16 // 64 KiB
	pieceSize  = 1 << pieceShift
)

// pieceState says what the walk knows of a piece.
const (
	pieceNone   int32 = 0  // not copied yet
	pieceFailed int32 = -1 // not copied: unreadable or past the budget
)

// heapCopy holds the pieces copied so far, in an arena mapped for the
// walk (transparent huge pages where the kernel gives them: a walk
// touches its copy at random, a TLB miss an object on 4 KiB pages) and
// unmapped when it ends.
type heapCopy struct {
	lo     uint64
	index  []int32 // per piece of the span: pieceNone, pieceFailed or 1 + its slot
	arena  []byte
	used   int
	data   [][]byte
	valid  []int // bytes of each slot read
	budget int   // bytes of pieces still allowed
	size   int   // of the arena
	// per batch: the pieces to copy
	want  []uint32
	spans []Span
	got   []int
}

func newHeapCopy(lo, hi uint64, budget int) *heapCopy {
	n := (hi - lo + pieceSize - 1) >> pieceShift
	if budget < pieceSize || n > 1<<24 {
		return nil
	}
	budget &^= pieceSize - 1
	arena, err := unix.Mmap(-1, 0, budget, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return nil
	}
	unix.Madvise(arena, unix.MADV_HUGEPAGE) // a hint: without it, 4 KiB pages
	return &heapCopy{lo: lo, index: make([]int32, n), budget: budget, size: budget, arena: arena}
}

// reset drops every piece: a collection moved objects since they were
// copied. The arena is used again from its start.
func (h *heapCopy) reset() {
	clear(h.index)
	h.data, h.valid = h.data[:0], h.valid[:0]
	h.budget, h.used = h.size, 0
}

// free unmaps the copy; no view of it may be used after.
func (h *heapCopy) free() {
	if h != nil && h.arena != nil {
		unix.Munmap(h.arena)
		h.arena, h.data = nil, nil
	}
}

// load copies the pieces holding the batch's objects that are not
// copied yet, while the budget lasts, in one vector, and says whether
// it copied any. addrs is sorted.
func (h *heapCopy) load(w *walker, addrs func(i int) uint64, n int) bool {
	h.want = h.want[:0]
	for i := 0; i < n; i++ {
		p := uint32((addrs(i) - h.lo) >> pieceShift)
		if h.index[p] != pieceNone || (len(h.want) > 0 && h.want[len(h.want)-1] == p) {
			continue
		}
		if h.budget < pieceSize {
			h.index[p] = pieceFailed
			continue
		}
		h.budget -= pieceSize
		h.want = append(h.want, p)
	}
	if len(h.want) == 0 {
		return false
	}
	h.spans = h.spans[:0]
	total := 0
	for _, p := range h.want {
		a := h.lo + uint64(p)<<pieceShift
		rg, _ := w.l.inHeap(a, 0)
		end := min(a+pieceSize, rg.End)
		if rg.End == 0 || end <= a { // a hole between heap ranges
			end = a
		}
		h.spans = append(h.spans, Span{Addr: a, Len: int(end - a)})
		total += int(end - a)
	}
	buf := h.arena[h.used : h.used+total]
	h.used += total
	if cap(h.got) < len(h.spans) {
		h.got = make([]int, len(h.spans))
	}
	h.got = h.got[:len(h.spans)]
	w.r.readSpans(buf, h.spans, h.got)
	off := 0
	for i, p := range h.want {
		s := h.spans[i]
		if h.got[i] == 0 {
			h.index[p] = pieceFailed
		} else {
			h.data = append(h.data, buf[off:off+s.Len:off+s.Len])
			h.valid = append(h.valid, h.got[i])
			h.index[p] = int32(len(h.data))
			w.stats.Pieces++
		}
		off += s.Len
	}
	return true
}

// span is the copy of the heap's bytes [a, end), or nil when they are
// not all in one copied piece's bytes read.
func (h *heapCopy) span(a, end uint64) []byte {
	if a < h.lo || end <= a {
		return nil
	}
	p := (a - h.lo) >> pieceShift
	if p >= uint64(len(h.index)) {
		return nil
	}
	slot := h.index[p]
	base := h.lo + p<<pieceShift
	if slot <= 0 || end-base > uint64(h.valid[slot-1]) {
		return nil
	}
	return h.data[slot-1][a-base : end-base]
}

// unsafeWords is m as uint64s (m is page aligned).
func unsafeWords(m []byte) []uint64 {
	return unsafe.Slice((*uint64)(unsafe.Pointer(&m[0])), len(m)/8)
}
