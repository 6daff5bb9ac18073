package vmlayout

import (
	"encoding/binary"
	"fmt"

	"github.com/djx-bpf/djx-bpf/hotspot/vmstructs"
)

// Geometry is how one JVM encodes references and class pointers in its
// objects: a narrow oop is OopBase + narrow<<OopShift, a narrow klass
// KlassBase + narrow<<KlassShift, held in the klass word or, with compact
// headers, in the mark word's bits from KlassMarkShift up.
type Geometry struct {
	CompressedOops bool
	OopBase        uint64 // narrow oop decoding: OopBase + narrow<<OopShift
	OopShift       uint

	CompressedClassPointers bool
	KlassBase               uint64
	KlassShift              uint

	// CompactHeaders: -XX:+UseCompactObjectHeaders, the narrow klass is
	// the mark word's bits from KlassMarkShift up (markWord::klass_shift)
	// and the header is the mark word alone.
	CompactHeaders bool
	KlassMarkShift uint
}

// OopBytes is a reference field's size: 4 with compressed oops, else 8.
func (g *Geometry) OopBytes() uint64 {
	if g.CompressedOops {
		return 4
	}
	return 8
}

// HeaderBytes is an instance's header, mark word and klass: 8 with
// compact headers, 12 with a narrow klass, else 16. An array's length
// follows it.
func (g *Geometry) HeaderBytes() uint64 {
	switch {
	case g.CompactHeaders:
		return 8
	case g.CompressedClassPointers:
		return 12
	}
	return 16
}

// DecodeOop turns a reference field's value into an address; null stays
// 0.
func (g *Geometry) DecodeOop(v uint64) uint64 {
	if v == 0 || !g.CompressedOops {
		return v
	}
	return g.OopBase + v<<g.OopShift
}

// DecodeKlass returns the Klass* an object's header names: hdr holds at
// least its first 16 bytes (12 without compact headers). A compact
// header's is in its mark word, a forwarded object's nowhere (0).
func (g *Geometry) DecodeKlass(hdr []byte) uint64 {
	if g.CompactHeaders {
		mark := binary.LittleEndian.Uint64(hdr)
		if mark&3 == 3 {
			return 0 // forwarded: the mark is the new address
		}
		nk := mark >> g.KlassMarkShift
		if nk == 0 {
			return 0
		}
		return g.KlassBase + nk<<g.KlassShift
	}
	if g.CompressedClassPointers {
		nk := uint64(binary.LittleEndian.Uint32(hdr[8:]))
		if nk == 0 {
			return 0
		}
		return g.KlassBase + nk<<g.KlassShift
	}
	return binary.LittleEndian.Uint64(hdr[8:])
}

// Encodings are the narrow encodings' bases and shifts as the JVM's
// statics hold them, whether the encoding is in use or not.
type Encodings struct {
	OopBase, KlassBase   uint64
	OopShift, KlassShift int64
}

// ReadEncodings reads the narrow oop and narrow klass bases and shifts
// from the JVM's statics (EncodingNeeds).
func ReadEncodings(tab *vmstructs.Table, r Reader) (Encodings, error) {
	if err := tab.Require(EncodingNeeds...); err != nil {
		return Encodings{}, err
	}
	var e Encodings
	for _, s := range []struct {
		what  string
		names []string
		word  *uint64
		shift *int64
	}{
		{"narrow oop base", narrowOopBase, &e.OopBase, nil},
		{"narrow oop shift", narrowOopShift, nil, &e.OopShift},
		{"narrow klass base", narrowKlassBase, &e.KlassBase, nil},
		{"narrow klass shift", narrowKlassShift, nil, &e.KlassShift},
	} {
		f, _ := tab.FirstField(s.names...)
		var b [8]byte
		n := 8
		if s.shift != nil {
			n = 4 // an int
		}
		if f.Address == 0 || read(r, b[:n], f.Address) != nil {
			return Encodings{}, fmt.Errorf("read %s at %#x: unreadable", s.what, f.Address)
		}
		if s.word != nil {
			*s.word = binary.LittleEndian.Uint64(b[:])
		} else {
			*s.shift = int64(int32(binary.LittleEndian.Uint32(b[:])))
		}
	}
	return e, nil
}

// Geometry is the geometry of a JVM whose flags say which encodings are
// in use: one not in use may hold anything (JDK 25 leaves the klass shift
// at -1 without compressed class pointers), and reads as base 0, shift 0.
// With compact headers, markWord::klass_shift says where the narrow klass
// is in the mark word: its bits up to the word's top, at most 32 of them.
func (e Encodings) Geometry(tab *vmstructs.Table, oops, klass, compact bool) (Geometry, error) {
	g := Geometry{CompressedOops: oops, CompressedClassPointers: klass, CompactHeaders: compact}
	oopShift, klassShift := e.OopShift, e.KlassShift
	if oops {
		g.OopBase = e.OopBase
	} else {
		oopShift = 0
	}
	if klass {
		g.KlassBase = e.KlassBase
	} else {
		klassShift = 0
	}
	if uint64(oopShift) > 8 || uint64(klassShift) > 32 {
		return Geometry{}, fmt.Errorf("%w: narrow oop shift %d, klass shift %d", ErrUnsupported, oopShift, klassShift)
	}
	g.OopShift, g.KlassShift = uint(oopShift), uint(klassShift)
	if !compact {
		return g, nil
	}
	if !klass {
		// HotSpot turns compact headers off without compressed class
		// pointers: the flags contradict each other.
		return Geometry{}, fmt.Errorf("%w: compact object headers without compressed class pointers", ErrUnsupported)
	}
	s, ok := tab.LongConst(markKlassShift)
	if !ok {
		return Geometry{}, fmt.Errorf("%w: compact object headers without %s in vmStructs", ErrUnsupported, markKlassShift)
	}
	if s < 32 || s > 62 {
		return Geometry{}, fmt.Errorf("%w: compact object headers with %s %d", ErrUnsupported, markKlassShift, int64(s))
	}
	g.KlassMarkShift = uint(s)
	return g, nil
}
