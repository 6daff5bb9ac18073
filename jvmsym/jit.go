package jvmsym

import (
	"slices"
	"sort"
)

// RawFrame is an unresolved Java frame: a jmethodID and a bytecode index
// (-1 when unknown or native).
type RawFrame struct {
	Method uint64
	BCI    int64
}

// PCFrames is the Java position of the compiled code ending at PC, with its
// inlining chain innermost method first.
type PCFrames struct {
	PC     uint64
	Frames []RawFrame
}

// CodeHit is what a CodeTable knows about a pc.
type CodeHit struct {
	Start, Size uint64 // the blob containing the pc
	// Stub names code the JVM generated outside Java methods, such as
	// "Interpreter"; it is "" for compiled methods.
	Stub string
	// Method is the compiled (root) method; Frames is the Java stack at
	// the pc, innermost first, ending with the root method. Frames is
	// shared with the table and must not be modified.
	Method uint64
	Frames []RawFrame
	// Named is the Java stack at the pc already named ("pkg.Class.m:line",
	// innermost first) when the code map read it from the JVM's own
	// memory (bpfstack.CodeMap): Method is then a Method*, not a
	// jmethodID, and Frames is nil. Shared; must not be modified.
	Named []string
}

// codeBlob is one compiled method or stub in a CodeTable.
type codeBlob struct {
	start, size uint64
	stub        string // "" for compiled code
	method      uint64
	pcs         []PCFrames // sorted by PC, inside the blob
	root        []RawFrame // the fallback frame when no scope covers a pc
}

// CodeTable maps the addresses of one JVM's JIT-compiled code and stubs to
// what they run. It is not safe for concurrent use.
type CodeTable struct {
	spans spans[*codeBlob]
}

// NewCodeTable returns an empty code table.
func NewCodeTable() *CodeTable { return &CodeTable{} }

// Len is the number of address ranges in the table.
func (c *CodeTable) Len() int { return len(c.spans.s) }

// AddCode records the compiled code of method at [start, start+size) with its
// scope descriptors, which may come in any order; pcs is copied. Code it
// overlaps is dropped: the code cache reused that memory, even if we never
// saw the unload.
func (c *CodeTable) AddCode(start, size, method uint64, pcs []PCFrames) {
	if size == 0 || start+size < start {
		return
	}
	sorted := make([]PCFrames, 0, len(pcs))
	for _, p := range pcs {
		// A descriptor outside the blob can never be the one for a pc in it.
		if p.PC >= start && p.PC-start < size {
			sorted = append(sorted, PCFrames{PC: p.PC, Frames: slices.Clone(p.Frames)})
		}
	}
	// Stable, so that of duplicate PCs the first reported is found.
	slices.SortStableFunc(sorted, func(a, b PCFrames) int {
		switch {
		case a.PC < b.PC:
			return -1
		case a.PC > b.PC:
			return 1
		}
		return 0
	})
	b := &codeBlob{start: start, size: size, method: method, pcs: sorted,
		root: []RawFrame{{Method: method, BCI: -1}}}
	c.spans.insert(span[*codeBlob]{start, start + size, b}, keepStubRemnant)
}

// AddStub records JVM-generated code such as "Interpreter" or
// "StubRoutines::call_stub" at [start, start+size). An empty name becomes
// "stub" so that the code still reads as a stub.
func (c *CodeTable) AddStub(start, size uint64, name string) {
	if size == 0 || start+size < start {
		return
	}
	if name == "" {
		name = "stub"
	}
	b := &codeBlob{start: start, size: size, stub: name}
	c.spans.insert(span[*codeBlob]{start, start + size, b}, keepStubRemnant)
}

// keepStubRemnant keeps the rest of an older stub that a newer stub lies in:
// stubs are described both as whole buffers and as the routines inside
// them, and stub code is not freed for reuse. Compiled code is, so an overlap
// there means the old code is gone.
func keepStubRemnant(old, n *codeBlob) bool { return old.stub != "" && n.stub != "" }

// RemoveCode forgets the code starting at start, as after a CompiledMethodUnload.
func (c *CodeTable) RemoveCode(start uint64) { c.spans.removeStart(start) }

// Lookup finds the code containing pc. For compiled code the scope is the
// descriptor with the smallest PC ≥ pc: HotSpot records descriptors at the
// end of instructions, and a sampled pc is the one after the accessing
// instruction. Past the last descriptor, or without any, the pc maps to the
// root method with an unknown bci. It does not allocate.
func (c *CodeTable) Lookup(pc uint64) (CodeHit, bool) {
	sp, ok := c.spans.find(pc)
	if !ok {
		return CodeHit{}, false
	}
	b := sp.v
	hit := CodeHit{Start: b.start, Size: b.size}
	if b.stub != "" {
		hit.Stub = b.stub
		return hit, true
	}
	hit.Method, hit.Frames = b.method, b.root
	i := sort.Search(len(b.pcs), func(i int) bool { return b.pcs[i].PC >= pc })
	if i < len(b.pcs) && len(b.pcs[i].Frames) > 0 {
		hit.Frames = b.pcs[i].Frames
	}
	return hit, true
}

// Contains says whether pc is in code the table knows.
func (c *CodeTable) Contains(pc uint64) bool {
	_, ok := c.spans.find(pc)
	return ok
}

// ResolveAll names raw frames, keeping their order.
func (t *Table) ResolveAll(frames []RawFrame) []Frame {
	return t.AppendResolved(make([]Frame, 0, len(frames)), frames)
}

// AppendResolved appends the names of raw frames to dst, for callers that
// reuse a buffer.
func (t *Table) AppendResolved(dst []Frame, frames []RawFrame) []Frame {
	for _, f := range frames {
		dst = append(dst, t.Resolve(f.Method, f.BCI))
	}
	return dst
}
