package heapwalk

import "golang.org/x/sys/unix"

// The visited bitmap has one bit per slot of heap, the smallest object's
// size: 16 bytes (mark word plus klass), 8 with compact object headers
// (an Object without fields is its mark word alone). Objects are 8-byte
// aligned, so no two start in one slot. It is one mapping over the whole
// span, reserved and not committed, on transparent huge pages where the
// kernel gives them (each found object's bit is a random access: on
// 4 KiB pages, a TLB miss each); its blocks (a MiB of heap each) are
// counted as objects are first found in them, so a large, sparsely used
// reservation costs little, and MaxBitmap caps them.
const blockShift = 20 // heap bytes a block covers: 1 MiB, 8 or 16 KiB of bits

type bitmap struct {
	lo        uint64
	shift     uint // log2 of a slot's bytes
	words     int  // uint64s of a block
	bits      []uint64
	mapped    []byte // the mapping bits lies in; nil when bits is Go's
	touched   []uint64
	blocks    int
	maxBlocks int
}

// newBitmap covers [lo, hi) in slots of 1<<shift bytes, in at most
// maxBytes of blocks.
func newBitmap(lo, hi uint64, maxBytes int, shift uint) *bitmap {
	n := (hi - lo + 1<<blockShift - 1) >> blockShift
	words := 1 << (blockShift - shift - 6)
	b := &bitmap{lo: lo, shift: shift, words: words, touched: make([]uint64, (n+63)/64), maxBlocks: max(1, maxBytes/(words*8))}
	size := int(n) * words * 8
	if m, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE); err == nil {
		unix.Madvise(m, unix.MADV_HUGEPAGE) // a hint
		b.mapped = m
		b.bits = unsafeWords(m)
	} else if size <= 64<<20 {
		b.bits = make([]uint64, int(n)*words)
	} else {
		b.maxBlocks = 0 // no room: every object is past the cap
	}
	return b
}

// free unmaps the bitmap.
func (b *bitmap) free() {
	if b.mapped != nil {
		unix.Munmap(b.mapped)
		b.mapped, b.bits = nil, nil
	}
}

// testAndSet marks the slot of a (inside the span): newly says it was
// not marked before; ok is false when a's block is past the cap.
func (b *bitmap) testAndSet(a uint64) (newly, ok bool) {
	off := a - b.lo
	t := off >> blockShift
	if tw, tb := &b.touched[t>>6], uint64(1)<<(t&63); *tw&tb == 0 {
		if b.blocks >= b.maxBlocks || b.bits == nil {
			return false, false
		}
		*tw |= tb
		b.blocks++
	}
	s := off >> b.shift
	word, bit := &b.bits[s>>6], uint64(1)<<(s&63)
	if *word&bit != 0 {
		return false, true
	}
	*word |= bit
	return true, true
}

// bytes is the memory the bitmap holds.
func (b *bitmap) bytes() int { return len(b.touched)*8 + b.blocks*b.words*8 }
