package profiler

import (
	"io"
	"time"

	"golang.org/x/sys/unix"

	"github.com/djx-bpf/djx-bpf/loader"
	"github.com/djx-bpf/djx-bpf/sources/sample"
)

// A session reaches the outside world through the interfaces of this
// file and vm.go: the BPF sampler, the relocation tracker, the agent's
// connection, the JVM (jvm.VM), its process (jvm.Process) and the clocks.
// Production uses loader.Sampler and the live ones here;
// the replay test puts a recorded run behind them, so that a real run's
// join and report are checked without root or a JDK.

// sampleSource is the stream of samples a dispatcher reads (dispatch.Source).
type sampleSource interface {
	// ReadBatch returns the next samples in buf[:0], and how far the
	// stream is complete (0: unknown); it fails once the source is closed
	// or flushed, after returning what it held.
	ReadBatch(buf []sample.Sample) ([]sample.Sample, uint64, error)
	// Counters are the sampler's own counts: matched, dropped, signals.
	Counters() (loader.Counters, error)
	Close() error
}

// sampler is a sample source and what a session tells it about its JVM:
// whether to sample it, where its heap is, which signal asks its threads
// for stacks.
type sampler interface {
	sampleSource
	AddPID(pid int) error
	RemovePID(pid int) error
	SetHeap(pid int, lo, hi, base uint64, shift uint) error
	SetStackSignal(pid, sig int) error
	NoJavaThread(pid int, tid uint32) error
	// SetHeaderMask and DropHeaderMask set which object headers the
	// program reads at one instruction (join.HeaderMask).
	SetHeaderMask(k sample.HeaderKey, mask uint32) error
	DropHeaderMask(k sample.HeaderKey) error
	Enable() error
	Disable()
	// Flush makes ReadBatch return what is pending, then fail.
	Flush() error
	// RunTime is the sampling program's total run time (false: the
	// kernel keeps none).
	RunTime() (time.Duration, bool)
}

var _ sampler = (*loader.Sampler)(nil)

// agentConn is the agent's connection: its batches in, commands out.
type agentConn = io.ReadWriteCloser

// clock is the time a session reads: wall time for its duration,
// CLOCK_MONOTONIC (the streams' clock) for stream times, djx-bpf's CPU
// time for its cost, and the heap walks' timers (After). A replay fixes
// them all, so that its report is the same every time.
type clock interface {
	Now() time.Time
	Mono() uint64
	CPU() time.Duration
	After(d time.Duration) <-chan time.Time
}

// sysClock is the system's clocks.
type sysClock struct{}

func (sysClock) Now() time.Time { return time.Now() }
func (sysClock) Mono() uint64   { return loader.Now() }

func (sysClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// CPU is djx-bpf's user and system time; 0 when it cannot be read.
func (sysClock) CPU() time.Duration {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
