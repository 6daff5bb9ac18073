// Package bpfstack names the Java stacks that the sampling program's
// HotSpot unwinder (bpf/hotspot_unwind.h, --stacks bpf) walked: raw
// frames, a code blob and a pc or an interpreter frame's Method* and
// bcp, become Java frames read from the JVM's own memory through package
// vmcode, with no agent, no signal and no CompiledMethodLoad records.
//
// It also hands the unwinder what it needs of a JVM: the code heaps and
// the CodeBlob layout (Target).
package bpfstack

import (
	"errors"
	"fmt"

	"github.com/djx-bpf/djx-bpf/hotspot/heapwalk"
	"github.com/djx-bpf/djx-bpf/hotspot/targetmem"
	"github.com/djx-bpf/djx-bpf/hotspot/vmcode"
	"github.com/djx-bpf/djx-bpf/hotspot/vmstructs"
	"github.com/djx-bpf/djx-bpf/loader"
	"github.com/djx-bpf/djx-bpf/safety/procfs"
	"github.com/djx-bpf/djx-bpf/sources/sample"
)

// Code is what the resolver asks of a JVM's code: vmcode.Symbolizer.
type Code interface {
	Frames(pc uint64) ([]vmcode.Frame, vmcode.Blob, error)
	Blob(pc uint64) (vmcode.Blob, error)
	InterpretedFrame(method, bcp uint64) (vmcode.Frame, error)
	Heaps() ([]vmcode.Heap, error)
	Offsets() vmcode.Offsets
}

// Resolver names one JVM's BPF stacks. It is not safe for concurrent
// use (one join goroutine owns it).
type Resolver struct {
	code Code
	// fpBlobs caches the rbp-linked blobs by start: the interpreter and
	// BufferBlob stubs, which live as long as the JVM.
	fpBlobs map[uint64]vmcode.Kind
	// named caches the frames of a pc in an nmethod by its blob, the
	// compile id BPF read from it with the frame, and the pc: a blob
	// freed and reused holds another compile id, so an entry never names
	// other code.
	named      map[namedKey][]vmcode.Frame
	namedBytes int // what named holds, names included
	budget     *timeBudget
	stats      Stats
	lastErr    error // the last frame vmcode could not name
	// cont ends virtual threads' stacks at their entry (zero: the
	// unwinder does not know it; contErr says why).
	cont     vmcode.Continuation
	contErr  error
	narrow   bool // compressed oops: OopBase + n << OopShift
	oopBase  uint64
	oopShift uint32
}

// Stats counts what the resolver made of the stacks.
type Stats struct {
	Stacks   uint64 // stacks with at least one Java frame
	Complete uint64 // ... walked to the thread's entry
	Frames   uint64 // Java frames named
	Failed   uint64 // frames vmcode could not name (the walk's path ends there)
	Gone     uint64 // ... of them read after the JVM exited (its last samples)
	Cached   uint64 // compiled frames named from the cache, without a read
	// OverBudget counts the frames not named past the time budgets
	// (their paths end there); Cut the paths cut at MaxFrames or an
	// inlining chain cut at MaxInlined.
	OverBudget uint64
	Cut        uint64
}

// namedKey is a pc in an nmethod, as BPF saw it.
type namedKey struct{ blob, id, pc uint64 }

// maxNamed and maxNamedBytes bound the cache of named pcs; past
// either, it starts over.
const (
	maxNamed      = 1 << 16
	maxNamedBytes = 16 << 20
)

// Caps on a path's depth: the unwinder walks up to 128 physical frames,
// and vmcode takes inlining chains up to vmcode.MaxInlineDepth. C2
// inlines to 15 levels by default; real stacks are far below MaxFrames.
const (
	MaxFrames  = 512
	MaxInlined = 32
)

// framesBytes estimates what frames hold, their names included.
func framesBytes(fs []vmcode.Frame) int {
	n := 64
	for i := range fs {
		f := &fs[i]
		n += 96 + len(f.Class) + len(f.Name) + len(f.Signature) + len(f.Source)
	}
	return n
}

// New returns a resolver over code.
func New(code Code) *Resolver {
	return &Resolver{code: code, fpBlobs: make(map[uint64]vmcode.Kind), named: make(map[namedKey][]vmcode.Frame), budget: newTimeBudget()}
}

// Open returns a resolver for the HotSpot JVM pid.
func Open(pid int) (*Resolver, error) { return OpenTarget(pid, liveTarget(pid)) }

// Target is what a resolver reads of a JVM's process (jvm.Process): a
// live one, or a session's recording of one.
type Target interface {
	Mem() targetmem.Mem
	VMStructs() (*vmstructs.Table, error)
	Continuation(t *vmstructs.Table) (vmcode.Continuation, error)
}

// OpenTarget returns a resolver for the HotSpot JVM pid, read through t.
func OpenTarget(pid int, t Target) (*Resolver, error) {
	tab, err := t.VMStructs()
	if err != nil {
		return nil, fmt.Errorf("open the code cache of pid %d: %w", pid, err)
	}
	mem := t.Mem()
	s, err := vmcode.New(tab, mem)
	if err != nil {
		return nil, fmt.Errorf("open the code cache of pid %d: %w", pid, err)
	}
	r := New(s)
	r.cont, r.contErr = t.Continuation(tab)
	if r.contErr == nil {
		// A continuation's tail chunk is an oop field: its encoding.
		hl, err := heapwalk.NewLayout(tab, mem, heapwalk.Options{})
		if err != nil {
			r.cont, r.contErr = vmcode.Continuation{}, fmt.Errorf("read the heap's layout: %w", err)
		} else {
			r.narrow, r.oopBase, r.oopShift = hl.CompressedOops, hl.OopBase, uint32(hl.OopShift)
		}
	}
	return r, nil
}

// liveTarget reads the process pid.
type liveTarget int

func (p liveTarget) Mem() targetmem.Mem                   { return targetmem.Open(int(p)) }
func (p liveTarget) VMStructs() (*vmstructs.Table, error) { return vmstructs.Open(int(p)) }
func (p liveTarget) Continuation(t *vmstructs.Table) (vmcode.Continuation, error) {
	return vmcode.ReadContinuation(int(p), t)
}

// Continuation is what the unwinder knows of the JVM's virtual threads,
// or why it knows nothing (their stacks then go on into their carriers').
func (r *Resolver) Continuation() (vmcode.Continuation, error) { return r.cont, r.contErr }

// Stats returns the counts so far.
func (r *Resolver) Stats() Stats { return r.stats }

// LastError is why the last frame that could not be named could not
// (the JVM's exit aside).
func (r *Resolver) LastError() error { return r.lastErr }

// Target is what the unwinder needs of the JVM: its code heaps and where
// a blob keeps its frame size.
func (r *Resolver) Target() ([]loader.CodeHeap, loader.CodeLayout, error) {
	hs, err := r.code.Heaps()
	if err != nil {
		return nil, loader.CodeLayout{}, fmt.Errorf("read the code heaps: %w", err)
	}
	if len(hs) > loader.MaxCodeHeaps {
		return nil, loader.CodeLayout{}, fmt.Errorf("%d code heaps, the unwinder takes %d", len(hs), loader.MaxCodeHeaps)
	}
	// The reserved ranges: a heap commits more as code grows, and a read
	// of a segment map byte not committed yet fails in BPF, harmlessly.
	heaps := make([]loader.CodeHeap, len(hs))
	for i, h := range hs {
		heaps[i] = loader.CodeHeap{Low: h.Low, High: h.End, Segmap: h.Segmap, SegmapLen: max(h.SegmapLen, (h.End-h.Low)>>h.Log2SegmentSize),
			Log2SegmentSize: uint32(h.Log2SegmentSize)}
	}
	o := r.code.Offsets()
	l := loader.CodeLayout{
		HeapBlockSize: uint32(o.HeapBlockSize),
		FrameSize:     uint32(o.BlobFrameSize.Offset),
		FrameComplete: uint32(o.BlobFrameComplete.Offset),
		CodeBegin:     uint32(o.CodeBegin.Offset),
		CodeIsOffset:  o.CodeIsOffset,
		// JDK 23 made it an int16_t.
		FrameComplete16: o.BlobFrameComplete.Width == 2,
		ReturnBarrier:   r.cont.ReturnBarrier, EnterSpecial: r.cont.EnterSpecial,
		OopBase: r.oopBase, OopShift: r.oopShift, NarrowOops: r.narrow,
		EntrySize: r.cont.EntrySize, EntryCont: r.cont.EntryCont, ContTail: r.cont.ContTail,
		ChunkSP: r.cont.ChunkSP, ChunkBottom: r.cont.ChunkBottom, ChunkPC: r.cont.ChunkPC, ChunkStack: r.cont.ChunkStack, ChunkParent: r.cont.ChunkParent,
	}
	if o.NMethodCompileID.Width == 4 && o.NMethodCompileID.Offset <= 4096 {
		l.CompileID = uint32(o.NMethodCompileID.Offset)
	}
	codeWidth := 8
	if o.CodeIsOffset {
		codeWidth = 4
	}
	switch {
	case o.HeapBlockSize == 0 || o.HeapBlockSize > 64:
		return nil, l, fmt.Errorf("%w: HeapBlock of %d bytes", ErrLayout, o.HeapBlockSize)
	case o.BlobFrameSize.Width != 4 || (o.BlobFrameComplete.Width != 4 && o.BlobFrameComplete.Width != 2) || o.CodeBegin.Width != codeWidth:
		return nil, l, fmt.Errorf("%w: CodeBlob's frame size, frame complete and code begin are %d, %d and %d bytes wide",
			ErrLayout, o.BlobFrameSize.Width, o.BlobFrameComplete.Width, o.CodeBegin.Width)
	case o.BlobFrameSize.Offset > 4096 || o.BlobFrameComplete.Offset > 4096 || o.CodeBegin.Offset > 4096:
		return nil, l, fmt.Errorf("%w: CodeBlob fields past 4 KiB", ErrLayout)
	}
	return heaps, l, nil
}

// ErrLayout means the JVM's CodeBlob is not laid out as the unwinder
// reads it.
var ErrLayout = errors.New("code blob layout the unwinder cannot read")

// Reasons a BPF stack is not whole, for the placeholder that ends its path.
func endReason(end uint16) string {
	switch end {
	case loader.UnwindEntry:
		return ""
	case loader.UnwindDepth:
		return "deeper than the unwinder walks"
	case loader.UnwindNoJava:
		return "no Java frames"
	case loader.UnwindRead:
		return "unreadable frame"
	case loader.UnwindSegmap:
		return "pc in no code blob"
	case loader.UnwindFrame:
		return "bad frame"
	case loader.UnwindNoInfo:
		return "code cache unknown"
	case loader.UnwindPrologue:
		return "in a method's prologue"
	case loader.UnwindZero:
		return "end of frame chain"
	case loader.UnwindChunk:
		return "virtual thread's frozen frames unreadable"
	}
	return fmt.Sprintf("unwinder code %d", end)
}

// Path is a sample's access path from its BPF stack, innermost first.
type Path struct {
	// NativePC is the native code the sample was in, called from the
	// Java frames (0: none); the caller names it.
	NativePC uint64
	Frames   []vmcode.Frame // Java frames, innermost first
	// Missing says why the path is not the whole stack ("" when it is).
	Missing string
}

// Sample is what Resolve needs of a sample besides its stack: its pc,
// where its access was (the first debug information at or after it; 0:
// the pc) and r13, which holds the bcp while the interpreter runs.
type Sample struct {
	IP, AccessPC, R13 uint64
	// Calls: every frame is a call site, none the sampled one (an
	// allocation's stack, walked from the runtime call).
	Calls bool
}

// Resolve names the frames of st. Stubs (adapters, call_stub, runtime
// stubs) give no frame, as in AsyncGetCallTrace's stacks; a frame vmcode
// cannot name ends the path there.
func (r *Resolver) Resolve(st *sample.Stack, s Sample) Path {
	var p Path
	r.budget.record()
	for i, f := range st.Frames {
		kind := f.Blob & loader.FrameKinds
		blob := f.Blob &^ loader.FrameKinds
		var err error
		switch kind {
		case loader.FrameNative:
			if len(p.Frames) == 0 && p.NativePC == 0 {
				p.NativePC = f.A
			}
		case loader.FrameSized:
			p.Frames, err = r.compiled(p.Frames, namedKey{blob, f.B, f.A}, s)
		case loader.FrameFP:
			p.Frames, err = r.rbpFrame(p.Frames, blob, f, i == 0 && !s.Calls, s)
		default:
			err = fmt.Errorf("frame kind %d", kind)
		}
		if len(p.Frames) > MaxFrames {
			r.stats.Cut++
			p.Frames = p.Frames[:MaxFrames]
			p.Missing = fmt.Sprintf("deeper than %d frames", MaxFrames)
			break
		}
		if errors.Is(err, errBudget) {
			r.stats.OverBudget += uint64(len(st.Frames) - i)
			p.Missing = budgetEnd
			break
		}
		if errors.Is(err, errInlined) {
			r.stats.Cut++
			p.Missing = fmt.Sprintf("inlined deeper than %d", MaxInlined)
			break
		}
		if err != nil {
			r.stats.Failed++
			p.Missing = "unreadable frame"
			if errors.Is(err, procfs.ErrNoProcess) {
				r.stats.Gone++
				break
			}
			r.lastErr = fmt.Errorf("frame %d (%#x %#x %#x): %w", i, f.Blob, f.A, f.B, err)
			break
		}
	}
	if p.Missing == "" {
		p.Missing = endReason(st.End)
	}
	if len(p.Frames) == 0 && p.Missing == "" {
		p.Missing = "no Java frames" // stubs only
	}
	if len(p.Frames) > 0 {
		r.stats.Stacks++
		r.stats.Frames += uint64(len(p.Frames))
		if p.Missing == "" {
			r.stats.Complete++
		}
	}
	return p
}

// compiled appends the Java frames of a fixed-size frame at pc: an
// nmethod's inlining chain (stubs have none). The sampled frame is looked
// up at its access.
func (r *Resolver) compiled(out []vmcode.Frame, k namedKey, s Sample) ([]vmcode.Frame, error) {
	pc, at := k.pc, k.pc
	if pc == s.IP && s.AccessPC != 0 {
		at = s.AccessPC
	}
	k.pc = at
	if fs, ok := r.named[k]; ok && k.id != 0 {
		r.stats.Cached++
		return inlined(out, fs)
	}
	var fs []vmcode.Frame
	var b vmcode.Blob
	var err error
	if !r.budget.run(func() { fs, b, err = r.code.Frames(at) }) {
		return out, errBudget
	}
	fromAt := err == nil
	if err != nil && at != pc {
		// The access's pc may lie past the blob's last debug
		// information; the sampled pc is the frame's all the same.
		if !r.budget.run(func() { fs, b, err = r.code.Frames(pc) }) {
			return out, errBudget
		}
	}
	if err != nil {
		return out, err
	}
	if b.Kind != vmcode.KindNMethod {
		return out, nil
	}
	if fromAt && k.id != 0 && b.Start == k.blob && uint64(uint32(b.CompileID)) == k.id {
		n := framesBytes(fs)
		if len(r.named) >= maxNamed || r.namedBytes+n > maxNamedBytes {
			clear(r.named)
			r.namedBytes = 0
		}
		r.named[k] = fs
		r.namedBytes += n
	}
	return inlined(out, fs)
}

// errInlined means an inlining chain was cut at MaxInlined frames.
var errInlined = errors.New("inlining chain cut")

// inlined appends the inlining chain fs, innermost first, cut to its
// MaxInlined innermost frames.
func inlined(out, fs []vmcode.Frame) ([]vmcode.Frame, error) {
	if len(fs) > MaxInlined {
		return append(out, fs[:MaxInlined]...), errInlined
	}
	return append(out, fs...), nil
}

// rbpFrame appends the Java frame of an rbp-linked frame when its blob is
// the interpreter. The top frame's bcp is in r13 (the frame's slot is
// written at calls); a slot's is the frame's call site.
func (r *Resolver) rbpFrame(out []vmcode.Frame, blob uint64, f sample.RawFrame, top bool, s Sample) ([]vmcode.Frame, error) {
	kind, ok := r.fpBlobs[blob]
	if !ok {
		// The top frame's pc is in the blob; a caller's blob is found by
		// its start.
		pc := blob
		if top {
			pc = s.IP
		}
		var b vmcode.Blob
		var err error
		if !r.budget.run(func() { b, err = r.code.Blob(pc) }) {
			return out, errBudget
		}
		if err != nil {
			return out, err
		}
		kind = b.Kind
		if len(r.fpBlobs) < 1<<12 {
			r.fpBlobs[blob] = kind
		}
	}
	if kind != vmcode.KindInterpreter {
		return out, nil
	}
	var fr vmcode.Frame
	var err error
	if top && s.R13 != 0 {
		if !r.budget.run(func() { fr, err = r.code.InterpretedFrame(f.A, s.R13) }) {
			return out, errBudget
		}
		if err == nil {
			return append(out, fr), nil
		}
	}
	if !r.budget.run(func() { fr, err = r.code.InterpretedFrame(f.A, f.B) }) {
		return out, errBudget
	}
	if err != nil {
		return out, err
	}
	return append(out, fr), nil
}
