package heapwalk

import (
	"errors"
	"math"
	"syscall"

	"github.com/djx-bpf/djx-bpf/hotspot/targetmem"
	"github.com/djx-bpf/djx-bpf/hotspot/vmstructs"
	"github.com/djx-bpf/djx-bpf/safety/procfs"
)

// Mem is the target's memory, as vmstructs reads it: ReadAt may read
// fewer bytes than asked, with an error, where the memory ends.
type Mem = vmstructs.Mem

// Span is one range of the target's memory to read.
type Span = targetmem.Span

// VectorMem is a Mem that reads many ranges in one call, as
// process_vm_readv does with its iovecs: the walk reads each batch of
// scattered objects that way, one system call for up to 1024 of them.
// A *targetmem.Reader is one.
type VectorMem interface {
	Mem
	// ReadVector reads the spans, in order, into dst one after the
	// other (len(dst) is their total length). It returns the bytes read
	// before the first it could not read, and then why.
	ReadVector(dst []byte, spans []Span) (int, error)
}

// fatal reports errors after which no read will work: the process is
// gone, may not be read, or its memory did not answer.
func fatal(err error) bool {
	return errors.Is(err, procfs.ErrNoProcess) || errors.Is(err, syscall.ESRCH) || errors.Is(err, syscall.EPERM) ||
		errors.Is(err, targetmem.ErrHung)
}

// reader reads the target for one walk: metadata through an LRU cache
// of chunks, objects in vectors of spans, and counts it all.
type reader struct {
	mem   Mem
	vec   VectorMem // nil when mem reads one range a call
	stats *Stats
	cache *chunkCache
	// gone is the first fatal error: the process exited or may not be
	// read, and the walk stops.
	gone error
}

// readAt reads len(p) bytes at addr, uncached; false if any is missing.
func (r *reader) readAt(p []byte, addr uint64) bool {
	if len(p) == 0 {
		return true
	}
	if addr == 0 || addr > math.MaxInt64-uint64(len(p)) || r.gone != nil {
		return false
	}
	r.stats.Reads++
	n, err := r.mem.ReadAt(p, int64(addr))
	n = max(0, min(n, len(p))) // a Mem's count is not trusted either
	r.stats.BytesRead += int64(n)
	if err != nil && fatal(err) {
		r.gone = err
	}
	return n == len(p)
}

// cached reads len(p) bytes at addr through the chunk cache, for
// metadata read again and again (klasses, symbols, the class graph).
func (r *reader) cached(p []byte, addr uint64) bool {
	if addr == 0 || addr > math.MaxInt64-uint64(len(p)) || r.gone != nil {
		return false
	}
	if r.cache == nil {
		return r.readAt(p, addr)
	}
	done := 0
	for done < len(p) {
		a := addr + uint64(done)
		c := r.cache.get(r, a)
		off := int(a - c.addr)
		if off >= c.valid {
			// The chunk's start may be unmapped where the bytes
			// asked for are not (a mapping that starts mid-chunk).
			return r.readAt(p[done:], a)
		}
		done += copy(p[done:], c.data[off:c.valid])
		if done < len(p) && c.valid < len(c.data) {
			return r.readAt(p[done:], addr+uint64(done))
		}
	}
	return true
}

// ReadPrefix reads len(p) bytes at addr through the cache, all or none,
// for vmlayout's readers.
func (r *reader) ReadPrefix(p []byte, addr uint64) (int, error) {
	if !r.cached(p, addr) {
		return 0, nil
	}
	return len(p), nil
}

func (r *reader) u64(addr uint64) (uint64, bool) {
	var b [8]byte
	if !r.cached(b[:], addr) {
		return 0, false
	}
	return le64(b[:]), true
}

func (r *reader) u32(addr uint64) (uint32, bool) {
	var b [4]byte
	if !r.cached(b[:], addr) {
		return 0, false
	}
	return le32(b[:]), true
}

// readSpans reads each span into dst, one after the other, and returns
// how many bytes of each it read: a span in unmapped memory, or running
// into it, is short and the others are read regardless.
func (r *reader) readSpans(dst []byte, spans []Span, valid []int) {
	if r.vec == nil {
		off := 0
		for i, s := range spans {
			valid[i] = 0
			if r.gone == nil && s.Addr != 0 && s.Addr <= math.MaxInt64-uint64(s.Len) {
				r.stats.Reads++
				n, err := r.mem.ReadAt(dst[off:off+s.Len], int64(s.Addr))
				n = max(0, min(n, s.Len))
				r.stats.BytesRead += int64(n)
				valid[i] = n
				if err != nil && fatal(err) {
					r.gone = err
				}
			}
			off += s.Len
		}
		return
	}
	off := 0
	for i := 0; i < len(spans); {
		if r.gone != nil {
			for ; i < len(spans); i++ {
				valid[i] = 0
			}
			return
		}
		total := 0
		for _, s := range spans[i:] {
			total += s.Len
		}
		r.stats.Reads++
		n, err := r.vec.ReadVector(dst[off:off+total], spans[i:])
		n = max(0, min(n, total))
		r.stats.BytesRead += int64(n)
		if err != nil && fatal(err) {
			r.gone = err
		}
		// Every span wholly inside n was read; the one n ends in is
		// short, and the reading goes on after it.
		for i < len(spans) && n >= spans[i].Len {
			valid[i] = spans[i].Len
			n -= spans[i].Len
			off += spans[i].Len
			i++
		}
		if i < len(spans) {
			valid[i] = n
			off += spans[i].Len
			i++
		}
	}
}

// chunk is one cached, aligned piece of the target's memory.
type chunk struct {
	addr       uint64
	valid      int // bytes readable from addr (0: none)
	data       []byte
	prev, next int32
}

// chunkCache keeps the most recently used chunks of the target's
// memory, bounded in number: metadata neighbours (klasses of one class
// loader, a symbol's bytes) then cost one read.
type chunkCache struct {
	size  int
	slots []chunk
	index map[uint64]int32
	head  int32 // most recently used, -1 when empty
	last  int32 // the chunk of the last get
}

func newChunkCache(chunkSize, total int) *chunkCache {
	n := max(1, total/chunkSize)
	return &chunkCache{size: chunkSize, slots: make([]chunk, 0, n), index: make(map[uint64]int32, n), head: -1, last: -1}
}

// get returns the chunk holding addr, reading it on a miss.
func (c *chunkCache) get(r *reader, addr uint64) *chunk {
	base := addr &^ uint64(c.size-1)
	if c.last >= 0 && c.slots[c.last].addr == base {
		return &c.slots[c.last]
	}
	i, ok := c.index[base]
	if !ok {
		if len(c.slots) < cap(c.slots) {
			c.slots = append(c.slots, chunk{data: make([]byte, c.size), prev: -1, next: -1})
			i = int32(len(c.slots) - 1)
		} else {
			i = c.slots[c.head].prev // the least recently used
			c.unlink(i)
			delete(c.index, c.slots[i].addr)
		}
		s := &c.slots[i]
		s.addr = base
		s.valid = 0
		if r.gone == nil && base != 0 && base <= math.MaxInt64-uint64(c.size) {
			r.stats.Reads++
			n, err := r.mem.ReadAt(s.data, int64(base))
			s.valid = max(0, min(n, c.size))
			r.stats.BytesRead += int64(s.valid)
			if err != nil && fatal(err) {
				r.gone = err
			}
		}
		c.index[base] = i
	} else {
		c.unlink(i)
	}
	c.pushFront(i)
	c.last = i
	return &c.slots[i]
}

func (c *chunkCache) unlink(i int32) {
	s := &c.slots[i]
	if s.next == i { // the only one
		c.head = -1
	} else {
		c.slots[s.prev].next = s.next
		c.slots[s.next].prev = s.prev
		if c.head == i {
			c.head = s.next
		}
	}
	s.prev, s.next = -1, -1
}

func (c *chunkCache) pushFront(i int32) {
	s := &c.slots[i]
	if c.head < 0 {
		s.prev, s.next = i, i
		c.head = i
		return
	}
	h := &c.slots[c.head]
	tail := h.prev
	s.next, s.prev = c.head, tail
	c.slots[tail].next = i
	h.prev = i
	c.head = i
}

func le64(b []byte) uint64 {
	_ = b[7]
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

func le32(b []byte) uint32 {
	_ = b[3]
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

// sized returns s with length n, reallocated only when its capacity is
// short: the walk's buffers for each read.
func sized[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}
