package profiler

import (
	"fmt"

	"github.com/djx-bpf/djx-bpf/loader"
	"github.com/djx-bpf/djx-bpf/naming/bpfstack"
	"github.com/djx-bpf/djx-bpf/sources/agentwire"
)

// Where access stacks come from (Options.Stacks).
const (
	// StacksAgent: the agent's AsyncGetCallTrace, on a signal BPF sends
	// the sampled thread (at most one per --stack-interval; the samples in
	// between borrow their callers).
	StacksAgent = "agent"
	// StacksBPF: every sample's own stack, unwound by the sampling
	// program (bpf/hotspot_unwind.h) and named from the JVM's memory
	// (package bpfstack); no stack signal.
	StacksBPF = "bpf"
	// StacksAuto: BPF where the unwinding program loads, else the agent's.
	StacksAuto = "auto"
)

// DefaultStacks is where stacks come from unless asked: BPF where it
// loads. On HotPaths and the stack ground truths it gives 98-100% of the
// samples their own whole stack, against 20-37% under the agent, without a
// signal into the JVM (docs/stacks.md).
const DefaultStacks = StacksAuto

// CheckStacks says whether mode is a --stacks mode.
func CheckStacks(mode string) error {
	switch mode {
	case "", StacksAgent, StacksBPF, StacksAuto:
		return nil
	}
	return fmt.Errorf("unknown stacks mode %q: use agent, bpf or auto", mode)
}

// openUnwinder opens the sampler for cfg with the BPF unwinder when the
// options ask for it; under auto a program the kernel refuses falls back
// to the default one and the agent's stacks, with a note. BPF stacks
// turn the stack signal off.
func (s *session) openUnwinder(cfg loader.Config) (*loader.Sampler, error) {
	if s.opts.Stacks == StacksAuto && s.opts.StackSignal < 0 {
		s.opts.Stacks = StacksAgent // no stacks asked for
	}
	if s.opts.Stacks != StacksBPF && s.opts.Stacks != StacksAuto {
		return loader.Open(cfg)
	}
	cfg.Unwind = true
	smp, err := loader.Open(cfg)
	if err != nil && s.opts.Stacks == StacksAuto {
		s.addNote("stacks from the agent: the BPF unwinder did not load: %v", err)
		s.opts.Stacks = StacksAgent
		cfg.Unwind = false
		return loader.Open(cfg)
	}
	if err != nil {
		return nil, fmt.Errorf("--stacks bpf: %w", err)
	}
	s.opts.Stacks = StacksBPF
	s.opts.StackSignal = -1
	return smp, nil
}

// unwinder is a sampler that unwinds stacks in BPF.
type unwinder interface {
	SetUnwind(pid int, heaps []loader.CodeHeap, l loader.CodeLayout) error
}

// useBPFStacks gives the unwinder the JVM's code cache and the join its
// resolver, once the agent is connected (the JVM is initialised). Where
// it cannot (not HotSpot, a layout vmcode does not know) the paths keep
// their leaf, with a note. The agent was started without JIT code records
// on HotSpot (code=2, agentOptions): the join reads JIT code from the code
// cache whenever vmcode can read it, stacks or not.
func (s *session) useBPFStacks() {
	if s.opts.Stacks != StacksBPF || s.j.BPFStacks() != nil || !s.j.Connected() {
		return
	}
	// Tried once: a failure leaves the paths to their leaves.
	s.opts.Stacks = StacksAgent
	r, err := bpfstack.Open(s.pid)
	if err != nil {
		s.addNote("no access stacks: the BPF unwinder cannot read this JVM's code: %v; %s", err, noCodeCache)
		return
	}
	s.j.UseCodeMap(r.CodeMap())
	u, ok := s.sampler.(unwinder)
	if !ok {
		s.addNote("no BPF stacks: the sampler does not unwind")
		return
	}
	heaps, l, err := r.Target()
	if err == nil {
		err = u.SetUnwind(s.pid, heaps, l)
	}
	if err != nil {
		s.addNote("no access stacks: %v", err)
		return
	}
	s.j.UseBPFStacks(r)
	s.opts.Stacks = StacksBPF
	if vt, ok := s.sampler.(vmThreadMarker); ok {
		s.vmThreads = bpfstack.NewVMThreads(s.pid, vt.VMThread)
	}
	// The agent walks sampled allocations' stacks itself from now on,
	// instead of GetStackTrace (most of what a recorded allocation cost),
	// and the join names them from the code cache as it does these.
	if _, err := s.conn.Write([]byte{agentwire.CommandRawStacks}); err != nil {
		s.addNote("allocation stacks stay GetStackTrace's: %v", err)
	}
}

// vmThreadMarker is an unwinding sampler that can skip the walks of the
// JVM's own threads (loader.Sampler.VMThread).
type vmThreadMarker interface {
	VMThread(pid int, tid uint32) error
}

// noCodeCache says what a session with BPF stacks loses when vmcode cannot
// read the JVM: on HotSpot the agent reports no JIT code then (code=2).
const noCodeCache = "on HotSpot the agent does not report JIT code with BPF stacks either: samples in compiled code keep [unknown code] as their leaf, " +
	"objects being initialised there are typed from the sample's own bytes only, and stores from compiled code are judged twice"

// autoForOpenJ9 makes --stacks auto take the agent's stacks when the JVM
// to profile is OpenJ9, whose code cache the BPF unwinder cannot read;
// openj9 says whether it is.
func (s *session) autoForOpenJ9(openj9 bool) {
	if s.opts.Stacks == StacksAuto && openj9 {
		s.opts.Stacks = StacksAgent
		s.addNote("stacks from the agent: the BPF unwinder reads HotSpot's code cache only, and this JVM is OpenJ9")
	}
}
