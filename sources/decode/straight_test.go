package decode

import "testing"

// A method: the load, two instructions that leave rbx alone, ip, ret.
//
//	0: mov 0x10(%rbx),%r10
//	4: add $0x1,%r11d
//	8: mov %r10,%r8
//	b: add %r11d,%r8d   <- ip
//	e: ret
const straightMethod = "4c 8b 53 10 41 83 c3 01 4d 89 d0 45 01 d8 c3"

func TestStraight(t *testing.T) {
	const start = 0x7f0000100000
	r := testRegs()
	r.IP = start + 0xb
	for _, c := range []struct {
		name string
		code string
		want Method
	}{
		{"straight", straightMethod, Straight},
		{"a branch back into the middle (jmp to 8)", straightMethod + " eb f7", None},
		{"a branch to ip itself (jmp to b)", straightMethod + " eb fa", None},
		{"a branch to the load itself (jmp to 0)", straightMethod + " eb ef", Straight},
		{"an indirect jump in the method", straightMethod + " 41 ff e2", None},
		{"the base written between (add $0x1,%rbx)", "4c 8b 53 10 48 83 c3 01 4d 89 d0 45 01 d8 c3", None},
		{"a call between", "4c 8b 53 10 e8 00 00 00 00 4d 89 d0 45 01 d8 c3", None},
		{"a store between (mov %r11d,0x8(%rsp))", "4c 8b 53 10 44 89 5c 24 08 45 01 d8 c3", None},
		{"the load overwrote its base (mov 0x10(%rbx),%rbx)", "48 8b 5b 10 41 83 c3 01 4d 89 d0 45 01 d8 c3", None},
	} {
		code := NewCode(start, hx(t, c.code))
		r := r
		if c.name == "a call between" || c.name == "a store between (mov %r11d,0x8(%rsp))" {
			r.IP = start + uint64(len(hx(t, c.code))) - 4 // the add before ret
		}
		got := code.Straight(&r)
		if got.Method != c.want {
			t.Errorf("%s: %+v, want %v", c.name, got, c.want)
			continue
		}
		if c.want == Straight && (got.Addr != r.GPR[3]+0x10 || got.Size != 8) {
			t.Errorf("%s: %+v, want rbx+0x10 %#x", c.name, got, r.GPR[3]+0x10)
		}
	}
	// ip not on an instruction boundary of the method.
	code := NewCode(start, hx(t, straightMethod))
	r.IP = start + 0xc
	if got := code.Straight(&r); got.Method != None {
		t.Errorf("ip inside an instruction: %+v", got)
	}
	if !code.Holds(start+0xb, hx(t, "aa bb 4c 8b 53 10 41 83 c3 01 4d 89 d0"), hx(t, "45 01 d8 c3 90 90")) {
		t.Error("Holds: the method's bytes around ip, before reaching past its start")
	}
	if code.Holds(start+0xb, hx(t, "4d 89 d1"), hx(t, "45 01 d8")) {
		t.Error("Holds: other bytes before ip")
	}
}
