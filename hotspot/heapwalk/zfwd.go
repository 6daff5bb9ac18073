package heapwalk

import (
	"math/bits"
	"slices"
	"time"
)

// ZGC relocates objects concurrently and heals the references to them
// lazily: until a later marking remaps it, a reference may still name an
// object's old place, where the object is gone once its page was
// relocated and freed. ZGC keeps each relocated page's forwarding (from
// index → to offset) in a forwarding table, a granule map, until its next
// relocation set is picked: a stale reference into a page that has a
// forwarding is read at its forwardee; one not forwarded yet is read where
// it is, as ZGC frees a page only after relocating all of it. JDK 17 has
// one table (ZHeap::_forwarding_table); generational ZGC one per
// generation, found in ZHeap by their page allocator and page table
// pointers (ZGeneration: _id, _page_allocator, _page_table,
// _forwarding_table), which vmStructs does not name.

// zFwdLayout is where the forwarding tables and their entries are.
type zFwdLayout struct {
	maps         []uint64 // each table's ZForwarding*[offset >> granule]: 17's one; 21+'s young, old
	maskPtr      uint64   // &ZAddressGoodMask (17), &ZPointerLoadGoodMask (21+)
	granuleShift uint64
	start, end   uint64 // ZForwarding::_virtual's _start, and _end (17) or _size (21+)
	sized        bool   // end is _size
	shift        uint64 // ZForwarding::_object_alignment_shift
	length       uint64 // ZForwarding::_entries' _length
	entries      uint64 // the attached entries array: sizeof(ZForwarding) aligned to 8
}

// zFwdNeeds are the entries every forwarding table is read by.
var zFwdNeeds = []string{
	"ZForwardingTable::_map", "ZGranuleMapForForwarding::_map", "ZForwarding::_virtual",
	"ZVirtualMemory::_start", "ZForwarding::_object_alignment_shift", "ZForwarding::_entries",
	"ZAttachedArrayForForwarding::_length",
}

// readZFwd finds the forwarding tables; nil (forwarding not read) when
// an entry is missing or they are not where they should be.
func (l *Layout) readZFwd(v *tableReader, g uint64, generational bool) *zFwdLayout {
	off := map[string]uint64{}
	field := func(n string) bool {
		f, ok := v.tab.FirstField(n)
		off[n] = f.Offset
		return ok && !f.Static
	}
	for _, n := range zFwdNeeds {
		if !field(n) {
			return nil
		}
	}
	size, ok := v.tab.Size("ZForwarding")
	gs, ok2 := v.tab.LongConst("ZGranuleSizeShift")
	if !ok || !ok2 || size == 0 || size > 4096 || gs < 16 || gs > 30 {
		return nil
	}
	f := &zFwdLayout{
		granuleShift: gs,
		start:        off["ZForwarding::_virtual"] + off["ZVirtualMemory::_start"],
		shift:        off["ZForwarding::_object_alignment_shift"],
		length:       off["ZForwarding::_entries"] + off["ZAttachedArrayForForwarding::_length"],
		entries:      (size + 7) &^ 7,
		sized:        generational,
	}
	heap := l.collectedHeap + v.field("ZCollectedHeap::_heap")
	inMap := off["ZForwardingTable::_map"] + off["ZGranuleMapForForwarding::_map"]
	if !generational {
		if !field("ZVirtualMemory::_end") || !field("ZHeap::_forwarding_table") || !field("ZGlobalsForVMStructs::_ZAddressGoodMask") {
			return nil
		}
		f.end = off["ZForwarding::_virtual"] + off["ZVirtualMemory::_end"]
		f.maps = []uint64{v.word("ZGranuleMapForForwarding::_map", heap+off["ZHeap::_forwarding_table"]+inMap)}
		f.maskPtr = v.word("ZGlobalsForVMStructs::_ZAddressGoodMask", g+off["ZGlobalsForVMStructs::_ZAddressGoodMask"])
	} else {
		if !field("ZVirtualMemory::_size") || !field("ZGlobalsForVMStructs::_ZPointerLoadGoodMask") {
			return nil
		}
		f.end = off["ZForwarding::_virtual"] + off["ZVirtualMemory::_size"]
		f.maskPtr = v.word("ZGlobalsForVMStructs::_ZPointerLoadGoodMask", g+off["ZGlobalsForVMStructs::_ZPointerLoadGoodMask"])
		f.maps = l.zGenerationMaps(v, heap, inMap)
	}
	if v.err != nil || f.maskPtr == 0 || len(f.maps) == 0 || slices.Contains(f.maps, 0) {
		v.err = nil // the walk goes on without forwarding
		return nil
	}
	return f
}

// zGenerationMaps finds generational ZGC's two ZGeneration objects in
// ZHeap, each the words (id, &ZHeap::_page_allocator, &ZHeap::_page_table)
// followed by its forwarding table, and returns the tables' maps, young's
// (id 0) then old's.
func (l *Layout) zGenerationMaps(v *tableReader, heap, inMap uint64) []uint64 {
	pa, ok1 := v.tab.FirstField("ZHeap::_page_allocator")
	pt, ok2 := v.tab.FirstField("ZHeap::_page_table")
	size, ok3 := v.tab.Size("ZHeap")
	if !ok1 || !ok2 || !ok3 || size > 1<<16 {
		return nil
	}
	buf := make([]byte, size)
	if !v.r.readAt(buf, heap) {
		return nil
	}
	maps := make([]uint64, 2)
	found := 0
	for o := uint64(0); o+24+inMap+8 <= size; o += 8 {
		id := le64(buf[o:]) & 0xffffffff
		if id > 1 || le64(buf[o+8:]) != heap+pa.Offset || le64(buf[o+16:]) != heap+pt.Offset || maps[id] != 0 {
			continue
		}
		maps[id] = le64(buf[o+24+inMap:])
		found++
	}
	if found != 2 {
		return nil
	}
	return maps
}

// zFwdRefresh is how long a snapshot of the granule maps and the colors
// serves: a new relocation set comes with a new GC cycle.
const zFwdRefresh = 20 * time.Millisecond

// zFwdMaxProbes bounds a lookup: the table is half full by design.
const zFwdMaxProbes = 1 << 12

// zForwarder looks stale references up in a walk.
type zForwarder struct {
	z     *zgc
	r     *reader
	stats *Stats
	at    time.Time
	mask  uint64     // the good (17) or load good (21+) mask when the snapshot was taken
	pages [][]uint64 // each granule map's [0, used) part
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

// refresh takes a new snapshot of the colors and the granule maps;
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
	if !f.r.readAt(b[:], f.z.fwd.maskPtr) {
		return false
	}
	f.mask = le64(b[:])
	n := int(f.z.used >> f.z.fwd.granuleShift)
	if cap(f.buf) < 8*n {
		f.buf = make([]byte, 8*n)
	}
	var pages [][]uint64
	for _, m := range f.z.fwd.maps {
		if !f.r.readAt(f.buf[:8*n], m) {
			return false
		}
		p := make([]uint64, n)
		for i := range p {
			p[i] = le64(f.buf[8*i:])
		}
		pages = append(pages, p)
	}
	f.pages = pages
	return true
}

// stale says whether the reference v may name an object's old place.
func (f *zForwarder) stale(v uint64) bool {
	if f.z.generational {
		return v&f.mask == 0 // not load good: another remapped bit
	}
	// Neither remapped nor of the good color: a pointer healed after the
	// relocation started is remapped, one healed by the marking since is
	// remapped before it is colored good.
	return v&((f.z.mask+1)<<2) == 0 && v&f.mask == 0
}

// forward turns the canonical address a of the reference v into its
// object's forwardee when v is stale and its page was relocated.
func (f *zForwarder) forward(v, a uint64) uint64 {
	if a <= 1 || !f.refresh() || !f.stale(v) {
		return a
	}
	z := f.z
	off := a & z.mask
	g := off >> z.fwd.granuleShift
	for _, t := range f.tables(v, g) {
		pages := f.pages[t]
		if g >= uint64(len(pages)) || pages[g] == 0 {
			continue
		}
		p := f.page(pages[g])
		if p == nil || off < p.start || off >= p.end {
			continue
		}
		to, ok := f.lookup(pages[g], p, (off-p.start)>>p.shift)
		if !ok {
			return a // not relocated yet: the old copy is whole
		}
		f.stats.Forwarded++
		f.stats.ReadForwarded++
		return to&z.mask | (z.mask + 1)
	}
	return a
}

// tables are the forwarding tables a stale v is remapped by, as ZGC's
// remap_generation picks them: a pointer whose old half of the remapped
// color is good was relocated by the young generation, one whose young
// half is good by the old; one bad in both by the young one if its page
// has a young forwarding, else the old. The remapped colors are four
// bits (zAddress.hpp): young's parity their index's bit 0, old's bit 1.
func (f *zForwarder) tables(v, g uint64) []int {
	if !f.z.generational {
		return []int{0}
	}
	rm := bits.TrailingZeros64((v >> zRemappedShift) & 0xf)
	good := bits.TrailingZeros64((f.mask >> zRemappedShift) & 0xf)
	switch {
	case rm>>1 == good>>1:
		return []int{0}
	case rm&1 == good&1:
		return []int{1}
	case g < uint64(len(f.pages[0])) && f.pages[0][g] != 0:
		return []int{0}
	}
	return []int{1}
}

// lookup finds from index idx in the forwarding at addr (ZForwarding::find:
// linear probing from the hash, the entries read 8 at a time): its
// to-offset, or false when it has none.
func (f *zForwarder) lookup(addr uint64, p *zFwdPage, idx uint64) (uint64, bool) {
	cur := uint64(zHash(uint32(idx))) & (p.length - 1)
	var b [64]byte
	for probes := uint64(0); probes < min(p.length, zFwdMaxProbes); {
		n := min(8, p.length-cur)
		if !f.r.readAt(b[:8*n], addr+f.z.fwd.entries+8*cur) {
			return 0, false
		}
		for i := range n {
			// Populated bit 0, to-offset bits 1-45, from-index 46-63.
			e := le64(b[8*i:])
			if e&1 == 0 {
				return 0, false
			}
			if e>>46 == idx {
				return (e >> 1) & (1<<45 - 1), true
			}
		}
		probes += n
		cur = (cur + n) & (p.length - 1)
	}
	return 0, false
}

// page reads (once a snapshot) the header of the forwarding at addr.
func (f *zForwarder) page(addr uint64) *zFwdPage {
	if p, ok := f.fwds[addr]; ok {
		return p
	}
	fl := f.z.fwd
	hi := max(fl.start, fl.end, fl.shift, fl.length) + 8
	var b [256]byte
	if hi > uint64(len(b)) || !f.r.readAt(b[:hi], addr) {
		f.fwds[addr] = nil
		return nil
	}
	p := &zFwdPage{start: le64(b[fl.start:]), end: le64(b[fl.end:]), shift: le64(b[fl.shift:]), length: le64(b[fl.length:])}
	if fl.sized {
		p.end += p.start
	}
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
