package datatype

import (
	"testing"

	"github.com/djx-bpf/djx-bpf/hotspot/vmlayout"
	"github.com/djx-bpf/djx-bpf/sources/decode"
)

var geo = Geometry{vmlayout.Geometry{CompressedClassPointers: true, CompressedOops: true, OopBase: 0, OopShift: 3}}

func entryTable() *Table {
	t := NewTable(geo)
	// java.util.TreeMap$Entry on JDK 17 with compressed oops and class
	// pointers (offsets as Unsafe.objectFieldOffset reports them).
	t.Add(0x800c1000, 0xc1000, "Ljava/util/TreeMap$Entry;", []Field{
		{Offset: 28, Name: "parent", Sig: "Ljava/util/TreeMap$Entry;"},
		{Offset: 12, Name: "color", Sig: "Z"},
		{Offset: 16, Name: "key", Sig: "Ljava/lang/Object;"},
		{Offset: 20, Name: "value", Sig: "Ljava/lang/Object;"},
		{Offset: 24, Name: "left", Sig: "Ljava/util/TreeMap$Entry;"},
		{Offset: 32, Name: "right", Sig: "Ljava/util/TreeMap$Entry;"},
	})
	t.Add(0x800c2000, 0xc2000, "[J", nil)
	return t
}

func TestFieldAt(t *testing.T) {
	tb := entryTable()
	e := tb.ByKlassWord(0x1234_0000_000c1000) // high half: the first field
	if e == nil || e.Name != "java.util.TreeMap$Entry" {
		t.Fatalf("klass word lookup: %+v", e)
	}
	for off, want := range map[uint64]string{0: FieldHeader, 8: FieldHeader, 12: "color", 13: "[+13]", 16: "key", 19: "key", 24: "left", 28: "parent", 32: "right", 36: "[+36]"} {
		if got := tb.FieldAt(e, off); got != want {
			t.Errorf("offset %d: %q, want %q", off, got, want)
		}
	}
	a := tb.BySig("[J")
	if a == nil || a.Name != "long[]" {
		t.Fatalf("array lookup: %+v", a)
	}
	for off, want := range map[uint64]string{8: FieldHeader, 12: FieldLength, 16: "", 4096: ""} {
		if got := tb.FieldAt(a, off); got != want {
			t.Errorf("array offset %d: %q, want %q", off, got, want)
		}
	}
	if tb.ByKlassWord(0xc3000) != nil {
		t.Error("unknown klass found")
	}
}

func TestObject(t *testing.T) {
	var regs decode.Regs
	var hdr [15][2]uint64
	const obj = 0x7_0000_1000
	regs.GPR[6] = obj          // rsi: pt_regs slot 13
	regs.GPR[11] = obj >> 3    // r11 holds the narrow oop: slot 6
	regs.GPR[12] = geo.OopBase // r12: the heap base
	hdr[13] = [2]uint64{1, 0xc1000}
	hdr[6] = [2]uint64{1 | 0x5a5a<<11, 0xc1000}
	h := Headers{OK: 1<<13 | 1<<6, Narrow: 1 << 6, Hdr: &hdr}
	for _, tc := range []struct {
		name string
		res  decode.Result
		ok   bool
	}{
		{"mov 0x18(%rsi)", decode.Result{Base: 6, Index: decode.NoReg, Disp: 0x18}, true},
		{"mov 0x18(%r12,%r11,8)", decode.Result{Base: 12, Index: 11, Scale: 8, Disp: 0x18}, true},
		{"mov 0x18(,%r11,8)", decode.Result{Base: decode.NoReg, Index: 11, Scale: 8, Disp: 0x18}, true},
		{"mov 0x18(%rax): no header read", decode.Result{Base: 0, Index: decode.NoReg, Disp: 0x18}, false},
		{"mov 0x10(%rsi,%r11,4): an element index, not an oop", decode.Result{Base: 6, Index: 11, Scale: 4, Disp: 0x10}, true},
		{"mov 0x10(%rip)", decode.Result{Base: decode.RIP, Index: decode.NoReg}, false},
	} {
		o, _, k, ok := geo.Object(tc.res, &regs, h)
		if ok != tc.ok || ok && (o != obj || k != 0xc1000) {
			t.Errorf("%s: object %#x klass %#x ok %v, want %#x ok %v", tc.name, o, k, ok, uint64(obj), tc.ok)
		}
	}
	// An unlocked mark with bits above the hash is no mark word: the
	// register pointed into an array's data, not at an object.
	hdr[13] = [2]uint64{1 | 1<<50, 0xc1000}
	if _, _, _, ok := geo.Object(decode.Result{Base: 6, Index: decode.NoReg}, &regs, h); ok {
		t.Error("implausible mark accepted")
	}
}

func TestHolds(t *testing.T) {
	tb := entryTable()
	e, a := tb.BySig("Ljava/util/TreeMap$Entry;"), tb.BySig("[J")
	for _, tc := range []struct {
		l    *Layout
		w    uint64
		off  uint64
		want bool
	}{
		{e, 0xc1000, 32, true},
		{e, 0xc1000, 39, true},  // padding up to the 8-byte boundary
		{e, 0xc1000, 40, false}, // the next object
		{a, 10<<32 | 0xc2000, 16 + 79, true},
		{a, 10<<32 | 0xc2000, 16 + 80 + 8, false},
	} {
		if got := tb.Holds(tc.l, tc.w, tc.off); got != tc.want {
			t.Errorf("%s word %#x offset %d: %v, want %v", tc.l.Name, tc.w, tc.off, got, tc.want)
		}
	}
}

// Unscaled compressed oops (a heap below 4 GiB): an oop is the address, and
// C2 may add it as an index to a zero base register.
func TestObjectUnscaled(t *testing.T) {
	g := Geometry{vmlayout.Geometry{CompressedClassPointers: true, CompressedOops: true}}
	var regs decode.Regs
	var hdr [15][2]uint64
	const obj = 0xc000_1000
	regs.GPR[11] = obj // r11: pt_regs slot 6
	regs.GPR[12] = 0   // r12: the heap base
	hdr[6] = [2]uint64{1, 0xc1000}
	h := Headers{OK: 1 << 6, Hdr: &hdr}
	for _, res := range []decode.Result{
		{Base: 12, Index: 11, Scale: 1, Disp: 0x10},
		{Base: 11, Index: decode.NoReg, Disp: 0x10},
	} {
		if o, _, k, ok := g.Object(res, &regs, h); !ok || o != obj || k != 0xc1000 {
			t.Errorf("%+v: object %#x klass %#x ok %v", res, o, k, ok)
		}
	}
}

// A class mirror holds the static fields of its class after its own.
func TestMirrorStatics(t *testing.T) {
	tb := entryTable()
	tb.Add(0x800c3000, 0xc3000, "Ljava/lang/Class;", []Field{{Offset: 12, Name: "cachedConstructor", Sig: "Ljava/lang/reflect/Constructor;"}, {Offset: 16, Name: "name", Sig: "Ljava/lang/String;"}})
	c := tb.BySig("Ljava/lang/Class;")
	if got := tb.FieldAt(c, 16); got != "name" {
		t.Errorf("offset 16: %q", got)
	}
	if got := tb.FieldAt(c, 112); got != FieldStatic || !tb.Holds(c, 0xc3000, 112) {
		t.Errorf("offset 112: %q, holds %v", got, tb.Holds(c, 0xc3000, 112))
	}
}

// Compact object headers (JDK 25, -XX:+UseCompactObjectHeaders): the
// narrow klass is in the mark word's top 22 bits, the fields start at 8,
// an array's length is at 8 and its elements at 12 or 16.
func TestCompactHeaders(t *testing.T) {
	g := Geometry{vmlayout.Geometry{CompressedClassPointers: true, CompressedOops: true, OopShift: 3, CompactHeaders: true, KlassMarkShift: 42}}
	tb := NewTable(g)
	tb.Add(0x6c00_0000+0x3000<<10, 0x3000, "Ljava/util/TreeMap$Entry;", []Field{
		{Offset: 8, Name: "color", Sig: "Z"},
		{Offset: 12, Name: "key", Sig: "Ljava/lang/Object;"},
		{Offset: 16, Name: "value", Sig: "Ljava/lang/Object;"},
		{Offset: 20, Name: "left", Sig: "Ljava/util/TreeMap$Entry;"},
		{Offset: 24, Name: "right", Sig: "Ljava/util/TreeMap$Entry;"},
		{Offset: 28, Name: "parent", Sig: "Ljava/util/TreeMap$Entry;"},
	})
	tb.Add(0x6c00_0000+0x3001<<10, 0x3001, "[J", nil)

	var regs decode.Regs
	var hdr [15][2]uint64
	const obj, arr = 0x7_0000_1000, 0x7_0000_2000
	regs.GPR[6] = obj // rsi: pt_regs slot 13
	regs.GPR[7] = arr // rdi: pt_regs slot 14
	// A mark with a hash and an age: unlocked; the word after it is the
	// first fields'.
	hdr[13] = [2]uint64{0x3000<<42 | 0x1234<<11 | 2<<3 | 1, 0xdead_0001_0000_0000}
	hdr[14] = [2]uint64{0x3001<<42 | 1, 10} // length 10
	h := Headers{OK: 1<<13 | 1<<14, Hdr: &hdr}

	o, _, k, ok := g.Object(decode.Result{Base: 6, Index: decode.NoReg, Disp: 20}, &regs, h)
	e := tb.ByKlassWord(k)
	if !ok || o != obj || e == nil || e.Name != "java.util.TreeMap$Entry" {
		t.Fatalf("entry: object %#x klass word %#x ok %v: %+v", o, k, ok, e)
	}
	for off, want := range map[uint64]string{0: FieldHeader, 7: FieldHeader, 8: "color", 12: "key", 20: "left", 28: "parent"} {
		if got := tb.FieldAt(e, off); got != want {
			t.Errorf("entry offset %d: %q, want %q", off, got, want)
		}
	}
	if !tb.Holds(e, k, 31) || tb.Holds(e, k, 32) {
		t.Errorf("entry extent: 31 %v, 32 %v", tb.Holds(e, k, 31), tb.Holds(e, k, 32))
	}
	o, _, k, ok = g.Object(decode.Result{Base: 7, Index: decode.NoReg, Disp: 16}, &regs, h)
	a := tb.ByKlassWord(k)
	if !ok || o != arr || a == nil || a.Name != "long[]" {
		t.Fatalf("array: object %#x klass word %#x ok %v: %+v", o, k, ok, a)
	}
	for off, want := range map[uint64]string{0: FieldHeader, 8: FieldLength, 16: ""} {
		if got := tb.FieldAt(a, off); got != want {
			t.Errorf("array offset %d: %q, want %q", off, got, want)
		}
	}
	if !tb.Holds(a, k, 16+79) || tb.Holds(a, k, 16+80) {
		t.Errorf("array extent: %v %v", tb.Holds(a, k, 16+79), tb.Holds(a, k, 16+80))
	}
	// A body store past the register's object: Enclosing names it by
	// the header the register points at.
	if o, k, ok := tb.Enclosing(arr+40, &regs, h); !ok || o != arr || tb.ByKlassWord(k) != a {
		t.Errorf("enclosing: %#x %#x %v", o, k, ok)
	}
	// A forwarded mark (lock bits 11) holds an address, not a klass.
	hdr[13][0] = 0x7_0000_9000 | 3
	if _, _, _, ok := g.Object(decode.Result{Base: 6, Index: decode.NoReg, Disp: 20}, &regs, h); ok {
		t.Error("forwarded mark accepted")
	}
	// C2's allocation stores the prototype mark word (movabs, then mov).
	code := []byte{0x48, 0xb8, 1, 0, 0, 0, 0, 0, 0, 0, 0x48, 0x89, 0x06} // movabs $..., %rax; mov %rax, (%rsi)
	proto := uint64(0x3000)<<42 | 1
	for i := range 8 {
		code[2+i] = byte(proto >> (8 * i))
	}
	if w, st := g.AllocKlass(code, 6); st != decode.ScanFound || tb.ByKlassWord(w) != e {
		t.Errorf("allocation's klass word %#x (%v)", w, st)
	}
}
