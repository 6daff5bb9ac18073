// Package datatype names the memory a sampled heap access touched by its
// data type: the class (or array type) of the object, from the klass word
// of its header, and the field (or array element), from the access's
// offset in the class's field layout. It works for every object, tracked
// or not: the sampling program reads the headers its registers point at,
// and the agent describes each class's Klass* and field offsets.
package datatype

import (
	"sort"

	"github.com/djx-bpf/djx-bpf/hotspot/vmlayout"
	"github.com/djx-bpf/djx-bpf/jvmsym"
	"github.com/djx-bpf/djx-bpf/sources/decode"
)

// Field is an instance field at a byte offset in its object.
type Field struct {
	Offset uint32
	Name   string
	Sig    string // JVM signature: "J", "Ljava/lang/Long;"
}

// Geometry is how the JVM lays out object headers and references: with
// CompressedClassPointers the klass word is a 32-bit narrow klass, with
// CompressedOops references in fields are 32 bits wide, and with
// CompactHeaders the narrow klass is in the mark word and an instance's
// fields, or an array's length, start at 8.
type Geometry struct {
	vmlayout.Geometry
}

// headerSize is where the first instance field (or an array's length)
// can start.
func (g Geometry) headerSize() uint64 { return g.HeaderBytes() }

// KlassWord is the klass word of an object header whose first 16 bytes
// are mark and next: the 8 bytes at offset 8, or with compact headers the
// narrow klass from the mark with the array length (the 4 bytes at
// offset 8) above it, as a narrow klass word holds them. Tables and
// Holds take this word.
func (g Geometry) KlassWord(mark, next uint64) uint64 {
	if !g.CompactHeaders {
		return next
	}
	return mark>>g.KlassMarkShift | uint64(uint32(next))<<32
}

// Layout is one class: its name and the instance fields of it and its
// superclasses, by offset.
type Layout struct {
	Name   string // Java form: "java.util.TreeMap$Entry", "long[]"
	Sig    string
	Array  bool
	Fields []Field // sorted by Offset
	sizes  []uint32
}

// Table maps klass words and signatures to layouts.
type Table struct {
	geo     Geometry
	byKlass map[uint64]*Layout // full Klass*, or the narrow value
	bySig   map[string]*Layout
}

// NewTable returns an empty table for a JVM of geometry g.
func NewTable(g Geometry) *Table {
	return &Table{geo: g, byKlass: make(map[uint64]*Layout), bySig: make(map[string]*Layout)}
}

// Geometry is the geometry the table was made for.
func (t *Table) Geometry() Geometry { return t.geo }

// Len bounds the memory the table holds: the number of klasses or of
// signatures it knows, whichever is more.
func (t *Table) Len() int { return max(len(t.byKlass), len(t.bySig)) }

// Add records a class: klass is its Klass*, narrow its compressed class
// pointer (used when the geometry says the klass word is narrow). A later
// Add of the same klass replaces the earlier one: a class can be unloaded
// and its Klass* reused.
func (t *Table) Add(klass uint64, narrow uint32, sig string, fields []Field) {
	l := &Layout{Name: jvmsym.TypeName(sig), Sig: sig, Array: len(sig) > 0 && sig[0] == '['}
	l.Fields = append([]Field(nil), fields...)
	sort.SliceStable(l.Fields, func(i, j int) bool { return l.Fields[i].Offset < l.Fields[j].Offset })
	l.sizes = make([]uint32, len(l.Fields))
	for i, f := range l.Fields {
		l.sizes[i] = t.fieldSize(f.Sig)
	}
	key := klass
	if t.geo.CompressedClassPointers {
		key = uint64(narrow)
	}
	t.byKlass[key] = l
	t.bySig[sig] = l
}

func (t *Table) fieldSize(sig string) uint32 {
	if sig == "" {
		return 0
	}
	switch sig[0] {
	case 'J', 'D':
		return 8
	case 'I', 'F':
		return 4
	case 'S', 'C':
		return 2
	case 'B', 'Z':
		return 1
	case 'L', '[':
		if t.geo.CompressedOops {
			return 4
		}
		return 8
	}
	return 0
}

// ByKlassWord returns the class whose header holds klass word w (the 8
// bytes after the mark word), or nil.
func (t *Table) ByKlassWord(w uint64) *Layout {
	if t.geo.CompressedClassPointers {
		w = uint64(uint32(w))
	}
	return t.byKlass[w]
}

// BySig returns the class of JVM signature sig, or nil.
func (t *Table) BySig(sig string) *Layout { return t.bySig[sig] }

// Header names of accesses that are not to a field or element.
const (
	FieldHeader = "[header]" // the mark or klass word: locking, hashing, type checks
	FieldLength = "length"   // an array's length
	// FieldStatic: past a java.lang.Class's own fields, where HotSpot keeps
	// the static fields of the class the mirror stands for.
	FieldStatic = "[static fields]"
)

// maxMirror bounds the static fields a class mirror can hold.
const maxMirror = 1 << 16

func (l *Layout) mirror() bool { return l.Sig == "Ljava/lang/Class;" }

// FieldAt names the field at byte offset off in an object of class l: ""
// for an array element, FieldHeader or FieldLength for the header, and
// "[+off]" when no field covers off (padding, or a layout that changed).
func (t *Table) FieldAt(l *Layout, off uint64) string {
	h := t.geo.headerSize()
	if l.Array {
		switch {
		case off < h:
			return FieldHeader
		case off < h+4:
			return FieldLength
		}
		return ""
	}
	if off < h {
		return FieldHeader
	}
	i := sort.Search(len(l.Fields), func(i int) bool { return uint64(l.Fields[i].Offset) > off }) - 1
	if i >= 0 && off < uint64(l.Fields[i].Offset)+uint64(max(l.sizes[i], 1)) {
		return l.Fields[i].Name
	}
	if l.mirror() && off >= t.instanceEnd(l) {
		return FieldStatic
	}
	return "[+" + itoa(off) + "]"
}

func itoa(v uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			return string(b[i:])
		}
	}
}

// Headers are the object headers a sample's registers pointed at, as the
// sampling program read them: Hdr[slot] for each pt_regs slot whose bit
// is set in OK; Narrow marks slots that held a compressed oop.
type Headers struct {
	OK, Narrow uint16
	Hdr        *[15][2]uint64
}

// ptSlot maps decode's register numbers (x86 encoding order) to pt_regs
// slots; rsp (-1) has no header.
var ptSlot = [16]int8{10, 11, 12, 5, -1, 4, 13, 14, 9, 8, 7, 6, 3, 2, 1, 0}

// Slot is the pt_regs slot of decode register reg, whose header the
// sampling program reads; -1 for none (rsp, or no register).
func Slot(reg int8) int {
	if reg < 0 || reg >= 16 {
		return -1
	}
	return int(ptSlot[reg])
}

// header is the mark and klass word (KlassWord) of the object register
// reg points at, as a narrow oop or not.
func (g Geometry) header(h Headers, reg int8, narrow bool) (mark, klass uint64, ok bool) {
	if reg < 0 || reg >= 16 || h.Hdr == nil {
		return 0, 0, false
	}
	s := ptSlot[reg]
	if s < 0 || h.OK&(1<<s) == 0 || (h.Narrow&(1<<s) != 0) != narrow {
		return 0, 0, false
	}
	return h.Hdr[s][0], g.KlassWord(h.Hdr[s][0], h.Hdr[s][1]), true
}

// Object finds the object a decoded access addressed: the base register
// (a field or element of the object it points at), or, under compressed
// oops, an index register holding an oop scaled by the oop shift with the
// heap base as base register (C2's `mov 0xc(%r12,%r11,8)`, r12 the heap
// base, or no base register when the base is 0; unscaled oops have a
// scale of 1). It returns the object's address and header words.
func (g Geometry) Object(res decode.Result, regs *decode.Regs, h Headers) (obj, mark, klass uint64, ok bool) {
	baseVal, hasBase := uint64(0), false
	if res.Base >= 0 && res.Base < 16 {
		baseVal, hasBase = regs.GPR[res.Base], true
	}
	if res.Index >= 0 && res.Index < 16 && res.Scale == 1<<g.OopShift && (res.Base == decode.NoReg || hasBase && baseVal == g.OopBase) {
		narrow := g.OopShift > 0 || g.OopBase != 0
		if m, k, ok := g.header(h, res.Index, narrow); ok {
			return g.OopBase + regs.GPR[res.Index]<<g.OopShift, m, k, g.plausibleMark(m)
		}
	}
	if hasBase {
		if m, k, ok := g.header(h, res.Base, false); ok {
			return baseVal, m, k, g.plausibleMark(m)
		}
	}
	return 0, 0, 0, false
}

// plausibleMark rejects words that cannot be a mark word: an unlocked
// mark (lock bits 01) keeps its top 22 bits clear on 64-bit HotSpot (25
// up to JDK 23, 22 since). Locked and inflated marks hold pointers and
// are left to the klass check. A compact mark holds the narrow klass in
// those bits, in every state but forwarded (lock bits 11: the mark is
// the object's new address).
func (g Geometry) plausibleMark(m uint64) bool {
	if g.CompactHeaders {
		return m&3 != 3 && m>>g.KlassMarkShift != 0
	}
	return m&3 != 1 || m>>42 == 0
}

// Holds says whether offset off can lie inside an object of class l whose
// klass word is w: within its fields (plus alignment) for an instance,
// within its length for an array (known when the klass word is narrow: the
// length fills the word's upper half). A register pointing into the middle
// of another object passes the klass check by chance only, and fails this.
func (t *Table) Holds(l *Layout, w, off uint64) bool {
	h := t.geo.headerSize()
	if l.mirror() {
		return off < maxMirror
	}
	if !l.Array {
		return off < (t.instanceEnd(l)+7)&^7
	}
	if !t.geo.CompressedClassPointers {
		return true
	}
	// Elements start after the length, aligned to their size (JDK 17
	// aligns them to a word: at most the same for 8-byte elements).
	es := uint64(t.elemSize(l.Sig))
	length := w >> 32
	return off < (h+4+es-1)&^(es-1)+length*es
}

// elemSize is the size of an element of the array class sig.
func (t *Table) elemSize(sig string) uint32 {
	if len(sig) < 2 {
		return 8
	}
	if s := t.fieldSize(sig[1:]); s > 0 {
		return s
	}
	return 8
}

// instanceEnd is where the instance fields of l end.
func (t *Table) instanceEnd(l *Layout) uint64 {
	end := t.geo.headerSize()
	if n := len(l.Fields); n > 0 {
		end = max(end, uint64(l.Fields[n-1].Offset)+uint64(l.sizes[n-1]))
	}
	return end
}
