package heapwalk

import (
	"encoding/binary"
	"testing"
)

// TestZDecode: ZGC's references, colored as each JDK colors them, turn
// into one canonical address; colored nulls into 0.
func TestZDecode(t *testing.T) {
	const mask = 1<<42 - 1
	const off = 0x1234560
	z17 := &zgc{mask: mask, used: 32 << 30}
	z25 := &zgc{mask: mask, used: 32 << 30, generational: true}
	canon := uint64(1<<42 | off)
	for _, tc := range []struct {
		name string
		z    *zgc
		v    uint64
		want uint64
	}{
		{"17 marked0", z17, 1<<42 | off, canon},
		{"17 marked1", z17, 1<<43 | off, canon},
		{"17 remapped", z17, 1<<44 | off, canon},
		{"17 finalizable", z17, 1<<45 | 1<<42 | off, canon},
		{"17 null", z17, 0, 0},
		// Generational: the colorless address shifted by its remapped
		// bit's place plus one, color bits below.
		{"25 remapped01 (shift 15)", z25, canon<<15 | 1<<14 | 0x3f0, canon},
		{"25 remapped00 (shift 13)", z25, canon<<13 | 1<<12 | 0x30, canon},
		{"25 remapped11 (shift 16)", z25, canon<<16 | 1<<15 | 0xff0, canon},
		{"25 colored null", z25, 1<<14 | 0x3f0, 0},
		{"25 two remapped bits", z25, canon<<15 | 3<<13, 1},
		// JNI local handles hold colorless addresses.
		{"25 colorless (a local handle)", z25, canon, canon},
	} {
		if got := tc.z.decode(tc.v); got != tc.want {
			t.Errorf("%s: decode(%#x) = %#x, want %#x", tc.name, tc.v, got, tc.want)
		}
	}
	l := &Layout{z: z17, Heap: []Range{{1 << 42, 1<<42 + 32<<30}}}
	for _, view := range []uint64{1 << 42, 1 << 43, 1 << 44} {
		if a, ok := l.Canonical(view | off); !ok || a != canon {
			t.Errorf("Canonical(%#x) = %#x, %v; want %#x", view|off, a, ok, canon)
		}
	}
	if _, ok := l.Canonical(1<<43 | 33<<30); ok {
		t.Errorf("an address past the reservation is in the heap")
	}
	if n := len(l.Views()); n != 3 {
		t.Errorf("JDK 17 has %d views, want 3", n)
	}
}

// TestZForward: a stale reference into a page with a forwarding is read
// at its forwardee (JDK 17's layout: ZForwarding of 136 bytes, entries
// after it; 25's: _size instead of _end, two tables); one not yet
// forwarded and a good one are read where they point.
func TestZForward(t *testing.T) {
	const mask = 1<<42 - 1
	base := uint64(mask + 1)
	for _, gen := range []bool{false, true} {
		m := newFakeMem()
		put := func(a, v uint64) {
			var b [8]byte
			binary.LittleEndian.PutUint64(b[:], v)
			m.write(a, b[:])
		}
		const used = 64 << 21 // 64 granules
		const mapA, fwdA, maskA, emptyMap = 0x10000, 0x20000, 0x30000, 0x40000
		fl := &zFwdLayout{maps: []uint64{mapA}, maskPtr: maskA, granuleShift: 21, start: 0, end: 8, shift: 16,
			length: 24, entries: 136, sized: gen}
		from := uint64(5 << 21) // the relocated page, granule 5
		pageEnd := uint64(2 << 21)
		if !gen {
			pageEnd += from // _end, not _size
		}
		for i := uint64(0); i < 64; i++ {
			put(mapA+8*i, 0)
			put(emptyMap+8*i, 0)
		}
		put(mapA+8*5, fwdA)
		put(mapA+8*6, fwdA)
		put(fwdA, from)
		put(fwdA+8, pageEnd)
		put(fwdA+16, 3)
		put(fwdA+24, 16) // 16 entries
		for i := uint64(0); i < 16; i++ {
			put(fwdA+136+8*i, 0)
		}
		// Object index 7 moved to offset 0x123450; put it where its hash
		// lands, behind a colliding entry, to probe.
		idx, to := uint64(7), uint64(0x123450)
		cur := uint64(zHash(uint32(idx))) & 15
		put(fwdA+136+8*cur, 99<<46|0x999<<1|1)
		put(fwdA+136+8*((cur+1)&15), idx<<46|to<<1|1)
		z := &zgc{mask: mask, used: used, generational: gen, fwd: fl}
		var good, stale uint64
		if gen {
			// Young's table has none, old's has it. Load good: remapped
			// index 1; the stale pointer's index 3 has young's parity
			// good and old's bad: the old generation moved it.
			fl.maps = []uint64{emptyMap, mapA}
			put(maskA, 1<<13)
			good = (base|from+idx<<3)<<14 | 1<<13
			stale = (base|from+idx<<3)<<16 | 1<<15
		} else {
			put(maskA, base<<1) // good: marked1
			good = base<<1 | from + idx<<3
			stale = base | from + idx<<3 // marked0
		}
		var st Stats
		f := newZForwarder(z, &reader{mem: m, stats: &st}, &st)
		name := map[bool]string{false: "17", true: "25"}[gen]
		if got := f.forward(stale, z.decode(stale)); got != base|to {
			t.Errorf("%s: stale reference read at %#x, want its forwardee %#x", name, got, base|to)
		}
		if got := f.forward(good, z.decode(good)); got != base|from+idx<<3 {
			t.Errorf("%s: good reference read at %#x, want where it points", name, got)
		}
		var other uint64 // index 8: not forwarded yet
		if gen {
			other = (base|from+8<<3)<<16 | 1<<15
		} else {
			other = base | from + 8<<3
		}
		if got := f.forward(other, z.decode(other)); got != base|from+8<<3 {
			t.Errorf("%s: an object not yet relocated read at %#x, want in place", name, got)
		}
		if st.ReadForwarded != 1 {
			t.Errorf("%s: %d read forwarded, want 1", name, st.ReadForwarded)
		}
	}
}
