// Package jvmsym turns JVM-level names into what a Java developer reads:
// type signatures into Java type names and (method, bci) pairs into
// `pkg.Class.method:line` frames. It also names code addresses: JIT code and
// stubs (CodeTable), native libraries (Native) and perf maps (PerfMap).
package jvmsym

import (
	"sort"
	"strconv"
	"strings"
)

var primitives = map[byte]string{
	'B': "byte", 'C': "char", 'D': "double", 'F': "float",
	'I': "int", 'J': "long", 'S': "short", 'Z': "boolean", 'V': "void",
}

// TypeName converts a JVM field descriptor or class signature to its Java
// name: "[[D" → "double[][]", "Ljava/util/HashMap$Node;" → "java.util.HashMap$Node".
// A bare internal name ("java/lang/String") is accepted too. Malformed input
// is returned unchanged so that nothing is silently renamed.
func TypeName(sig string) string {
	dims := 0
	for dims < len(sig) && sig[dims] == '[' {
		dims++
	}
	elem := sig[dims:]
	var name string
	switch {
	case len(elem) == 1 && primitives[elem[0]] != "":
		name = primitives[elem[0]]
	case len(elem) > 2 && elem[0] == 'L' && elem[len(elem)-1] == ';':
		name = strings.ReplaceAll(elem[1:len(elem)-1], "/", ".")
	case dims == 0 && elem != "" && !strings.ContainsAny(elem, ";["):
		name = strings.ReplaceAll(elem, "/", ".")
	default:
		return sig
	}
	return name + strings.Repeat("[]", dims)
}

// LineEntry maps bytecode locations from Start on to a source line.
type LineEntry struct {
	Start int64
	Line  int32
}

// Method is what the agent tells about a jmethodID.
type Method struct {
	ClassSig   string
	Name       string
	Sig        string
	SourceFile string
	Lines      []LineEntry // any order
}

// Frame is one resolved stack frame.
type Frame struct {
	Class  string // Java class name
	Method string
	Line   int // 0 when unknown
}

// String formats the frame as Class.method:line (or Class.method without a line).
func (f Frame) String() string { return string(f.Append(nil)) }

// Append appends the frame as String formats it to b.
func (f Frame) Append(b []byte) []byte {
	b = append(append(append(b, f.Class...), '.'), f.Method...)
	if f.Line > 0 {
		b = strconv.AppendInt(append(b, ':'), int64(f.Line), 10)
	}
	return b
}

// Table caches the methods of one JVM, as sent once each by the agent.
type Table struct {
	methods map[uint64]*Method
	bytes   int // what the methods hold, by MethodBytes
}

// NewTable returns an empty method table.
func NewTable() *Table { return &Table{methods: make(map[uint64]*Method)} }

// Add records a method; its line table is sorted for lookups, and its
// names are cut to MaxName bytes.
func (t *Table) Add(id uint64, m Method) {
	m.ClassSig, m.Name, m.Sig, m.SourceFile = CutName(m.ClassSig), CutName(m.Name), CutName(m.Sig), CutName(m.SourceFile)
	lines := append([]LineEntry(nil), m.Lines...)
	sort.Slice(lines, func(i, j int) bool { return lines[i].Start < lines[j].Start })
	m.Lines = lines
	if old, ok := t.methods[id]; ok {
		t.bytes -= MethodBytes(old)
	}
	t.methods[id] = &m
	t.bytes += MethodBytes(&m)
}

// Len is the number of known methods.
func (t *Table) Len() int { return len(t.methods) }

// Bytes estimates the memory the known methods hold, so that a loader can
// bound it per JVM whatever their number.
func (t *Table) Bytes() int { return t.bytes }

// MethodBytes estimates the memory a method of a Table holds: its strings,
// line table, and the struct and map entry.
func MethodBytes(m *Method) int {
	return 128 + len(m.ClassSig) + len(m.Name) + len(m.Sig) + len(m.SourceFile) + 16*len(m.Lines)
}

// Resolve names the frame at (method id, bci). An unknown method gives an
// honest placeholder instead of a wrong name.
func (t *Table) Resolve(id uint64, bci int64) Frame {
	m, ok := t.methods[id]
	if !ok {
		return Frame{Class: "[unknown]", Method: "0x" + strconv.FormatUint(id, 16)}
	}
	if m.ClassSig == "" && m.Name == "" {
		// The agent could not describe it: its class was unloaded (the
		// jmethodID is stale) before the METHOD record was built.
		return Frame{Class: "[unloaded]", Method: "0x" + strconv.FormatUint(id, 16)}
	}
	return Frame{Class: TypeName(m.ClassSig), Method: m.Name, Line: LineOf(m.Lines, bci)}
}

// LineOf finds the line of bci in a sorted line table: the entry with the
// greatest start ≤ bci. Native methods (bci -1) and empty tables give 0.
func LineOf(lines []LineEntry, bci int64) int {
	if bci < 0 || len(lines) == 0 {
		return 0
	}
	i := sort.Search(len(lines), func(i int) bool { return lines[i].Start > bci })
	if i == 0 {
		return 0
	}
	return int(lines[i-1].Line)
}
