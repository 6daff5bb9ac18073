package heapwalk

import "testing"

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
