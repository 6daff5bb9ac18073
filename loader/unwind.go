package loader

import (
	"encoding/binary"
	"fmt"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"

	"github.com/djx-bpf/djx-bpf/bpf"
	"github.com/djx-bpf/djx-bpf/sources/sample"
)

// An unwinding variant's record is its sample up to the frames, then
// Nframes frames: its length varies (bpf_ringbuf_output of the walked
// part).
var (
	unwindHeadSize  = int(unsafe.Offsetof(bpf.DjxUnwindSample{}.Frames))
	unwindFrameSize = int(unsafe.Sizeof(bpf.DjxUnwindUnwindFrame{}))
	offNframes      = int(unsafe.Offsetof(bpf.DjxUnwindSample{}.Nframes))
	offUwEnd        = int(unsafe.Offsetof(bpf.DjxUnwindSample{}.UwEnd))
)

// MaxUnwindFrames is how many physical frames the unwinder walks
// (UNWIND_FRAMES) and MaxCodeHeaps how many code heaps it takes.
const (
	MaxUnwindFrames = len(bpf.DjxUnwindSample{}.Frames)
	MaxCodeHeaps    = len(bpf.DjxUnwindUnwindTarget{}.Heaps)
)

// Why a BPF stack walk ended (enum unwind_end).
const (
	UnwindDepth    = uint16(bpf.DjxUnwindUnwindEndUW_END_DEPTH)
	UnwindEntry    = uint16(bpf.DjxUnwindUnwindEndUW_END_ENTRY)
	UnwindNoJava   = uint16(bpf.DjxUnwindUnwindEndUW_END_NO_JAVA)
	UnwindRead     = uint16(bpf.DjxUnwindUnwindEndUW_END_READ)
	UnwindSegmap   = uint16(bpf.DjxUnwindUnwindEndUW_END_SEGMAP)
	UnwindFrame    = uint16(bpf.DjxUnwindUnwindEndUW_END_FRAME)
	UnwindNoInfo   = uint16(bpf.DjxUnwindUnwindEndUW_END_NO_INFO)
	UnwindPrologue = uint16(bpf.DjxUnwindUnwindEndUW_END_PROLOGUE)
	UnwindZero     = uint16(bpf.DjxUnwindUnwindEndUW_END_ZERO)
	UnwindChunk    = uint16(bpf.DjxUnwindUnwindEndUW_END_CHUNK)
)

// Frame kinds in the low bits of sample.RawFrame.Blob (enum unwind_kind).
const (
	FrameSized  = uint64(bpf.DjxUnwindUnwindKindUW_SIZED)
	FrameFP     = uint64(bpf.DjxUnwindUnwindKindUW_FP)
	FrameNative = uint64(bpf.DjxUnwindUnwindKindUW_NATIVE)
	FrameKinds  = uint64(bpf.DjxUnwindUnwindKindUW_KIND_MASK)
)

// CodeHeap is one HotSpot code heap as the unwinder walks it: the
// committed range and its segment map (vmcode.Heap).
type CodeHeap struct {
	Low, High         uint64
	Segmap, SegmapLen uint64
	Log2SegmentSize   uint32
}

// CodeLayout is where the unwinder finds a blob's frame facts
// (vmcode.Offsets): all offsets from the blob's start, CodeBlob's int
// fields 4 bytes wide.
type CodeLayout struct {
	HeapBlockSize uint32
	FrameSize     uint32 // CodeBlob::_frame_size
	FrameComplete uint32 // CodeBlob::_frame_complete_offset
	// FrameComplete16: that field is an int16_t (JDK 23 on), not an int.
	FrameComplete16 bool
	CodeBegin       uint32 // CodeBlob::_code_begin, or its offset field
	CodeIsOffset    bool
	// CompileID is nmethod::_compile_id's offset (an int), read with each
	// compiled frame so that user space can cache its names (0: not read).
	CompileID uint32
	// Virtual threads (vmcode.Continuation; zero: none): the return
	// barrier, the address of ContinuationEntry::_enter_special, that
	// entry's size and its continuation's offset, the offset of a
	// Continuation's tail chunk and of a StackChunk's sp, bottom, pc and
	// stack; how the heap's narrow oops decode (NarrowOops: the tail is
	// one).
	ReturnBarrier, EnterSpecial, OopBase                                                   uint64
	OopShift                                                                               uint32
	NarrowOops                                                                             bool
	EntrySize, EntryCont, ContTail, ChunkSP, ChunkBottom, ChunkPC, ChunkStack, ChunkParent uint32
}

// loadUnwind loads the unwinding variant's maps, its entry program for
// the source and the step program, which it puts in the tail-call array.
func (s *Sampler) loadUnwind(spec *ebpf.CollectionSpec) error {
	entry, other := bpf.DjxUnwindProgOnSample, bpf.DjxUnwindProgOnSampleMem
	if s.cfg.Source == Hardware {
		entry, other = other, entry
	}
	delete(spec.Programs, other) // on_sample_mem needs Linux 6.2
	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		return err
	}
	defer coll.Close()
	var o struct {
		bpf.DjxMaps
		UnwindTargets *ebpf.Map     `ebpf:"unwind_targets"`
		Progs         *ebpf.Map     `ebpf:"uw_progs"`
		Step          *ebpf.Program `ebpf:"uw_step"`
		VMThreads     *ebpf.Map     `ebpf:"vm_threads"`
	}
	if err := coll.Assign(&o); err != nil {
		return err
	}
	s.maps, s.unwindTargets, s.uwProgs, s.uwStep, s.vmThreads = o.DjxMaps, o.UnwindTargets, o.Progs, o.Step, o.VMThreads
	s.prog = coll.DetachProgram(entry)
	if s.prog == nil {
		return fmt.Errorf("no program %s", entry)
	}
	if err := s.uwProgs.Put(uint32(0), s.uwStep); err != nil {
		return fmt.Errorf("put the step program in its tail-call array: %w", err)
	}
	return nil
}

// VMThread tells the unwinder that thread tid of process pid (host
// namespace) is one of the JVM's own, which run no Java code: its samples
// then skip the walk and end with UnwindNoJava. A later thread that reuses
// the tid is walked again (the program tells them apart by start time).
func (s *Sampler) VMThread(pid int, tid uint32) error {
	if s.vmThreads == nil {
		return fmt.Errorf("mark thread %d as the JVM's own: the unwinding program is not loaded", tid)
	}
	if err := s.vmThreads.Put(bpf.DjxThreadKey{Tgid: uint32(pid), Tid: tid}, uint64(1)); err != nil {
		return fmt.Errorf("mark thread %d as the JVM's own: %w", tid, err)
	}
	return nil
}

// Unwinding says whether the sampler loaded the unwinding variant.
func (s *Sampler) Unwinding() bool { return s.unwindTargets != nil }

// SetUnwind gives the unwinder pid's code cache: its heaps and blob
// layout. Until then its samples carry no frames (UnwindNoInfo).
func (s *Sampler) SetUnwind(pid int, heaps []CodeHeap, l CodeLayout) error {
	if s.unwindTargets == nil {
		return fmt.Errorf("set code cache of pid %d: the unwinding program is not loaded", pid)
	}
	if len(heaps) == 0 || len(heaps) > MaxCodeHeaps {
		return fmt.Errorf("set code cache of pid %d: %d code heaps (1..%d)", pid, len(heaps), MaxCodeHeaps)
	}
	t := bpf.DjxUnwindUnwindTarget{
		Gen:    s.unwindGen.Add(1),
		Nheaps: uint32(len(heaps)), HbSize: l.HeapBlockSize,
		OffFrameSize: l.FrameSize, OffFrameComplete: l.FrameComplete, OffCodeBegin: l.CodeBegin,
		OffCompileId: l.CompileID,
		RetBarrier:   l.ReturnBarrier, EnterSpecial: l.EnterSpecial, OopBase: l.OopBase, OopShift: l.OopShift,
		EntrySize: l.EntrySize, OffEntryCont: l.EntryCont, OffContTail: l.ContTail,
		OffChunkSp: l.ChunkSP, OffChunkBottom: l.ChunkBottom, OffChunkPc: l.ChunkPC, OffChunkStack: l.ChunkStack,
		OffChunkParent: l.ChunkParent,
	}
	if l.NarrowOops {
		t.NarrowOops = 1
	}
	if l.CodeIsOffset {
		t.CodeIsOffset = 1
	}
	if l.FrameComplete16 {
		t.FrameComplete16 = 1
	}
	for i, h := range heaps {
		t.Heaps[i] = bpf.DjxUnwindCodeHeap{Low: h.Low, High: h.High, Segmap: h.Segmap, SegmapLen: h.SegmapLen, Log2Seg: h.Log2SegmentSize}
	}
	if err := s.unwindTargets.Put(uint32(pid), t); err != nil {
		return fmt.Errorf("set code cache of pid %d: %w", pid, err)
	}
	return nil
}

// parseStack copies the unwound frames of an unwinding variant's record
// into s.Stack (a new slice: samples outlive the record). A record cut
// short keeps the frames it holds.
func parseStack(b []byte, s *Sample) {
	if len(b) < unwindHeadSize {
		return
	}
	le := binary.LittleEndian
	n := min(int(le.Uint16(b[offNframes:])), MaxUnwindFrames, (len(b)-unwindHeadSize)/unwindFrameSize)
	st := &sample.Stack{Frames: make([]sample.RawFrame, n), End: le.Uint16(b[offUwEnd:])}
	for i := range n {
		f := b[unwindHeadSize+i*unwindFrameSize:]
		st.Frames[i] = sample.RawFrame{Blob: le.Uint64(f), A: le.Uint64(f[8:]), B: le.Uint64(f[16:])}
	}
	s.Stack = st
}

// RunStats is how long the sampling program has run and how many times,
// on every CPU and for every process it saw (false: the kernel keeps no
// statistics): their ratio is its time per run.
func (s *Sampler) RunStats() (time.Duration, uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.runStats == nil || s.prog == nil {
		return 0, 0, false
	}
	st, err := s.prog.Stats()
	if err != nil {
		return 0, 0, false
	}
	return st.Runtime, st.RunCount, true
}
