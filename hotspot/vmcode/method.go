package vmcode

import (
	"errors"
	"fmt"
	"strings"

	"github.com/djx-bpf/djx-bpf/hotspot/vmlayout"
	"github.com/djx-bpf/djx-bpf/jvmsym"
)

// Caps on a method's metadata as read.
const (
	// maxMethodTail caps the bytes read after a method's bytecodes for
	// its line number table (which ends the first of the tables there).
	maxMethodTail = 256 << 10
	symbolPrefix  = 96 // first read of a Symbol: most names fit
	maxCPLength   = 1 << 16
	maxCodeSize   = 1 << 16
)

// Method is a Java method as its metadata names it.
type Method struct {
	Addr uint64 // Method*
	// The names are cut to jvmsym.MaxName bytes.
	Class     string // Java name: "java.util.HashMap$Node"
	Name      string // "get"
	Signature string // JVM descriptor: "(Ljava/lang/Object;)Ljava/lang/Object;"
	Source    string // source file name, "" if the class has none
	// ConstMethod is the method's immutable part; its bytecodes start at
	// CodeBase and span CodeSize bytes (an interpreter frame's bcp
	// points into them).
	ConstMethod, CodeBase uint64
	CodeSize              int
	lines                 []linePair
}

// Line is the source line of bci, 0 when unknown.
func (m *Method) Line(bci int) int {
	// An unknown bci (-1: a method's entry, a native method) has no
	// line, as in jvmsym, where HotSpot would give the first one.
	if bci < 0 || bci > maxCodeSize {
		return 0
	}
	return int(max(0, lineOf(m.lines, int32(bci))))
}

// Frame is one Java frame: a method at a bytecode index.
type Frame struct {
	Method    uint64 // Method*
	BCI       int    // -1 when unknown (a native method, a frame without debug info)
	Class     string // Java name
	Name      string
	Signature string
	Source    string
	Line      int // 0 when unknown
}

// JVM is the frame as jvmsym names frames.
func (f Frame) JVM() jvmsym.Frame { return jvmsym.Frame{Class: f.Class, Method: f.Name, Line: f.Line} }

// String is "pkg.Class.method:line", as jvmsym.Frame prints frames.
func (f Frame) String() string { return f.JVM().String() }

// Append appends the frame as String formats it to b.
func (f Frame) Append(b []byte) []byte { return f.JVM().Append(b) }

// bytes estimates what a frame holds, its names included: a frame kept
// keeps them alive after its method leaves the method cache.
func (f *Frame) bytes() int {
	return 96 + len(f.Class) + len(f.Name) + len(f.Signature) + len(f.Source)
}

func (m *Method) frame(bci int) Frame {
	return Frame{Method: m.Addr, BCI: bci, Class: m.Class, Name: m.Name, Signature: m.Signature, Source: m.Source, Line: m.Line(bci)}
}

func (m *Method) bytes() int {
	return 256 + len(m.Class) + len(m.Name) + len(m.Signature) + len(m.Source) + 8*len(m.lines)
}

// readMethod reads a Method: Method → ConstMethod → ConstantPool → its
// holder's name and the names in its pool, and the line number table.
func (s *Symbolizer) readMethod(r *reader, addr uint64) (*Method, error) {
	l := s.l
	if !plausible(addr, 0) || addr%8 != 0 {
		return nil, malformed("Method* %#x", addr)
	}
	cm, err := r.u64(addr + l.methodConst.off)
	if err != nil {
		return nil, fmt.Errorf("read Method %#x: %w", addr, err)
	}
	if !plausible(cm, 0) || cm%8 != 0 {
		return nil, malformed("Method %#x: ConstMethod* %#x", addr, cm)
	}
	// One read holds a small method whole: header, bytecodes and the
	// line number table after them.
	buf := make([]byte, max(l.cmSize, constMethodPrefix))
	n, err := r.prefix(buf, cm)
	if err != nil {
		return nil, err
	}
	if uint64(n) < l.cmSize {
		return nil, malformed("ConstMethod %#x is unreadable", cm)
	}
	buf = buf[:n]
	hdr := buf[:l.cmSize]
	m := &Method{Addr: addr, ConstMethod: cm, CodeBase: cm + l.cmSize, CodeSize: int(get(hdr, l.cmCodeSize))}
	total := get(hdr, l.cmWords) * 8
	if total < l.cmSize+uint64(m.CodeSize) || m.CodeSize > maxCodeSize {
		return nil, malformed("ConstMethod %#x: %d bytes for %d of bytecodes", cm, total, m.CodeSize)
	}
	if get(hdr, l.cmFlags)&l.cmHasLines != 0 {
		if m.lines, err = s.readLines(r, cm, buf, total, uint64(m.CodeSize)); err != nil {
			return nil, fmt.Errorf("ConstMethod %#x: %w", cm, err)
		}
	}
	if err := s.readNames(r, m, hdr); err != nil {
		return nil, fmt.Errorf("method %#x: %w", addr, err)
	}
	return m, nil
}

// constMethodPrefix is the first read of a ConstMethod.
const constMethodPrefix = 512

// readLines decodes the line number table after the bytecodes of the
// ConstMethod at cm, of total bytes, whose first bytes are buf.
func (s *Symbolizer) readLines(r *reader, cm uint64, buf []byte, total, codeSize uint64) ([]linePair, error) {
	start := s.l.cmSize + codeSize
	end := min(total, start+maxMethodTail)
	var tail []byte
	if end <= uint64(len(buf)) {
		tail = buf[start:end]
	} else {
		var err error
		if tail, err = r.bytesAt(cm+start, end-start, maxMethodTail, "line number table"); err != nil {
			return nil, err
		}
	}
	return decodeLines(tail, s.l.unsigned5X)
}

// class is what a constant pool says of its class, cached by pool: the
// methods of one class share it.
type class struct {
	name, source string
	length       uint64 // entries in the pool
}

// maxClasses and classCacheBytes bound the pool cache; it is cleared
// when either is reached.
const (
	maxClasses      = 8192
	classCacheBytes = 4 << 20
)

// bytes estimates what a cached class holds.
func (c *class) bytes() int { return 96 + len(c.name) + len(c.source) }

// poolClass reads the class of the pool at cp: its holder's name and
// its source file.
func (s *Symbolizer) poolClass(r *reader, cp uint64) (*class, error) {
	if c, ok := s.classes[cp]; ok {
		return c, nil
	}
	l := s.l
	hdr := make([]byte, l.cpSize)
	if err := r.read(hdr, cp); err != nil {
		return nil, fmt.Errorf("read ConstantPool %#x: %w", cp, err)
	}
	n := sget(hdr, l.cpLength)
	if n <= 0 || n > maxCPLength {
		return nil, malformed("ConstantPool %#x of %d entries", cp, n)
	}
	c := &class{length: uint64(n)}
	// A method handle intrinsic's pool is a stub of 3 entries whose
	// source file index is stale: no source file rather than no frame.
	if si := get(hdr, l.cpSourceIndex); si != 0 && si < c.length {
		p, err := r.u64(cp + l.cpSize + 8*si)
		if err != nil {
			return nil, fmt.Errorf("read source file entry: %w", err)
		}
		if c.source, err = s.symbol(r, p, "source file"); err != nil {
			return nil, err
		}
	}
	holder := get(hdr, l.cpHolder)
	if !plausible(holder, 0) || holder%8 != 0 {
		return nil, malformed("pool holder %#x", holder)
	}
	text, length, err := l.vm.ReadKlassName(r, holder, jvmsym.MaxName, symbolPrefix)
	if err != nil {
		return nil, symbolErr(err, "class name", holder)
	}
	c.name = jvmsym.TypeName(s.symbolName(text, length))
	if len(s.classes) >= maxClasses || s.classBytes+c.bytes() > classCacheBytes {
		clear(s.classes)
		s.classBytes = 0
	}
	s.classes[cp] = c
	s.classBytes += c.bytes()
	return c, nil
}

// readNames reads the class, method, signature and source file names.
func (s *Symbolizer) readNames(r *reader, m *Method, cmHdr []byte) error {
	l := s.l
	cp := get(cmHdr, l.cmConstants)
	if !plausible(cp, 0) || cp%8 != 0 {
		return malformed("ConstantPool* %#x", cp)
	}
	c, err := s.poolClass(r, cp)
	if err != nil {
		return err
	}
	m.Class, m.Source = c.name, c.source
	ni, si := get(cmHdr, l.cmNameIndex), get(cmHdr, l.cmSigIndex)
	if ni == 0 || si == 0 || ni >= c.length || si >= c.length {
		return malformed("name index %d, signature index %d in a pool of %d", ni, si, c.length)
	}
	// The two entries are usually near each other: one read for both.
	lo, hi := min(ni, si), max(ni, si)
	span := uint64(1)
	if hi-lo < 64 {
		span = hi - lo + 1
	}
	ents, err := r.bytesAt(cp+l.cpSize+8*lo, 8*span, 8*64, "pool entries")
	if err != nil {
		return err
	}
	entry := func(i uint64) (uint64, error) {
		if i-lo < span {
			return get(ents[8*(i-lo):], field{0, 8}), nil
		}
		return r.u64(cp + l.cpSize + 8*i)
	}
	for _, x := range []struct {
		i    uint64
		dst  *string
		what string
	}{{ni, &m.Name, "name"}, {si, &m.Signature, "signature"}} {
		p, err := entry(x.i)
		if err != nil {
			return fmt.Errorf("read %s entry: %w", x.what, err)
		}
		if *x.dst, err = s.symbol(r, p, x.what); err != nil {
			return err
		}
	}
	if m.Name == "" || m.Signature == "" || m.Signature[0] != '(' {
		return malformed("method name %q, signature %q", m.Name, m.Signature)
	}
	return nil
}

// symbol reads a Symbol: a u2 length and that many bytes of modified UTF-8.
func (s *Symbolizer) symbol(r *reader, p uint64, what string) (string, error) {
	if !plausible(p, 0) {
		return "", malformed("%s Symbol* %#x", what, p)
	}
	// Only what is kept of a long name is read.
	text, length, err := s.l.vm.ReadSymbol(r, p, jvmsym.MaxName, symbolPrefix)
	if err != nil {
		return "", symbolErr(err, what, p)
	}
	return s.symbolName(text, length), nil
}

// symbolName is a Symbol's text as read, of length bytes in all, as a
// name. Modified UTF-8 is UTF-8 but for NUL and supplementary characters,
// which come out replaced rather than failing the whole frame.
func (s *Symbolizer) symbolName(text []byte, length int) string {
	name := strings.ToValidUTF8(string(text), "\uFFFD")
	if len(text) < length {
		s.stats.NamesCut++
		name = jvmsym.CutName(name + jvmsym.NameCut)
	}
	return name
}

// symbolErr says what of a Symbol at p (or of the class at p) could not
// be read; memory that ends early is malformed metadata.
func symbolErr(err error, what string, p uint64) error {
	if errors.Is(err, vmlayout.ErrUnreadable) {
		return malformed("%s at %#x: %v", what, p, err)
	}
	return fmt.Errorf("read %s at %#x: %w", what, p, err)
}
