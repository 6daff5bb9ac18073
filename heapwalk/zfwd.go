package heapwalk

import (
	"encoding/binary"
	"time"
)

// ZGC relocates objects concurrently and heals the references to them
// lazily: until the next marking remaps it, a reference may still name
// an object's old place, where the object is gone once its page was
// relocated and freed. ZGC keeps each relocated page's forwarding (from
// index → to offset) in a forwarding table, a granule map, until the next
// cycle picks its relocation set: a stale reference into a page that has
// a forwarding is read at its forwardee; one not forwarded yet is read
// where it is, whose page ZGC frees only after relocating all of it.
// JDK 17 only: generational ZGC's tables are per generation, which
// vmStructs does not name.

// zFwdLayout is where JDK 17's forwarding table and entries are.
type zFwdLayout struct {
	mapPtr       uint64 // ZGranuleMapForForwarding::_map: ZForwarding*[offset >> granule]
	goodMaskPtr  uint64 // &ZAddressGoodMask
	granuleShift uint64
	start, end   uint64 // ZForwarding::_virtual's _start and _end
	shift        uint64 // ZForwarding::_object_alignment_shift
	length       uint64 // ZForwarding::_entries' _length
	entries      uint64 // the attached entries array: sizeof(ZForwarding) aligned to 8
}

// zFwdNeeds are the entries the forwarding table is read by.
var zFwdNeeds = []string{
	"ZHeap::_forwarding_table", "ZForwardingTable::_map", "ZGranuleMapForForwarding::_map",
	"ZGlobalsForVMStructs::_ZAddressGoodMask", "ZForwarding::_virtual", "ZVirtualMemory::_start",
	"ZVirtualMemory::_end", "ZForwarding::_object_alignment_shift", "ZForwarding::_entries",
	"ZAttachedArrayForForwarding::_length",
}

// readZFwd finds JDK 17's forwarding table; nil (forwarding not read)
// when an entry is missing, as on generational ZGC.
func (l *Layout) readZFwd(v *tableReader, g uint64) *zFwdLayout {
	off := map[string]uint64{}
	for _, n := range zFwdNeeds {
		f, ok := v.tab.FirstField(n)
		if !ok || f.Static {
			return nil
		}
		off[n] = f.Offset
	}
	size, ok := v.tab.Size("ZForwarding")
	if !ok || size == 0 || size > 4096 {
		return nil
	}
	gs, ok := v.tab.LongConst("ZGranuleSizeShift")
	if !ok || gs < 16 || gs > 30 {
		return nil
	}
	tbl := l.collectedHeap + v.field("ZCollectedHeap::_heap") + off["ZHeap::_forwarding_table"] +
		off["ZForwardingTable::_map"] + off["ZGranuleMapForForwarding::_map"]
	f := &zFwdLayout{
		mapPtr:       v.word("ZGranuleMapForForwarding::_map", tbl),
		goodMaskPtr:  v.word("ZGlobalsForVMStructs::_ZAddressGoodMask", g+off["ZGlobalsForVMStructs::_ZAddressGoodMask"]),
		granuleShift: gs,
		start:        off["ZForwarding::_virtual"] + off["ZVirtualMemory::_start"],
		end:          off["ZForwarding::_virtual"] + off["ZVirtualMemory::_end"],
		shift:        off["ZForwarding::_object_alignment_shift"],
		length:       off["ZForwarding::_entries"] + off["ZAttachedArrayForForwarding::_length"],
		entries:      (size + 7) &^ 7,
	}
	if v.err != nil || f.mapPtr == 0 || f.goodMaskPtr == 0 {
		v.err = nil // the walk goes on without forwarding
		return nil
	}
	return f
}

// zFwdRefresh is how long a snapshot of the granule map and the good
// color serves: a new relocation set comes with a new GC cycle, seconds
// apart at the most.
const zFwdRefresh = 20 * time.Millisecond

// zFwdMaxProbes bounds a lookup: the table is half full by design.
const zFwdMaxProbes = 1 << 12

// zForwarder looks stale references up in a walk.
type zForwarder struct {
	z     *zgc
	r     *reader
	stats *Stats
	at    time.Time
	good  uint64   // ZAddressGoodMask when the snapshot was taken
	pages []uint64 // the granule map's [0, used) part
	fwds  map[uint64]*zFwdPage
	buf   []byte
}

// zFwdPage is one forwarding's header.
type zFwdPage struct {
	start, end, shift, length uint64
}

func newZForwarder(z *zgc, r *reader, stats *Stats) *zForwarder {
	if z == nil || z.fwd == nil {
		return nil
	}
	return &zForwarder{z: z, r: r, stats: stats}
}

// refresh takes a new snapshot of the good color and the granule map;
// false when they are unreadable (no forwarding then).
func (f *zForwarder) refresh() bool {
	if !f.at.IsZero() && time.Since(f.at) < zFwdRefresh {
		return f.pages != nil
	}
	f.at = time.Now()
	f.pages = nil
	clear(f.fwds)
	if f.fwds == nil {
		f.fwds = map[uint64]*zFwdPage{}
	}
	var b [8]byte
	if !f.r.readAt(b[:], f.z.fwd.goodMaskPtr) {
		return false
	}
	f.good = binary.LittleEndian.Uint64(b[:])
	n := int(f.z.used >> f.z.fwd.granuleShift)
	if cap(f.buf) < 8*n {
		f.buf = make([]byte, 8*n)
	}
	if !f.r.readAt(f.buf[:8*n], f.z.fwd.mapPtr) {
		return false
	}
	f.pages = make([]uint64, n)
	for i := range f.pages {
		f.pages[i] = binary.LittleEndian.Uint64(f.buf[8*i:])
	}
	return true
}

// forward turns the canonical address a of the reference v into its
// object's forwardee when v is stale and its page was relocated.
func (f *zForwarder) forward(v, a uint64) uint64 {
	z := f.z
	// The remapped view's bit, and the good color: neither is stale. A
	// pointer healed after the relocation started is remapped, one healed
	// by the marking since is remapped before it is colored good.
	if a <= 1 || v&((z.mask+1)<<2) != 0 || !f.refresh() || v&f.good != 0 {
		return a
	}
	off := a & z.mask
	g := off >> z.fwd.granuleShift
	if g >= uint64(len(f.pages)) || f.pages[g] == 0 {
		return a
	}
	p := f.page(f.pages[g])
	if p == nil || off < p.start || off >= p.end {
		return a
	}
	idx := (off - p.start) >> p.shift
	cur := uint64(zHash(uint32(idx))) & (p.length - 1)
	// Linear probing: the entries from the hash on, read 8 at a time.
	var b [64]byte
	for probes := uint64(0); probes < min(p.length, zFwdMaxProbes); {
		n := min(8, p.length-cur)
		if !f.r.readAt(b[:8*n], f.pages[g]+z.fwd.entries+8*cur) {
			return a
		}
		for i := range n {
			e := binary.LittleEndian.Uint64(b[8*i:])
			if e&1 == 0 {
				return a // not relocated yet: the old copy is whole
			}
			if e>>46 == idx {
				f.stats.Forwarded++
				f.stats.ReadForwarded++
				return (e>>1)&(1<<45-1)&z.mask | (z.mask + 1)
			}
		}
		probes += n
		cur = (cur + n) & (p.length - 1)
	}
	return a
}

// page reads (once a snapshot) the header of the forwarding at addr.
func (f *zForwarder) page(addr uint64) *zFwdPage {
	if p, ok := f.fwds[addr]; ok {
		return p
	}
	fl := f.z.fwd
	// The header's words, in one read.
	hi := max(fl.start, fl.end, fl.shift, fl.length) + 8
	var b [256]byte
	if hi > uint64(len(b)) || !f.r.readAt(b[:hi], addr) {
		f.fwds[addr] = nil
		return nil
	}
	word := func(off uint64) uint64 { return binary.LittleEndian.Uint64(b[off:]) }
	p := &zFwdPage{start: word(fl.start), end: word(fl.end), shift: word(fl.shift), length: word(fl.length)}
	if p.end <= p.start || p.shift < 3 || p.shift > 21 || p.length == 0 || p.length&(p.length-1) != 0 || p.length > 1<<24 {
		p = nil
	}
	f.fwds[addr] = p
	return p
}

// zHash is ZHash::uint32_to_uint32, the forwarding entries' hash.
func zHash(key uint32) uint32 {
	key = ^key + key<<15
	key ^= key >> 12
	key += key << 2
	key ^= key >> 4
	key *= 2057
	key ^= key >> 16
	return key
}
