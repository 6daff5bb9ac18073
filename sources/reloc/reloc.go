// Package reloc captures the object copies and GC epochs of HotSpot JVMs
// with BPF, and uprobes on the USDT sites hotspot:gc__begin and gc__end
// bracket each GC operation. One ring buffer serves every JVM.
//
// Copies are caught, by default, by uprobes on the memcpy/memmove calls
// inside the Serial, Parallel and G1 collectors' own copy functions, found
// by name in libjvm.so's .symtab and by disassembling them (gcsites.go):
// they trap only when a collector copies an object of more than 64 bytes,
// never outside a GC pause, whether or not the BPF filter keeps the copy.
// The kernel emulates the call instruction, so a hit costs several times
// less than one at memmove's entry, which single-steps its first
// instruction (7-10 us on the development VM, design.md). A pause grows
// with the number of objects over 64 bytes the collector copies.
//
// When libjvm.so is stripped or its copy functions are unknown (a JDK not
// in gcCopyFuncs), copies are caught instead on the memmove/memcpy
// implementation that libjvm.so really calls (found through its GOT in the
// live process): that traps on every copy of every thread of the JVM, GC
// or not, and made H2 and Xalan 1.9-2.6 times slower. Info.SitesErr says
// when this fallback was taken.
package reloc

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/cilium/ebpf/rlimit"

	"github.com/djx-bpf/djx-bpf/bpf"
	"github.com/djx-bpf/djx-bpf/safety/elfsafe"
)

// Kind is the kind of an Event.
type Kind uint8

// Event kinds: reloc.bpf.c's enum reloc_kind (TestKindsMatchBPF).
const (
	GCBegin Kind = 1 // a GC operation starts (hotspot:gc__begin)
	GCEnd   Kind = 2 // it ends (hotspot:gc__end)
	Copy    Kind = 3 // a copy out of the heap (memmove/memcpy)
)

func (k Kind) String() string {
	switch k {
	case GCBegin:
		return "gc-begin"
	case GCEnd:
		return "gc-end"
	case Copy:
		return "copy"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Event is one record of the ring buffer.
type Event struct {
	Kind Kind
	Time uint64 // CLOCK_MONOTONIC ns (bpf_ktime_get_ns)
	PID  uint32 // tgid, host pid namespace
	TID  uint32
	// Copy: memmove(Dst, Src, Len).
	Src, Dst, Len uint64
	// GCBegin: FullKnown says whether the probe's argument could be read;
	// Full is its value (HotSpot passes "full GC").
	Full, FullKnown bool
}

// Range is a half-open address range [Start, End).
type Range struct{ Start, End uint64 }

// CopyProbe says where copies are caught.
type CopyProbe string

// Copy probes (Config.Copies).
const (
	// CopiesAuto catches copies at the collectors' copy sites, and on
	// libc's memmove when libjvm.so has none (stripped, unknown JDK).
	CopiesAuto CopyProbe = ""
	// CopiesGCSites uses the collectors' copy sites only: AddJVM fails
	// for the copies (Info.CopyErr) when libjvm.so has none.
	CopiesGCSites CopyProbe = "gc-sites"
	// CopiesLibc traps libc's memmove/memcpy as libjvm.so calls them:
	// every copy of every thread.
	CopiesLibc CopyProbe = "libc"
)

// Config configures the probes and the BPF filter.
type Config struct {
	// MinLen drops copies shorter than this in BPF (0 keeps all).
	MinLen uint64
	// Copies chooses the copy probes (CopiesAuto if empty).
	Copies CopyProbe

	// entryProbes, for measurements only, puts the copy program on the
	// entry of every collector copy function instead of its memcpy calls:
	// the events are meaningless (the registers are not memcpy's), the
	// hit counters and pauses are what it is for.
	entryProbes bool
}

// Sentinel errors; Info reports them for the part that could not be
// attached, and AddJVM returns them when neither part could.
var (
	// ErrNoUSDT means libjvm.so has no hotspot:gc__begin/gc__end notes
	// (a JDK built without DTrace support): GC epochs are not reported.
	ErrNoUSDT = errors.New("libjvm.so has no hotspot gc__begin/gc__end USDT probes (JDK built without --enable-dtrace)")
	// ErrGOT means libjvm's memmove/memcpy GOT slots could not be resolved
	// in the process: copies are not reported; use rescanning instead.
	ErrGOT = errors.New("cannot resolve libjvm's memmove/memcpy through its GOT")
	// ErrNoJVM means the process maps no libjvm.so.
	ErrNoJVM = errors.New("process maps no libjvm.so")
	// ErrClosed is returned by Read after Close.
	ErrClosed = errors.New("tracker closed")
	// ErrFlushed is returned by Read once the records pending at Flush are read.
	ErrFlushed = ringbuf.ErrFlushed
)

// maxRanges is MAX_RANGES in reloc.bpf.c.
const maxRanges = 4

// Info says what AddJVM attached.
type Info struct {
	LibJVM string // libjvm.so as the process sees it
	// Sites are the collectors' copy sites attached, one uprobe each, in
	// libjvm.so; empty if the libc fallback was taken.
	Sites []Site
	// SitesErr says why the copy sites were not used (wraps ErrNoSymtab
	// or ErrNoSites), nil if they were or Config.Copies is CopiesLibc.
	SitesErr error
	// Copies are the libc implementations attached when the copy sites
	// were not used, one uprobe each; empty if CopyErr != nil.
	Copies []CopyTarget
	// GCBegin and GCEnd are the USDT sites attached (a probe may be
	// inlined at several sites).
	GCBegin, GCEnd []Probe
	// CopyErr (wraps ErrGOT) and GCErr (wraps ErrNoUSDT) say why a part
	// was not attached; AddJVM still succeeds if the other part was.
	CopyErr, GCErr error
}

// Counters are the BPF counters, summed over CPUs.
type Counters struct {
	// Hits counts every copy uprobe hit of a tracked process: each one
	// paid the trap, whether kept or filtered.
	Hits         uint64
	HitsInGC     uint64 // the part of Hits between gc__begin and gc__end
	Kept         uint64 // copies sent to the ring buffer
	FilteredLen  uint64 // shorter than MinLen
	FilteredHeap uint64 // source outside the heap ranges
	Dropped      uint64 // lost because the ring buffer was full
	GCEvents     uint64 // gc__begin/gc__end events sent
	Foreign      uint64 // hits in untracked processes (should stay 0)
}

// Tracker owns the BPF objects, the per-JVM uprobe links and the reader.
type Tracker struct {
	cfg  Config
	objs bpf.RelocObjects
	rd   *ringbuf.Reader

	mu     sync.Mutex
	jvms   map[int][]link.Link // referenced so that finalizers don't close them
	closed bool
}

// Open loads the BPF objects. Nothing is attached until AddJVM.
func Open(cfg Config) (t *Tracker, err error) {
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("raise memlock rlimit: %w", err)
	}
	t = &Tracker{cfg: cfg, jvms: map[int][]link.Link{}}
	defer func() {
		if err != nil {
			t.Close()
		}
	}()
	if err := bpf.LoadRelocObjects(&t.objs, nil); err != nil {
		return nil, fmt.Errorf("load relocation bpf objects: %w", err)
	}
	if t.rd, err = ringbuf.NewReader(t.objs.RelocEvents); err != nil {
		return nil, fmt.Errorf("open relocation ring buffer: %w", err)
	}
	return t, nil
}

// AddJVM attaches the copy and GC uprobes to the JVM pid (host pid
// namespace) and keeps copies whose source lies in heap (at most 4 ranges
// after merging adjacent ones). It fails, attaching nothing, if neither
// copies nor GC epochs can be tracked.
func (t *Tracker) AddJVM(pid int, heap []Range) (Info, error) {
	filter, err := heapFilter(t.cfg.MinLen, heap)
	if err != nil {
		return Info{}, fmt.Errorf("track pid %d: %w", pid, err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return Info{}, ErrClosed
	}
	if _, ok := t.jvms[pid]; ok {
		return Info{}, fmt.Errorf("track pid %d: already tracked", pid)
	}
	proc, err := readProcess(pid)
	if err != nil {
		return Info{}, fmt.Errorf("track pid %d: %w", pid, err)
	}
	// Parsed, and probed through /proc/self/fd, from this one open file:
	// the uprobes go on the inode verified here, not on a path.
	jvm, err := openMapped(pid, proc.jvm)
	if err != nil {
		return Info{LibJVM: proc.jvm.path}, fmt.Errorf("track pid %d: open libjvm: %w", pid, err)
	}
	defer jvm.Close()
	p, err := planJVM(t.cfg, jvm, proc)
	if err != nil {
		return p.info, fmt.Errorf("track pid %d: %w", pid, err)
	}
	links, err := t.attach(pid, jvm, &filter, &p)
	if err != nil {
		return p.info, fmt.Errorf("track pid %d: %w", pid, err)
	}
	t.jvms[pid] = links
	return p.info, nil
}

// attach sets pid's BPF filter entry, then opens the plan's uprobes and
// names the libc implementations probed in p.info. The entry goes first
// so that no early event is lost; a failure undoes everything.
func (t *Tracker) attach(pid int, jvm *elfsafe.File, filter *bpf.RelocTarget, p *plan) ([]link.Link, error) {
	if err := t.objs.RelocTargets.Put(uint32(pid), filter); err != nil {
		return nil, fmt.Errorf("set bpf filter: %w", err)
	}
	links, err := t.openLinks(pid, jvm, p)
	if err != nil {
		for _, l := range links {
			l.Close()
		}
		t.objs.RelocTargets.Delete(uint32(pid))
		return nil, err
	}
	return links, nil
}

// openLinks opens the plan's uprobes in order; on failure it returns
// those already open with the error.
func (t *Tracker) openLinks(pid int, jvm *elfsafe.File, p *plan) ([]link.Link, error) {
	var links []link.Link
	var jvmEx *link.Executable
	for _, u := range p.probes {
		if u.libc >= 0 {
			l, sym, err := t.attachLibc(pid, u)
			if err != nil {
				return links, err
			}
			links = append(links, l)
			p.info.Copies[u.libc].Symbol = sym
			continue
		}
		if jvmEx == nil {
			ex, err := link.OpenExecutable(jvm.FDPath())
			if err != nil {
				return links, fmt.Errorf("open libjvm: %w", err)
			}
			jvmEx = ex
		}
		l, err := t.uprobe(jvmEx, pid, u)
		if err != nil {
			return links, err
		}
		links = append(links, l)
	}
	return links, nil
}

// attachLibc attaches u on the libc file it lies in, opened as libjvm.so
// is, and names its symbol.
func (t *Tracker) attachLibc(pid int, u uprobe) (link.Link, string, error) {
	lib, err := openMapped(pid, u.libcMap)
	if err != nil {
		return nil, "", fmt.Errorf("open %s: %w", u.libcMap.path, err)
	}
	defer lib.Close()
	ex, err := link.OpenExecutable(lib.FDPath())
	if err != nil {
		return nil, "", fmt.Errorf("open %s: %w", u.libcMap.path, err)
	}
	l, err := t.uprobe(ex, pid, u)
	if err != nil {
		return nil, "", err
	}
	return l, symbolAt(lib, u.offset), nil
}

// uprobe attaches u's program at u's offset of ex, for pid only.
func (t *Tracker) uprobe(ex *link.Executable, pid int, u uprobe) (link.Link, error) {
	prog := map[Kind]*ebpf.Program{Copy: t.objs.OnCopy, GCBegin: t.objs.OnGcBegin, GCEnd: t.objs.OnGcEnd}[u.kind]
	l, err := ex.Uprobe("", prog, &link.UprobeOptions{Address: u.offset, PID: pid, Cookie: u.cookie, RefCtrOffset: u.refCtr})
	if err != nil {
		return nil, fmt.Errorf("attach %s: %w", u.what, err)
	}
	return l, nil
}

// RemoveJVM detaches pid's uprobes and removes its filter entry. Events
// already in the ring buffer can still be read.
func (t *Tracker) RemoveJVM(pid int) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.removeLocked(pid)
}

func (t *Tracker) removeLocked(pid int) error {
	links, ok := t.jvms[pid]
	if !ok {
		return fmt.Errorf("untrack pid %d: not tracked", pid)
	}
	delete(t.jvms, pid)
	var errs []error
	for _, l := range links {
		if err := l.Close(); err != nil {
			errs = append(errs, fmt.Errorf("untrack pid %d: close link: %w", pid, err))
		}
	}
	if err := t.objs.RelocTargets.Delete(uint32(pid)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		errs = append(errs, fmt.Errorf("untrack pid %d: remove bpf filter: %w", pid, err))
	}
	return errors.Join(errs...)
}

// eventSize is sizeof(struct reloc_event), as bpf2go generated it.
const eventSize = int(unsafe.Sizeof(bpf.RelocRelocEvent{}))

// Event flags: reloc.bpf.c's enum reloc_flag, as bpf2go generated it.
const (
	flagFull  = bpf.RelocRelocFlagFLAG_FULL
	flagArgOK = bpf.RelocRelocFlagFLAG_ARG_OK
)

// Read blocks until the next event. It returns ErrFlushed after Flush once
// the pending events are read, and ErrClosed after Close.
func (t *Tracker) Read(ev *Event) error {
	var rec ringbuf.Record
	for {
		if err := t.rd.ReadInto(&rec); err != nil {
			if errors.Is(err, ringbuf.ErrClosed) {
				return ErrClosed
			}
			return err
		}
		if len(rec.RawSample) >= eventSize {
			parseEvent(rec.RawSample, ev)
			return nil
		}
	}
}

// parseEvent reads one struct reloc_event through its generated type; b
// holds at least eventSize bytes (b[:eventSize] panics otherwise). The type
// holds no pointers and the targets bpf2go builds it for (little-endian)
// load unaligned fields, so the record is read in place.
func parseEvent(b []byte, ev *Event) {
	r := (*bpf.RelocRelocEvent)(unsafe.Pointer(unsafe.SliceData(b[:eventSize])))
	*ev = Event{
		Time:      r.Time,
		PID:       r.Pid,
		TID:       r.Tid,
		Src:       r.Src,
		Dst:       r.Dst,
		Len:       r.Len,
		Kind:      Kind(r.Kind),
		Full:      r.Flags&flagFull != 0,
		FullKnown: r.Flags&flagArgOK != 0,
	}
}

// SetDeadline makes Read return os.ErrDeadlineExceeded at t. It waits for a
// Read in progress, so call it from the reading goroutine.
func (t *Tracker) SetDeadline(d time.Time) { t.rd.SetDeadline(d) }

// Flush makes a Read blocked in another goroutine return the records
// already in the ring buffer, then ErrFlushed.
func (t *Tracker) Flush() error { return t.rd.Flush() }

// Counters sums the per-CPU counters.
func (t *Tracker) Counters() (Counters, error) {
	var c Counters
	for slot, dst := range map[bpf.RelocRelocCounter]*uint64{
		bpf.RelocRelocCounterCNT_HITS: &c.Hits, bpf.RelocRelocCounterCNT_KEPT: &c.Kept,
		bpf.RelocRelocCounterCNT_FILTER_LEN: &c.FilteredLen, bpf.RelocRelocCounterCNT_FILTER_HEAP: &c.FilteredHeap,
		bpf.RelocRelocCounterCNT_DROPPED: &c.Dropped, bpf.RelocRelocCounterCNT_GC: &c.GCEvents,
		bpf.RelocRelocCounterCNT_FOREIGN: &c.Foreign, bpf.RelocRelocCounterCNT_HITS_GC: &c.HitsInGC,
	} {
		var vals []uint64
		if err := t.objs.RelocCounters.Lookup(uint32(slot), &vals); err != nil {
			return c, fmt.Errorf("read relocation counters: %w", err)
		}
		for _, v := range vals {
			*dst += v
		}
	}
	return c, nil
}

// Close detaches every JVM and releases the BPF objects. Safe to call more
// than once.
func (t *Tracker) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	t.closed = true
	var errs []error
	for pid := range t.jvms {
		errs = append(errs, t.removeLocked(pid))
	}
	if t.rd != nil {
		errs = append(errs, t.rd.Close())
	}
	errs = append(errs, t.objs.Close())
	return errors.Join(errs...)
}
