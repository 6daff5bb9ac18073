package heapwalk

import (
	"slices"

	"github.com/djx-bpf/djx-bpf/jvmsym"
)

// Caps on what one klass in the target's metaspace may make the walk
// read or keep. Real classes are far below them.
const (
	maxInstanceSize = 1 << 20 // bytes; a class's fields take at most 65535 × 8
	maxVtable       = 1 << 20 // words of a vtable, of an itable
	maxOopMaps      = 1 << 12 // blocks; one per class of a hierarchy, plus @Contended groups
	maxOopFields    = 1 << 16 // oop fields of one class
	maxSuperDepth   = 256     // superclasses followed
	maxBadKlasses   = 1 << 16 // bad klass pointers remembered, so a garbled heap costs one read each
	maxStatics      = 65535   // reference statics of one class: a class has at most 65535 fields
	// In all classes of a walk: real JVMs have under 100k classes with
	// a few fields each.
	maxTotalOopFields = 1 << 22
	maxNameBytes      = 1 << 26
)

const kcacheBits = 8

// kcacheEntry is one entry of the walker's klass cache.
type kcacheEntry struct {
	addr uint64
	k    *klass
}

// kind is what a klass's objects are, for the walk.
type kind uint8

const (
	kindNone      kind = iota // no instances: an interface or abstract class (layout helper 0)
	kindInstance              // fixed size, oop fields from the oop maps
	kindMirror                // java.lang.Class: variable size, with its class's statics
	kindObjArray              // references
	kindTypeArray             // primitives
	kindOpaque                // jdk.internal.vm.StackChunk: its size is not in the klass; counted, not followed
)

// klass is what the walk knows of one Klass*: read once, validated,
// then shared by all its objects.
type klass struct {
	addr    uint64
	idx     uint32 // 1-based index in walker.klassList
	name    string // Java form: java.util.HashMap$Node, long[]
	super   uint64
	kind    kind
	size    uint64 // an instance's bytes (for java.lang.Class, where the statics start)
	hdr     uint64 // an array's header bytes: its elements start there
	log2    uint   // an array's element size, log2
	oops    []uint32
	mirror  uint64 // its java.lang.Class instance
	refType uint8  // InstanceKlass::_reference_type: 0 for none

	// What the walk caches on it: hops and edges of its fields, the row
	// of its last chain.
	hops      []uint32
	edgeChain []uint32
	edges     []uint32
	arrHop    uint32
	arrChain  uint32
	arrEdge   uint32
	statics   map[uint32]uint32 // static field offset in its mirror → hop
	rowChain  uint32
	row       uint32
	hasRow    bool
	buf       *bufFields // its direct buffer fields (offheap.go), when bufState is bufYes
	bufState  uint8
}

// klassAt returns the klass at addr, read and validated on first use;
// nil if addr is not a valid klass.
func (w *walker) klassAt(addr uint64) *klass {
	// A direct-mapped cache in front of the map: most objects are of a
	// few classes.
	c := &w.kcache[(addr>>3)*0x9e3779b97f4a7c15>>(64-kcacheBits)]
	if c.addr == addr && c.k != nil {
		return c.k
	}
	if k, ok := w.klasses[addr]; ok {
		if k != nil {
			c.addr, c.k = addr, k
		}
		return k
	}
	k := w.readKlass(addr)
	if k == nil {
		if w.badKlasses < maxBadKlasses {
			w.badKlasses++
			w.klasses[addr] = nil
		}
		return nil
	}
	// The classes, their names and their oop fields are bounded in
	// all, as a forged heap could make up classes of its own.
	if len(w.klassList) >= w.cfg.MaxKlasses || w.oopFields+len(k.oops) > maxTotalOopFields || w.nameBytes+len(k.name) > maxNameBytes {
		w.stats.KlassesCapped++
		return nil
	}
	w.oopFields += len(k.oops)
	w.nameBytes += len(k.name)
	k.idx = uint32(len(w.klassList) + 1)
	w.klassList = append(w.klassList, k)
	w.klasses[addr] = k
	if k.kind != kindNone && k.kind != kindOpaque {
		k.hops = make([]uint32, len(k.oops))
		k.edgeChain = make([]uint32, len(k.oops))
		k.edges = make([]uint32, len(k.oops))
	}
	return k
}

// readKlass reads and validates the Klass at addr: its layout helper
// sane, its name a readable symbol, its oop maps inside its instances,
// and its mirror in the heap pointing back at it.
func (w *walker) readKlass(addr uint64) *klass {
	l, o := w.l, &w.l.off
	if addr == 0 || addr%8 != 0 {
		return nil
	}
	buf := w.kbuf[:o.klassSize]
	if !w.r.cached(buf, addr) {
		return nil
	}
	k := &klass{addr: addr, super: le64(buf[o.klassSuper:])}
	lh := int32(le32(buf[o.klassLH:]))
	switch {
	case lh > 0:
		k.kind = kindInstance
		k.size = uint64(lh) &^ 7 // the low bits flag the slow allocation path
		if k.size < l.HeaderSize || k.size > maxInstanceSize || k.size%l.Alignment != 0 {
			return nil
		}
	case lh < 0:
		tag := lh >> o.lhTagShift
		k.hdr = uint64(uint32(lh)>>o.lhHeaderShift) & uint64(o.lhHeaderMask)
		k.log2 = uint(uint32(lh) & o.lhLog2Mask)
		if k.hdr < l.HeaderSize+4 || k.hdr > l.HeaderSize+4+8 || k.log2 > 3 {
			return nil
		}
		switch tag {
		case o.lhTagObj:
			k.kind = kindObjArray
			if 1<<k.log2 != l.OopSize {
				return nil
			}
		case o.lhTagType:
			k.kind = kindTypeArray
		default:
			return nil
		}
	}
	name, ok := w.symbol(l.vm.KlassName(buf))
	if !ok {
		return nil
	}
	k.name = jvmsym.TypeName(name)
	if lh > 0 {
		if !w.instanceKlass(k) {
			return nil
		}
		switch name {
		case "java/lang/Class":
			// Its instances hold their size, their statics' count and
			// their class at these offsets: they must lie inside.
			if k.size < o.mirrorKlass+8 || k.size < o.mirrorOopSize+4 || k.size < o.mirrorStaticCount+4 {
				return nil
			}
			k.kind = kindMirror
		case "jdk/internal/vm/StackChunk":
			k.kind = kindOpaque
		}
	}
	// The mirror must point back: a strong check that addr is a Klass.
	slot := le64(buf[o.klassMirror+o.oopHandleObj:])
	m, ok := w.r.u64(slot)
	if l.z != nil {
		m = w.ref(m) // the handle holds a colored reference, maybe stale
	}
	if !ok || m%8 != 0 {
		return nil
	}
	if _, ok := l.inHeap(m, l.HeaderSize); !ok {
		return nil
	}
	var back [8]byte
	if !w.r.readAt(back[:], m+o.mirrorKlass) || le64(back[:]) != addr {
		return nil
	}
	k.mirror = m
	return k
}

// instanceKlass reads an InstanceKlass's reference type and nonstatic
// oop maps: OopMapBlocks {int offset; uint count} after the vtable and
// the itable, which follow the InstanceKlass itself.
func (w *walker) instanceKlass(k *klass) bool {
	l, o := w.l, &w.l.off
	buf := w.kbuf[:o.ikSize]
	if !w.r.cached(buf, k.addr) {
		return false
	}
	vtable := int32(le32(buf[o.klassVtableLen:]))
	itable := int32(le32(buf[o.ikItableLen:]))
	nmaps := int32(le32(buf[o.ikOopMapSize:]))
	k.refType = buf[o.ikRefType]
	if vtable < 0 || vtable > maxVtable || itable < 0 || itable > maxVtable || nmaps < 0 || nmaps > maxOopMaps {
		return false
	}
	if nmaps == 0 {
		return true
	}
	// On 64 bits an OopMapBlock is one word.
	at := k.addr + (o.ikSize+7)&^7 + 8*uint64(vtable) + 8*uint64(itable)
	maps := make([]byte, 8*nmaps)
	if !w.r.cached(maps, at) {
		return false
	}
	for i := range int(nmaps) {
		off := int64(int32(le32(maps[8*i:])))
		n := uint64(le32(maps[8*i+4:]))
		if n == 0 {
			continue
		}
		if off < int64(l.HeaderSize) || uint64(off)%l.OopSize != 0 || n > (k.size-uint64(off))/l.OopSize ||
			len(k.oops)+int(n) > maxOopFields {
			return false
		}
		for j := range n {
			k.oops = append(k.oops, uint32(uint64(off)+j*l.OopSize))
		}
	}
	slices.Sort(k.oops)
	k.oops = slices.Compact(k.oops)
	return true
}

// symbol reads a Symbol's text: u2 length, then the bytes. A name must
// be non-empty and free of control bytes (modified UTF-8 has no NUL).
func (w *walker) symbol(addr uint64) (string, bool) {
	if addr == 0 {
		return "", false
	}
	// MaxName+1 bytes are enough to tell a name that AppendCut must cut.
	b, n, err := w.l.vm.ReadSymbol(w.r, addr, jvmsym.MaxName+1, 0)
	if err != nil || n == 0 {
		return "", false
	}
	for _, c := range b {
		if c < 0x20 || c == 0x7f {
			return "", false
		}
	}
	return string(jvmsym.AppendCut(nil, b)), true
}

// hasOop says whether the klass's instances have an oop field at off.
func (k *klass) hasOop(off uint32) bool {
	_, ok := slices.BinarySearch(k.oops, off)
	return ok
}

// declaring returns the class that declares k's oop field at off: the
// topmost superclass whose instances have it too.
func (w *walker) declaring(k *klass, off uint32) *klass {
	d := k
	s := k.super
	for range maxSuperDepth {
		if s == 0 {
			break
		}
		sk := w.klassAt(s)
		if sk == nil || !sk.hasOop(off) {
			break
		}
		d, s = sk, sk.super
	}
	return d
}
