// Package sample is what the sampling program reports of one sampled
// thread, in plain types: the loader fills them from the ring buffer, and
// the join reads them without knowing about BPF.
package sample

import "github.com/djx-bpf/djx-bpf/sources/pmu"

// Source is a sample source: which perf event drives the BPF program.
type Source string

const (
	// Decode samples the user registers and instruction bytes on a cpu-clock
	// timer; the address comes from decoding the instruction in Go.
	Decode Source = pmu.NameDecode
	// PageFaults samples the software page-fault event; ctx->addr is exact.
	PageFaults Source = pmu.NamePageFaults
	// Hardware samples a PMU address-sampling event (PEBS, IBS); ctx->addr
	// is exact and the samples carry the data source and latency.
	Hardware Source = "hardware"
)

// Flags of a Sample, as set by the BPF program: enum sample_flag in
// bpf/sample.bpf.c, which bpf2go generates for Go and a loader test holds
// these to.
const (
	FlagBeforeOK = 1 << 0 // Before holds the bytes ending at ip
	FlagAtOK     = 1 << 1 // At holds the bytes starting at ip
	FlagMemOK    = 1 << 2 // DataSrc and Weight were read (hardware events)
	// FlagNoStack: stacks are asked for, but not for this sample (one was
	// sent to its thread a moment ago, or the thread is new).
	FlagNoStack = 1 << 3
	// FlagHdrMasked: only the header slots the loader's mask for this
	// instruction names were read (HeaderKey).
	FlagHdrMasked = 1 << 4
	// FlagBeforeShort: with FlagBeforeOK, only the last 16 bytes of
	// Before were readable (or recorded); the rest is zero.
	FlagBeforeShort = 1 << 5
)

// BeforeBytes is how many bytes before ip a sample holds (BEFORE_BYTES in
// bpf/sample.bpf.c).
const BeforeBytes = 64

// BeforeIP is the readable part of s.Before (nil if none).
func (s *Sample) BeforeIP() []byte {
	switch {
	case s.Flags&FlagBeforeOK == 0:
		return nil
	case s.Flags&FlagBeforeShort != 0:
		return s.Before[BeforeBytes-16:]
	}
	return s.Before[:]
}

// HeaderKey names one instruction of one process for the sampling
// program's header masks.
type HeaderKey struct {
	PID uint32
	IP  uint64
}

// KeyOf is the header key of s's instruction.
func KeyOf(s *Sample) HeaderKey { return HeaderKey{PID: s.PID, IP: s.IP()} }

// Sample is one sample of a profiled thread.
type Sample struct {
	Time   uint64 // CLOCK_MONOTONIC ns
	PID    uint32
	TID    uint32
	Addr   uint64 // ctx->addr (0 for cpu-clock)
	Period uint64
	Regs   [21]uint64        // struct pt_regs
	Before [BeforeBytes]byte // the bytes ending at ip
	At     [16]byte
	Flags  uint32
	CPU    uint32
	// DataSrc (union perf_mem_data_src) and Weight (union
	// perf_sample_weight) of a hardware sample; 0 when not provided.
	DataSrc uint64
	Weight  uint64
	// Hdr holds the mark and klass words of the object that pt_regs slot
	// i points at, read in the sampling interrupt, when bit i of HdrOK is
	// set; bit i of HdrNarrow says slot i held a compressed oop.
	HdrOK     uint16
	HdrNarrow uint16
	Hdr       [15][2]uint64
	// Stack is the thread's stack as the unwinding program walked it
	// (--stacks bpf), innermost frame first; nil from the default
	// program.
	Stack *Stack
}

// Stack is a stack unwound in BPF: raw frames, named later from the
// JVM's memory (package bpfstack).
type Stack struct {
	Frames []RawFrame
	End    uint16 // why the walk ended: enum unwind_end in bpf/hotspot_unwind.h
}

// RawFrame is one physical frame as BPF read it: Blob is the code
// blob's start with the frame kind in its low 3 bits (1: a fixed-size
// frame, A its pc; 2: an rbp-linked one, A and B the interpreter's
// Method* and bcp slots; 3: native code, A its pc, no blob).
type RawFrame struct {
	Blob, A, B uint64
}

// IP returns the sampled instruction pointer.
func (s *Sample) IP() uint64 { return s.Regs[16] }
