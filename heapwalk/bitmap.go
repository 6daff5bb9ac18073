package heapwalk

// The visited bitmap has one bit per slot of heap, the smallest object's
// size: 16 bytes (mark word plus klass), 8 with compact object headers
// (an Object without fields is its mark word alone). Objects are 8-byte
// aligned, so no two start in one slot. Its blocks are allocated as
// objects are found in them, so a large, sparsely used reservation costs
// little.
const blockShift = 20 // heap bytes a block covers: 1 MiB, 8 or 16 KiB of bits

type bitmap struct {
	lo        uint64
	shift     uint    // log2 of a slot's bytes
	words     int     // uint64s of a block
	top       []int32 // block index + 1 for each MiB of the span; 0: none yet
	blocks    [][]uint64
	maxBlocks int
}

// newBitmap covers [lo, hi) in slots of 1<<shift bytes, in at most
// maxBytes of blocks.
func newBitmap(lo, hi uint64, maxBytes int, shift uint) *bitmap {
	n := (hi - lo + 1<<blockShift - 1) >> blockShift
	words := 1 << (blockShift - shift - 6)
	return &bitmap{lo: lo, shift: shift, words: words, top: make([]int32, n), maxBlocks: max(1, maxBytes/(words*8))}
}

// testAndSet marks the slot of a (inside the span): newly says it was
// not marked before; ok is false when a's block cannot be allocated
// under the cap.
func (b *bitmap) testAndSet(a uint64) (newly, ok bool) {
	off := a - b.lo
	t := off >> blockShift
	bi := b.top[t]
	if bi == 0 {
		if len(b.blocks) >= b.maxBlocks {
			return false, false
		}
		b.blocks = append(b.blocks, make([]uint64, b.words))
		bi = int32(len(b.blocks))
		b.top[t] = bi
	}
	s := (off & (1<<blockShift - 1)) >> b.shift
	word, bit := &b.blocks[bi-1][s>>6], uint64(1)<<(s&63)
	if *word&bit != 0 {
		return false, true
	}
	*word |= bit
	return true, true
}

// bytes is the memory the bitmap holds.
func (b *bitmap) bytes() int { return len(b.top)*4 + len(b.blocks)*b.words*8 }
