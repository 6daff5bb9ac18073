// Package vmlayout is the offsets and encodings of HotSpot's structures
// in one JVM, read from its vmStructs: what more than one reader of a
// JVM's memory reads by (the heap walk in heapwalk, the code symbolizer
// in vmcode), with each JDK's names for an entry spelled once, and the
// typed readers of what they both read (a Symbol, a Klass's name).
package vmlayout

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/djx-bpf/djx-bpf/hotspot/vmstructs"
)

var (
	// ErrUnsupported means the tables give a layout the readers here do
	// not know.
	ErrUnsupported = errors.New("unsupported HotSpot layout")
	// ErrUnreadable means the target's memory ended before what was read.
	ErrUnreadable = errors.New("unreadable")
)

// Entry names, with each JDK's spelling where they differ: JDK 17's
// first, then the one JDK 21 and 25 use.
var (
	klassName    = []string{"Klass::_name"}
	symbolLength = []string{"Symbol::_length"}
	// The body is an opaque entry in every JDK; "_body[0]" is its first
	// byte, typed u1.
	symbolBody = []string{"Symbol::_body", "Symbol::_body[0]"}

	narrowOopBase    = []string{"CompressedOops::_narrow_oop._base", "CompressedOops::_base"}
	narrowOopShift   = []string{"CompressedOops::_narrow_oop._shift", "CompressedOops::_shift"}
	narrowKlassBase  = []string{"CompressedKlassPointers::_narrow_klass._base", "CompressedKlassPointers::_base"}
	narrowKlassShift = []string{"CompressedKlassPointers::_narrow_klass._shift", "CompressedKlassPointers::_shift"}
	markKlassShift   = "markWord::klass_shift"
)

// Needs are the entries New reads.
var Needs = []vmstructs.Need{
	vmstructs.NeedField(klassName...),
	vmstructs.NeedField(symbolLength...),
	vmstructs.NeedField(symbolBody...),
}

// EncodingNeeds are the entries ReadEncodings reads.
var EncodingNeeds = []vmstructs.Need{
	vmstructs.NeedStatic(narrowOopBase...),
	vmstructs.NeedStatic(narrowOopShift...),
	vmstructs.NeedStatic(narrowKlassBase...),
	vmstructs.NeedStatic(narrowKlassShift...),
}

// Bounds on the offsets New accepts: a Symbol's body follows a few
// bytes of header, a Klass is a few hundred bytes.
const (
	maxSymbolBody = 64
	maxKlass      = 4096
)

// Layout is the offsets of the structures both the heap walk and the
// code symbolizer read.
type Layout struct {
	Klass  Klass
	Symbol Symbol
}

// Klass is where Klass's fields are in a Klass.
type Klass struct {
	Name uint64 // Klass::_name, a Symbol*
}

// Symbol is how a Symbol holds its text: a u2 length at Length, the
// bytes (modified UTF-8, no NUL) from Body on.
type Symbol struct {
	Length, Body uint64
}

// New reads the layout from the JVM's tables and checks that its
// offsets lie where such fields can.
func New(tab *vmstructs.Table) (*Layout, error) {
	if err := tab.Require(Needs...); err != nil {
		return nil, err
	}
	field := func(names []string) vmstructs.Field {
		for _, n := range names {
			if f, ok := tab.FirstField(n); ok && !f.Static {
				return f
			}
		}
		return vmstructs.Field{} // Require found one
	}
	l := &Layout{}
	l.Klass.Name = field(klassName).Offset
	length := field(symbolLength)
	l.Symbol.Length = length.Offset
	l.Symbol.Body = field(symbolBody).Offset
	if length.TypeString != "u2" {
		return nil, fmt.Errorf("%w: Symbol::_length is %q, not u2", ErrUnsupported, length.TypeString)
	}
	if l.Symbol.Length+2 > l.Symbol.Body || l.Symbol.Body > maxSymbolBody {
		return nil, fmt.Errorf("%w: Symbol length at %d, body at %d", ErrUnsupported, l.Symbol.Length, l.Symbol.Body)
	}
	if l.Klass.Name+8 > maxKlass {
		return nil, fmt.Errorf("%w: Klass::_name at %d", ErrUnsupported, l.Klass.Name)
	}
	return l, nil
}

// Reader reads the target's memory for the typed readers: ReadPrefix
// reads up to len(p) bytes at addr and returns how many it read, fewer
// where the memory ends. Its error is one that ends the read (the
// process is gone, the address refused), never a short count alone.
type Reader interface {
	ReadPrefix(p []byte, addr uint64) (int, error)
}

// read reads exactly len(p) bytes at addr.
func read(r Reader, p []byte, addr uint64) error {
	n, err := r.ReadPrefix(p, addr)
	if err != nil {
		return err
	}
	if n < len(p) {
		return fmt.Errorf("%d bytes at %#x: %w", len(p), addr, ErrUnreadable)
	}
	return nil
}

// ReadSymbol reads the Symbol at addr: its length, and the first bytes
// of its text, at most limit of them. ahead is how many of the text's
// bytes to read with the header in one read (most names are short); the
// rest of the limit, if the text has it, takes one more read.
func (l *Layout) ReadSymbol(r Reader, addr uint64, limit, ahead int) (text []byte, length int, err error) {
	s := l.Symbol
	buf := make([]byte, s.Body+uint64(max(ahead, 0)))
	n, err := r.ReadPrefix(buf, addr)
	if err != nil {
		return nil, 0, err
	}
	if uint64(n) < s.Body {
		return nil, 0, fmt.Errorf("Symbol at %#x: %w", addr, ErrUnreadable)
	}
	length = int(buf[s.Length]) | int(buf[s.Length+1])<<8
	keep := uint64(min(length, max(limit, 0)))
	if s.Body+keep <= uint64(n) {
		return buf[s.Body : s.Body+keep], length, nil
	}
	text = make([]byte, keep)
	got := copy(text, buf[s.Body:n])
	if err := read(r, text[got:], addr+s.Body+uint64(got)); err != nil {
		return nil, 0, fmt.Errorf("Symbol at %#x of %d bytes: %w", addr, length, err)
	}
	return text, length, nil
}

// KlassName returns the Symbol* a Klass names itself by: klass holds at
// least the Klass's first Klass.Name+8 bytes.
func (l *Layout) KlassName(klass []byte) uint64 {
	return binary.LittleEndian.Uint64(klass[l.Klass.Name:])
}

// ReadKlassName reads the name of the Klass at klass: its Symbol*, then
// the Symbol, as ReadSymbol does.
func (l *Layout) ReadKlassName(r Reader, klass uint64, limit, ahead int) (text []byte, length int, err error) {
	var b [8]byte
	if err := read(r, b[:], klass+l.Klass.Name); err != nil {
		return nil, 0, fmt.Errorf("Klass::_name of %#x: %w", klass, err)
	}
	return l.ReadSymbol(r, binary.LittleEndian.Uint64(b[:]), limit, ahead)
}
