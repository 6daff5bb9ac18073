package bpfstack

import (
	"errors"
	"fmt"

	"github.com/djx-bpf/djx-bpf/hotspot/vmcode"
	"github.com/djx-bpf/djx-bpf/jvmsym"
	"github.com/djx-bpf/djx-bpf/safety/procfs"
)

// CodeMap answers what the join asks of a JVM's JIT code, from the code
// cache read from the JVM's memory (vmcode) instead of the agent's
// CompiledMethodLoad and DynamicCodeGenerated records: whether a pc is in
// the code cache, the blob holding it (its instructions' start and size,
// a stub's name or the compiled method) and the Java frames at the pc,
// named. With stacks unwound in BPF the agent reports no JIT code; this
// names the leaf of a sample whose BPF stack has no Java frames, the code
// past an allocation's sampled pc and whether a store came from JIT code.
//
// The target's memory is not trusted: vmcode bounds every read and walk
// and answers malformed code with an error, which is a miss here. Not
// safe for concurrent use (the join's goroutine owns it).
type CodeMap struct {
	code  Code
	heaps []vmcode.Heap // the code heaps' reserved ranges, once read
	// heapWait counts lookups until the heaps are asked for again after
	// a failed read (the JVM was starting).
	heapWait int
	// named caches hits by blob, compile id and pc: the compile id, read
	// from the blob's header with each lookup, tells a blob freed and
	// reused for other code, so a hit never names other code.
	named      map[mapKey]jvmsym.CodeHit
	namedBytes int
	// names, when set, interns the frames' names (the join's).
	names   *jvmsym.Names
	nameBuf []byte
	budget  *timeBudget // shared with the resolver it came from
	stats   MapStats
	lastErr error
}

// MapStats counts a CodeMap's lookups.
type MapStats struct {
	Lookups uint64 // pcs in the code cache looked up
	Cached  uint64 // ... named from the cache (the blob's header read only)
	Misses  uint64 // ... in no live blob (a free block, a heap's unused part)
	Errors  uint64 // ... in a blob vmcode could not read
	Gone    uint64 // ... after the JVM exited (its last samples)
	// OverBudget counts lookups not made past the time budgets (misses).
	OverBudget uint64
}

type mapKey struct {
	blob uint64
	id   int64
	pc   uint64
}

// maxMapHits and maxMapHitBytes bound the named cache; past either, it
// starts over.
const (
	maxMapHits     = 1 << 14
	maxMapHitBytes = 16 << 20
)

// inlinedCut ends a leaf whose inlining chain was cut at MaxInlined.
var inlinedCut = fmt.Sprintf("[stack cut: inlined deeper than %d]", MaxInlined)

// heapRetry is how many lookups pass before a failed read of the code
// heaps is tried again.
const heapRetry = 1024

// NewCodeMap returns a code map over code.
func NewCodeMap(code Code) *CodeMap {
	return &CodeMap{code: code, named: make(map[mapKey]jvmsym.CodeHit), budget: newTimeBudget()}
}

// CodeMap returns a code map over the resolver's JVM, sharing its time
// budget.
func (r *Resolver) CodeMap() *CodeMap {
	m := NewCodeMap(r.code)
	m.budget = r.budget
	return m
}

// UseNames interns the names of the frames the map names in n.
func (m *CodeMap) UseNames(n *jvmsym.Names) { m.names = n }

// Stats returns the counts so far.
func (m *CodeMap) Stats() MapStats { return m.stats }

// LastError is why the last blob that could not be read could not.
func (m *CodeMap) LastError() error { return m.lastErr }

// Contains says whether pc is in one of the code heaps' reserved ranges:
// JIT code, a stub or the interpreter, or room for them. It reads the
// JVM only to learn the heaps.
func (m *CodeMap) Contains(pc uint64) bool {
	if m.heaps == nil {
		if m.heapWait > 0 {
			m.heapWait--
			return false
		}
		hs, err := m.code.Heaps()
		if err != nil || len(hs) == 0 {
			m.heapWait = heapRetry
			if err != nil {
				m.lastErr = err
			}
			return false
		}
		m.heaps = hs
	}
	for _, h := range m.heaps {
		if pc >= h.Start && pc < h.End {
			return true
		}
	}
	return false
}

// Lookup finds the code blob holding pc, as jvmsym.CodeTable.Lookup does
// from the agent's records: Start and Size are its instructions, Stub
// its name unless it is a compiled method, whose Method* is Method and
// whose inlining chain at pc (the first debug information at or after
// it) is Named. A pc outside the code cache costs no read; one inside
// costs the blob's header (the segment map and the header, two reads),
// and, the first time a compiled method is seen, its debug information.
func (m *CodeMap) Lookup(pc uint64) (jvmsym.CodeHit, bool) {
	if !m.Contains(pc) {
		return jvmsym.CodeHit{}, false
	}
	m.stats.Lookups++
	var fs []vmcode.Frame
	var b vmcode.Blob
	var err error
	m.budget.record()
	if !m.budget.run(func() { fs, b, err = m.code.Frames(pc) }) {
		m.stats.OverBudget++
		return jvmsym.CodeHit{}, false
	}
	if err != nil {
		switch {
		case errors.Is(err, vmcode.ErrNotCode):
			m.stats.Misses++
		case errors.Is(err, procfs.ErrNoProcess):
			m.stats.Gone++
		default:
			m.stats.Errors++
			m.lastErr = err
		}
		return jvmsym.CodeHit{}, false
	}
	hit := jvmsym.CodeHit{Start: b.Start, Size: b.End - b.Start}
	if pc >= b.CodeBegin && pc < b.CodeEnd {
		hit.Start, hit.Size = b.CodeBegin, b.CodeEnd-b.CodeBegin
	}
	if b.Kind != vmcode.KindNMethod {
		hit.Stub = b.Name
		if hit.Stub == "" {
			hit.Stub = "stub"
		}
		return hit, true
	}
	k := mapKey{b.Start, b.CompileID, pc}
	if h, ok := m.named[k]; ok {
		m.stats.Cached++
		return h, true
	}
	hit.Method = b.Method
	cut := len(fs) > MaxInlined
	fs = fs[:min(len(fs), MaxInlined)]
	hit.Named = make([]string, len(fs), len(fs)+1)
	n := 64 + 16*len(fs)
	for i, f := range fs {
		if m.names != nil {
			m.nameBuf = f.Append(m.nameBuf[:0])
			hit.Named[i] = m.names.Name(m.names.Intern(m.nameBuf))
		} else {
			hit.Named[i] = jvmsym.CutName(f.String())
			n += len(hit.Named[i])
		}
	}
	if cut {
		hit.Named = append(hit.Named, inlinedCut)
	}
	if len(hit.Named) == 0 {
		hit.Named = []string{"[compiled code]"}
	}
	if len(m.named) >= maxMapHits || m.namedBytes+n > maxMapHitBytes {
		clear(m.named)
		m.namedBytes = 0
	}
	m.named[k] = hit
	m.namedBytes += n
	return hit, true
}
