package heapwalk

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
	"sort"
	"testing"

	"github.com/djx-bpf/djx-bpf/hotspot/vmstructs"
)

// fakeMem is a sparse address space of 4 KiB pages: reading a page
// never written is short, as process_vm_readv is on unmapped memory.
type fakeMem struct {
	pages map[uint64]*[4096]byte
	reads int
	// onRead, when set, runs before each read (a GC "during" a walk).
	onRead func()
}

func newFakeMem() *fakeMem { return &fakeMem{pages: make(map[uint64]*[4096]byte)} }

func (m *fakeMem) ReadAt(p []byte, off int64) (int, error) {
	m.reads++
	if m.onRead != nil {
		m.onRead()
	}
	return m.read(p, uint64(off))
}

func (m *fakeMem) read(p []byte, a uint64) (int, error) {
	done := 0
	for done < len(p) {
		pg, ok := m.pages[(a+uint64(done))>>12]
		if !ok {
			return done, fmt.Errorf("no memory at %#x", a+uint64(done))
		}
		done += copy(p[done:], pg[(a+uint64(done))&4095:])
	}
	return done, nil
}

func (m *fakeMem) ReadVector(dst []byte, spans []Span) (int, error) {
	m.reads++
	if m.onRead != nil {
		m.onRead()
	}
	done := 0
	for _, s := range spans {
		n, err := m.read(dst[done:done+s.Len], s.Addr)
		done += n
		if err != nil {
			return done, err
		}
	}
	return done, nil
}

func (m *fakeMem) write(a uint64, b []byte) {
	for len(b) > 0 {
		pg, ok := m.pages[a>>12]
		if !ok {
			pg = new([4096]byte)
			m.pages[a>>12] = pg
		}
		n := copy(pg[a&4095:], b)
		a += uint64(n)
		b = b[n:]
	}
}

func (m *fakeMem) put64(a, v uint64) { m.write(a, binary.LittleEndian.AppendUint64(nil, v)) }
func (m *fakeMem) put32(a uint64, v uint32) {
	m.write(a, binary.LittleEndian.AppendUint32(nil, v))
}
func (m *fakeMem) put16(a uint64, v uint16) {
	m.write(a, binary.LittleEndian.AppendUint16(nil, v))
}
func (m *fakeMem) get64(a uint64) uint64 {
	var b [8]byte
	m.read(b[:], a)
	return binary.LittleEndian.Uint64(b[:])
}
func (m *fakeMem) get32(a uint64) uint32 {
	var b [4]byte
	m.read(b[:], a)
	return binary.LittleEndian.Uint32(b[:])
}

// plainMem hides fakeMem's ReadVector: the walk then reads span by span.
type plainMem struct{ m *fakeMem }

func (p plainMem) ReadAt(b []byte, off int64) (int, error) { return p.m.ReadAt(b, off) }

// The synthetic java.lang.Class: its instance size (where statics
// start) and the offsets java_lang_Class's statics give.
const (
	classSize        = 96
	classNameOff     = 16 // its one reference field
	mirrorKlassOff   = 64
	mirrorArrayOff   = 72
	mirrorSizeOff    = 80
	mirrorStaticsOff = 84
)

// Where the synthetic JVM's memory is.
const (
	heapLo    = 0x4_0000_0000 // 16 GiB
	heapBytes = 64 << 20
	metaLo    = 0x8_0000_0000 // 32 GiB
	nativeLo  = 0x5000_0000_0000
)

// synth builds a JVM's memory as HotSpot lays it out, with the offsets
// of a real JDK's vmStructs (the vmstructs fixtures): classes with
// oop maps and mirrors on class loader lists, objects in a heap.
type synth struct {
	t          testing.TB
	jdk        string
	tab        *vmstructs.Table
	m          *fakeMem
	coops, ccp bool
	compact    bool // compact object headers: the narrow klass in the mark word
	oopBase    uint64
	oopShift   uint
	klassBase  uint64
	klassShift uint
	hdr, oop   uint64

	heapTop, metaTop, nativeTop uint64
	heapHi                      uint64
	gcCount                     uint64 // address of _total_collections
	gcFull                      uint64 // address of _total_full_collections
	gcActive                    uint64

	classK, objectK uint64
	sizes           map[uint64]uint64 // instance klass → size
	arrays          map[uint64]arrInfo
	mirrors         map[uint64]uint64
	order           []uint64 // klasses, in the order made
}

type arrInfo struct {
	hdr  uint64
	log2 uint
}

var fixtures = map[string]*vmstructs.Table{}

func fixture(t testing.TB, jdk string) *vmstructs.Table {
	t.Helper()
	if tab := fixtures[jdk]; tab != nil {
		return tab
	}
	tab, err := vmstructs.ReadFixture(filepath.Join("..", "vmstructs", "testdata", jdk+".json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	fixtures[jdk] = tab
	return tab
}

func newSynth(t testing.TB, jdk string, coops, ccp bool) *synth {
	t.Helper()
	return newSynthV(t, variant{jdk: jdk, coops: coops, ccp: ccp})
}

// newSynthV is newSynth for any variant, compact headers too.
func newSynthV(t testing.TB, v variant) *synth {
	t.Helper()
	jdk, coops, ccp := v.jdk, v.coops, v.ccp
	s := &synth{t: t, jdk: jdk, tab: fixture(t, jdk), m: newFakeMem(), coops: coops, ccp: ccp, compact: v.compact,
		heapTop: heapLo, metaTop: metaLo + 4096, nativeTop: nativeLo, heapHi: heapLo + heapBytes, // narrow klass 0 is null
		sizes: map[uint64]uint64{}, arrays: map[uint64]arrInfo{}, mirrors: map[uint64]uint64{}}
	s.hdr, s.oop = 16, 8
	if ccp {
		s.hdr = 12
		s.klassBase = metaLo
		if jdk == "jdk25" {
			s.klassShift = 3
		}
		if s.compact {
			s.hdr, s.klassShift = 8, 10 // 22 bits of narrow klass, as JDK 25 encodes them
		}
	}
	if coops {
		s.oop = 4
		s.oopBase, s.oopShift = heapLo-0x1000_0000, 3
	}
	s.statics()
	// java.lang.Class first: every mirror is one of its instances.
	s.classK = s.klassStruct("java/lang/Class", 0, classSize|1, []uint32{classNameOff}, 0)
	s.objectK = s.class("java/lang/Object", 0, 16, nil, 0)
	s.put64(s.classK+s.f("Klass::_super"), s.objectK)
	s.mirror(s.classK, 0)
	return s
}

func (s *synth) f(name string) uint64 {
	f, ok := s.tab.FirstField(name)
	if !ok {
		s.t.Fatalf("%s: no field %s", s.jdk, name)
	}
	return f.Offset
}

func (s *synth) static(names ...string) uint64 {
	f, ok := s.tab.FirstField(names...)
	if !ok || !f.Static {
		s.t.Fatalf("%s: no static %v", s.jdk, names)
	}
	return f.Address
}

func (s *synth) size(name string) uint64 {
	v, ok := s.tab.Size(name)
	if !ok {
		s.t.Fatalf("%s: no type %s", s.jdk, name)
	}
	return v
}

func (s *synth) put64(a, v uint64) { s.m.put64(a, v) }

// native allocates n bytes of C heap.
func (s *synth) native(n uint64) uint64 {
	a := s.nativeTop
	s.nativeTop += (n + 15) &^ 15
	s.m.write(a, make([]byte, n))
	return a
}

func (s *synth) meta(n uint64) uint64 {
	a := s.metaTop
	s.metaTop += (n + 15) &^ 15
	s.m.write(a, make([]byte, n))
	return a
}

// klassMeta allocates a Klass: aligned so that the narrow klass encoding
// (its shift) reaches it, as HotSpot places them.
func (s *synth) klassMeta(n uint64) uint64 {
	al := uint64(1) << s.klassShift
	s.metaTop = (s.metaTop + al - 1) &^ (al - 1)
	return s.meta(n)
}

func (s *synth) cstring(str string) uint64 {
	a := s.native(uint64(len(str) + 1))
	s.m.write(a, []byte(str))
	return a
}

// symbol makes a HotSpot Symbol: hash and refcount, u2 length, bytes.
func (s *synth) symbol(str string) uint64 {
	a := s.meta(s.f("Symbol::_body") + uint64(len(str)))
	s.m.put16(a+s.f("Symbol::_length"), uint16(len(str)))
	s.m.write(a+s.f("Symbol::_body"), []byte(str))
	return a
}

// statics writes libjvm's statics: oop and klass encoding, the
// java.lang.Class offsets, the flag table, the heap.
func (s *synth) statics() {
	m := s.m
	m.put64(s.static("CompressedOops::_narrow_oop._base", "CompressedOops::_base"), s.oopBase)
	m.put32(s.static("CompressedOops::_narrow_oop._shift", "CompressedOops::_shift"), uint32(s.oopShift))
	m.put64(s.static("CompressedKlassPointers::_narrow_klass._base", "CompressedKlassPointers::_base"), s.klassBase)
	m.put32(s.static("CompressedKlassPointers::_narrow_klass._shift", "CompressedKlassPointers::_shift"), uint32(s.klassShift))
	m.put32(s.static("java_lang_Class::_klass_offset"), mirrorKlassOff)
	m.put32(s.static("java_lang_Class::_array_klass_offset"), mirrorArrayOff)
	m.put32(s.static("java_lang_Class::_oop_size_offset"), mirrorSizeOff)
	m.put32(s.static("java_lang_Class::_static_oop_field_count_offset"), mirrorStaticsOff)
	m.put64(s.static("ClassLoaderDataGraph::_head"), 0)

	b := func(v bool) uint64 {
		if v {
			return 1
		}
		return 0
	}
	flags := []struct {
		name string
		val  uint64
	}{
		{"UseSerialGC", 0}, {"PrintFlagsFinal", 0}, {"UseCompressedOops", b(s.coops)},
		{"UseCompressedClassPointers", b(s.ccp)}, {"ObjectAlignmentInBytes", 8}, {"UseG1GC", 1},
	}
	if s.jdk == "jdk25" {
		flags = append(flags, struct {
			name string
			val  uint64
		}{"UseCompactObjectHeaders", b(s.compact)})
	}
	fsize := s.size("JVMFlag")
	arr := s.native(fsize * uint64(len(flags)))
	for i, fl := range flags {
		e := arr + uint64(i)*fsize
		val := s.native(8)
		m.put64(val, fl.val)
		m.put64(e+s.f("JVMFlag::_addr"), val)
		m.put64(e+s.f("JVMFlag::_name"), s.cstring(fl.name))
	}
	m.put64(s.static("JVMFlag::flags"), arr)
	m.put64(s.static("JVMFlag::numFlags"), uint64(len(flags)))

	heap := s.native(s.size("CollectedHeap"))
	mr := heap + s.f("CollectedHeap::_reserved")
	m.put64(mr+s.f("MemRegion::_start"), heapLo)
	m.put64(mr+s.f("MemRegion::_word_size"), heapBytes/8)
	s.gcCount = heap + s.f("CollectedHeap::_total_collections")
	m.put32(s.gcCount, 7)
	s.gcFull = s.gcCount + 4 // not in the tables: declared after the count
	m.put32(s.gcFull, 2)
	if f, ok := s.tab.FirstField("CollectedHeap::_is_gc_active", "CollectedHeap::_is_stw_gc_active"); ok {
		s.gcActive = heap + f.Offset
	}
	m.put64(s.static("Universe::_collectedHeap"), heap)
}

// setFlag adds the -XX flag name with value v to the flag table.
func (s *synth) setFlag(name string, v uint64) {
	old := s.m.get64(s.static("JVMFlag::flags"))
	n := s.m.get64(s.static("JVMFlag::numFlags"))
	fsize := s.size("JVMFlag")
	// A new table, one entry longer: what follows the old one is taken.
	arr := s.native((n + 1) * fsize)
	entries := make([]byte, n*fsize)
	s.m.read(entries, old)
	s.m.write(arr, entries)
	s.put64(s.static("JVMFlag::flags"), arr)
	val := s.native(8)
	s.put64(val, v)
	e := arr + n*fsize
	s.put64(e+s.f("JVMFlag::_addr"), val)
	s.put64(e+s.f("JVMFlag::_name"), s.cstring(name))
	s.put64(s.static("JVMFlag::numFlags"), n+1)
}

// klassStruct writes an InstanceKlass: layout helper lh, its name, its
// super, a vtable and an itable, and the oop maps of oops (offsets,
// made into blocks of consecutive fields).
func (s *synth) klassStruct(name string, super uint64, lh uint32, oops []uint32, refType uint8) uint64 {
	var blocks [][2]uint32
	for _, o := range oops {
		if n := len(blocks); n > 0 && blocks[n-1][0]+blocks[n-1][1]*uint32(s.oop) == o {
			blocks[n-1][1]++
			continue
		}
		blocks = append(blocks, [2]uint32{o, 1})
	}
	ik := (s.size("InstanceKlass") + 7) &^ 7
	const vtable, itable = 5, 3
	k := s.klassMeta(ik + 8*(vtable+itable) + 8*uint64(len(blocks)))
	m := s.m
	m.put32(k+s.f("Klass::_layout_helper"), lh)
	m.put64(k+s.f("Klass::_name"), s.symbol(name))
	m.put64(k+s.f("Klass::_super"), super)
	m.put32(k+s.f("Klass::_vtable_len"), vtable)
	m.put32(k+s.f("InstanceKlass::_itable_len"), itable)
	m.put32(k+s.f("InstanceKlass::_nonstatic_oop_map_size"), uint32(len(blocks)))
	m.write(k+s.f("InstanceKlass::_reference_type"), []byte{refType})
	for i, bl := range blocks {
		at := k + ik + 8*(vtable+itable) + 8*uint64(i)
		m.put32(at, bl[0])
		m.put32(at+4, bl[1])
	}
	s.sizes[k] = uint64(lh) &^ 7
	s.order = append(s.order, k)
	return k
}

// class makes an instance class with its mirror, nStatics reference
// statics in it.
func (s *synth) class(name string, super uint64, size uint64, oops []uint32, nStatics int) uint64 {
	if super == 0 && s.objectK != 0 {
		super = s.objectK
	}
	k := s.klassStruct(name, super, uint32(size), oops, 0)
	s.mirror(k, nStatics)
	return k
}

// arrayClass makes an array class; obj for references.
func (s *synth) arrayClass(name string, obj bool, log2 uint) uint64 {
	k := s.klassMeta(s.size("ObjArrayKlass"))
	base := s.hdr + 4
	align := uint64(8) // JDK 17: elements start at a word
	if s.jdk == "jdk25" {
		align = 1 << log2 // JDK 25: at the element size
	}
	base = (base + align - 1) &^ (align - 1)
	tag := uint32(0xC0000000) // typeArray: -1 << 30
	if obj {
		tag = 0x80000000 // objArray: -2 << 30
	}
	lh := tag | uint32(base)<<16 | uint32(log2)
	s.m.put32(k+s.f("Klass::_layout_helper"), lh)
	s.m.put64(k+s.f("Klass::_name"), s.symbol(name))
	s.m.put64(k+s.f("Klass::_super"), s.objectK)
	s.arrays[k] = arrInfo{base, log2}
	s.order = append(s.order, k)
	s.mirror(k, 0)
	return k
}

// mirror makes k's java.lang.Class instance and its OopHandle.
func (s *synth) mirror(k uint64, nStatics int) uint64 {
	size := (classSize + uint64(nStatics)*s.oop + 7) &^ 7
	mi := s.alloc(s.classK, size)
	s.m.put64(mi+mirrorKlassOff, k)
	s.m.put32(mi+mirrorSizeOff, uint32(size/8))
	s.m.put32(mi+mirrorStaticsOff, uint32(nStatics))
	slot := s.native(8)
	s.put64(slot, mi)
	s.put64(k+s.f("Klass::_java_mirror")+s.f("OopHandle::_obj"), slot)
	s.mirrors[k] = mi
	return mi
}

func (s *synth) narrowKlass(k uint64) uint32 { return uint32((k - s.klassBase) >> s.klassShift) }

// alloc allocates an object of klass k in the heap.
func (s *synth) alloc(k, size uint64) uint64 {
	a := s.heapTop
	s.heapTop += (size + 7) &^ 7
	if s.heapTop > s.heapHi {
		s.t.Fatalf("synthetic heap full")
	}
	s.m.write(a, make([]byte, size))
	s.put64(a, 1) // mark word: unlocked, no hash
	s.setKlass(a, k)
	return a
}

// markKlassShift is markWord::klass_shift in the fixtures' tables.
const markKlassShift = 42

// setKlass writes the header's klass: in the mark word with compact
// headers, else the narrow or full klass word.
func (s *synth) setKlass(a, k uint64) { s.setKlassWord(a, uint64(s.narrowKlass(k)), k) }

// setKlassWord writes a narrow klass or a full Klass* as the header
// holds one.
func (s *synth) setKlassWord(a, narrow, full uint64) {
	switch {
	case s.compact:
		s.put64(a, s.m.get64(a)&(1<<markKlassShift-1)|narrow<<markKlassShift)
	case s.ccp:
		s.m.put32(a+8, uint32(narrow))
	default:
		s.put64(a+8, full)
	}
}

func (s *synth) obj(k uint64) uint64 { return s.alloc(k, s.sizes[k]) }

func (s *synth) array(k uint64, n int) uint64 {
	ai := s.arrays[k]
	a := s.alloc(k, ai.hdr+uint64(n)<<ai.log2)
	s.m.put32(a+s.hdr, uint32(n))
	return a
}

// slot writes a reference to target at addr.
func (s *synth) slot(addr, target uint64) {
	if target == 0 {
		return
	}
	if s.coops {
		s.m.put32(addr, uint32((target-s.oopBase)>>s.oopShift))
	} else {
		s.put64(addr, target)
	}
}

func (s *synth) ref(obj uint64, off uint32, target uint64) { s.slot(obj+uint64(off), target) }

func (s *synth) elem(arr uint64, i int, target uint64) {
	s.slot(arr+s.arrays[s.klassOf(arr)].hdr+uint64(i)*s.oop, target)
}

func (s *synth) klassOf(a uint64) uint64 {
	if s.compact {
		return s.klassBase + s.m.get64(a)>>markKlassShift<<s.klassShift
	}
	if s.ccp {
		return s.klassBase + uint64(s.m.get32(a+8))<<s.klassShift
	}
	return s.m.get64(a + 8)
}

// setStatic sets class k's i-th reference static.
func (s *synth) setStatic(k uint64, i int, target uint64) {
	s.slot(s.mirrors[k]+classSize+uint64(i)*s.oop, target)
}

func (s *synth) staticOff(i int) uint32 { return uint32(classSize + uint64(i)*s.oop) }

// fields lays out n reference fields after the header; it returns their
// offsets and the instance size.
func (s *synth) fields(n int) ([]uint32, uint64) {
	var offs []uint32
	first := (s.hdr + s.oop - 1) &^ (s.oop - 1) // 8-byte references skip the gap after a 12-byte header
	for i := range n {
		offs = append(offs, uint32(first+uint64(i)*s.oop))
	}
	return offs, (first + uint64(n)*s.oop + 7) &^ 7
}

// finish puts the classes on two class loaders' lists and returns the
// layout NewLayout reads from it all.
func (s *synth) finish() *Layout {
	s.t.Helper()
	cldSize := s.size("ClassLoaderData")
	half := len(s.order) / 2
	var prev uint64
	for _, part := range [][]uint64{s.order[half:], s.order[:half]} {
		cld := s.native(cldSize)
		s.put64(cld+s.f("ClassLoaderData::_next"), prev)
		var next uint64
		for i := len(part) - 1; i >= 0; i-- {
			s.put64(part[i]+s.f("Klass::_next_link"), next)
			next = part[i]
		}
		s.put64(cld+s.f("ClassLoaderData::_klasses"), next)
		prev = cld
	}
	s.put64(s.static("ClassLoaderDataGraph::_head"), prev)
	l, err := NewLayout(s.tab, s.m, Options{})
	if err != nil {
		s.t.Fatalf("%s: %v", s.jdk, err)
	}
	return l
}

// rowsBy indexes a result's rows by "chain | class".
func rowsBy(r *Result) map[string]Row {
	out := map[string]Row{}
	for i, ro := range r.Rows {
		out[r.ChainString(ro.Chain)+" | "+ro.Class] = r.Rows[i]
	}
	return out
}

func dumpRows(t testing.TB, r *Result) {
	t.Helper()
	keys := make([]string, 0, len(r.Rows))
	for k, ro := range rowsBy(r) {
		keys = append(keys, fmt.Sprintf("%s: %d objects, %d bytes, recursive %v", k, ro.Count, ro.Bytes, ro.Recursive))
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.Log(k)
	}
}
