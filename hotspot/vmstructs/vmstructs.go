// Package vmstructs reads HotSpot's serviceability tables from outside the
// JVM, with no agent: the vmStructs that libjvm exports for the
// serviceability agent (gHotSpotVMStructs, gHotSpotVMTypes,
// gHotSpotVMIntConstants, gHotSpotVMLongConstants and the symbols that give
// their entries' layout). They name the offsets of HotSpot's C++ fields
// (Klass::_layout_helper), the addresses of its statics (Universe's heap,
// CodeCache's heaps), the sizes of its types and its constants, which is
// what a heap walker or a stack unwinder needs to parse a JVM's memory.
//
// Open finds libjvm in /proc/PID/maps, resolves the exported symbols from
// its .dynsym and its load bias, and reads the tables with
// process_vm_readv. Read does the same work on any Mem and Symbols, which
// is how the tests replay memory captured from real JVMs.
//
// The target owns every byte read: each table is capped in entries and
// stride, each string must end with a NUL within MaxString bytes, every
// read counts against MaxRead bytes in all, and a garbled table is an
// error wrapping ErrMalformed, never a panic or an unbounded allocation.
// The names and the release string are the target's text too: escape them
// (termsafe) before they reach a terminal.
package vmstructs

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Caps on what a target's tables may make Read do. The real tables are
// far below them: JDK 17 has 788 fields, 768 types, 398 int and 86 long
// constants, and the longest name of JDK 17 or 25 has 79 bytes.
const (
	// MaxEntries caps the entries of each table.
	MaxEntries = 100_000
	// MaxStride caps an entry's size; a real one is 16 to 48 bytes.
	MaxStride = 1024
	// MaxString caps one name, its NUL included.
	MaxString = 1024
	// MaxRead caps the bytes read from the target in all, entries and
	// string pages together; JDK 17 needs 576 KiB, JDK 25 348 KiB.
	MaxRead = 32 << 20
	// maxStringBytes caps the bytes of distinct strings kept: a forged
	// table can point thousands of entries into one page at different
	// offsets, each a new string of up to MaxString bytes.
	maxStringBytes = 8 << 20
)

var (
	// ErrNotHotSpot means the process runs no HotSpot JVM whose libjvm
	// exports vmStructs: no JVM, OpenJ9, or a libjvm built without them.
	ErrNotHotSpot = errors.New("no HotSpot vmStructs")
	// ErrMalformed means the tables in the target's memory are garbled,
	// forged or over a cap.
	ErrMalformed = errors.New("malformed vmStructs")
	// ErrMissing means a table lacks entries a caller requires.
	ErrMissing = errors.New("missing vmStructs entries")
)

// Mem reads the target's address space: ReadAt reads len(p) bytes at the
// address off. Like process_vm_readv it may read fewer, n < len(p), when
// the memory at off+n is unreadable, and then returns an error. The
// address is an int64 as in io.ReaderAt (an *os.File of /proc/PID/mem is
// a Mem); user-space addresses fit.
type Mem interface {
	ReadAt(p []byte, off int64) (n int, err error)
}

// Symbols are where libjvm's exported vmStructs symbols are in the target.
type Symbols struct {
	// Lib names the library, for messages (its path in the target's maps).
	Lib string
	// Base is libjvm's load bias: a symbol's runtime address is Base
	// plus its ELF value.
	Base uint64
	// Addrs holds the runtime address of each symbol named in SymbolNames.
	Addrs map[string]uint64
}

// Field is one entry of gHotSpotVMStructs: a C++ field of a HotSpot type.
type Field struct {
	Type string // the type holding it: "Klass"
	Name string // "_layout_helper", or a path like "_metadata._compressed_klass"
	// TypeString is the field's C++ type ("jint", "Klass*"); "" for the
	// unchecked (opaque) entries, which have none.
	TypeString string
	Static     bool
	Offset     uint64 // of a non-static field, in bytes from its object's start
	Address    uint64 // of a static field, in the target's address space
}

// Type is one entry of gHotSpotVMTypes.
type Type struct {
	Name       string
	Superclass string // "" for none
	Oop        bool   // an oop typedef
	Integer    bool   // an integer type, of any size
	Unsigned   bool   // if an integer, an unsigned one
	Size       uint64 // sizeof, in bytes
}

type fieldKey struct{ typ, name string }

// Table is what Read found in one JVM. It is immutable and safe for
// concurrent use.
type Table struct {
	// Release is the JVM's release string, Abstract_VM_Version's
	// _s_vm_release ("17.0.15+6-Debian-1deb12u1"); "" if the table has no
	// such static or its string is unreadable.
	Release string
	// Base is libjvm's load bias, from the Symbols read: static addresses
	// minus Base are the same in every run of one libjvm.
	Base uint64
	// Stats says what reading took.
	Stats Stats

	fields   []Field // in table order
	types    []Type
	fieldIdx map[fieldKey]int
	typeIdx  map[string]int
	ints     map[string]int32
	longs    map[string]uint64
}

// Stats counts the work of one Read.
type Stats struct {
	Reads int // ReadAt calls on the Mem
	Bytes int // bytes asked for
	// Duplicates counts entries dropped because an earlier one had the
	// same name (the first one wins, as in the serviceability agent).
	Duplicates int
}

// Field returns the entry typ::name ("Klass", "_layout_helper").
func (t *Table) Field(typ, name string) (Field, bool) {
	i, ok := t.fieldIdx[fieldKey{typ, name}]
	if !ok {
		return Field{}, false
	}
	return t.fields[i], true
}

// FirstField returns the first of the entries named "Type::field" that the
// table has: for fields renamed between JDKs, e.g.
// FirstField("CompressedOops::_narrow_oop._base", "CompressedOops::_base").
func (t *Table) FirstField(names ...string) (Field, bool) {
	for _, n := range names {
		typ, name, ok := splitField(n)
		if !ok {
			continue
		}
		if f, ok := t.Field(typ, name); ok {
			return f, true
		}
	}
	return Field{}, false
}

// Type returns the type named name.
func (t *Table) Type(name string) (Type, bool) {
	i, ok := t.typeIdx[name]
	if !ok {
		return Type{}, false
	}
	return t.types[i], true
}

// Size returns the size of the type named name.
func (t *Table) Size(name string) (uint64, bool) {
	ty, ok := t.Type(name)
	return ty.Size, ok
}

// IntConst returns the int constant named name.
func (t *Table) IntConst(name string) (int32, bool) {
	v, ok := t.ints[name]
	return v, ok
}

// LongConst returns the long constant named name.
func (t *Table) LongConst(name string) (uint64, bool) {
	v, ok := t.longs[name]
	return v, ok
}

// Fields returns every field entry, in table order.
func (t *Table) Fields() []Field { return slices.Clone(t.fields) }

// Types returns every type entry, in table order.
func (t *Table) Types() []Type { return slices.Clone(t.types) }

// IntConsts returns every int constant.
func (t *Table) IntConsts() map[string]int32 { return maps.Clone(t.ints) }

// LongConsts returns every long constant.
func (t *Table) LongConsts() map[string]uint64 { return maps.Clone(t.longs) }

// Major is the JDK's feature release (17, 25), from Release; 0 if unknown.
func (t *Table) Major() int {
	end := strings.IndexFunc(t.Release, func(r rune) bool { return r < '0' || r > '9' })
	if end < 0 {
		end = len(t.Release)
	}
	n, err := strconv.Atoi(t.Release[:end])
	if err != nil {
		return 0
	}
	return n
}

// splitField splits "Type::field" at its last "::": C++ type names may
// hold "::" themselves, field names never do.
func splitField(s string) (typ, name string, ok bool) {
	i := strings.LastIndex(s, "::")
	if i <= 0 || i+2 >= len(s) {
		return "", "", false
	}
	return s[:i], s[i+2:], true
}

// Need is one entry a caller requires, with alternatives for names that
// differ between JDKs: any one of them will do.
type Need struct {
	kind  needKind
	names []string
}

type needKind int

const (
	needField needKind = iota
	needStatic
	needType
	needInt
	needLong
)

// NeedField requires a non-static field, named "Type::field"
// ("Klass::_layout_helper"), or one of its alternatives.
func NeedField(names ...string) Need { return Need{needField, names} }

// NeedStatic requires a static field, named "Type::field"
// ("Universe::_collectedHeap"), or one of its alternatives.
func NeedStatic(names ...string) Need { return Need{needStatic, names} }

// NeedType requires a type ("G1HeapRegion"), or one of its alternatives
// ("HeapRegion", its name in JDK 17).
func NeedType(names ...string) Need { return Need{needType, names} }

// NeedInt requires an int constant, or one of its alternatives.
func NeedInt(names ...string) Need { return Need{needInt, names} }

// NeedLong requires a long constant, or one of its alternatives.
func NeedLong(names ...string) Need { return Need{needLong, names} }

func (n Need) String() string {
	alt := strings.Join(n.names, " or ")
	switch n.kind {
	case needField:
		return "field " + alt
	case needStatic:
		return "static " + alt
	case needType:
		return "type " + alt
	case needInt:
		return "int constant " + alt
	default:
		return "long constant " + alt
	}
}

func (t *Table) has(n Need) bool {
	for _, name := range n.names {
		switch n.kind {
		case needField, needStatic:
			if f, ok := t.FirstField(name); ok && f.Static == (n.kind == needStatic) {
				return true
			}
		case needType:
			if _, ok := t.Type(name); ok {
				return true
			}
		case needInt:
			if _, ok := t.IntConst(name); ok {
				return true
			}
		case needLong:
			if _, ok := t.LongConst(name); ok {
				return true
			}
		}
	}
	return false
}

// Require checks that the table has every entry of needs and names, in one
// error wrapping ErrMissing, each one it lacks. A field found static where
// a non-static one is needed (or the reverse) counts as missing.
func (t *Table) Require(needs ...Need) error {
	var missing []string
	for _, n := range needs {
		if !t.has(n) {
			missing = append(missing, n.String())
		}
	}
	if len(missing) == 0 {
		return nil
	}
	jvm := "this JVM"
	if t.Release != "" {
		jvm = "JVM " + t.Release
	}
	return fmt.Errorf("%w: %s lacks %s: this HotSpot release renamed or removed them, and djx-bpf does not know its names yet",
		ErrMissing, jvm, strings.Join(missing, ", "))
}
