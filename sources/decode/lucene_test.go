package decode

import "testing"

// Samples of bench/services/LuceneService.java (JDK 17, C2 and libjvm),
// their 64 bytes before ip as the sampling program reads them. With only
// the last 16 the instruction ending at ip was ambiguous.
const (
	// libjvm: `mov (%r10),%r9` ends at ip, `mov %r9,%r11` at ip.
	luceneLibjvmBefore = "bcc848d3e8034da84883e801894da8488945a0498b451085c90f84b0000000488d3c8d000000004c8d0c0f49c1e1054c01c84c8b48084d8b14114d01f24d8b0a"
	luceneLibjvmAt     = "4d89cb4d21e34d891a4c85cb74038328"
	// StandardTokenizerImpl.getNextToken: `movabs $0xc035afc0,%r10; mov
	// 0x10(%r10,%r9,4),%r10d` (a static final int[]) ends at ip, `mov
	// %r10d,%ebp` at ip.
	luceneTableBefore = "d1488bd94c63ce4d03d149b9c8b035c000000000478b4c91104183f9ff0f841fffffff45894d104183f93d0f83f602000049bac0af35c000000000478b548a10"
	luceneTableAt     = "418bea83e50185ed0f846d03000041f7"
)

func TestLuceneLongWindow(t *testing.T) {
	var d Decoder
	r := testRegs()
	r.IP = 0x7fe7df5f207d
	before, at := hx(t, luceneLibjvmBefore), hx(t, luceneLibjvmAt)
	if got := d.Decode(before[len(before)-16:], at, &r); got.Method != None {
		t.Errorf("libjvm, 16 bytes: %+v, want none (ambiguous)", got)
	}
	if c := d.Why(before[len(before)-16:], at, &r); c != CauseNoBoundary {
		t.Errorf("libjvm, 16 bytes: %v, want no-boundary", c)
	}
	got := d.Decode(before, at, &r)
	if got.Method != LookBack || got.Addr != r.GPR[10] || got.Base != 10 || got.Size != 8 {
		t.Errorf("libjvm, 64 bytes: %+v, want look-back at r10 %#x", got, r.GPR[10])
	}

	r.IP = 0x7fe7c8f05681
	before, at = hx(t, luceneTableBefore), hx(t, luceneTableAt)
	if got := d.Decode(before[len(before)-16:], at, &r); got.Method != None {
		t.Errorf("table, 16 bytes: %+v, want none (ambiguous)", got)
	}
	want := 0xc035afc0 + r.GPR[9]*4 + 0x10
	got = d.Decode(before, at, &r)
	if got.Method != LookBack || got.Addr != want || got.Base != NoReg || got.Index != 9 || got.Size != 4 {
		t.Errorf("table, 64 bytes: %+v, want look-back at %#x through the movabs constant", got, want)
	}
	if c := d.Why(before, at, &r); c != CauseAddress {
		t.Errorf("table, 64 bytes: %v", c)
	}
}

// The base a load overwrote is known only from a constant the
// instruction just before put in that very register.
func TestConstBaseOnlyFromImmediate(t *testing.T) {
	var d Decoder
	r := testRegs()
	r.IP = 0x7fe7c8f05681
	tbl := hx(t, luceneTableBefore)
	at := hx(t, luceneTableAt)
	movabs := len(tbl) - 15 // movabs $0xc035afc0,%r10 (10 bytes), then the 5-byte load
	for _, c := range []struct{ name, insn string }{
		{"register copy: mov %r8,%r10; nopl 0x0(%rax)", "4d 8b d0 0f 1f 80 00 00 00 00"},
		{"movabs to another register: movabs $0xc035afc0,%r11", "49 bb c0 af 35 c0 00 00 00 00"},
	} {
		b := append([]byte(nil), tbl...)
		copy(b[movabs:], hx(t, c.insn))
		if got := d.Decode(b, at, &r); got.Method != None {
			t.Errorf("%s: %+v, want none", c.name, got)
		}
		if w := d.Why(b, at, &r); w != CauseBaseClobbered {
			t.Errorf("%s: %v, want base-clobbered", c.name, w)
		}
	}
	// mov $imm32,%r10d zero-extends: a 4-byte nop, then `41 ba imm32`.
	b := append([]byte(nil), tbl...)
	copy(b[movabs:], hx(t, "0f 1f 40 00 41 ba c0 af 35 c0"))
	want := 0xc035afc0 + r.GPR[9]*4 + 0x10
	if got := d.Decode(b, at, &r); got.Method != LookBack || got.Addr != want {
		t.Errorf("mov $imm32,%%r10d: %+v, want %#x", got, want)
	}
}
