package heapwalk

// The visited bitmap has one bit per 16 bytes of heap: objects are
// 8-byte aligned and at least 16 bytes long (mark word plus klass), so
// no two start in one 16-byte slot. Its blocks are allocated as objects
// are found in them, so a large, sparsely used reservation costs little.
const (
	slotShift  = 4
	blockShift = 20 // heap bytes a block covers: 1 MiB, 8 KiB of bits
	blockWords = 1 << (blockShift - slotShift - 6)
)

type bitmap struct {
	lo        uint64
	top       []int32 // block index + 1 for each MiB of the span; 0: none yet
	blocks    [][]uint64
	maxBlocks int
}

func newBitmap(lo, hi uint64, maxBytes int) *bitmap {
	n := (hi - lo + 1<<blockShift - 1) >> blockShift
	return &bitmap{lo: lo, top: make([]int32, n), maxBlocks: max(1, maxBytes/(blockWords*8))}
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
		b.blocks = append(b.blocks, make([]uint64, blockWords))
		bi = int32(len(b.blocks))
		b.top[t] = bi
	}
	s := (off & (1<<blockShift - 1)) >> slotShift
	word, bit := &b.blocks[bi-1][s>>6], uint64(1)<<(s&63)
	if *word&bit != 0 {
		return false, true
	}
	*word |= bit
	return true, true
}

// bytes is the memory the bitmap holds.
func (b *bitmap) bytes() int { return len(b.top)*4 + len(b.blocks)*blockWords*8 }
