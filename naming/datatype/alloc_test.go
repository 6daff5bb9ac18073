package datatype

import (
	"encoding/hex"
	"testing"

	"github.com/djx-bpf/djx-bpf/sources/decode"
)

// C2 zeroes a new object's body through a second register: the access's
// base points past the header, and another register holds the start.
func TestEnclosing(t *testing.T) {
	tb := entryTable()
	var regs decode.Regs
	var hdr [15][2]uint64
	const entry, arr = 0x7_0000_1000, 0x7_0000_2000
	regs.GPR[0] = entry       // rax: slot 10
	regs.GPR[10] = entry + 16 // r10: slot 7, past the header
	regs.GPR[3] = arr         // rbx: slot 5, a long[10]
	hdr[10] = [2]uint64{1, 0xc1000}
	hdr[7] = [2]uint64{0, 0} // the body is not yet written
	hdr[5] = [2]uint64{1, 10<<32 | 0xc2000}
	h := Headers{OK: 1<<10 | 1<<7 | 1<<5, Hdr: &hdr}
	for _, tc := range []struct {
		addr, obj uint64
		ok        bool
	}{
		{entry + 16, entry, true},
		{entry + 39, entry, true},
		{entry + 40, 0, false}, // past the TreeMap$Entry
		{arr + 16 + 79, arr, true},
		{arr + 16 + 80, 0, false}, // past the array's length
		{entry - 8, 0, false},
	} {
		o, k, ok := tb.Enclosing(tc.addr, &regs, h)
		if ok != tc.ok || ok && o != tc.obj || ok && tb.ByKlassWord(k) == nil {
			t.Errorf("address %#x: object %#x klass %#x ok %v, want %#x %v", tc.addr, o, k, ok, tc.obj, tc.ok)
		}
	}
	// Without narrow klass words an array's length is not in the words
	// read, so its extent is unknown: no claim.
	wide := NewTable(Geometry{})
	wide.Add(0x800c2000, 0, "[J", nil)
	hdr[5] = [2]uint64{1, 0x800c2000}
	if _, _, ok := wide.Enclosing(arr+16, &regs, Headers{OK: 1 << 5, Hdr: &hdr}); ok {
		t.Error("an array of unknown length claimed an address")
	}
}

// The klass word comes from the store that initialises the header, on the
// bytes of C2's allocation of a java.lang.Long (see decode's
// TestStoredConst), under both klass-word widths.
func TestAllocKlass(t *testing.T) {
	narrow, _ := hex.DecodeString("48c700010000004c8bd04983c210c74008284f04004489600c")
	if k, st := geo.AllocKlass(narrow, 0); st != decode.ScanFound || k != 0x44f28 {
		t.Errorf("narrow: %#x %d", k, st)
	}
	wide, _ := hex.DecodeString("48c7000100000049ba00104000080000004c895008")
	if k, st := (Geometry{}).AllocKlass(wide, 0); st != decode.ScanFound || k != 0x800401000 {
		t.Errorf("wide: %#x %d", k, st)
	}
	if _, st := (Geometry{}).AllocKlass(narrow, 0); st == decode.ScanFound {
		t.Error("a 4-byte klass store taken for a full Klass*")
	}
}
