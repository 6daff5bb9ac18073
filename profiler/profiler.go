// Package profiler runs object-centric profiles of JVMs: it loads the agent
// (dynamic attach or -agentpath), samples with BPF, and feeds both streams
// to package join, whose object table becomes the report. A scan runs one
// such session per JVM of the host on one shared sampler.
package profiler

import (
	"fmt"
	"time"

	"github.com/djx-bpf/djx-bpf/naming/stacks"
	"github.com/djx-bpf/djx-bpf/sources/agentwire"
	"github.com/djx-bpf/djx-bpf/sources/pmu"
	"github.com/djx-bpf/djx-bpf/sources/reloc/follow"
	"github.com/djx-bpf/djx-bpf/target/jvm"
	"github.com/djx-bpf/djx-bpf/target/launch"
)

// ErrSamplerBusy means another JVMTI environment holds the JVM's heap
// sampler, which HotSpot grants to one environment at a time.
var ErrSamplerBusy = jvm.ErrSamplerBusy

// Defaults.
const (
	DefaultMinSize = 1024
	// DefaultFreq is decode's rate, pmu.DecodeFreq (documented there).
	DefaultFreq = pmu.DecodeFreq
	// DefaultAllocBudget bounds the agent's cost on allocation-heavy code,
	// where a recorded allocation costs its thread 3-40 µs (the measured
	// trade-off: docs/benchmarks.md, "The allocation budget").
	DefaultAllocBudget = 500
	// DefaultRelocation: see docs/design.md for the measured trade-off. The
	// memmove uprobe traps on every copy of every thread, not only in GC
	// pauses: `make bench` measured H2 and Xalan 1.9-2.6x slower with it,
	// 1.4-1.5x with rescan.
	DefaultRelocation = follow.Rescan
	// DefaultCensusBudget bounds each stop-the-world pause of the census
	// at attach (docs/census.md has the pauses per heap).
	DefaultCensusBudget = 500 * time.Millisecond
	// DefaultRecensus is the least time between two censuses of large
	// objects after GCs, which run only while the allocation budget keeps
	// the heap sampler from catching objects of min size.
	DefaultRecensus = time.Second
)

// Census modes (--census).
const (
	// CensusAuto: a walk of the heap from outside the JVM, with no pause
	// (HotSpot with vmStructs; Serial, Parallel or G1), else as CensusJVMTI.
	CensusAuto = "auto"
	// CensusJVMTI: the agent's census with holder chains at attach,
	// degraded to one without holders, then to none, when a pause would
	// pass the budget.
	CensusJVMTI = "jvmti"
	// CensusOn: the full census whatever its pauses.
	CensusOn = "on"
	// CensusObjects: a census without holder chains.
	CensusObjects = "objects"
	// CensusOff: no census; only objects allocated after the attach are
	// tracked.
	CensusOff = "off"
)

// DefaultStackSignal is the signal BPF sends a sampled thread to ask for its
// Java stack: SIGURG. HotSpot does not use it, its default action is to
// ignore it (a signal that arrives where no handler is installed does no
// harm), and as a standard signal it coalesces: at most one is pending per
// thread, where real-time signals queue and a burst of them can fill the
// user's RLIMIT_SIGPENDING, after which the kernel refuses every queued
// signal of that user. async-profiler and JFR's CPU-time sampler use
// SIGPROF; other users of SIGURG (Go runtimes in native libraries) send
// it with tgkill, and the agent passes those on to their handler.
const DefaultStackSignal = 23

// DefaultStackInterval spaces the stacks of one thread. A stack costs the
// thread tens of µs on deep Java stacks (signal delivery and
// AsyncGetCallTrace: 3.4% of H2's CPU at one per sample at 499 Hz), so a
// thread gets one at most every 10 ms, as async-profiler samples by
// default; the samples in between take their callers from it (join's
// borrowStack).
const DefaultStackInterval = 10 * time.Millisecond

// DefaultInterval is the heap sampling interval used for a min size: a
// quarter of it, so an object of exactly min size is caught with probability
// 1-e^-4 ≈ 98% and twice that size with 99.97%.
func DefaultInterval(minSize uint64) uint64 {
	if minSize < 64 {
		return 16
	}
	return minSize / 4
}

// Options configure a profile.
type Options struct {
	Event    string        // auto | decode | page-faults
	Verbose  bool          // notes give their reasons (the source auto picked)
	Duration time.Duration // 0: until ctx ends or the target exits
	MinSize  uint64        // objects smaller than this are not tracked
	Interval uint64        // heap sampling interval in bytes; 0: DefaultInterval(MinSize)
	Freq     int           // decode sampling frequency per CPU, Hz
	// HWFreq, when set, samples a hardware event in frequency mode (the
	// kernel adjusts the period to about HWFreq samples per second).
	HWFreq int
	Period uint64 // page-faults: every Period-th fault; hardware: every Period-th event (0: the event's default)
	// AllocBudget caps the JVM's sampled-allocation callbacks per second:
	// above it the agent raises the heap sampling interval. 0: no cap.
	AllocBudget uint64
	// Relocation is how GC moves are followed (package follow): uprobe,
	// rescan or off.
	Relocation string
	// StackSignal is the signal that asks sampled threads for their Java
	// stacks (access paths): DefaultStackSignal when 0; negative: no stacks.
	StackSignal int
	// StackInterval is the least time between two stacks of one thread;
	// samples in between borrow their callers from the thread's last
	// stack. DefaultStackInterval when 0.
	StackInterval time.Duration
	// AgentTimeout bounds the wait for the agent to connect.
	AgentTimeout time.Duration
	// RunAs is the user Launch runs the application as; nil: djx-bpf's own.
	RunAs *launch.RunAs
	// Notify, when set, receives progress notes meant for the user.
	Notify func(string)
	// NUMA looks up the node of every sampled page (move_pages) and of the
	// sampling CPU, for a per-object remote-access share.
	NUMA bool
	// Progress, when set, is called about once a second while profiling.
	Progress func(Progress)
	// Control, when set, switches sampling off (false) and on (true) while
	// profiling, as perf record's --control does: the perf events and the
	// JVM's allocation sampling stop; objects already tracked are still
	// followed. Switched, when set, is called after each command.
	Control  <-chan bool
	Switched func(on bool, err error)
	// Census is what an attached profile tracks of the objects that
	// already exist: CensusAuto (default), CensusOn, CensusObjects or
	// CensusOff. CensusBudget bounds each census pause (auto and objects;
	// DefaultCensusBudget when 0). Recensus is the least time between
	// censuses of large objects after GCs (DefaultRecensus when 0,
	// negative: none).
	Census       string
	CensusBudget time.Duration
	Recensus     time.Duration
	// NoDataTypes turns off naming samples by data type (the agent's class
	// descriptions, the sampled object headers) and by memory region.
	NoDataTypes bool
	// Stacks is where access stacks come from (package stacks): agent,
	// bpf or auto (default).
	Stacks string
	// Poll is how often the ring buffer is looked at when the BPF program
	// has not woken the reader (0: loader.PollInterval).
	Poll time.Duration
}

// Progress is a live view of a profile in progress.
type Progress struct {
	Elapsed   time.Duration
	Remaining time.Duration // 0 without a duration
	Samples   uint64        // samples of the target so far
	Rate      float64       // samples per second over the last interval
	Objects   int           // tracked live objects
	Dropped   uint64        // samples lost to a full ring buffer
}

func (o *Options) fill() {
	if o.MinSize == 0 {
		o.MinSize = DefaultMinSize
	}
	if o.Interval == 0 {
		o.Interval = DefaultInterval(o.MinSize)
	}
	if o.Freq == 0 {
		o.Freq = DefaultFreq
	}
	if o.Relocation == "" {
		o.Relocation = DefaultRelocation
	}
	if o.StackSignal == 0 {
		o.StackSignal = DefaultStackSignal
	}
	if o.StackInterval == 0 {
		o.StackInterval = DefaultStackInterval
	}
	if o.AgentTimeout == 0 {
		o.AgentTimeout = 15 * time.Second
	}
	if o.Census == "" {
		o.Census = CensusAuto
	}
	if o.Stacks == "" {
		o.Stacks = stacks.Default
		if o.StackSignal < 0 {
			o.Stacks = stacks.Agent // no stacks asked for: nothing to unwind
		}
	}
	if o.CensusBudget == 0 {
		o.CensusBudget = DefaultCensusBudget
	}
	if o.Recensus == 0 {
		o.Recensus = DefaultRecensus
	}
}

// stacksChoice is where stacks come from as asked, before the sampler
// and the JVM settle it: the session's, which leaves o as given.
func (o *Options) stacksChoice() stacks.Choice {
	return stacks.Choice{Mode: o.Stacks, Signal: o.StackSignal}
}

// CheckCensus says whether mode is a --census mode.
func CheckCensus(mode string) error {
	switch mode {
	case "", CensusAuto, CensusJVMTI, CensusOn, CensusObjects, CensusOff:
		return nil
	}
	return fmt.Errorf("unknown census mode %q: use auto, jvmti, on, objects or off", mode)
}

func (o *Options) note(format string, args ...any) {
	if o.Notify != nil {
		o.Notify(fmt.Sprintf(format, args...))
	}
}

// agentOptions are the agent's options for the session's stacks st.
func (o *Options) agentOptions(sock string, st stacks.Choice) string {
	a := agentwire.Options{Sock: sock, Interval: o.Interval, MinSize: o.MinSize, Budget: o.AllocBudget,
		// The rescan strategy itself, and the check of the uprobe one.
		Reconcile: o.Relocation != follow.Off, StackSignal: st.Signal,
		// With stacks unwound in BPF the join reads JIT code from the
		// JVM's code cache (bpfstack.CodeMap); st.Open has decided by now
		// (the sampler opens before the agent starts).
		NoJITCode: st.Mode == stacks.BPF, Types: !o.NoDataTypes, Recensus: o.Recensus,
		// The census runs when asked (attached sessions only); the
		// census after GCs in every mode but off.
		Census:       map[string]int{CensusAuto: 2, CensusJVMTI: 2, CensusOn: 2, CensusObjects: 1}[o.Census],
		CensusBudget: max(time.Microsecond, o.CensusBudget)}
	if o.Census == CensusOn {
		a.CensusBudget = 0
	}
	return a.String()
}
