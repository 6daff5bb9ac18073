package decode

import "testing"

func TestWhy(t *testing.T) {
	r := testRegs()
	r.IP = 0x7f0000001000
	var d Decoder
	for _, c := range []struct {
		name, before, at string
		want             Cause
	}{
		{"base result", "41 83 c5 05 4d 63 d2 4e 8b 14 17", "49 0f ca", CauseAddress},
		{"heap base index clobbered", "4d 63 d2 4f 8b 5c dc 10", "4c 01 d8", CauseIndexClobbered},
		{"base clobbered", "41 83 c5 05 4d 63 d2 4d 8b 14 3a", "49 0f ca", CauseBaseClobbered},
		{"segment register move misread", "00 41 8b 68 0c 85 ed 0f 8c 8f 01 00 00 49 8b 02", "45 85 db", CauseAddress},
		{"arithmetic: shr; mov %eax,%r8d", "49 69 c0 00 00 1a 00 48 c1 e8 18", "44 8b c0", CauseNoMemory},
		{"store before ip", "41 83 c5 05 4d 63 d2 4a 89 04 17", "48 83 c0 01", CauseNotLoad},
		{"fs access at ip", "41 83 c5 05", "64 48 8b 04 25 28 00 00 00", CauseUncomputable},
		{"unreadable", "41 83 c5 05", "", CauseNoBytes},
	} {
		if got := d.Why(hx(t, c.before), hx(t, c.at), &r); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// WhyPrevious ignores the instruction at ip: the ZGC barrier's access.
func TestWhyPrevious(t *testing.T) {
	r := testRegs()
	r.IP = 0x7f0000001000
	var d Decoder
	if got := d.WhyPrevious(hx(t, "41 83 c5 05 4d 63 d2 4d 8b 14 3a"), &r); got != CauseBaseClobbered {
		t.Errorf("base clobbered: %v", got)
	}
	if got := d.WhyPrevious(hx(t, "90 90 90 90 4c 8b 53 10"), &r); got != CauseAddress {
		t.Errorf("load: %v", got)
	}
}
