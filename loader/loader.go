// Package loader loads the sampling BPF program, opens one perf event per CPU
// for the chosen sample source, filters by the profiled tgids and delivers
// the raw samples read from the ring buffer.
package loader

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"

	"github.com/djx-bpf/djx-bpf/bpf"
	"github.com/djx-bpf/djx-bpf/naming/numa"
	"github.com/djx-bpf/djx-bpf/sources/pmu"
	"github.com/djx-bpf/djx-bpf/sources/sample"
)

// Source, Sample and the sample flags are package sample's: the loader
// fills them, the join reads them.
type (
	Source = sample.Source
	Sample = sample.Sample
)

const (
	Decode     = sample.Decode
	PageFaults = sample.PageFaults
	Hardware   = sample.Hardware

	FlagBeforeOK = sample.FlagBeforeOK
	FlagAtOK     = sample.FlagAtOK
	FlagMemOK    = sample.FlagMemOK
	FlagNoStack  = sample.FlagNoStack
)

// ErrClosed is returned by Read after Close.
var ErrClosed = errors.New("sampler closed")

// Config selects the source and its rate.
type Config struct {
	Source Source
	// Freq is the cpu-clock sampling frequency per CPU in Hz (decode).
	Freq int
	// Period samples every Period-th event (page-faults).
	Period uint64
	// RingSize is the ring buffer size in bytes, a power of two multiple of
	// the page size; 0 keeps the program's 8 MiB.
	RingSize uint32
	// Attr is the event for Hardware (see package pmu), and CPUs the CPUs
	// its PMU covers (nil: all online CPUs).
	Attr *unix.PerfEventAttr
	CPUs []int
	// StackGap is the least time between two stack signals to one thread
	// (SetStackSignal); samples in between carry FlagNoStack. Below
	// MinStackGap (and 0) it is MinStackGap.
	StackGap time.Duration
	// Unwind loads the program variant that unwinds each sample's HotSpot
	// stack in BPF (bpf/hotspot_unwind.h); SetUnwind gives it a JVM's
	// code cache.
	Unwind bool
	// Poll is how often ReadBatch looks at the ring buffer (0:
	// PollInterval).
	Poll time.Duration
}

// MinStackGap bounds the stack signals of a thread whatever StackGap says:
// a burst of page faults must not turn into a signal storm.
const MinStackGap = 100 * time.Microsecond

// sampleSize is sizeof(struct sample) in sample.bpf.c.
const sampleSize = int(unsafe.Sizeof(bpf.DjxSample{}))

// Counters are the BPF program's counters, summed over CPUs.
type Counters struct {
	Matched uint64 // samples of profiled processes
	Dropped uint64 // lost because the ring buffer was full
	Kernel  uint64 // taken in kernel mode, skipped
	// Stack signals (SetStackSignal): queued to the sampled thread, and
	// refused by the kernel (one still pending from this CPU).
	Signaled     uint64
	SignalFailed uint64
	// SignalSkipped: not sent, the thread had one less than 100 µs ago or
	// is younger than 200 ms (see SIG_MIN_AGE_NS in sample.bpf.c).
	SignalSkipped uint64
	// SignalNonJava: not sent, the thread has no JNIEnv (NoJavaThread).
	SignalNonJava uint64
}

// Sampler owns the BPF objects, perf events and ring buffer reader.
type Sampler struct {
	maps bpf.DjxMaps
	prog *ebpf.Program
	// unwindTargets is the unwinding variant's map of code caches (nil:
	// the default program).
	unwindTargets *ebpf.Map
	// uwProgs is its tail-call array, holding uwStep.
	uwProgs *ebpf.Map
	uwStep  *ebpf.Program
	// vmThreads: the JVMs' own threads, whose samples skip the walk.
	vmThreads *ebpf.Map
	// unwindGen numbers the code caches given to the unwinder: the key
	// of its per-CPU frame cache, so that a pid reused misses.
	unwindGen atomic.Uint64
	fds       []int
	links     []link.Link // referenced so that finalizers don't close them
	rd        *ringbuf.Reader
	cfg       Config
	// runStats keeps the kernel's BPF run-time statistics on while the
	// sampler is open (nil where the kernel lacks them, before 5.8).
	runStats io.Closer
	// lastComplete is when ReadBatch last found the ring buffer empty.
	lastComplete uint64
	mu           sync.Mutex
	closed       bool
}

// Open loads the program and starts sampling on every online CPU. Samples
// flow only for tgids added with AddPID.
func Open(cfg Config) (s *Sampler, err error) {
	if cfg.Source == "" {
		cfg.Source = Decode
	}
	if cfg.Freq <= 0 {
		cfg.Freq = pmu.DecodeFreq
	}
	if cfg.Period == 0 {
		cfg.Period = 1
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("raise memlock rlimit: %w", err)
	}
	s = &Sampler{cfg: cfg}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	load := bpf.LoadDjx
	if cfg.Unwind {
		load = bpf.LoadDjxUnwind
	}
	spec, err := load()
	if err != nil {
		return nil, fmt.Errorf("load bpf spec: %w", err)
	}
	if cfg.RingSize != 0 {
		spec.Maps["samples"].MaxEntries = cfg.RingSize
	}
	if err := spec.Variables[bpf.DjxVarSigGapNs].Set(uint64(max(cfg.StackGap, MinStackGap))); err != nil {
		return nil, fmt.Errorf("set the stack signal gap: %w", err)
	}
	// The kernel counts BPF run time only while someone asks: two clock
	// reads per run, for every program on the machine, until closed.
	if c, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME)); err == nil {
		s.runStats = c
	}
	if err := s.load(spec); err != nil {
		if errors.Is(err, unix.EPERM) {
			return nil, fmt.Errorf("load bpf program: %w: %w", ErrPrivilege, err)
		}
		return nil, fmt.Errorf("load bpf program: %w: %w", ErrNoBPF, err)
	}
	cpus := cfg.CPUs
	if len(cpus) == 0 {
		if cpus, err = onlineCPUs(); err != nil {
			return nil, err
		}
	}
	for _, cpu := range cpus {
		fd, err := openEvent(cfg, cpu)
		if err != nil {
			return nil, err
		}
		s.fds = append(s.fds, fd)
		l, err := link.AttachRawLink(link.RawLinkOptions{
			Target:  fd,
			Program: s.prog,
			Attach:  ebpf.AttachPerfEvent,
		})
		if err != nil {
			return nil, fmt.Errorf("attach bpf program to perf event on cpu %d: %w", cpu, err)
		}
		s.links = append(s.links, l)
	}
	s.rd, err = ringbuf.NewReader(s.maps.Samples)
	if err != nil {
		return nil, fmt.Errorf("open ring buffer: %w", err)
	}
	for _, fd := range s.fds {
		if err := unix.IoctlSetInt(fd, unix.PERF_EVENT_IOC_ENABLE, 0); err != nil {
			return nil, fmt.Errorf("enable perf event: %w", err)
		}
	}
	return s, nil
}

// load loads the maps and the one program the source needs: only hardware
// events use on_sample_mem, whose kfunc (bpf_cast_to_kern_ctx) needs
// Linux 6.2, so decode and page faults work on older kernels.
func (s *Sampler) load(spec *ebpf.CollectionSpec) error {
	if s.cfg.Unwind {
		return s.loadUnwind(spec)
	}
	if s.cfg.Source == Hardware {
		var o struct {
			bpf.DjxMaps
			Prog *ebpf.Program `ebpf:"on_sample_mem"`
		}
		err := spec.LoadAndAssign(&o, nil)
		s.maps, s.prog = o.DjxMaps, o.Prog
		return err
	}
	var o struct {
		bpf.DjxMaps
		Prog *ebpf.Program `ebpf:"on_sample"`
	}
	err := spec.LoadAndAssign(&o, nil)
	s.maps, s.prog = o.DjxMaps, o.Prog
	return err
}

func openEvent(cfg Config, cpu int) (int, error) {
	attr := unix.PerfEventAttr{
		Type: unix.PERF_TYPE_SOFTWARE,
		// exclude_kernel: a kernel-mode sample has no user registers.
		Bits: unix.PerfBitDisabled | unix.PerfBitExcludeKernel | unix.PerfBitExcludeHv,
	}
	switch cfg.Source {
	case Decode:
		attr.Config = unix.PERF_COUNT_SW_CPU_CLOCK
		// A fixed period in ns instead of freq mode: the clock is exact.
		attr.Sample = uint64(time.Second) / uint64(cfg.Freq)
	case PageFaults:
		attr.Config = unix.PERF_COUNT_SW_PAGE_FAULTS
		attr.Sample = cfg.Period
	case Hardware:
		if cfg.Attr == nil {
			return -1, errors.New("hardware source without an event")
		}
		attr = *cfg.Attr
		attr.Bits |= unix.PerfBitDisabled
	default:
		return -1, fmt.Errorf("unknown sample source %q", cfg.Source)
	}
	attr.Size = uint32(unsafe.Sizeof(unix.PerfEventAttr{}))
	fd, err := unix.PerfEventOpen(&attr, -1, cpu, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err != nil {
		if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
			return -1, fmt.Errorf("open %s perf event on cpu %d: %w: %w", cfg.Source, cpu, ErrPrivilege, err)
		}
		return -1, fmt.Errorf("open %s perf event on cpu %d: %w", cfg.Source, cpu, err)
	}
	return fd, nil
}

func onlineCPUs() ([]int, error) {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		cpus := make([]int, runtime.NumCPU())
		for i := range cpus {
			cpus[i] = i
		}
		return cpus, nil
	}
	cpus, err := numa.ParseCPUList(string(b))
	if err == nil && len(cpus) == 0 {
		err = fmt.Errorf("empty cpu list %q", b)
	}
	if err != nil {
		return nil, fmt.Errorf("parse online cpus: %w", err)
	}
	return cpus, nil
}

// AddPID starts sampling the threads of tgid pid (host pid namespace).
func (s *Sampler) AddPID(pid int) error {
	if err := s.maps.Targets.Put(uint32(pid), bpf.DjxTarget{}); err != nil {
		return fmt.Errorf("add pid %d to bpf filter: %w", pid, err)
	}
	return nil
}

// updateTarget changes pid's entry of the targets map in place.
func (s *Sampler) updateTarget(pid int, f func(*bpf.DjxTarget)) error {
	var t bpf.DjxTarget
	if err := s.maps.Targets.Lookup(uint32(pid), &t); err != nil {
		return err
	}
	f(&t)
	return s.maps.Targets.Update(uint32(pid), t, ebpf.UpdateExist)
}

// SetStackSignal makes every later sample of pid send sig to the sampled
// thread (bpf_send_signal_thread), whose handler records its Java stack; 0
// stops that. Only set it while a handler is installed on sig in pid: an
// unhandled signal would kill the process.
func (s *Sampler) SetStackSignal(pid, sig int) error {
	if sig < 0 || sig > 64 {
		return fmt.Errorf("stack signal %d out of range 1..64", sig)
	}
	if err := s.updateTarget(pid, func(t *bpf.DjxTarget) { t.Signo = uint8(sig) }); err != nil {
		return fmt.Errorf("set stack signal of pid %d: %w", pid, err)
	}
	return nil
}

// SetHeap has every later sample of pid carry the object headers that its
// registers point at: those in [lo, hi), and with shift > 0 the compressed
// oops that decode to there (base + reg<<shift). lo = hi = 0 stops it.
func (s *Sampler) SetHeap(pid int, lo, hi, base uint64, shift uint) error {
	if shift > 7 || lo > hi {
		return fmt.Errorf("heap [%#x, %#x) with oop shift %d out of range", lo, hi, shift)
	}
	err := s.updateTarget(pid, func(t *bpf.DjxTarget) {
		t.HeapLo, t.HeapHi, t.OopBase, t.OopShift = lo, hi, base, uint8(shift)
	})
	if err != nil {
		return fmt.Errorf("set heap of pid %d: %w", pid, err)
	}
	return nil
}

// NoJavaThread stops stack signals to thread tid of process pid (host
// namespace), which the agent found without a JNIEnv: it has no Java
// stack, and a signal would only cost it time. The map is an LRU: a tid
// reused by a Java thread after 16k others loses its stacks at worst.
func (s *Sampler) NoJavaThread(pid int, tid uint32) error {
	if err := s.maps.NoJava.Put(bpf.DjxThreadKey{Tgid: uint32(pid), Tid: tid}, uint8(1)); err != nil {
		return fmt.Errorf("mark thread %d as non-Java: %w", tid, err)
	}
	return nil
}

// SetHeaderMask makes the program read, at instruction k, only the object
// headers of the pt_regs slots in mask. A full map (bpf/sample.bpf.c's
// HDR_MASKS) refuses new keys: those keep reading every header.
func (s *Sampler) SetHeaderMask(k sample.HeaderKey, mask uint32) error {
	if err := s.maps.HdrMasks.Put(bpf.DjxHdrKey{Pid: k.PID, Ip: k.IP}, mask); err != nil {
		return fmt.Errorf("set header mask at %#x: %w", k.IP, err)
	}
	return nil
}

// DropHeaderMask makes the program read every header at k again.
func (s *Sampler) DropHeaderMask(k sample.HeaderKey) error {
	err := s.maps.HdrMasks.Delete(bpf.DjxHdrKey{Pid: k.PID, Ip: k.IP})
	if err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("drop header mask at %#x: %w", k.IP, err)
	}
	return nil
}

// dropHeaderMasks drops pid's header masks: a later process with its pid
// must not inherit them.
func (s *Sampler) dropHeaderMasks(pid int) error {
	return dropKeys(s.maps.HdrMasks, "header masks", func(k *bpf.DjxHdrKey) bool { return k.Pid == uint32(pid) })
}

// dropThreads deletes pid's entries from m, a map keyed by thread (nil:
// none to drop).
func dropThreads(m *ebpf.Map, pid int) error {
	if m == nil {
		return nil
	}
	return dropKeys(m, "threads", func(k *bpf.DjxThreadKey) bool { return k.Tgid == uint32(pid) })
}

// dropKeys deletes the keys of m that mine picks (what: for errors).
func dropKeys[K any](m *ebpf.Map, what string, mine func(*K) bool) error {
	var (
		k    K
		keys []K
	)
	v := make([]byte, m.ValueSize())
	it := m.Iterate()
	for it.Next(&k, &v) {
		if mine(&k) {
			keys = append(keys, k)
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("list %s: %w", what, err)
	}
	for _, k := range keys {
		if err := m.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("drop %s: %w", what, err)
		}
	}
	return nil
}

// RemovePID stops sampling pid.
func (s *Sampler) RemovePID(pid int) error {
	if err := s.maps.Targets.Delete(uint32(pid)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("remove pid %d from bpf filter: %w", pid, err)
	}
	if s.unwindTargets != nil {
		if err := s.unwindTargets.Delete(uint32(pid)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("remove pid %d's code cache: %w", pid, err)
		}
	}
	if err := s.dropHeaderMasks(pid); err != nil {
		return fmt.Errorf("remove pid %d: %w", pid, err)
	}
	// A later process with this pid must not inherit its threads' marks.
	for _, m := range []*ebpf.Map{s.maps.NoJava, s.vmThreads} {
		if err := dropThreads(m, pid); err != nil {
			return fmt.Errorf("remove pid %d: %w", pid, err)
		}
	}
	return nil
}

// SetDeadline makes Read return os.ErrDeadlineExceeded at t. It waits for a
// Read in progress: use Flush to end a blocked Read from another goroutine.
func (s *Sampler) SetDeadline(t time.Time) { s.rd.SetDeadline(t) }

// ErrFlushed is returned by Read once the records pending at Flush are read.
var ErrFlushed = ringbuf.ErrFlushed

// Flush makes Read return the records already in the ring buffer, then
// ErrFlushed, without waiting for more.
func (s *Sampler) Flush() error { return s.rd.Flush() }

// Read blocks until the next sample and decodes it into out. It returns
// ErrClosed after Close. The BPF program wakes readers only once 16 KiB
// are pending: at low rates give Read a deadline (or use ReadBatch, which
// polls) so that it looks again.
func (s *Sampler) Read(out *Sample) error {
	var rec ringbuf.Record
	for {
		if err := s.rd.ReadInto(&rec); err != nil {
			if errors.Is(err, ringbuf.ErrClosed) {
				return ErrClosed
			}
			return err
		}
		if len(rec.RawSample) >= sampleSize {
			parseSample(rec.RawSample, out)
			if s.cfg.Unwind {
				parseStack(rec.RawSample, out)
			}
			return nil
		}
	}
}

// PollInterval is how often ReadBatch looks at the ring buffer: the BPF
// program wakes the reader only when 16 KiB are pending. Each look costs the
// loader ~0.1 ms of CPU (measured: 0.43 s over an idle 8 s profile at 5 ms;
// at 25 ms, with the agent's batches every 50 ms, djx-bpf idled at 0.9% of
// a core, 0.2% at 100 ms and 200 ms). The join waits for the agent's
// batches, 200 ms apart, anyway.
const PollInterval = 100 * time.Millisecond

// completeSlack is the margin on the completeness bound. The program
// reserves its record before it reads the clock, so a sample stamped
// before a look at the ring was already counted by it; the margin covers
// the gap between the two, which a guest's stalled vCPU can stretch.
const completeSlack = uint64(10 * time.Millisecond)

// completeEvery is how often ReadBatch returns without samples, only to say
// how far the stream is complete.
const completeEvery = uint64(200 * time.Millisecond)

// Now is CLOCK_MONOTONIC in nanoseconds: the clock of Sample.Time
// (bpf_ktime_get_ns) and of the agent's records.
func Now() uint64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
}

// ReadBatch blocks until a sample arrives, then takes every sample already
// in the ring buffer as well (up to cap(dst)), appending them to dst[:0]:
// one wakeup and one hand-off per burst instead of per sample. It polls
// every PollInterval, so do not combine it with SetDeadline.
//
// complete says how far the stream is known to be whole: every sample taken
// before it (Sample.Time) has been returned by this call or an earlier one;
// 0 if this call cannot tell. While no sample comes, ReadBatch returns no
// samples every so often just to advance it, so that a consumer joining
// samples with other streams by time knows it has seen all of them.
func (s *Sampler) ReadBatch(dst []Sample) (_ []Sample, complete uint64, _ error) {
	dst = dst[:0]
	if cap(dst) == 0 {
		dst = make([]Sample, 0, 256)
	}
	var smp Sample
	for {
		t := Now()
		poll := s.cfg.Poll
		if poll <= 0 {
			poll = PollInterval
		}
		s.rd.SetDeadline(time.Now().Add(poll))
		err := s.Read(&smp)
		if err == nil {
			break
		}
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			return dst, 0, err
		}
		// Nothing was reserved during the wait: every sample taken before
		// it began has been returned.
		if t >= s.lastComplete+completeEvery {
			s.lastComplete = t
			return dst, max(t, completeSlack) - completeSlack, nil
		}
	}
	dst = append(dst, smp)
	latest := smp.Time
	for len(dst) < cap(dst) {
		// AvailableBytes counts records reserved but not yet committed, so
		// an empty ring at t means every sample taken before t is read.
		t := Now()
		if s.rd.AvailableBytes() == 0 {
			s.lastComplete = t
			return dst, max(t, completeSlack) - completeSlack, nil
		}
		if err := s.Read(&smp); err != nil {
			break // the next call reports it
		}
		dst = append(dst, smp)
		latest = max(latest, smp.Time)
	}
	// The ring is not empty (a busy machine may never leave it empty), but
	// the program reserves a record before it reads the clock: a sample
	// taken more than completeSlack before the latest one read was
	// reserved before it, so it has been read too.
	return dst, max(latest, completeSlack) - completeSlack, nil
}

// parseSample copies a ring-buffer record into the generated layout (an
// aligned copy: the record's bytes need not be) and from there into s.
func parseSample(b []byte, s *Sample) {
	var r bpf.DjxSample
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&r)), unsafe.Sizeof(r)), b)
	*s = Sample{
		Time: r.Time, PID: r.Pid, TID: r.Tid, Addr: r.Addr, Period: r.Period,
		Regs: r.Regs, Before: r.Before, At: r.At, Flags: uint32(r.Flags), CPU: r.Cpu,
		DataSrc: r.DataSrc, Weight: r.Weight,
		HdrOK: r.HdrOk, HdrNarrow: r.HdrNarrow, Hdr: r.Hdr,
	}
}

// RunTime is how long the sampling program has run in total, on every CPU
// and for every process it saw (false: the kernel keeps no statistics).
// It leaves out the perf interrupt that calls it.
func (s *Sampler) RunTime() (time.Duration, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.runStats == nil || s.prog == nil {
		return 0, false
	}
	st, err := s.prog.Stats()
	if err != nil {
		return 0, false
	}
	return st.Runtime, true
}

// Counters sums the per-CPU counters.
func (s *Sampler) Counters() (Counters, error) {
	var c Counters
	for slot, dst := range map[bpf.DjxCounter]*uint64{
		bpf.DjxCounterCNT_MATCHED: &c.Matched, bpf.DjxCounterCNT_DROPPED: &c.Dropped, bpf.DjxCounterCNT_KERNEL: &c.Kernel,
		bpf.DjxCounterCNT_SIGNALED: &c.Signaled, bpf.DjxCounterCNT_SIGNAL_FAIL: &c.SignalFailed,
		bpf.DjxCounterCNT_SIGNAL_SKIP: &c.SignalSkipped, bpf.DjxCounterCNT_SIGNAL_NOJAVA: &c.SignalNonJava,
	} {
		var vals []uint64
		if err := s.maps.Counters.Lookup(uint32(slot), &vals); err != nil {
			return c, fmt.Errorf("read bpf counters: %w", err)
		}
		for _, v := range vals {
			*dst += v
		}
	}
	return c, nil
}

// Close stops sampling and releases every perf fd, link and map. Safe to
// call more than once.
func (s *Sampler) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	for _, fd := range s.fds {
		_ = unix.IoctlSetInt(fd, unix.PERF_EVENT_IOC_DISABLE, 0)
	}
	for _, l := range s.links {
		errs = append(errs, l.Close())
	}
	for _, fd := range s.fds {
		errs = append(errs, unix.Close(fd))
	}
	if s.rd != nil {
		errs = append(errs, s.rd.Close())
	}
	if s.prog != nil {
		errs = append(errs, s.prog.Close())
	}
	if s.runStats != nil {
		errs = append(errs, s.runStats.Close())
	}
	errs = append(errs, s.maps.Close())
	if s.unwindTargets != nil {
		errs = append(errs, s.unwindTargets.Close())
	}
	if s.vmThreads != nil {
		errs = append(errs, s.vmThreads.Close())
	}
	if s.uwProgs != nil {
		errs = append(errs, s.uwProgs.Close())
	}
	if s.uwStep != nil {
		errs = append(errs, s.uwStep.Close())
	}
	return errors.Join(errs...)
}

// Disable stops the perf events; samples already in the ring buffer can still
// be read.
func (s *Sampler) Disable() {
	_ = s.ioctlAll(unix.PERF_EVENT_IOC_DISABLE)
}

// Enable restarts the perf events after Disable.
func (s *Sampler) Enable() error {
	if err := s.ioctlAll(unix.PERF_EVENT_IOC_ENABLE); err != nil {
		return fmt.Errorf("enable perf event: %w", err)
	}
	return nil
}

func (s *Sampler) ioctlAll(req uint) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	var errs []error
	for _, fd := range s.fds {
		errs = append(errs, unix.IoctlSetInt(fd, req, 0))
	}
	return errors.Join(errs...)
}
