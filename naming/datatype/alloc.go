package datatype

import "github.com/djx-bpf/djx-bpf/sources/decode"

// Objects being initialised. JIT code writes a new object's header, then
// its body, often through a second register (C2 zeroes a body through
// base+16, and an array's with vector stores), and a timer sample lands on
// those stores. The register the access used then points at memory whose
// header is not yet written, or past the header; two ways still name it.

// Enclosing finds, among the objects whose headers the sample's registers
// point at, the one whose extent holds addr. Only extents known exactly
// count: instances, and arrays when the klass word is narrow (the length
// shares its word).
func (t *Table) Enclosing(addr uint64, regs *decode.Regs, h Headers) (obj, klass uint64, ok bool) {
	for reg := int8(0); reg < 16; reg++ {
		for _, narrow := range [2]bool{false, true} {
			m, k, hdr := t.geo.header(h, reg, narrow)
			if !hdr || !t.geo.plausibleMark(m) {
				continue
			}
			o := regs.GPR[reg]
			if narrow {
				o = t.geo.OopBase + o<<t.geo.OopShift
			}
			if o > addr || ok && o <= obj {
				continue
			}
			l := t.ByKlassWord(k)
			if l == nil || l.mirror() || l.Array && !t.geo.CompressedClassPointers || !t.Holds(l, k, addr-o) {
				continue
			}
			obj, klass, ok = o, k, true
		}
	}
	return obj, klass, ok
}

// klassOffset is where the klass word sits in an object header.
const klassOffset = 8

// AllocKlass reads the klass word of the object at register base from
// the code that initialises it: its store of a constant klass word, in
// the straight-line code from the sampled pc. With compact headers it is
// the store of the mark word, the class's prototype header.
func (g Geometry) AllocKlass(code []byte, base int8) (uint64, decode.Scan) {
	if g.CompactHeaders {
		m, st := decode.StoredConst(code, base, 0, 8)
		if st != decode.ScanFound {
			return 0, st
		}
		return g.KlassWord(m, 0), st
	}
	size := 8
	if g.CompressedClassPointers {
		size = 4
	}
	return decode.StoredConst(code, base, klassOffset, size)
}
