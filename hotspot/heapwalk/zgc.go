package heapwalk

import (
	"fmt"
	"math/bits"

	"github.com/djx-bpf/djx-bpf/hotspot/vmstructs"
)

// ZGC's heap is a reservation in its offset space, [0, ZAddressOffsetMax),
// seen through views: JDK 17's non-generational ZGC maps it three times
// (Marked0, Marked1, Remapped at 1, 2 and 4 << offset bits) and its
// references and registers carry one view's bits (colored); JDK 21+'s
// generational ZGC maps it once, at ZAddressHeapBase (= offset mask + 1),
// where registers hold colorless addresses while references in the heap
// are colored and shifted left by their load shift. The walk reads every
// object at one canonical view, offset | (mask + 1), which both map.

// zNeeds are the entries a ZGC layout reads besides needs.
var zNeeds = []vmstructs.Need{
	vmstructs.NeedStatic("ZGlobalsForVMStructs::_instance_p"),
	vmstructs.NeedField("ZGlobalsForVMStructs::_ZAddressOffsetMask"),
	vmstructs.NeedField("ZCollectedHeap::_heap"),
	vmstructs.NeedField("ZHeap::_page_allocator"),
	vmstructs.NeedField("ZPageAllocator::_max_capacity"),
}

// zColorMasks point at the good masks of JDK 17's ZGC (one) and of
// generational ZGC (load and store).
var zColorMasks = [...]string{
	"ZGlobalsForVMStructs::_ZAddressGoodMask",
	"ZGlobalsForVMStructs::_ZPointerLoadGoodMask",
	"ZGlobalsForVMStructs::_ZPointerStoreGoodMask",
}

// zRemappedShift is the lowest of generational ZGC's four remapped bits
// in a colored pointer (zAddress.hpp): a pointer's load shift is its
// remapped bit's place plus one.
const zRemappedShift = 12

// zVirtualToPhysical is ZVirtualToPhysicalRatio: ZGC reserves this many
// times the heap's max capacity of address space.
const zVirtualToPhysical = 16

// zgc is what a ZGC layout knows of its address space.
type zgc struct {
	mask         uint64 // ZAddressOffsetMask
	generational bool
	used         uint64      // offsets the walk covers: [0, used)
	fwd          *zFwdLayout // the forwarding table; nil: not read (zfwd.go)
	// colorAt are the addresses of ZGC's good masks: they change at each
	// mark and relocation start, which leave _total_collections alone.
	colorAt []uint64
}

// readZ reads ZGC's offset mask (and, generational, its load shift) and
// the heap's max capacity: the heap is [base, base+used) with used the
// reservation, 16 times the max capacity, capped to the walk's span.
func (l *Layout) readZ(v *tableReader) error {
	if err := v.tab.Require(zNeeds...); err != nil {
		return err
	}
	g := v.word("ZGlobalsForVMStructs::_instance_p", v.static("ZGlobalsForVMStructs::_instance_p"))
	maskP := v.word("ZGlobalsForVMStructs::_ZAddressOffsetMask", g+v.field("ZGlobalsForVMStructs::_ZAddressOffsetMask"))
	mask := v.word("ZAddressOffsetMask", maskP)
	pa := l.collectedHeap + v.field("ZCollectedHeap::_heap") + v.field("ZHeap::_page_allocator")
	maxCap := v.word("ZPageAllocator::_max_capacity", pa+v.field("ZPageAllocator::_max_capacity"))
	if v.err != nil {
		return v.err
	}
	if mask&(mask+1) != 0 || mask < 1<<32-1 || mask > 1<<46-1 {
		return fmt.Errorf("%w: offset mask %#x", ErrUnsupported, mask)
	}
	z := &zgc{mask: mask}
	if f, ok := v.tab.FirstField("ZGlobalsForVMStructs::_ZPointerLoadShift"); ok && !f.Static {
		// Generational: check the colored pointer's layout is the one
		// known, by the current load shift and its remapped bit.
		z.generational = true
		shift := v.word("ZPointerLoadShift", v.word("ZGlobalsForVMStructs::_ZPointerLoadShift", g+f.Offset))
		good := uint64(0)
		if gf, ok := v.tab.FirstField("ZGlobalsForVMStructs::_ZPointerLoadGoodMask"); ok && !gf.Static {
			good = v.word("ZPointerLoadGoodMask", v.word("ZGlobalsForVMStructs::_ZPointerLoadGoodMask", g+gf.Offset))
		}
		if v.err != nil {
			return v.err
		}
		if good == 0 || good&(good-1) != 0 || uint64(bits.TrailingZeros64(good))+1 != shift ||
			shift <= zRemappedShift || shift > zRemappedShift+4 {
			return fmt.Errorf("%w: load shift %d with load good mask %#x", ErrUnsupported, shift, good)
		}
	}
	if maxCap == 0 || maxCap > mask {
		return fmt.Errorf("%w: max capacity %d", ErrUnsupported, maxCap)
	}
	z.used = min(maxCap*zVirtualToPhysical, mask+1, maxHeapSpan)
	for _, n := range zColorMasks {
		if f, ok := v.tab.FirstField(n); ok && !f.Static {
			if a := v.word(n, g+f.Offset); v.err == nil && a != 0 {
				z.colorAt = append(z.colorAt, a)
			}
		}
	}
	if v.err != nil {
		return v.err
	}
	z.fwd = l.readZFwd(v, g, z.generational)
	l.z = z
	base := mask + 1
	l.Heap = []Range{{base, base + z.used}}
	return nil
}

// decodeZ turns a ZGC reference (a slot's, or a handle's) into its
// canonical address; 0 for null.
func (z *zgc) decode(v uint64) uint64 {
	if z.generational {
		// JNI local handles hold colorless addresses; colored ones are
		// shifted far above them.
		if v&^z.mask == z.mask+1 {
			return v
		}
		// The null pointer may keep its color bits.
		if v>>(zRemappedShift+4) == 0 {
			return 0
		}
		rm := (v >> zRemappedShift) & 0xf
		if rm == 0 || rm&(rm-1) != 0 {
			return 1 // no one remapped bit: not a pointer, and misaligned
		}
		a := v >> (zRemappedShift + 1 + bits.TrailingZeros64(rm))
		return a&z.mask | (z.mask + 1)
	}
	if v&z.mask == 0 {
		return 0
	}
	return v&z.mask | (z.mask + 1)
}

// DecodeRef turns a reference as the JVM stores it in a field or a
// handle (ZGC: colored, or a local handle's colorless address) into the
// address its object is read at; 0 for null. Under other collectors it
// is v: compressed oops are the caller's.
func (l *Layout) DecodeRef(v uint64) uint64 {
	if l.z == nil {
		return v
	}
	return l.z.decode(v)
}

// ref decodes a reference slot's value v, through ZGC's forwarding
// table where v is stale.
func (w *walker) ref(v uint64) uint64 {
	a := w.l.decodeOop(v)
	if w.zf != nil {
		return w.zf.forward(v, a)
	}
	return a
}

// views are the heap's ranges in each view that maps it.
func (z *zgc) views() []uint64 {
	base := z.mask + 1
	if z.generational {
		return []uint64{base}
	}
	return []uint64{base, base << 1, base << 2}
}

// Views are every range of addresses at which the JVM's registers may
// hold a heap address: JDK 17's ZGC maps its heap three times; other
// collectors have one view, Heap.
func (l *Layout) Views() []Range {
	if l.z == nil {
		return l.Heap
	}
	var out []Range
	for _, b := range l.z.views() {
		out = append(out, Range{b, b + l.z.used})
	}
	return out
}

// Canonical turns an address in one of Views into the address the walk
// knows the object by (ZGC: its canonical view); ok is false for an
// address outside the heap.
func (l *Layout) Canonical(a uint64) (uint64, bool) {
	if l.z == nil {
		_, ok := l.inHeap(a, 0)
		return a, ok
	}
	for _, b := range l.z.views() {
		if a >= b && a-b < l.z.used {
			return a - b + l.z.mask + 1, true
		}
	}
	return a, false
}
