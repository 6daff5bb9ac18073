package join

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/djx-bpf/djx-bpf/loader"
	"github.com/djx-bpf/djx-bpf/sources/agentwire"
)

// BenchmarkIngest measures the loader's sustained ingest end to end: the
// real BPF program on the page-fault event of this process, the ring
// buffer, loader.Sampler.Read, and the consumer's OnSample → drain →
// attribute into the object tree, as the session runs them. A producer
// thread touches fresh pages of a 64 MiB mapping (one fault, so one sample,
// per page; MADV_DONTNEED starts it over) at a paced rate; each object of
// the tree covers half a page, so every sample is attributed.
//
// Sub-benchmarks:
//   - rate=N: the producer makes N faults per second; one op is one sample
//     consumed. Metrics: samples/s consumed, consumer CPU per sample
//     (CLOCK_THREAD_CPUTIME_ID of the consumer thread) and the consumer's
//     share of a core, and drops (ring buffer full) at that rate.
//   - rate=max: the producer runs unpaced.
//   - drain: the producer fills the 8 MiB ring buffer while nobody reads
//     (drops included), then the consumer empties it: its pure capacity,
//     samples per second of one core.
//
// Privileged (BPF, perf events): skipped with the reason otherwise.
//
//	go test -run '^$' -bench Ingest -benchtime 3s ./join/
func BenchmarkIngest(b *testing.B) {
	if err := loader.Preflight(); err != nil {
		b.Skipf("privileged benchmark skipped: %v", err)
	}
	for _, rate := range []int{25_000, 50_000, 100_000, 200_000, 400_000, 0} {
		name := fmt.Sprintf("rate=%d", rate)
		if rate == 0 {
			name = "rate=max"
		}
		b.Run(name, func(b *testing.B) { ingest(b, rate) })
	}
	b.Run("drain", ingestDrain)
}

const ingestRegion = 64 << 20

type ingestRig struct {
	s      *loader.Sampler
	j      *JVM
	region []byte
	stop   atomic.Bool
	done   chan struct{}
	faults atomic.Uint64
}

func newIngestRig(b *testing.B) *ingestRig {
	s, err := loader.Open(loader.Config{Source: loader.PageFaults, Period: 1})
	if err != nil {
		b.Fatalf("open sampler: %v", err)
	}
	region, err := unix.Mmap(-1, 0, ingestRegion, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		s.Close()
		b.Fatal(err)
	}
	r := &ingestRig{s: s, region: region, done: make(chan struct{})}
	j := exactJVM(os.Getpid())
	j.OnBatch(batch(1, hello(1), method(1, "LIngest;", "touch", 1)))
	base := uint64(uintptr(unsafe.Pointer(&region[0])))
	recs := make([]agentwire.Record, 0, ingestRegion/4096)
	for off := uint64(0); off < ingestRegion; off += 4096 {
		recs = append(recs, alloc(2, base+off, 2048, "[B", agentwire.Frame{Method: 1}))
	}
	j.OnBatch(batch(2, recs...))
	r.j = j
	if err := s.AddPID(os.Getpid()); err != nil {
		r.close()
		b.Fatal(err)
	}
	return r
}

func (r *ingestRig) close() {
	r.stop.Store(true)
	<-r.done
	r.s.Close()
	unix.Munmap(r.region)
}

// produce touches one page per fault at rate faults/s (0: as fast as it
// can), on a thread of its own.
func (r *ingestRig) produce(rate int) {
	go func() {
		defer close(r.done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		start := time.Now()
		var n uint64
		off := 0
		for !r.stop.Load() {
			if rate > 0 {
				due := uint64(time.Since(start).Seconds() * float64(rate))
				if n >= due {
					time.Sleep(50 * time.Microsecond)
					continue
				}
			}
			for k := 0; k < 64; k++ {
				r.region[off] = 1
				off += 4096
				n++
				if off == ingestRegion {
					unix.Madvise(r.region, unix.MADV_DONTNEED)
					off = 0
				}
			}
			r.faults.Store(n)
		}
	}()
}

func threadCPU() time.Duration {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return time.Duration(ts.Nano())
}

// consume reads n samples into the tree; it returns how many it got before
// the deadline.
func (r *ingestRig) consume(n int, deadline time.Time) int {
	r.s.SetDeadline(deadline)
	var smp loader.Sample
	got := 0
	for got < n {
		if err := r.s.Read(&smp); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				break
			}
			return got
		}
		r.j.OnSample(&smp, loader.PageFaults)
		got++
		if got%1024 == 0 {
			r.j.OnBatch(batch(smp.Time))
		}
	}
	r.j.OnBatch(batch(smp.Time))
	return got
}

func ingest(b *testing.B, rate int) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r := newIngestRig(b)
	defer func() {
		if r.done != nil {
			r.close()
		}
	}()
	r.produce(rate)
	b.ResetTimer()
	t0, c0 := time.Now(), threadCPU()
	got := r.consume(b.N, time.Now().Add(30*time.Second))
	wall, cpu := time.Since(t0), threadCPU()-c0
	b.StopTimer()
	c, _ := r.s.Counters()
	if got == 0 {
		b.Fatal("no samples")
	}
	b.ReportMetric(float64(got)/wall.Seconds(), "samples/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(got), "cpu-ns/sample")
	b.ReportMetric(cpu.Seconds()/wall.Seconds(), "consumer-cores")
	b.ReportMetric(float64(c.Dropped), "dropped")
	if got < b.N {
		b.Logf("only %d of %d samples in 30 s", got, b.N)
	}
}

func ingestDrain(b *testing.B) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var got int
	var cpu, wall time.Duration
	var dropped uint64
	for got < b.N {
		r := newIngestRig(b)
		r.produce(0)
		// Fill the ring: it holds ~30k samples; wait until drops show it
		// is full.
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if c, _ := r.s.Counters(); c.Dropped > 0 {
				break
			}
		}
		r.stop.Store(true)
		<-r.done
		t0, c0 := time.Now(), threadCPU()
		n := r.consume(b.N-got, time.Now().Add(200*time.Millisecond))
		wall += time.Since(t0)
		cpu += threadCPU() - c0
		got += n
		c, _ := r.s.Counters()
		dropped += c.Dropped
		r.s.Close()
		unix.Munmap(r.region)
		if n == 0 {
			b.Fatal("nothing to drain")
		}
	}
	b.ReportMetric(float64(got)/cpu.Seconds(), "samples/s/core")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(got), "cpu-ns/sample")
}
