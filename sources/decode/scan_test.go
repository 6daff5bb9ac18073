package decode

import (
	"encoding/hex"
	"testing"
)

// C2's allocation of a java.lang.Long on JDK 17 (AVX-512 host), as llvm-mc
// disassembles it:
//
//	movq $1, (%rax)           mark word
//	movq %rax, %r10
//	addq $16, %r10
//	movl $0x44f28, 8(%rax)    narrow klass
//	movl %r12d, 12(%rax)
//	vpxor %ymm0, %ymm0, %ymm0
//	vmovq %xmm0, (%r10)       zero the body
const longAlloc = "48c70001000000" + "4c8bd0" + "4983c210" + "c74008284f0400" + "4489600c" + "c5fdefc0" + "c4c179d602"

func TestStoredConst(t *testing.T) {
	hx := func(s string) []byte {
		b, err := hex.DecodeString(s)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	const rax, r10 = 0, 10
	cases := []struct {
		name string
		code string
		base int8
		size int
		want uint64
		st   Scan
	}{
		{"from the mark store", longAlloc, rax, 4, 0x44f28, ScanFound},
		{"at the klass store", longAlloc[28:], rax, 4, 0x44f28, ScanFound},
		{"another base", longAlloc, r10, 4, 0, ScanStopped}, // addq writes r10 first
		{"cut short", longAlloc[:24], rax, 4, 0, ScanShort},
		{"wrong width", longAlloc, rax, 8, 0, ScanStopped},
		// addq $16, %rax: rax no longer holds the object.
		{"base written", "4883c010" + "c74008284f0400", rax, 4, 0, ScanStopped},
		{"branch first", "eb07" + "c74008284f0400", rax, 4, 0, ScanStopped},
		// movabsq $0x1122334455667788, %r10; movq %r10, 8(%rax): a full Klass*.
		{"movabs", "49ba8877665544332211" + "4c895008", rax, 8, 0x1122334455667788, ScanFound},
		// movabsq ..., %r10; addq $16, %r10; movq %r10, 8(%rax)
		{"movabs clobbered", "49ba8877665544332211" + "4983c210" + "4c895008", rax, 8, 0, ScanStopped},
		// Integer.valueOf on JDK 17 (testdata/jit.txt): the TLAB bump's
		// jae to the slow path comes before the header stores.
		{"slow-path branch", "498b8708010000" + "4c8bd0" + "4983c210" + "4d3b9718010000" + "7366" + "4d899708010000", rax, 4, 0, ScanStopped},
	}
	for _, c := range cases {
		v, st := StoredConst(hx(c.code), c.base, 8, c.size)
		if v != c.want || st != c.st {
			t.Errorf("%s: got %#x %d, want %#x %d", c.name, v, st, c.want, c.st)
		}
	}
}
