package decode

import (
	"encoding/hex"
	"strings"
	"testing"
)

func hx(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRegsFromPtRegs(t *testing.T) {
	// pt_regs order: r15 r14 r13 r12 rbp rbx r11 r10 r9 r8 rax rcx rdx rsi rdi orig_rax rip cs eflags rsp ss
	names := []string{"r15", "r14", "r13", "r12", "rbp", "rbx", "r11", "r10", "r9", "r8", "rax", "rcx", "rdx", "rsi", "rdi", "orig_rax", "rip", "cs", "eflags", "rsp", "ss"}
	var p [21]uint64
	val := map[string]uint64{}
	for i, n := range names {
		p[i] = uint64(1000 + i)
		val[n] = p[i]
	}
	r := RegsFromPtRegs(&p)
	enc := []string{"rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi", "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15"}
	for i, n := range enc {
		if r.GPR[i] != val[n] {
			t.Errorf("GPR[%d] (%s) = %d, want %d", i, n, r.GPR[i], val[n])
		}
	}
	if r.IP != val["rip"] {
		t.Errorf("IP = %d, want %d", r.IP, val["rip"])
	}
}

func TestDecodeAtIP(t *testing.T) {
	var r Regs
	for i := range r.GPR {
		r.GPR[i] = 0x10000 * uint64(i+1)
	}
	r.IP = 0x400000
	const (
		rax = 0x10000
		rcx = 0x20000
		rdx = 0x30000
		rsi = 0x70000
		rdi = 0x80000
		r10 = 0xb0000
		r11 = 0xc0000
		r12 = 0xd0000
	)
	tests := []struct {
		name, at string
		want     Result
	}{
		{"mov (%rax,%rcx,8),%rax", "48 8b 04 c8", Result{Addr: rax + rcx*8, Method: AtIP, Size: 8, Store: false}},
		{"mov %r11d,0xc(%r12,%r11,8)", "47 89 5c dc 0c", Result{Addr: r12 + r11*8 + 0xc, Method: AtIP, Size: 4, Store: true}},
		{"mov 0x10(%rip),%rax", "48 8b 05 10 00 00 00", Result{Addr: 0x400000 + 7 + 0x10, Method: AtIP, Size: 8, Store: false}},
		{"movzbl -1(%rsi),%eax", "0f b6 46 ff", Result{Addr: rsi - 1, Method: AtIP, Size: 1, Store: false}},
		{"addr32 mov (%eax),%ecx", "67 8b 08", Result{Addr: rax & 0xffffffff, Method: AtIP, Size: 4, Store: false}},
		{"cmpl $0,0xc(%rsi)", "83 7e 0c 00", Result{Addr: rsi + 0xc, Method: AtIP, Size: 4, Store: false}},
		{"movabs 0x1122334455667788,%eax", "a1 88 77 66 55 44 33 22 11", Result{Addr: 0x1122334455667788, Method: AtIP, Size: 4, Store: false}},
		{"rep movsq", "f3 48 a5", Result{Addr: rsi, Method: AtIP, Size: 8, Store: true}},
		{"rep stosb", "f3 aa", Result{Addr: rdi, Method: AtIP, Size: 1, Store: true}},
		{"prefetcht0 0x40(%rax)", "0f 18 48 40", Result{Addr: rax + 0x40, Method: AtIP, Size: 0, Store: false}},
		{"vmovdqu (%rsi,%rdx,8),%ymm0", "c5 fe 6f 04 d6", Result{Addr: rsi + rdx*8, Method: AtIP, Size: 32, Store: false}},
		{"vmovdqu %ymm0,0x20(%rdi,%rdx,8)", "c5 fe 7f 44 d7 20", Result{Addr: rdi + rdx*8 + 0x20, Method: AtIP, Size: 32, Store: true}},
		{"vpaddd 0x20(%rsi,%rcx,4),%ymm1,%ymm1", "c5 f5 fe 4c 8e 20", Result{Addr: rsi + rcx*4 + 0x20, Method: AtIP, Size: 32, Store: false}},
		// EVEX disp8*N: full vector 64 bytes, 0x07*64 = 0x1c0.
		{"vmovdqu32 0x1c0(%rsi,%r10,8),%zmm0", "62 b1 7e 48 6f 44 d6 07", Result{Addr: rsi + r10*8 + 0x1c0, Method: AtIP, Size: 64, Store: false}},
		// Broadcast: N is the element size.
		{"vpaddd 0x8(%rsi){1to16},%zmm1,%zmm2", "62 f1 75 58 fe 56 02", Result{Addr: rsi + 8, Method: AtIP, Size: 4, Store: false}},
		// EVEX.X extends the GPR index; zmm17 needs R'.
		{"vmovdqu32 0x20(%rax,%r9,1),%ymm17", "62 a1 7e 28 6f 4c 08 01", Result{Addr: rax + 0xa0000 + 0x20, Method: AtIP, Size: 32, Store: false}},
		// T1S scalar: N = 8.
		{"vmovsd 0x8(%rax),%xmm17", "62 e1 ff 08 10 48 01", Result{Addr: rax + 8, Method: AtIP, Size: 8, Store: false}},
		// RIP-relative EVEX: next ip + disp32.
		{"vmovdqu64 0x1f(%rip),%zmm16 (disp32 is not scaled)", "62 e1 fe 48 6f 05 1f 00 00 00", Result{Addr: 0x400000 + 10 + 0x1f, Method: AtIP, Size: 64, Store: false}},
	}
	var d Decoder
	for _, tc := range tests {
		got := d.Decode(nil, hx(t, tc.at), &r)
		if accessOf(got) != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
	// Instructions with no usable address.
	for _, tc := range []struct{ name, at string }{
		{"lea 0x10(%rax,%rcx,8),%rdx", "48 8d 54 c8 10"},
		{"nopw 0x0(%rax,%rax,1)", "66 0f 1f 44 00 00"},
		{"mov %fs:0x28,%rax", "64 48 8b 04 25 28 00 00 00"},
		{"mov %gs:(%rax),%rdx", "65 48 8b 10"},
		{"vpgatherdd %ymm2,(%rax,%ymm1,4),%ymm0", "c4 e2 6d 90 04 88"},
		{"vpgatherdd 0x10(%rax,%zmm1,4),%zmm0{%k1}", "62 f2 7d 49 90 44 88 04"},
		{"vaddph 0x40(%rax),%zmm1,%zmm2 (FP16: N unknown)", "62 f5 74 48 58 50 01"},
		{"push %rbx", "53"},
		{"ret", "c3"},
		{"truncated", "48 8b"},
		{"APX REX2", "d5 10 8b 04 c8"},
		{"empty", ""},
	} {
		if got := d.Decode(nil, hx(t, tc.at), &r); got.Method != None {
			t.Errorf("%s: got %+v, want none", tc.name, got)
		}
	}
}

func TestDecodeLookBack(t *testing.T) {
	var r Regs
	for i := range r.GPR {
		r.GPR[i] = 0x10000 * uint64(i+1)
	}
	r.IP = 0x400000
	pad := "48 89 c3 48 83 c1 01 4c 89 c2 " // mov %rax,%rbx; add $1,%rcx; mov %r8,%rdx
	tests := []struct {
		name, before, at string
		want             Result
	}{
		{"mov 0x10(%rsi),%rax; add %rax,%rbx", pad + "48 8b 46 10", "48 01 c3",
			Result{Addr: 0x70000 + 0x10, Method: LookBack, Size: 8, Store: false}},
		// C2's spilled sum: the store at ip consumes the stalled load-op,
		// so the load wins over the store's own (stack) address.
		{"add 0x10(%r8,%r11,8),%r10; mov %r10,0x48(%rsp)", pad + "4f 03 54 d8 10", "4c 89 54 24 48",
			Result{Addr: 0x90000 + 0xc0000*8 + 0x10, Method: LookBack, Size: 8, Store: false}},
		// The same, as C2 laid it out in GcHot (JDK 17): "48 4f 03 54 d8 10"
		// also decodes, REX.W ignored before REX.WRXB, and made the boundary
		// ambiguous, so 90% of samples took the stack address.
		{"nop; mov 0x48(%rsp),%r10; add 0x10(%r8,%r11,8),%r10; mov %r10,0x48(%rsp)",
			"1f 80 00 00 00 00 4c 8b 54 24 48 4f 03 54 d8 10", "4c 89 54 24 48",
			Result{Addr: 0x90000 + 0xc0000*8 + 0x10, Method: LookBack, Size: 8, Store: false}},
		// C2's MemorySegment.get(JAVA_LONG, off) on a global-arena segment
		// (Temurin 25, SegmentTruth), as sampled: "00 41 8b 68 0c ..."
		// also decodes from the stray 00 as add; push; mov %cs,...; mov
		// (%rdx),%eax, which made the boundary ambiguous for 31% of samples.
		{"mov 0xc(%r8),%ebp; test %ebp,%ebp; jl; mov (%r10),%rax; test %r11d,%r11d",
			"00 41 8b 68 0c 85 ed 0f 8c 8f 01 00 00 49 8b 02", "45 85 db",
			Result{Addr: 0xb0000, Method: LookBack, Size: 8, Store: false}},
		// An access at ip that does not consume the load wins.
		{"mov 0x10(%rsi),%rax; mov 0x8(%rdx),%rcx", pad + "48 8b 46 10", "48 8b 4a 08",
			Result{Addr: 0x30000 + 0x8, Method: AtIP, Size: 8, Store: false}},
		// The ip need not consume the load: the timer lands after the stalled instruction.
		{"mov 0x10(%rsi),%rax; add %rcx,%rbx (independent)", pad + "48 8b 46 10", "48 01 cb", Result{Addr: 0x70000 + 0x10, Method: LookBack, Size: 8}},
		{"mov (%rax),%rax overwrites its base", pad + "48 8b 00", "48 01 c3", Result{}},
		{"mov 0xc(%r12,%r11,8),%r11d overwrites its index", pad + "47 8b 5c dc 0c", "45 85 db", Result{}},
		{"cmp 0xc(%rdx),%eax; jne", pad + "3b 42 0c", "75 10",
			Result{Addr: 0x30000 + 0xc, Method: LookBack, Size: 4, Store: false}},
		{"vmovdqu (%rsi),%ymm0; vpaddd %ymm0,%ymm1,%ymm1", pad + "c5 fe 6f 06", "c5 f5 fe c8",
			Result{Addr: 0x70000, Method: LookBack, Size: 32, Store: false}},
		{"store before: mov %rax,(%rsi); add %rax,%rbx", pad + "48 89 06", "48 01 c3", Result{}},
		{"at ip is a load itself", pad + "48 8b 46 10", "48 8b 03", Result{Addr: 0x40000, Method: AtIP, Size: 8, Store: false}},
		{"no bytes before", "", "48 01 c3", Result{}},
		{"no bytes at ip", pad + "48 8b 46 10", "", Result{}},
	}
	var d Decoder
	for _, tc := range tests {
		got := d.Decode(hx(t, tc.before), hx(t, tc.at), &r)
		if accessOf(got) != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestDecodeAllocs(t *testing.T) {
	var r Regs
	var d Decoder
	before := hx(t, "48 89 c3 48 83 c1 01 4c 89 c2 48 8b 46 10")
	at := hx(t, "48 01 c3")
	evex := hx(t, "62 b1 7e 48 6f 44 d6 07")
	if n := testing.AllocsPerRun(100, func() {
		d.Decode(before, at, &r)
		d.Decode(nil, evex, &r)
	}); n != 0 {
		t.Errorf("Decode allocates %v times per call", n)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte{0x48, 0x89, 0xc3, 0x48, 0x8b, 0x46, 0x10}, []byte{0x48, 0x01, 0xc3})
	f.Add([]byte{}, []byte{0x62, 0xb1, 0x7e, 0x48, 0x6f, 0x44, 0xd6, 0x07})
	f.Add([]byte{0xc4, 0xe2, 0x6d, 0x90, 0x04, 0x88}, []byte{0xc5, 0xfe, 0x6f, 0x04, 0xd6})
	f.Add([]byte{0x67, 0x64, 0xf3, 0x48, 0xa5}, []byte{0x66, 0x2e, 0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, before, at []byte) {
		var d Decoder
		r := testRegs()
		res := d.Decode(before, at, &r)
		if res.Method > LookBack || res.Method == None && res != (Result{}) {
			t.Fatalf("inconsistent result %+v", res)
		}
		var x insn
		if x.decode(at) && (x.n < 1 || x.n > 15 || x.n > len(at)) {
			t.Fatalf("length %d for %x", x.n, at)
		}
	})
}

func BenchmarkDecode(b *testing.B) {
	r := testRegs()
	cases := []struct{ name, before, at string }{
		{"at-ip/legacy", "", "47 8b 5c dc 0c"},
		{"at-ip/evex", "", "62 b1 7e 48 6f 44 d6 07"},
		{"look-back", "48 89 c3 48 83 c1 01 4c 89 c2 48 8b 46 10", "48 01 c3"},
		{"look-back/none", "48 89 c3 48 83 c1 01 4c 89 c2 48 01 cb", "48 01 c3"},
	}
	for _, c := range cases {
		before, at := hx(b, c.before), hx(b, c.at)
		b.Run(c.name, func(b *testing.B) {
			var d Decoder
			b.ReportAllocs()
			for b.Loop() {
				d.Decode(before, at, &r)
			}
		})
	}
}

// accessOf is r without its operand, which the table tests leave out.
func accessOf(r Result) Result {
	return Result{Addr: r.Addr, Method: r.Method, Size: r.Size, Store: r.Store}
}

// The operand names the registers the address came from, for naming the
// object a base register points at.
func TestDecodeOperand(t *testing.T) {
	var r Regs
	r.GPR[6], r.GPR[12], r.GPR[11] = 0x70000, 0xd0000, 0xc0000
	r.IP = 0x400000
	var d Decoder
	for _, tc := range []struct {
		name, before, at string
		base, index      int8
		scale            uint8
		disp             int64
	}{
		{"mov 0x10(%rsi),%rax", "", "48 8b 46 10", 6, NoReg, 0, 0x10},
		{"mov 0xc(%r12,%r11,8),%eax", "", "43 8b 44 dc 0c", 12, 11, 8, 0xc},
		{"mov 0x10(%rip),%rax", "", "48 8b 05 10 00 00 00", RIP, NoReg, 0, 0x10},
		{"look-back mov 0x10(%rsi),%rax; add %rax,%rbx", "90 90 90 90 90 90 90 90 90 90 90 90 48 8b 46 10", "48 01 c3", 6, NoReg, 0, 0x10},
	} {
		got := d.Decode(hx(t, tc.before), hx(t, tc.at), &r)
		if got.Method == None || got.Base != tc.base || got.Index != tc.index || (tc.index != NoReg && got.Scale != tc.scale) || got.Disp != tc.disp {
			t.Errorf("%s: got %+v, want base %d index %d scale %d disp %#x", tc.name, got, tc.base, tc.index, tc.scale, tc.disp)
		}
	}
}
