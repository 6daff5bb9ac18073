package loader

import (
	"encoding/binary"
	"errors"
	"os"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/djx-bpf/djx-bpf/bpf"
	"github.com/djx-bpf/djx-bpf/naming/numa"
	"github.com/djx-bpf/djx-bpf/sources/sample"
)

func TestParseCPUList(t *testing.T) {
	got, err := numa.ParseCPUList("0-2,5,7-8\n")
	if err != nil {
		t.Fatal(err)
	}
	want := []int{0, 1, 2, 5, 7, 8}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	for _, bad := range []string{"a", "3-1", "1-x"} {
		if _, err := numa.ParseCPUList(bad); err == nil {
			t.Errorf("ParseCPUList(%q) succeeded", bad)
		}
	}
}

func TestParseRelease(t *testing.T) {
	for _, c := range []struct {
		rel        string
		maj, minor int
		ok         bool
	}{{"6.18.44-fc-v782", 6, 18, true}, {"5.8.0", 5, 8, true}, {"4.19.0-17-amd64", 4, 19, true}, {"5.10rc1", 5, 10, true}, {"x", 0, 0, false}} {
		maj, mn, ok := parseRelease(c.rel)
		if maj != c.maj || mn != c.minor || ok != c.ok {
			t.Errorf("parseRelease(%q) = %d,%d,%v", c.rel, maj, mn, ok)
		}
	}
}

// openOrSkip opens a sampler, skipping (with the reason) where the kernel or
// privileges don't allow it.
func openOrSkip(t *testing.T, cfg Config) *Sampler {
	t.Helper()
	if err := Preflight(); err != nil {
		t.Skipf("privileged test skipped: %v", err)
	}
	s, err := Open(cfg)
	if err != nil {
		t.Fatalf("open sampler: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.AddPID(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	return s
}

// collect reads samples until n arrive or the deadline passes, while work runs.
func collect(t *testing.T, s *Sampler, n int, work func(stop <-chan struct{})) []Sample {
	t.Helper()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { work(stop); close(done) }()
	defer func() { close(stop); <-done }()
	var out []Sample
	deadline := time.Now().Add(5 * time.Second)
	s.SetDeadline(deadline)
	for len(out) < n {
		var smp Sample
		if err := s.Read(&smp); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				break
			}
			t.Fatal(err)
		}
		out = append(out, smp)
	}
	return out
}

func TestDecodeSourceSamplesOwnThreads(t *testing.T) {
	s := openOrSkip(t, Config{Source: Decode, Freq: 1000})
	samples := collect(t, s, 50, func(stop <-chan struct{}) {
		x := 0
		for {
			select {
			case <-stop:
				return
			default:
			}
			for i := 0; i < 1e6; i++ {
				x += i
			}
		}
	})
	if len(samples) < 50 {
		t.Fatalf("got %d samples in 5s of busy loop, want 50", len(samples))
	}
	for _, smp := range samples {
		if int(smp.PID) != os.Getpid() {
			t.Fatalf("sample of pid %d, want only %d", smp.PID, os.Getpid())
		}
		if smp.IP() == 0 || smp.Flags&FlagAtOK == 0 {
			t.Fatalf("sample without ip/instruction bytes: %+v", smp)
		}
		if smp.Regs[17]&3 != 3 {
			t.Fatalf("kernel-mode sample delivered: cs=%#x", smp.Regs[17])
		}
	}
	// The bytes around ip are this process's own code, as it reads them.
	mem, err := os.Open("/proc/self/mem")
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	full := 0
	for _, smp := range samples {
		var want [sample.BeforeBytes + 16]byte
		if _, err := mem.ReadAt(want[:], int64(smp.IP()-sample.BeforeBytes)); err != nil ||
			smp.Flags&FlagBeforeOK == 0 || smp.Flags&sample.FlagBeforeShort != 0 {
			continue
		}
		full++
		if [sample.BeforeBytes]byte(want[:sample.BeforeBytes]) != smp.Before || [16]byte(want[sample.BeforeBytes:]) != smp.At {
			t.Fatalf("ip %#x: bytes before %x at %x, the code is %x", smp.IP(), smp.Before, smp.At, want)
		}
	}
	if full < len(samples)/2 {
		t.Errorf("%d of %d samples with all %d bytes before ip", full, len(samples), sample.BeforeBytes)
	}
	c, err := s.Counters()
	if err != nil {
		t.Fatal(err)
	}
	if c.Matched < uint64(len(samples)) {
		t.Errorf("counters %+v below %d delivered", c, len(samples))
	}
	run, ok := s.RunTime()
	if !ok {
		t.Skip("kernel keeps no BPF run-time statistics (before 5.8)")
	}
	t.Logf("BPF program: %v for %d matched samples", run, c.Matched)
	if run <= 0 || run > time.Duration(c.Matched)*time.Millisecond {
		t.Errorf("BPF run time %v for %d samples", run, c.Matched)
	}
}

func TestPageFaultSourceGivesExactAddress(t *testing.T) {
	s := openOrSkip(t, Config{Source: PageFaults, Period: 1})
	const size = 64 << 20
	mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	lo := uint64(uintptrOf(mem))
	samples := collect(t, s, 200, func(stop <-chan struct{}) {
		for i := 0; i < len(mem); i += 4096 {
			mem[i] = 1
		}
		<-stop
	})
	in := 0
	for _, smp := range samples {
		if smp.Addr >= lo && smp.Addr < lo+size {
			in++
		}
	}
	if in < 100 {
		t.Fatalf("%d of %d page-fault samples inside the touched mapping, want >= 100", in, len(samples))
	}
}

// A ring buffer nobody reads fills up: the drops must be counted.
func TestRingBufferOverflowIsCounted(t *testing.T) {
	s := openOrSkip(t, Config{Source: Decode, Freq: 10000, RingSize: 4096})
	deadline := time.Now().Add(3 * time.Second)
	x := 0
	for time.Now().Before(deadline) {
		for i := 0; i < 1e6; i++ {
			x += i
		}
		c, err := s.Counters()
		if err != nil {
			t.Fatal(err)
		}
		if c.Dropped > 0 {
			t.Logf("after %d matched samples: %d dropped", c.Matched, c.Dropped)
			return
		}
	}
	t.Fatalf("no drops counted with a full 4 KiB ring buffer (x=%d)", x)
}

// The hardware program (kernel context, CO-RE) must load and run here; no
// PMU exists, so it is driven by the software page-fault event given as a
// raw attr: the address is exact, and the data source is what the kernel
// fills in when the driver gave none (perf_prepare_sample): PERF_MEM_NA =
// op NA (bit 0) | lvl NA (bit 5) | snoop NA (bit 19) | lock NA (bit 24) |
// dtlb NA (bit 26) | lvl_num NA (0xf << 33) = 0x1e05080021. Reading that
// exact value shows the CO-RE read of the kernel's sample data works.
func TestMemProgramRunsOnRawAttr(t *testing.T) {
	attr := unix.PerfEventAttr{
		Type:   unix.PERF_TYPE_SOFTWARE,
		Config: unix.PERF_COUNT_SW_PAGE_FAULTS,
		Sample: 1,
		Bits:   unix.PerfBitExcludeKernel | unix.PerfBitExcludeHv,
		// What a PEBS load-latency event asks for (see package pmu).
		Sample_type: unix.PERF_SAMPLE_ADDR | unix.PERF_SAMPLE_DATA_SRC | unix.PERF_SAMPLE_WEIGHT_STRUCT,
	}
	s := openOrSkip(t, Config{Source: Hardware, Attr: &attr})
	const size = 16 << 20
	mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	lo := uint64(uintptrOf(mem))
	samples := collect(t, s, 100, func(stop <-chan struct{}) {
		for i := 0; i < len(mem); i += 4096 {
			mem[i] = 1
		}
		<-stop
	})
	in := 0
	for _, smp := range samples {
		if smp.Flags&FlagMemOK == 0 {
			t.Fatalf("sample without FlagMemOK from the hardware program: %+v", smp.Flags)
		}
		const memNA = 0x1e05080021
		if smp.DataSrc != memNA || smp.Weight != 0 {
			t.Fatalf("software event gave data_src %#x weight %#x, want %#x (PERF_MEM_NA) and 0", smp.DataSrc, smp.Weight, memNA)
		}
		if smp.Addr >= lo && smp.Addr < lo+size {
			in++
		}
	}
	if in < 50 {
		t.Fatalf("%d of %d samples inside the touched mapping, want >= 50", in, len(samples))
	}
}

// faultSignals samples every page fault of this process and asks each
// sampled thread for a stack with SIGURG, and maps 64 MiB to fault on.
func faultSignals(t *testing.T) (*Sampler, []byte) {
	s := openOrSkip(t, Config{Source: PageFaults, Period: 1})
	if err := s.SetStackSignal(os.Getpid(), int(unix.SIGURG)); err != nil {
		t.Fatal(err)
	}
	mem, err := unix.Mmap(-1, 0, 64<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(mem) })
	return s, mem
}

// Stack signals on a burst of page faults: at most one per thread per 100
// µs, so that a fault storm (or faults taken by the signal handler itself)
// cannot starve the thread. Our own process handles SIGURG (the Go runtime
// takes it as a preemption request), so it is safe to send here.
func TestStackSignalsAreRateLimited(t *testing.T) {
	s, mem := faultSignals(t)
	var start time.Time
	samples := collect(t, s, 2000, func(stop <-chan struct{}) {
		// A thread younger than SIG_MIN_AGE_NS gets no signals at all, and
		// the test binary's threads may all be that young.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		time.Sleep(250 * time.Millisecond)
		start = time.Now()
		for i := 0; i < len(mem); i += 4096 {
			mem[i] = 1
		}
		<-stop
	})
	took := time.Since(start)
	c, err := s.Counters()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d samples in %v; signals sent %d, skipped %d, refused %d", len(samples), took, c.Signaled, c.SignalSkipped, c.SignalFailed)
	if c.Signaled == 0 || c.SignalSkipped == 0 {
		t.Fatalf("want signals both sent and skipped during a fault burst: %+v", c)
	}
	// No more than one per 100 µs per thread (a few threads fault here).
	if max := uint64(took/(100*time.Microsecond)+1) * 8; c.Signaled > max {
		t.Errorf("%d signals in %v, more than the rate limit allows (%d)", c.Signaled, took, max)
	}
}

// TestNoJavaThreadGetsNoSignal: a thread marked non-Java faults in a burst
// and is sampled, but gets no stack signal, and the counter says why.
func TestNoJavaThreadGetsNoSignal(t *testing.T) {
	s, mem := faultSignals(t)
	type mark struct {
		tid uint32
		at  uint64
	}
	marks := make(chan mark, 1)
	samples := collect(t, s, 2000, func(stop <-chan struct{}) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		tid := unix.Gettid()
		if err := s.NoJavaThread(os.Getpid(), uint32(tid)); err != nil {
			t.Error(err)
		}
		marks <- mark{uint32(tid), Now()}
		time.Sleep(250 * time.Millisecond) // older than SIG_MIN_AGE_NS, which would skip it anyway
		for i := 0; i < len(mem); i += 4096 {
			mem[i] = 1
		}
		<-stop
	})
	m := <-marks
	c, err := s.Counters()
	if err != nil {
		t.Fatal(err)
	}
	mine, signalled := 0, 0
	for _, smp := range samples {
		if smp.TID == m.tid && smp.Time > m.at { // faults before the mark may be signalled
			mine++
			if smp.Flags&FlagNoStack == 0 {
				signalled++
			}
		}
	}
	t.Logf("%d samples, %d of the marked thread; signals sent %d, not sent to non-Java threads %d", len(samples), mine, c.Signaled, c.SignalNonJava)
	if mine < 1000 || signalled != 0 || c.SignalNonJava == 0 {
		t.Fatalf("marked thread: %d samples, %d signalled; counters %+v: want >=1000 samples, none signalled, SignalNonJava counted", mine, signalled, c)
	}
}

// fakeHeap maps a 1 MiB "heap" at lo, unmapped when the test ends, with
// one object at obj whose header words are mark and klass.
func fakeHeap(t *testing.T, mark, klass uint64) (lo, obj uint64) {
	t.Helper()
	mem, err := unix.Mmap(-1, 0, 1<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(mem) })
	binary.LittleEndian.PutUint64(mem[4096:], mark)
	binary.LittleEndian.PutUint64(mem[4096+8:], klass)
	lo = uint64(uintptrOf(mem))
	return lo, lo + 4096
}

// The sampling program reads the header of the object a register points
// at, directly or as a compressed oop, while the thread is stopped: a fake
// heap of one "object" whose address (and compressed form) the busy loop
// keeps in registers.
func TestSamplesCarryObjectHeaders(t *testing.T) {
	for _, narrow := range []bool{false, true} {
		t.Run(map[bool]string{false: "direct", true: "compressed"}[narrow], func(t *testing.T) {
			s := openOrSkip(t, Config{Source: Decode, Freq: 1000})
			const mark, klass = 0x1, 0x0000000800c01234
			lo, obj := fakeHeap(t, mark, klass)
			base, shift := uint64(0), uint(0)
			ref := obj
			if narrow {
				base, shift = lo-(1<<20), 3
				ref = (obj - base) >> shift
			}
			if err := s.SetHeap(os.Getpid(), lo, lo+1<<20, base, shift); err != nil {
				t.Fatal(err)
			}
			samples := collect(t, s, 200, func(stop <-chan struct{}) {
				spinWith(ref, stop)
			})
			hit := 0
			for _, smp := range samples {
				for i := 0; i < 15; i++ {
					if smp.HdrOK&(1<<i) == 0 {
						continue
					}
					if smp.Regs[i] != ref {
						continue
					}
					if smp.Hdr[i] != [2]uint64{mark, klass} || (smp.HdrNarrow&(1<<i) != 0) != narrow {
						t.Fatalf("slot %d = %#x: header %#x narrow %v, want %#x %#x narrow %v", i, smp.Regs[i], smp.Hdr[i], smp.HdrNarrow&(1<<i) != 0, mark, klass, narrow)
					}
					hit++
					break
				}
			}
			if hit < len(samples)/2 {
				t.Fatalf("%d of %d samples read the header the loop's register points at", hit, len(samples))
			}
		})
	}
}

// A header mask limits the reads at its instruction: with mask 0 at every
// instruction the loop was sampled at, its later samples there come
// flagged and without headers; dropped, the masks leave every header read
// again, and RemovePID drops a process's masks.
func TestHeaderMaskLimitsReads(t *testing.T) {
	s := openOrSkip(t, Config{Source: Decode, Freq: 1000})
	lo, ref := fakeHeap(t, 0x1, 0x0000000800c01234)
	if err := s.SetHeap(os.Getpid(), lo, lo+1<<20, 0, 0); err != nil {
		t.Fatal(err)
	}
	spin := func(stop <-chan struct{}) { spinWith(ref, stop) }
	keys := map[sample.HeaderKey]bool{}
	for _, smp := range collect(t, s, 200, spin) {
		if smp.HdrOK != 0 {
			keys[sample.KeyOf(&smp)] = true
		}
	}
	if len(keys) == 0 {
		t.Fatal("no sample read a header")
	}
	for k := range keys {
		if err := s.SetHeaderMask(k, 0); err != nil {
			t.Fatal(err)
		}
	}
	masked := 0
	for _, smp := range collect(t, s, 200, spin) {
		k := sample.KeyOf(&smp)
		switch {
		case smp.Flags&sample.FlagHdrMasked == 0:
		case !keys[k]:
			t.Fatalf("sample at %#x masked, but no mask was set there", smp.IP())
		case smp.HdrOK != 0:
			t.Fatalf("sample at %#x read headers %#x through mask 0", smp.IP(), smp.HdrOK)
		default:
			masked++
		}
	}
	if masked < 50 {
		t.Fatalf("%d masked samples of 200 at the loop's masked instructions", masked)
	}
	for k := range keys {
		if err := s.DropHeaderMask(k); err != nil {
			t.Fatal(err)
		}
	}
	dropped := Now()
	for _, smp := range collect(t, s, 100, spin) {
		if smp.Time > dropped && smp.Flags&sample.FlagHdrMasked != 0 {
			t.Fatalf("sample at %#x masked after the masks were dropped", smp.IP())
		}
	}
	for k := range keys {
		if err := s.SetHeaderMask(k, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.RemovePID(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	var (
		k bpf.DjxHdrKey
		v uint32
	)
	if it := s.maps.HdrMasks.Iterate(); it.Next(&k, &v) {
		t.Fatalf("mask at %#x of pid %d left after RemovePID", k.Ip, k.Pid)
	}
}

// spinWith keeps ref live in a register until stop closes.
//
//go:noinline
func spinWith(ref uint64, stop <-chan struct{}) {
	x := ref
	for {
		select {
		case <-stop:
			return
		default:
		}
		for i := 0; i < 1e6; i++ {
			x = x*3 + ref
		}
		sinkU64 = x
	}
}

var sinkU64 uint64

// A thread marked non-Java under another process keeps its signals: one
// target's agent cannot switch off another's stacks by naming its tids.
func TestNoJavaMarkIsPerProcess(t *testing.T) {
	s, mem := faultSignals(t)
	tids := make(chan uint32, 1)
	samples := collect(t, s, 2000, func(stop <-chan struct{}) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		tid := uint32(unix.Gettid())
		if err := s.NoJavaThread(os.Getpid()+1, tid); err != nil {
			t.Error(err)
		}
		tids <- tid
		time.Sleep(250 * time.Millisecond) // older than SIG_MIN_AGE_NS
		for i := 0; i < len(mem); i += 4096 {
			mem[i] = 1
		}
		<-stop
	})
	tid := <-tids
	c, err := s.Counters()
	if err != nil {
		t.Fatal(err)
	}
	if c.SignalNonJava != 0 || c.Signaled == 0 {
		t.Fatalf("counters %+v after marking thread %d of another process: want signals sent and none skipped as non-Java (%d samples)", c, tid, len(samples))
	}
}
