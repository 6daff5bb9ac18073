package heap

import "testing"

func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		name string
		g    Geometry
		ref  uint32
		want uint64
	}{
		{"unscaled", Geometry{Mode: RefsUnscaled}, 0x80000010, 0x80000010},
		{"zero based 3", Geometry{Mode: RefsZeroBased, Shift: 3}, 0xe0000002, 0x700000010},
		{"zero based 1", Geometry{Mode: RefsZeroBased, Shift: 1}, 0x80000000, 0x100000000},
		{"zero based 4", Geometry{Mode: RefsZeroBased, Shift: 4}, 0xffffffff, 0xffffffff0},
		{"disjoint", Geometry{Mode: RefsDisjointBase, Base: 0x1000000000, Shift: 3}, 0x200002, 0x1001000010},
		{"heap based", Geometry{Mode: RefsHeapBased, Base: 0x900000000, Shift: 3}, 0x40002, 0x900200010},
		{"null stays null", Geometry{Mode: RefsHeapBased, Base: 0x900000000, Shift: 3}, 0, 0},
		{"full", Geometry{Mode: RefsFull}, 0x1234, 0x1234},
	} {
		if got := tc.g.Decode(tc.ref); got != tc.want {
			t.Errorf("%s: Decode(%#x) = %#x, want %#x", tc.name, tc.ref, got, tc.want)
		}
		if tc.g.Mode.Compressed() {
			ref, ok := tc.g.Encode(tc.want)
			if !ok || ref != tc.ref {
				t.Errorf("%s: Encode(%#x) = %#x, %v; want %#x", tc.name, tc.want, ref, ok, tc.ref)
			}
		}
	}
	g := Geometry{Mode: RefsZeroBased, Shift: 3}
	if _, ok := g.Encode(0x700000004); ok {
		t.Error("encoded a misaligned address")
	}
	if _, ok := g.Encode(0x800000000); ok {
		t.Error("encoded an address beyond 32 GiB with shift 3")
	}
	if g.DecodeLimit() != 32*GiB {
		t.Errorf("DecodeLimit = %#x", g.DecodeLimit())
	}
}

func TestClassify(t *testing.T) {
	g := Geometry{
		Reserved: Range{Start: 0x80000000, End: 0x100000000, Name: "heap"},
		Regions: []Range{
			{Start: 0x80000000, End: 0x90000000, Name: "old"},
			{Start: 0xd0000000, End: 0x100000000, Name: "young"},
		},
	}
	for _, tc := range []struct {
		addr uint64
		want string
		ok   bool
	}{
		{0x80000000, "old", true},
		{0x8fffffff, "old", true},
		{0xa0000000, "heap", true}, // reserved, in no region
		{0xffffffff, "young", true},
		{0x100000000, "", false},
		{0x7fffffff, "", false},
	} {
		r, ok := g.Classify(tc.addr)
		if ok != tc.ok || r.Name != tc.want {
			t.Errorf("Classify(%#x) = %q, %v; want %q, %v", tc.addr, r.Name, ok, tc.want, tc.ok)
		}
		if g.Contains(tc.addr) != tc.ok {
			t.Errorf("Contains(%#x) != %v", tc.addr, tc.ok)
		}
	}
	// Without a reservation (ZGC), only regions count.
	z := Geometry{Regions: []Range{{Start: 0x1000, End: 0x2000, Name: "r"}}}
	if !z.Contains(0x1800) || z.Contains(0x2000) {
		t.Error("regions-only classification wrong")
	}
}

func TestValidate(t *testing.T) {
	bad := []Geometry{
		{Reserved: Range{Start: 0x1000, End: 0x2000}, Regions: []Range{{Start: 0x800, End: 0x1800, Name: "x"}}},
		{Mode: RefsUnscaled, Reserved: Range{Start: 0xc0000000, End: 0x140000000}},
		{Mode: RefsZeroBased, Shift: 5},
		{Mode: RefsHeapBased, Base: 0x900000000, Shift: 3, Reserved: Range{Start: 0x800000000, End: 0x900000000}},
	}
	for i, g := range bad {
		if err := g.Validate(); err == nil {
			t.Errorf("case %d: Validate accepted %v", i, g.String())
		}
	}
}
