package vmstructs

import (
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/djx-bpf/djx-bpf/internal/testenv"
)

// imgBase is where a built image lies in the fake address space. Its first
// words are the symbols, in SymbolNames order: FuzzRead reads any bytes
// that way.
const imgBase = 0x10000

type named[V any] struct {
	name string
	v    V
}

// tables are the contents of a hand-built image.
type tables struct {
	fields  []Field
	types   []Type
	ints    []named[int32]
	longs   []named[uint64]
	release string // when set, Abstract_VM_Version::_s_vm_release points to it
}

// image is tables laid out as libjvm lays them out, with HotSpot's
// standard entry layouts.
type image struct {
	buf []byte
	at  map[string]int // offset in buf of each symbol's word, and of "structs", "types", "ints", "longs"
}

func (im *image) mem() *fixture { return &fixture{Segments: []segment{{imgBase, im.buf}}} }

func imageSymbols() Symbols {
	s := Symbols{Lib: "libjvm.so", Base: imgBase, Addrs: map[string]uint64{}}
	for i, n := range SymbolNames {
		s.Addrs[n] = imgBase + 8*uint64(i)
	}
	return s
}

func (im *image) put64(off int, v uint64) { binary.LittleEndian.PutUint64(im.buf[off:], v) }

// entry returns the offset of entry i of table ("structs", ...).
func (im *image) entry(table string, i int) int {
	stride := map[string]int{"structs": 48, "types": 40, "ints": 16, "longs": 16}[table]
	return im.at[table] + i*stride
}

func (tb tables) image() *image {
	im := &image{at: map[string]int{}}
	fields := slices.Clone(tb.fields)
	const releaseWord = 0x100
	if tb.release != "" {
		fields = append(fields, Field{Type: "Abstract_VM_Version", Name: "_s_vm_release", TypeString: "const char*",
			Static: true, Address: imgBase + releaseWord})
	}
	off := 0x200
	im.at["structs"], off = off, off+48*(len(fields)+1)
	im.at["types"], off = off, off+40*(len(tb.types)+1)
	im.at["ints"], off = off, off+16*(len(tb.ints)+1)
	im.at["longs"], off = off, off+16*(len(tb.longs)+1)
	strs := map[string]uint64{}
	var area []byte
	str := func(s string) uint64 {
		if s == "" {
			return 0
		}
		if a, ok := strs[s]; ok {
			return a
		}
		a := imgBase + uint64(off+len(area))
		strs[s] = a
		area = append(append(area, s...), 0)
		return a
	}
	var words []func()
	put := func(o int, v uint64) { words = append(words, func() { im.put64(o, v) }) }
	put4 := func(o int, v uint32) {
		words = append(words, func() { binary.LittleEndian.PutUint32(im.buf[o:], v) })
	}
	b2u := func(b bool) uint32 {
		if b {
			return 1
		}
		return 0
	}
	for i, f := range fields {
		e := im.at["structs"] + 48*i
		put(e, str(f.Type))
		put(e+8, str(f.Name))
		put(e+16, str(f.TypeString))
		put4(e+24, b2u(f.Static))
		put(e+32, f.Offset)
		put(e+40, f.Address)
	}
	for i, ty := range tb.types {
		e := im.at["types"] + 40*i
		put(e, str(ty.Name))
		put(e+8, str(ty.Superclass))
		put4(e+16, b2u(ty.Oop))
		put4(e+20, b2u(ty.Integer))
		put4(e+24, b2u(ty.Unsigned))
		put(e+32, ty.Size)
	}
	for i, c := range tb.ints {
		e := im.at["ints"] + 16*i
		put(e, str(c.name))
		put4(e+8, uint32(c.v))
	}
	for i, c := range tb.longs {
		e := im.at["longs"] + 16*i
		put(e, str(c.name))
		put(e+8, c.v)
	}
	if tb.release != "" {
		put(releaseWord, str(tb.release))
	}
	im.buf = make([]byte, off+len(area))
	copy(im.buf[off:], area)
	for _, w := range words {
		w()
	}
	vals := map[string]uint64{
		"gHotSpotVMStructs": imgBase + uint64(im.at["structs"]), "gHotSpotVMStructEntryArrayStride": 48,
		"gHotSpotVMStructEntryTypeNameOffset": 0, "gHotSpotVMStructEntryFieldNameOffset": 8,
		"gHotSpotVMStructEntryTypeStringOffset": 16, "gHotSpotVMStructEntryIsStaticOffset": 24,
		"gHotSpotVMStructEntryOffsetOffset": 32, "gHotSpotVMStructEntryAddressOffset": 40,
		"gHotSpotVMTypes": imgBase + uint64(im.at["types"]), "gHotSpotVMTypeEntryArrayStride": 40,
		"gHotSpotVMTypeEntryTypeNameOffset": 0, "gHotSpotVMTypeEntrySuperclassNameOffset": 8,
		"gHotSpotVMTypeEntryIsOopTypeOffset": 16, "gHotSpotVMTypeEntryIsIntegerTypeOffset": 20,
		"gHotSpotVMTypeEntryIsUnsignedOffset": 24, "gHotSpotVMTypeEntrySizeOffset": 32,
		"gHotSpotVMIntConstants": imgBase + uint64(im.at["ints"]), "gHotSpotVMIntConstantEntryArrayStride": 16,
		"gHotSpotVMIntConstantEntryNameOffset": 0, "gHotSpotVMIntConstantEntryValueOffset": 8,
		"gHotSpotVMLongConstants": imgBase + uint64(im.at["longs"]), "gHotSpotVMLongConstantEntryArrayStride": 16,
		"gHotSpotVMLongConstantEntryNameOffset": 0, "gHotSpotVMLongConstantEntryValueOffset": 8,
	}
	for i, n := range SymbolNames {
		im.at[n] = 8 * i
		im.put64(8*i, vals[n])
	}
	return im
}

// smallTables is a few entries of each kind, as JDK 17 has them.
func smallTables() tables {
	return tables{
		fields: []Field{
			{Type: "Klass", Name: "_layout_helper", TypeString: "jint", Offset: 8},
			{Type: "oopDesc", Name: "_metadata._compressed_klass", TypeString: "narrowKlass", Offset: 8},
			{Type: "Universe", Name: "_collectedHeap", TypeString: "CollectedHeap*", Static: true, Address: 0x7f0012345678},
			{Type: "Array<u1>", Name: "_data", Offset: 4}, // unchecked: no type string
		},
		types: []Type{
			{Name: "Klass", Superclass: "Metadata", Size: 208},
			{Name: "jint", Integer: true, Size: 4},
			{Name: "juint", Integer: true, Unsigned: true, Size: 4},
			{Name: "oop", Oop: true, Size: 8},
		},
		ints:    []named[int32]{{"oopSize", 8}, {"Klass::_lh_array_tag_obj_value", -2}},
		longs:   []named[uint64]{{"markWord::hash_mask_in_place", 0x3fffffff800}},
		release: "17.0.99+1-test",
	}
}

func TestReadBuilt(t *testing.T) {
	tb := smallTables()
	tab, err := Read(tb.image().mem(), imageSymbols())
	if err != nil {
		t.Fatal(err)
	}
	wantFields := append(slices.Clone(tb.fields), Field{Type: "Abstract_VM_Version", Name: "_s_vm_release",
		TypeString: "const char*", Static: true, Address: imgBase + 0x100})
	if got := tab.Fields(); !slices.Equal(got, wantFields) {
		t.Errorf("fields:\n%+v\nwant\n%+v", got, wantFields)
	}
	if got := tab.Types(); !slices.Equal(got, tb.types) {
		t.Errorf("types:\n%+v\nwant\n%+v", got, tb.types)
	}
	for _, c := range tb.ints {
		if v, ok := tab.IntConst(c.name); !ok || v != c.v {
			t.Errorf("int %s = %d %v, want %d", c.name, v, ok, c.v)
		}
	}
	for _, c := range tb.longs {
		if v, ok := tab.LongConst(c.name); !ok || v != c.v {
			t.Errorf("long %s = %#x %v, want %#x", c.name, v, ok, c.v)
		}
	}
	if tab.Release != tb.release || tab.Major() != 17 || tab.Base != imgBase {
		t.Errorf("release %q, major %d, base %#x", tab.Release, tab.Major(), tab.Base)
	}
	if size, ok := tab.Size("Klass"); !ok || size != 208 {
		t.Errorf("Size(Klass) = %d %v", size, ok)
	}
	if _, ok := tab.Field("Klass", "_nope"); ok {
		t.Error("Field found an entry that is not there")
	}
	// Everything fits one read per table and a few for the words and the
	// strings.
	if tab.Stats.Reads > 8 {
		t.Errorf("%d reads", tab.Stats.Reads)
	}
}

// The struct table ends at its first null field name, whatever the type
// name, as the serviceability agent reads it.
func TestReadEndsAtNullFieldName(t *testing.T) {
	im := smallTables().image()
	im.put64(im.entry("structs", 1)+8, 0)
	tab, err := Read(im.mem(), imageSymbols())
	if err != nil {
		t.Fatal(err)
	}
	if n := len(tab.Fields()); n != 1 || tab.Release != "" {
		t.Errorf("%d fields, release %q; want the first field only", n, tab.Release)
	}
}

func TestReadDuplicates(t *testing.T) {
	tb := smallTables()
	tb.fields = append(tb.fields, Field{Type: "Klass", Name: "_layout_helper", TypeString: "jint", Offset: 12})
	tb.types = append(tb.types, Type{Name: "Klass", Size: 1})
	tb.ints = append(tb.ints, named[int32]{"oopSize", 4})
	tb.longs = append(tb.longs, tb.longs[0])
	tab, err := Read(tb.image().mem(), imageSymbols())
	if err != nil {
		t.Fatal(err)
	}
	if f, _ := tab.Field("Klass", "_layout_helper"); f.Offset != 8 || tab.Stats.Duplicates != 4 {
		t.Errorf("Klass::_layout_helper at %d, %d duplicates; want the first (8), 4", f.Offset, tab.Stats.Duplicates)
	}
}

func TestReadMissingSymbols(t *testing.T) {
	im := smallTables().image()
	syms := imageSymbols()
	delete(syms.Addrs, "gHotSpotVMTypeEntrySizeOffset")
	delete(syms.Addrs, "gHotSpotVMLongConstants")
	_, err := Read(im.mem(), syms)
	if !errors.Is(err, ErrNotHotSpot) || !strings.Contains(err.Error(), "gHotSpotVMTypeEntrySizeOffset gHotSpotVMLongConstants") {
		t.Errorf("Read without two symbols: %v", err)
	}
	_, err = Read(im.mem(), Symbols{Lib: "/opt/j9/lib/j9vm/libjvm.so"})
	if !errors.Is(err, ErrNotHotSpot) || !strings.Contains(err.Error(), "/opt/j9/lib/j9vm/libjvm.so exports no gHotSpotVMStructs") {
		t.Errorf("Read without symbols: %v", err)
	}
}

// Garbled tables: each must fail with ErrMalformed and say what is wrong.
func TestReadMalformed(t *testing.T) {
	long := strings.Repeat("x", MaxString+10)
	cases := []struct {
		name   string
		tables func(*tables)
		mutate func(*image)
		want   string
	}{
		{name: "zero stride", mutate: func(im *image) { im.put64(im.at["gHotSpotVMStructEntryArrayStride"], 0) },
			want: "gHotSpotVMStructEntryArrayStride is 0, not in 1..1024"},
		{name: "huge stride", mutate: func(im *image) { im.put64(im.at["gHotSpotVMTypeEntryArrayStride"], 1<<40) },
			want: "gHotSpotVMTypeEntryArrayStride is 1099511627776"},
		{name: "member past the entry", mutate: func(im *image) { im.put64(im.at["gHotSpotVMIntConstantEntryValueOffset"], 13) },
			want: "gHotSpotVMIntConstantEntryValueOffset is 13, past the end of a 16-byte entry"},
		{name: "member offset wraps", mutate: func(im *image) { im.put64(im.at["gHotSpotVMStructEntryAddressOffset"], 1<<64-4) },
			want: "past the end"},
		{name: "null table", mutate: func(im *image) { im.put64(im.at["gHotSpotVMLongConstants"], 0) },
			want: "gHotSpotVMLongConstants is null"},
		{name: "table at the top of the address space", mutate: func(im *image) { im.put64(im.at["gHotSpotVMStructs"], 1<<63-8) },
			want: "out of the address space"},
		{name: "no end before unreadable memory", mutate: func(im *image) {
			im.put64(im.at["gHotSpotVMTypes"], imgBase+uint64(len(im.buf))-40)
			copy(im.buf[len(im.buf)-40:], strings.Repeat("y", 40))
		}, want: "gHotSpotVMTypes: entry 1 at 0x"},
		{name: "type name unreadable", mutate: func(im *image) { im.put64(im.entry("structs", 0), 0xdead0000) },
			want: "gHotSpotVMStructs entry 0: malformed vmStructs: string at 0xdead0000: memory at 0xdead0000 is unreadable before its NUL"},
		{name: "no NUL before unreadable memory", mutate: func(im *image) {
			im.buf[len(im.buf)-1] = 'z'
			im.put64(im.entry("types", 2)+8, imgBase+uint64(len(im.buf))-1)
		}, want: "gHotSpotVMTypes entry 2: malformed vmStructs: string at 0x"},
		{name: "name over the cap", tables: func(tb *tables) { tb.ints[1].name = long },
			want: "no NUL within 1024 bytes"},
		{name: "field name without type name", mutate: func(im *image) { im.put64(im.entry("structs", 2), 0) },
			want: "gHotSpotVMStructs entry 2 has a field name but no type name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tb := smallTables()
			if c.tables != nil {
				c.tables(&tb)
			}
			im := tb.image()
			if c.mutate != nil {
				c.mutate(im)
			}
			want := c.want
			_, err := Read(im.mem(), imageSymbols())
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), want) {
				t.Errorf("Read: %v\nwant ErrMalformed with %q", err, want)
			}
		})
	}
}

// synth is a Mem without end: f gives each byte.
type synth func(addr uint64) byte

func (s synth) ReadAt(p []byte, off int64) (int, error) {
	for i := range p {
		p[i] = s(uint64(off) + uint64(i))
	}
	return len(p), nil
}

// endless is memory whose struct table (stride bytes an entry) ends after
// n entries, or never for n 0, its entries' names at name(i); the other
// tables are empty. Its strings are "a" runs ending every 1000 bytes, from
// strBase on, and "b" without end from 0x3000_0000 on.
func endless(stride, n uint64, name func(i uint64) uint64) synth {
	const structs, strBase, zeros = 0x10_0000_0000, 0x1000_0000, 0x2000_0000
	words := map[string]uint64{
		"gHotSpotVMStructs": structs, "gHotSpotVMStructEntryArrayStride": stride,
		"gHotSpotVMStructEntryFieldNameOffset": 8, "gHotSpotVMStructEntryTypeStringOffset": 16,
		"gHotSpotVMStructEntryIsStaticOffset": 24, "gHotSpotVMStructEntryOffsetOffset": 32,
		"gHotSpotVMStructEntryAddressOffset": 40,
		"gHotSpotVMTypes":                    zeros, "gHotSpotVMTypeEntryArrayStride": 40,
		"gHotSpotVMIntConstants": zeros, "gHotSpotVMIntConstantEntryArrayStride": 16,
		"gHotSpotVMLongConstants": zeros, "gHotSpotVMLongConstantEntryArrayStride": 16,
	}
	var sym [8 * 24]byte
	for i, n := range SymbolNames {
		binary.LittleEndian.PutUint64(sym[8*i:], words[n])
	}
	return func(a uint64) byte {
		switch {
		case a >= imgBase && a < imgBase+uint64(len(sym)):
			return sym[a-imgBase]
		case a >= structs:
			e, o := (a-structs)/stride, (a-structs)%stride
			if o < 16 && (n == 0 || e < n) { // the type and field names
				var w [8]byte
				binary.LittleEndian.PutUint64(w[:], name(e))
				return w[o%8]
			}
			return 0
		case a >= strBase && a < zeros:
			if (a-strBase)%1000 == 999 {
				return 0
			}
			return 'a'
		case a >= 0x3000_0000 && a < 0x3100_0000:
			return 'b'
		}
		return 0
	}
}

// Forged tables that never end stop at a cap, in bounded time and memory.
func TestReadCaps(t *testing.T) {
	const strBase = 0x1000_0000
	cases := []struct {
		name string
		mem  synth
		want string
	}{
		{"endless entries", endless(48, 0, func(uint64) uint64 { return strBase }), "gHotSpotVMStructs has more than 100000 entries"},
		{"endless wide entries", endless(MaxStride, 0, func(uint64) uint64 { return strBase }), "gHotSpotVMStructs: no end within 33554432 bytes read in all"},
		// 60000 distinct names of up to 999 bytes: 30 MB of strings.
		{"many long names", endless(48, 60000, func(i uint64) uint64 { return strBase + i }), "names of more than 8388608 bytes in all"},
		{"a name without end", endless(48, 10, func(uint64) uint64 { return 0x3000_0000 + 10 }), "no NUL within 1024 bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mem := c.mem
			var err error
			testenv.Within(t, 30*time.Second, c.name, func() {
				alloc, d := testenv.Allocated(func() { _, err = Read(mem, imageSymbols()) })
				t.Logf("%v, %d MiB allocated", d.Round(time.Millisecond), alloc>>20)
				if alloc > 128<<20 {
					t.Errorf("allocated %d MiB", alloc>>20)
				}
			})
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Read: %v\nwant ErrMalformed with %q", err, c.want)
			}
		})
	}
}

// liar claims more than it was asked for, and a negative count when it
// reads less.
type liar struct{ Mem }

func (l liar) ReadAt(p []byte, off int64) (int, error) {
	n, err := l.Mem.ReadAt(p, off)
	if n < len(p) {
		return -5, err
	}
	return n + 100, err
}

// A Mem's counts are clamped, not trusted: a lie is a short read.
func TestReadLyingMem(t *testing.T) {
	im := smallTables().image()
	if _, err := Read(liar{im.mem()}, imageSymbols()); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "entry 0 at") {
		t.Errorf("Read: %v, want ErrMalformed", err)
	}
}
