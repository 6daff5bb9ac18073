// Package stacks decides where a session's access stacks come from
// (--stacks): the agent's AsyncGetCallTrace on a signal, or every
// sample's own stack unwound by the sampling program and named from the
// JVM's memory (package bpfstack). A Choice starts as the user asked,
// and settles on what the kernel and the JVM allow.
package stacks

import (
	"fmt"

	"github.com/djx-bpf/djx-bpf/join"
	"github.com/djx-bpf/djx-bpf/loader"
	"github.com/djx-bpf/djx-bpf/naming/bpfstack"
	"github.com/djx-bpf/djx-bpf/sources/agentwire"
)

// Where access stacks come from (--stacks).
const (
	// Agent: the agent's AsyncGetCallTrace, on a signal BPF sends the
	// sampled thread (at most one per --stack-interval; the samples in
	// between borrow their callers).
	Agent = "agent"
	// BPF: every sample's own stack, unwound by the sampling program
	// (bpf/hotspot_unwind.h) and named from the JVM's memory (package
	// bpfstack); no stack signal.
	BPF = "bpf"
	// Auto: BPF where the unwinding program loads, else the agent's.
	Auto = "auto"
)

// Default is where stacks come from unless asked: BPF where it loads. On
// HotPaths and the stack ground truths it gives 98-100% of the samples
// their own whole stack, against 20-37% under the agent, without a
// signal into the JVM (docs/stacks.md).
const Default = Auto

// Check says whether mode is a --stacks mode.
func Check(mode string) error {
	switch mode {
	case "", Agent, BPF, Auto:
		return nil
	}
	return fmt.Errorf("unknown stacks mode %q: use agent, bpf or auto", mode)
}

// Choice is a session's stacks: the mode (Auto until the sampler opens)
// and the signal that asks the JVM's threads for the agent's stacks
// (negative: none).
type Choice struct {
	Mode   string
	Signal int
}

// Notes are where a Choice's notes go: into the session's report.
type Notes func(format string, args ...any)

// Open opens the sampler for cfg with the BPF unwinder when the choice
// asks for it; under auto a program the kernel refuses falls back to the
// default one and the agent's stacks, with a note. BPF stacks turn the
// stack signal off.
func (c *Choice) Open(cfg loader.Config, note Notes) (*loader.Sampler, error) {
	if c.Mode == Auto && c.Signal < 0 {
		c.Mode = Agent // no stacks asked for
	}
	if c.Mode != BPF && c.Mode != Auto {
		return loader.Open(cfg)
	}
	cfg.Unwind = true
	smp, err := loader.Open(cfg)
	if err != nil && c.Mode == Auto {
		note("stacks from the agent: the BPF unwinder did not load: %v", err)
		c.Mode = Agent
		cfg.Unwind = false
		return loader.Open(cfg)
	}
	if err != nil {
		return nil, fmt.Errorf("--stacks bpf: %w", err)
	}
	c.Mode = BPF
	c.Signal = -1
	return smp, nil
}

// ForOpenJ9 makes auto take the agent's stacks when the JVM to profile is
// OpenJ9, whose code cache the BPF unwinder cannot read; openj9 says
// whether it is.
func (c *Choice) ForOpenJ9(openj9 bool, note Notes) {
	if c.Mode == Auto && openj9 {
		c.Mode = Agent
		note("stacks from the agent: the BPF unwinder reads HotSpot's code cache only, and this JVM is OpenJ9")
	}
}

// unwinder is a sampler that unwinds stacks in BPF.
type unwinder interface {
	SetUnwind(pid int, heaps []loader.CodeHeap, l loader.CodeLayout) error
}

// vmThreadMarker is an unwinding sampler that can skip the walks of the
// JVM's own threads (loader.Sampler.VMThread).
type vmThreadMarker interface {
	VMThread(pid int, tid uint32) error
}

// Target is what the BPF stacks read of the JVM's process (jvm.Process):
// its code cache and its threads' names.
type Target interface {
	bpfstack.Target
	Comm(tid uint32) (string, error)
}

// Use gives the unwinder (sampler) the JVM's code cache, read through t,
// and the join its resolver, once the agent is connected (the JVM is
// initialised), and returns what marks HotSpot's own threads (nil: none).
// Where it cannot (not HotSpot, a layout vmcode does not know) the paths
// keep their leaf, with a note. The agent was started without JIT code
// records on HotSpot (code=2): the join reads JIT code from the code cache
// whenever vmcode can read it, stacks or not. command writes a command to
// the agent.
func (c *Choice) Use(pid int, t Target, j *join.JVM, sampler any, command func([]byte) error, note Notes) *bpfstack.VMThreads {
	if c.Mode != BPF || j.BPFStacks() != nil || !j.Connected() {
		return nil
	}
	// Tried once: a failure leaves the paths to their leaves.
	c.Mode = Agent
	r, err := bpfstack.OpenTarget(pid, t)
	if err != nil {
		note("no access stacks: the BPF unwinder cannot read this JVM's code: %v; %s", err, noCodeCache)
		return nil
	}
	j.UseCodeMap(r.CodeMap())
	u, ok := sampler.(unwinder)
	if !ok {
		note("no BPF stacks: the sampler does not unwind")
		return nil
	}
	heaps, l, err := r.Target()
	if err == nil {
		err = u.SetUnwind(pid, heaps, l)
	}
	if err != nil {
		note("no access stacks: %v", err)
		return nil
	}
	j.UseBPFStacks(r)
	c.Mode = BPF
	var vt *bpfstack.VMThreads
	if m, ok := sampler.(vmThreadMarker); ok {
		vt = bpfstack.NewVMThreads(pid, t.Comm, m.VMThread)
	}
	// The agent walks sampled allocations' stacks itself from now on,
	// instead of GetStackTrace (most of what a recorded allocation cost),
	// and the join names them from the code cache as it does these.
	if err := command([]byte{agentwire.CommandRawStacks}); err != nil {
		note("allocation stacks stay GetStackTrace's: %v", err)
	}
	return vt
}

// noCodeCache says what a session with BPF stacks loses when vmcode cannot
// read the JVM: on HotSpot the agent reports no JIT code then (code=2).
const noCodeCache = "on HotSpot the agent does not report JIT code with BPF stacks either: samples in compiled code keep [unknown code] as their leaf, " +
	"objects being initialised there are typed from the sample's own bytes only, and stores from compiled code are judged twice"
