package heap

import (
	"errors"
	"fmt"
	"strings"
)

// VMKind names the JVM implementation a Geometry describes.
type VMKind int

const (
	VMUnknown VMKind = iota
	HotSpot
	OpenJ9
)

func (k VMKind) String() string {
	switch k {
	case HotSpot:
		return "HotSpot"
	case OpenJ9:
		return "OpenJ9"
	}
	return "unknown"
}

// RefMode is how the JVM encodes a 32-bit compressed reference.
// Every compressed mode decodes as Base + ref<<Shift; the modes differ in
// which of Base and Shift are zero, which is what HotSpot reports.
type RefMode int

const (
	// RefsUnknown means the input did not say.
	RefsUnknown RefMode = iota
	// RefsFull means no compression: references are 64-bit addresses
	// (HotSpot -XX:-UseCompressedOops, ZGC; OpenJ9 -Xnocompressedrefs).
	RefsFull
	// RefsUnscaled: base 0, shift 0; the heap ends at or below 4 GiB
	// (HotSpot "32-bit", OpenJ9 shift 0).
	RefsUnscaled
	// RefsZeroBased: base 0, shift > 0 (HotSpot "Zero based", OpenJ9 shifts 1-4).
	RefsZeroBased
	// RefsDisjointBase: base != 0 and its bits do not overlap ref<<shift,
	// so base|ref<<shift is also valid (HotSpot "Non-zero disjoint base").
	RefsDisjointBase
	// RefsHeapBased: base != 0 (HotSpot "Non-zero based").
	RefsHeapBased
)

func (m RefMode) String() string {
	switch m {
	case RefsFull:
		return "uncompressed"
	case RefsUnscaled:
		return "unscaled"
	case RefsZeroBased:
		return "zero based"
	case RefsDisjointBase:
		return "disjoint base"
	case RefsHeapBased:
		return "heap based"
	}
	return "unknown"
}

// Compressed reports whether references are 32-bit encoded.
func (m RefMode) Compressed() bool {
	return m >= RefsUnscaled
}

// GiB is 1<<30 bytes.
const GiB = uint64(1) << 30

// Geometry is where a JVM's heap lives and how its references are encoded.
type Geometry struct {
	VM VMKind
	// Reserved is the heap's reserved address range (what -Xmx can grow
	// into). Zero when the source does not say (ZGC).
	Reserved Range
	// Regions are named sub-ranges: generations or spaces (HotSpot
	// GC.heap_info), or 1STHEAPREGION regions (OpenJ9). They need not
	// cover Reserved.
	Regions []Range
	// Mode, Base and Shift define Decode.
	Mode  RefMode
	Base  uint64
	Shift uint
	// ShiftDerived is true when Shift was not stated by the JVM but inferred
	// from the heap's top address (OpenJ9 javacores do not print it).
	ShiftDerived bool
	// KlassBase and KlassShift encode compressed class pointers (HotSpot),
	// when the source states them.
	KlassBase  uint64
	KlassShift uint
	HasKlass   bool
	// Version is the JVM's self-description, if found.
	Version string
}

// ErrNotCompressed means Decode or Encode was used on a geometry with full
// (uncompressed) or unknown references.
var ErrNotCompressed = errors.New("references are not compressed")

// Decode turns a compressed reference into an address. The null reference
// decodes to 0 in every mode (HotSpot and OpenJ9 both keep null as 0).
// With uncompressed or unknown references it returns the value unchanged.
func (g *Geometry) Decode(ref uint32) uint64 {
	if ref == 0 || !g.Mode.Compressed() {
		return uint64(ref)
	}
	return g.Base + uint64(ref)<<g.Shift
}

// Encode is the inverse of Decode. ok is false when addr cannot be
// represented: below Base, misaligned for Shift, or out of range.
func (g *Geometry) Encode(addr uint64) (ref uint32, ok bool) {
	if !g.Mode.Compressed() {
		return 0, false
	}
	if addr == 0 {
		return 0, true
	}
	if addr < g.Base {
		return 0, false
	}
	off := addr - g.Base
	if off&(uint64(1)<<g.Shift-1) != 0 || off>>g.Shift > 0xffffffff {
		return 0, false
	}
	return uint32(off >> g.Shift), true
}

// DecodeLimit is one past the highest address a compressed reference can
// name: Base + 4 GiB << Shift. It is 0 when references are not compressed.
func (g *Geometry) DecodeLimit() uint64 {
	if !g.Mode.Compressed() {
		return 0
	}
	return g.Base + (uint64(1)<<32)<<g.Shift
}

// Contains reports whether addr lies in the heap: in Reserved, or, when
// Reserved is unknown, in one of the Regions.
func (g *Geometry) Contains(addr uint64) bool {
	_, ok := g.Classify(addr)
	return ok
}

// Classify returns the region holding addr. An address inside Reserved but
// in no named region (e.g. uncommitted heap) is reported as a Range named
// "heap" spanning Reserved. ok is false for non-heap addresses.
func (g *Geometry) Classify(addr uint64) (r Range, ok bool) {
	for _, r := range g.Regions {
		if addr >= r.Start && addr < r.End {
			return r, true
		}
	}
	if g.Reserved.End > g.Reserved.Start && addr >= g.Reserved.Start && addr < g.Reserved.End {
		r := g.Reserved
		if r.Name == "" {
			r.Name = "heap"
		}
		return r, true
	}
	return Range{}, false
}

// Validate checks internal consistency: regions inside the reservation and
// the reservation reachable by compressed references.
func (g *Geometry) Validate() error {
	res := g.Reserved
	hasRes := res.End > res.Start
	if res.End < res.Start {
		return fmt.Errorf("heap geometry: reservation [%#x, %#x) ends before it starts", res.Start, res.End)
	}
	for _, r := range g.Regions {
		if r.End <= r.Start {
			return fmt.Errorf("heap geometry: region %q: empty range [%#x, %#x)", r.Name, r.Start, r.End)
		}
		if hasRes && (r.Start < res.Start || r.End > res.End) {
			return fmt.Errorf("heap geometry: region %q [%#x, %#x) outside reservation [%#x, %#x)",
				r.Name, r.Start, r.End, res.Start, res.End)
		}
	}
	if g.Mode.Compressed() {
		if g.Shift > 4 {
			return fmt.Errorf("heap geometry: shift %d out of range 0-4", g.Shift)
		}
		if hasRes && (res.Start < g.Base || res.End > g.DecodeLimit()) {
			return fmt.Errorf("heap geometry: reservation [%#x, %#x) not addressable with base %#x shift %d",
				res.Start, res.End, g.Base, g.Shift)
		}
	}
	return nil
}

// String is a one-line summary, e.g.
// "HotSpot heap [0x80000000, 0x100000000) 2048 MiB, unscaled compressed refs".
func (g *Geometry) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s heap", g.VM)
	if g.Reserved.End > g.Reserved.Start {
		fmt.Fprintf(&b, " [%#x, %#x) %d MiB", g.Reserved.Start, g.Reserved.End, (g.Reserved.End-g.Reserved.Start)>>20)
	}
	switch {
	case g.Mode == RefsFull:
		b.WriteString(", uncompressed refs")
	case g.Mode.Compressed():
		fmt.Fprintf(&b, ", %s compressed refs, base %#x, shift %d", g.Mode, g.Base, g.Shift)
		if g.ShiftDerived {
			b.WriteString(" (derived)")
		}
	default:
		b.WriteString(", reference encoding unknown")
	}
	return b.String()
}

// modeFor classifies a compressed encoding by its base and shift, the way
// HotSpot names them.
func modeFor(base uint64, shift uint) RefMode {
	switch {
	case base == 0 && shift == 0:
		return RefsUnscaled
	case base == 0:
		return RefsZeroBased
	case base&((uint64(1)<<32)<<shift-1) == 0:
		return RefsDisjointBase
	}
	return RefsHeapBased
}

// span returns the smallest range covering rs, named name.
func span(rs []Range, name string) Range {
	if len(rs) == 0 {
		return Range{}
	}
	out := Range{Start: rs[0].Start, End: rs[0].End, Name: name}
	for _, r := range rs[1:] {
		out.Start = min(out.Start, r.Start)
		out.End = max(out.End, r.End)
	}
	return out
}
