package loader

import (
	"fmt"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"

	"github.com/djx-bpf/djx-bpf/bpf"
	"github.com/djx-bpf/djx-bpf/sample"
)

// unwindSampleSize is sizeof(struct sample) in the unwinding variant: the
// default sample, then the stack.
const unwindSampleSize = int(unsafe.Sizeof(bpf.DjxUnwindSample{}))

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
}

// loadUnwind loads the unwinding variant's maps and program.
func (s *Sampler) loadUnwind(spec *ebpf.CollectionSpec) error {
	var o struct {
		bpf.DjxMaps
		UnwindTargets *ebpf.Map     `ebpf:"unwind_targets"`
		Prog          *ebpf.Program `ebpf:"on_sample"`
	}
	err := spec.LoadAndAssign(&o, nil)
	s.maps, s.prog, s.unwindTargets = o.DjxMaps, o.Prog, o.UnwindTargets
	return err
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
		Nheaps: uint32(len(heaps)), HbSize: l.HeapBlockSize,
		OffFrameSize: l.FrameSize, OffFrameComplete: l.FrameComplete, OffCodeBegin: l.CodeBegin,
		OffCompileId: l.CompileID,
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
// into s.Stack (a new slice: samples outlive the record).
func parseStack(b []byte, s *Sample) {
	if len(b) < unwindSampleSize {
		return
	}
	var r bpf.DjxUnwindSample
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&r)), unsafe.Sizeof(r)), b)
	n := min(int(r.Nframes), len(r.Frames))
	st := &sample.Stack{Frames: make([]sample.RawFrame, n), End: r.UwEnd}
	for i := range n {
		f := r.Frames[i]
		st.Frames[i] = sample.RawFrame{Blob: f.Blob, A: f.A, B: f.B}
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
