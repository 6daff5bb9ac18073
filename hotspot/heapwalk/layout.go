package heapwalk

import (
	"errors"
	"fmt"
	"slices"

	"github.com/djx-bpf/djx-bpf/hotspot/vmlayout"
	"github.com/djx-bpf/djx-bpf/hotspot/vmstructs"
)

var (
	// ErrUnsupported means the JVM's heap is one the walker cannot
	// parse: ZGC, Shenandoah, a table it does not understand.
	ErrUnsupported = errors.New("unsupported heap layout")
	// ErrNotReady means the JVM has no heap yet (still starting).
	ErrNotReady = errors.New("JVM not initialised")
)

// Range is a range of addresses, [Start, End).
type Range struct{ Start, End uint64 }

func (r Range) contains(a uint64) bool { return a >= r.Start && a < r.End }

// Caps on what a target's tables may make NewLayout accept.
const (
	maxFlags    = 10_000  // JDK 17 has about 1300 flags, JDK 25 about 1400
	maxFlagName = 64      // the longest flag name read; the ones wanted are shorter
	maxHeapSpan = 1 << 38 // 256 GiB: the walk's queue packs heap offsets in 35 bits of words
)

// Options are what the caller knows better than the tables, or what a
// table lacks.
type Options struct {
	// CompressedOops and CompressedClassPointers, when set, override
	// the -XX flags read from the JVM's flag table (needed only for a
	// JVM whose flag table cannot be read).
	CompressedOops          *bool
	CompressedClassPointers *bool
	// Heap, when set, replaces CollectedHeap::_reserved as the ranges
	// every object must lie in (not under ZGC: its page allocator says).
	Heap []Range
}

// Layout is how a JVM lays out its heap and its class metadata: what
// the walk needs to parse objects from outside the JVM. It is read once
// per JVM; its statics (heap ranges, bases, shifts) do not change while
// the JVM runs.
type Layout struct {
	Release string // the JVM's release string
	GC      string // "serial", "parallel", "g1", "shenandoah", "z", "epsilon"; "" if no flag says

	// Geometry is how oops and klass pointers are encoded.
	vmlayout.Geometry
	OopSize uint64 // 4 with compressed oops, else 8

	// HeaderSize is an instance's header, mark word and klass (8 with
	// compact headers, 12 or 16 bytes); an array's length is at
	// HeaderSize.
	HeaderSize uint64
	// Alignment is ObjectAlignmentInBytes: every object's size is a
	// multiple of it.
	Alignment uint64

	// Heap is where objects may be: CollectedHeap::_reserved, sorted.
	Heap []Range

	z             *zgc   // ZGC's address space; nil under other collectors
	cldHead       uint64 // address of ClassLoaderDataGraph::_head
	collectedHeap uint64 // the CollectedHeap object
	off           offsets
	vm            *vmlayout.Layout // the offsets the code symbolizer reads by too
}

// offsets are the vmStructs offsets and constants the walk reads by.
type offsets struct {
	klassLH, klassSuper, klassMirror, klassNextLink, klassVtableLen uint64
	ikItableLen, ikOopMapSize, ikRefType                            uint64
	ikSize, klassSize                                               uint64 // sizeof(InstanceKlass), sizeof(Klass)
	oopHandleObj                                                    uint64
	cldNext, cldKlasses                                             uint64
	mirrorKlass, mirrorOopSize, mirrorStaticCount                   uint64 // in a java.lang.Class instance
	heapTotal                                                       uint64 // CollectedHeap::_total_collections
	heapActive                                                      uint64 // CollectedHeap::_is_gc_active; 0 if none
	hasActive                                                       bool
	heapFull                                                        uint64 // CollectedHeap::_total_full_collections
	hasFull                                                         bool

	lhTagShift, lhHeaderShift, lhHeaderMask, lhLog2Mask uint32
	lhTagObj, lhTagType                                 int32
}

// needs are the entries NewLayout reads, with each JDK's names.
var needs = slices.Concat(vmlayout.EncodingNeeds, vmlayout.Needs, []vmstructs.Need{
	vmstructs.NeedStatic("ClassLoaderDataGraph::_head"),
	vmstructs.NeedStatic("Universe::_collectedHeap"),
	vmstructs.NeedStatic("java_lang_Class::_klass_offset"),
	vmstructs.NeedStatic("java_lang_Class::_oop_size_offset"),
	vmstructs.NeedStatic("java_lang_Class::_static_oop_field_count_offset"),
	vmstructs.NeedStatic("JVMFlag::flags"),
	vmstructs.NeedStatic("JVMFlag::numFlags"),
	vmstructs.NeedField("JVMFlag::_addr"),
	vmstructs.NeedField("JVMFlag::_name"),
	vmstructs.NeedField("Klass::_layout_helper"),
	vmstructs.NeedField("Klass::_super"),
	vmstructs.NeedField("Klass::_java_mirror"),
	vmstructs.NeedField("Klass::_next_link"),
	vmstructs.NeedField("Klass::_vtable_len"),
	vmstructs.NeedField("InstanceKlass::_itable_len"),
	vmstructs.NeedField("InstanceKlass::_nonstatic_oop_map_size"),
	vmstructs.NeedField("InstanceKlass::_reference_type"),
	vmstructs.NeedField("OopHandle::_obj"),
	vmstructs.NeedField("ClassLoaderData::_next"),
	vmstructs.NeedField("ClassLoaderData::_klasses"),
	vmstructs.NeedField("CollectedHeap::_reserved"),
	vmstructs.NeedField("CollectedHeap::_total_collections"),
	vmstructs.NeedField("MemRegion::_start"),
	vmstructs.NeedField("MemRegion::_word_size"),
	vmstructs.NeedType("InstanceKlass"),
	vmstructs.NeedType("Klass"),
	vmstructs.NeedType("JVMFlag"),
})

// NewLayout reads the layout of the JVM whose tables tab are, from its
// memory mem.
func NewLayout(tab *vmstructs.Table, mem Mem, opts Options) (*Layout, error) {
	l, err := newLayout(tab, mem, opts)
	if err != nil {
		return nil, fmt.Errorf("heap layout: %w", err)
	}
	return l, nil
}

func newLayout(tab *vmstructs.Table, mem Mem, opts Options) (*Layout, error) {
	if err := tab.Require(needs...); err != nil {
		return nil, err
	}
	var st Stats
	v := &tableReader{tab: tab, r: &reader{mem: mem, stats: &st}}
	l := &Layout{Release: tab.Release}
	enc, err := vmlayout.ReadEncodings(tab, v.r)
	if err != nil {
		return nil, err
	}
	l.readStatics(v)
	if v.err != nil {
		return nil, v.err
	}
	// The flags first: they refuse the layouts the walk cannot parse,
	// whatever the rest says.
	flags, err := readFlags(v.r, tab)
	if err != nil {
		return nil, err
	}
	if err := l.fromFlags(flags, opts); err != nil {
		return nil, err
	}
	g, err := enc.Geometry(tab, l.CompressedOops, l.CompressedClassPointers, l.CompactHeaders)
	if err != nil {
		return nil, walkErr(err)
	}
	l.Geometry, l.OopSize, l.HeaderSize = g, g.OopBytes(), g.HeaderBytes()
	if l.vm, err = vmlayout.New(tab); err != nil {
		return nil, walkErr(err)
	}
	for _, o := range []uint64{l.off.mirrorKlass, l.off.mirrorOopSize, l.off.mirrorStaticCount} {
		if o < l.HeaderSize || o > 4096 || o%4 != 0 {
			return nil, fmt.Errorf("%w: java.lang.Class field offset %d (is java.lang.Class loaded?)", ErrNotReady, int64(o))
		}
	}
	if err := l.off.read(v, l.vm.Klass.Name); err != nil {
		return nil, err
	}
	if err := l.layoutHelper(tab); err != nil {
		return nil, err
	}
	if l.collectedHeap == 0 {
		return nil, fmt.Errorf("%w: Universe::_collectedHeap is null (try again once the JVM runs)", ErrNotReady)
	}
	if err := l.readHeap(v, opts); err != nil {
		return nil, err
	}
	// Counts that do not read as a count of full collections (more than
	// all collections) are not taken.
	if l.off.hasFull {
		if n, full, _, err := l.collectionsFull(v.r); err != nil || full > n {
			l.off.hasFull = false
		}
	}
	return l, l.checkHeap()
}

// walkErr marks the layouts vmlayout refuses as ones the walk cannot
// parse.
func walkErr(err error) error {
	if errors.Is(err, vmlayout.ErrUnsupported) {
		return fmt.Errorf("%w: %w", ErrUnsupported, err)
	}
	return err
}

// tableReader reads the JVM's memory at the places its tables name, and
// keeps the first read that failed.
type tableReader struct {
	tab *vmstructs.Table
	r   *reader
	err error
}

func (v *tableReader) field(names ...string) uint64 {
	f, _ := v.tab.FirstField(names...)
	return f.Offset
}

func (v *tableReader) static(names ...string) uint64 {
	f, _ := v.tab.FirstField(names...)
	return f.Address
}

func (v *tableReader) word(what string, addr uint64) uint64 {
	w, ok := v.r.u64(addr)
	if !ok && v.err == nil {
		v.err = fmt.Errorf("read %s at %#x: unreadable", what, addr)
	}
	return w
}

func (v *tableReader) int32At(what string, addr uint64) uint64 {
	w, ok := v.r.u32(addr)
	if !ok && v.err == nil {
		v.err = fmt.Errorf("read %s at %#x: unreadable", what, addr)
	}
	return uint64(int64(int32(w)))
}

// readStatics reads java.lang.Class's injected field offsets and where
// the class list and the heap object are.
func (l *Layout) readStatics(v *tableReader) {
	l.off.mirrorKlass = v.int32At("java_lang_Class::_klass_offset", v.static("java_lang_Class::_klass_offset"))
	l.off.mirrorOopSize = v.int32At("java_lang_Class::_oop_size_offset", v.static("java_lang_Class::_oop_size_offset"))
	l.off.mirrorStaticCount = v.int32At("java_lang_Class::_static_oop_field_count_offset", v.static("java_lang_Class::_static_oop_field_count_offset"))
	l.cldHead = v.static("ClassLoaderDataGraph::_head")
	l.collectedHeap = v.word("Universe::_collectedHeap", v.static("Universe::_collectedHeap"))
}

// read takes the metadata's field offsets from the tables, and checks
// that they lie where such fields can.
func (o *offsets) read(v *tableReader, klassName uint64) error {
	o.klassLH = v.field("Klass::_layout_helper")
	o.klassSuper = v.field("Klass::_super")
	o.klassMirror = v.field("Klass::_java_mirror")
	o.klassNextLink = v.field("Klass::_next_link")
	o.klassVtableLen = v.field("Klass::_vtable_len")
	o.ikItableLen = v.field("InstanceKlass::_itable_len")
	o.ikOopMapSize = v.field("InstanceKlass::_nonstatic_oop_map_size")
	o.ikRefType = v.field("InstanceKlass::_reference_type")
	o.ikSize, _ = v.tab.Size("InstanceKlass")
	o.klassSize, _ = v.tab.Size("Klass")
	o.oopHandleObj = v.field("OopHandle::_obj")
	o.cldNext = v.field("ClassLoaderData::_next")
	o.cldKlasses = v.field("ClassLoaderData::_klasses")
	o.heapTotal = v.field("CollectedHeap::_total_collections")
	if f, ok := v.tab.FirstField("CollectedHeap::_is_gc_active", "CollectedHeap::_is_stw_gc_active"); ok && !f.Static {
		o.heapActive, o.hasActive = f.Offset, true
	}
	// The tables of JDK 17 and 25 leave out the count of full
	// collections, declared right after _total_collections since JDK 8.
	if f, ok := v.tab.Field("CollectedHeap", "_total_full_collections"); ok && !f.Static {
		o.heapFull, o.hasFull = f.Offset, true
	} else if size, ok := v.tab.Size("CollectedHeap"); ok && o.heapTotal+8 <= size {
		o.heapFull, o.hasFull = o.heapTotal+4, true
	}
	// Klass's fields must lie inside it, InstanceKlass's after them.
	for _, f := range []uint64{o.klassLH, klassName, o.klassSuper, o.klassMirror + o.oopHandleObj, o.klassNextLink, o.klassVtableLen} {
		if f+8 > o.klassSize || o.klassSize > 4096 {
			return fmt.Errorf("%w: Klass field at %d outside sizeof(Klass) %d", ErrUnsupported, f, o.klassSize)
		}
	}
	for _, f := range []uint64{o.ikItableLen, o.ikOopMapSize, o.ikRefType} {
		if f < o.klassSize || f+4 > o.ikSize || o.ikSize > 4096 {
			return fmt.Errorf("%w: InstanceKlass field at %d outside [%d, %d)", ErrUnsupported, f, o.klassSize, o.ikSize)
		}
	}
	return nil
}

// readHeap takes the heap's range from opts, else from
// CollectedHeap::_reserved.
func (l *Layout) readHeap(v *tableReader, opts Options) error {
	if l.GC == "z" {
		// Its heap is in its offset space, whatever opts say.
		if err := l.readZ(v); err != nil {
			return fmt.Errorf("ZGC: %w", err)
		}
		return nil
	}
	l.Heap = opts.Heap
	if len(l.Heap) > 0 {
		return nil
	}
	mr := l.collectedHeap + v.field("CollectedHeap::_reserved")
	start := v.word("CollectedHeap::_reserved", mr+v.field("MemRegion::_start"))
	words := v.word("CollectedHeap::_reserved", mr+v.field("MemRegion::_word_size"))
	if v.err != nil {
		return v.err
	}
	if words > maxHeapSpan/8 {
		return fmt.Errorf("%w: heap of %d words reserved, over the walk's %d GiB", ErrUnsupported, words, maxHeapSpan>>30)
	}
	l.Heap = []Range{{start, start + words*8}}
	return nil
}

// checkHeap sorts the heap ranges and checks them: aligned, disjoint,
// non-empty, within the walk's span.
func (l *Layout) checkHeap() error {
	l.Heap = slices.Clone(l.Heap)
	slices.SortFunc(l.Heap, func(a, b Range) int {
		switch {
		case a.Start < b.Start:
			return -1
		case a.Start > b.Start:
			return 1
		}
		return 0
	})
	if len(l.Heap) == 0 || len(l.Heap) > 64 {
		return fmt.Errorf("%w: %d heap ranges", ErrUnsupported, len(l.Heap))
	}
	for i, h := range l.Heap {
		if h.Start == 0 || h.End <= h.Start || h.Start%8 != 0 || h.End%8 != 0 || h.End > 1<<56 {
			return fmt.Errorf("%w: heap range [%#x, %#x)", ErrUnsupported, h.Start, h.End)
		}
		if i > 0 && h.Start < l.Heap[i-1].End {
			return fmt.Errorf("%w: heap ranges [%#x, %#x) and [%#x, %#x) overlap", ErrUnsupported, l.Heap[i-1].Start, l.Heap[i-1].End, h.Start, h.End)
		}
	}
	if span := l.Heap[len(l.Heap)-1].End - l.Heap[0].Start; span > maxHeapSpan {
		return fmt.Errorf("%w: heap spans %d GiB, over the walk's %d GiB", ErrUnsupported, span>>30, maxHeapSpan>>30)
	}
	return nil
}

// layoutHelper takes Klass's layout helper encoding from the table's
// constants, where it has them, and checks it is the one the walk knows.
func (l *Layout) layoutHelper(tab *vmstructs.Table) error {
	o := &l.off
	c := func(name string, def int32) int32 {
		if v, ok := tab.IntConst(name); ok {
			return v
		}
		return def
	}
	o.lhTagShift = uint32(c("Klass::_lh_array_tag_shift", 30))
	o.lhTagObj = c("Klass::_lh_array_tag_obj_value", -2)
	o.lhTagType = c("Klass::_lh_array_tag_type_value", -1)
	o.lhHeaderShift = uint32(c("Klass::_lh_header_size_shift", 16))
	o.lhHeaderMask = uint32(c("Klass::_lh_header_size_mask", 0xff))
	o.lhLog2Mask = uint32(c("Klass::_lh_log2_element_size_mask", 0x3f))
	if o.lhTagShift != 30 || o.lhTagObj != -2 || o.lhTagType != -1 || o.lhHeaderShift != 16 || o.lhHeaderMask != 0xff ||
		c("Klass::_lh_log2_element_size_shift", 0) != 0 || c("Klass::_lh_instance_slow_path_bit", 1) != 1 {
		return fmt.Errorf("%w: Klass layout helper encoding changed (tag shift %d, header shift %d)", ErrUnsupported, o.lhTagShift, o.lhHeaderShift)
	}
	return nil
}

// flagNames are the -XX flags the layout depends on.
var flagNames = []string{
	"UseCompressedOops", "UseCompressedClassPointers", "UseCompactObjectHeaders", "ObjectAlignmentInBytes",
	"UseSerialGC", "UseParallelGC", "UseG1GC", "UseZGC", "UseShenandoahGC", "UseEpsilonGC",
}

// flag is one -XX flag's value: its first 8 bytes (a bool is the low
// byte, an intx all of them).
type flag struct {
	val uint64
}

// readFlags reads flagNames from the JVM's flag table (JVMFlag::flags,
// numFlags entries of sizeof(JVMFlag)): absent ones are left out.
func readFlags(r *reader, tab *vmstructs.Table) (map[string]flag, error) {
	fs, _ := tab.FirstField("JVMFlag::flags")
	fn, _ := tab.FirstField("JVMFlag::numFlags")
	fName, _ := tab.FirstField("JVMFlag::_name")
	fAddr, _ := tab.FirstField("JVMFlag::_addr")
	size, _ := tab.Size("JVMFlag")
	arr, ok1 := r.u64(fs.Address)
	n, ok2 := r.u64(fn.Address)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("read the flag table: JVMFlag::flags at %#x unreadable", fs.Address)
	}
	if n == 0 || n > maxFlags || size < 16 || size > 256 || fName.Offset+8 > size || fAddr.Offset+8 > size {
		return nil, fmt.Errorf("%w: flag table of %d entries of %d bytes", ErrUnsupported, n, size)
	}
	want := make(map[string]bool, len(flagNames))
	for _, name := range flagNames {
		want[name] = true
	}
	buf := make([]byte, n*size)
	if !r.readAt(buf, arr) {
		return nil, fmt.Errorf("read the flag table: %d entries at %#x unreadable", n, arr)
	}
	out := make(map[string]flag)
	var name [maxFlagName]byte
	for i := uint64(0); i < n; i++ {
		e := buf[i*size : (i+1)*size]
		np, ap := le64(e[fName.Offset:]), le64(e[fAddr.Offset:])
		if np == 0 || ap == 0 {
			continue
		}
		// Read the name up to maxFlagName bytes, short at the end of a
		// mapping; only names that end within it can be wanted.
		nb := name[:]
		if !r.cached(nb, np) {
			nb = name[:0]
			for j := 0; j < maxFlagName && r.cached(name[j:j+1], np+uint64(j)); j++ {
				nb = name[:j+1]
				if name[j] == 0 {
					break
				}
			}
		}
		end := slices.Index(nb, 0)
		if end < 0 {
			continue
		}
		s := string(nb[:end])
		if !want[s] {
			continue
		}
		var v [8]byte
		if !r.cached(v[:], ap) {
			// A bool may sit in the last byte of a mapping.
			if !r.cached(v[:1], ap) {
				return nil, fmt.Errorf("read flag %s at %#x: unreadable", s, ap)
			}
		}
		out[s] = flag{le64(v[:])}
	}
	return out, nil
}

// fromFlags sets the collector, the encodings in use and the alignment
// from the flags (or the options), and refuses what the walker cannot
// parse.
func (l *Layout) fromFlags(flags map[string]flag, opts Options) error {
	on := func(name string) bool { f, ok := flags[name]; return ok && f.val&0xff != 0 }
	l.CompactHeaders = on("UseCompactObjectHeaders")
	switch {
	case on("UseZGC"):
		// Colored references: the walk reads them through their colors,
		// at one view of the heap (zgc.go).
		l.GC = "z"
	case on("UseShenandoahGC"):
		// Objects it moves concurrently are forwarded in the mark word:
		// the walk reads them at their new address.
		l.GC = "shenandoah"
	case on("UseSerialGC"):
		l.GC = "serial"
	case on("UseParallelGC"):
		l.GC = "parallel"
	case on("UseG1GC"):
		l.GC = "g1"
	case on("UseEpsilonGC"):
		l.GC = "epsilon"
	}
	pick := func(opt *bool, name string) (bool, error) {
		if opt != nil {
			return *opt, nil
		}
		if _, ok := flags[name]; !ok {
			return false, fmt.Errorf("%w: no -XX:%s in the flag table, and no option says", ErrUnsupported, name)
		}
		return on(name), nil
	}
	var err error
	if l.CompressedOops, err = pick(opts.CompressedOops, "UseCompressedOops"); err != nil {
		return err
	}
	if l.CompressedClassPointers, err = pick(opts.CompressedClassPointers, "UseCompressedClassPointers"); err != nil {
		return err
	}
	l.Alignment = 8
	if f, ok := flags["ObjectAlignmentInBytes"]; ok {
		// An intx in JDK 17, an int in JDK 25: the low 32 bits either way.
		l.Alignment = uint64(uint32(f.val))
	}
	if l.Alignment < 8 || l.Alignment > 256 || l.Alignment&(l.Alignment-1) != 0 {
		return fmt.Errorf("%w: ObjectAlignmentInBytes %d", ErrUnsupported, l.Alignment)
	}
	return nil
}

// Collections reads the JVM's count of collections so far
// (CollectedHeap::_total_collections) and whether a stop-the-world
// collection runs now: a walk that saw the count change, or a
// collection running, read a heap that moved under it.
func (l *Layout) Collections(mem Mem) (count uint32, active bool, err error) {
	var st Stats
	r := &reader{mem: mem, stats: &st}
	return l.collections(r)
}

// gcState is what says whether the heap moved between two reads: the
// collection count, a pause running, and ZGC's colors (a concurrent
// cycle's phases change them, not the count).
type gcState struct {
	count  uint32
	full   uint32 // full collections: they compact the whole heap
	active bool
	colors [len(zColorMasks)]uint64
}

// moved says whether a collection ran or runs between g and h.
func (g gcState) moved(h gcState) bool {
	return g.count != h.count || g.colors != h.colors || g.active || h.active
}

// state is the collection count, a pause running, and ZGC's colors.
func (l *Layout) state(r *reader) (gcState, error) {
	n, full, active, err := l.collectionsFull(r)
	if err != nil {
		return gcState{}, err
	}
	g := gcState{count: n, full: full, active: active}
	if l.z != nil {
		var b [8]byte
		for i, a := range l.z.colorAt {
			if r.readAt(b[:], a) {
				g.colors[i] = le64(b[:])
			}
		}
	}
	return g, nil
}

func (l *Layout) collections(r *reader) (uint32, bool, error) {
	n, _, active, err := l.collectionsFull(r)
	return n, active, err
}

// collectionsFull is the collection count, the count of full ones (0
// when the layout has none) and whether a pause runs, read at once.
func (l *Layout) collectionsFull(r *reader) (count, full uint32, active bool, err error) {
	o := &l.off
	// The walk asks before and after each batch: one read when the
	// fields are near (they are in CollectedHeap).
	lo, hi := o.heapTotal, o.heapTotal+4
	if o.hasActive {
		lo, hi = min(lo, o.heapActive), max(hi, o.heapActive+1)
	}
	if o.hasFull {
		lo, hi = min(lo, o.heapFull), max(hi, o.heapFull+4)
	}
	var b [64]byte
	if hi-lo <= uint64(len(b)) && r.readAt(b[:hi-lo], l.collectedHeap+lo) {
		count = le32(b[o.heapTotal-lo:])
		if o.hasFull {
			full = le32(b[o.heapFull-lo:])
		}
		if o.hasActive {
			active = b[o.heapActive-lo] != 0
		}
		return count, full, active, nil
	}
	if !r.readAt(b[:4], l.collectedHeap+o.heapTotal) {
		if r.gone != nil {
			return 0, 0, false, fmt.Errorf("read the collection count: %w", r.gone)
		}
		return 0, 0, false, fmt.Errorf("read the collection count at %#x: unreadable", l.collectedHeap+o.heapTotal)
	}
	count = le32(b[:])
	if o.hasFull && r.readAt(b[:4], l.collectedHeap+o.heapFull) {
		full = le32(b[:])
	}
	if o.hasActive && r.readAt(b[:1], l.collectedHeap+o.heapActive) {
		active = b[0] != 0
	}
	return count, full, active, nil
}

// minObjectShift is log2 of the smallest object's bytes: 8 with compact
// headers (a mark word alone), else 16.
func (l *Layout) minObjectShift() uint {
	if l.HeaderSize <= 8 {
		return 3
	}
	return 4
}

// inHeap says whether [a, a+n) lies in one heap range, and which.
func (l *Layout) inHeap(a, n uint64) (Range, bool) {
	for _, h := range l.Heap {
		if a >= h.Start && a < h.End {
			return h, n <= h.End-a
		}
	}
	return Range{}, false
}

// decodeOop turns a reference slot's value into an address.
func (l *Layout) decodeOop(v uint64) uint64 {
	if v == 0 {
		return 0
	}
	if l.z != nil {
		return l.z.decode(v)
	}
	return l.DecodeOop(v)
}

// KlassOf returns the Klass* an object's header names: hdr holds at
// least its first 16 bytes (12 without compact headers). A compact
// header's is in its mark word, a forwarded object's nowhere (0).
func (l *Layout) KlassOf(hdr []byte) uint64 { return l.DecodeKlass(hdr) }

// decodeKlass turns an object's klass word into a Klass*.
func (l *Layout) decodeKlass(hdr []byte) uint64 { return l.DecodeKlass(hdr) }
