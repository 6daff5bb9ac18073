package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The irq subcommand measures what the sampling interrupt alone costs a
// thread on this machine, which no cost line can: the kernel's timer
// interrupt for decode's cpu-clock event, and what it leaves behind in the
// thread's TLB and caches. A thread does random loads over a buffer, with
// a cpu-clock perf event on itself at freq Hz (no BPF program, no ring
// buffer) switched on and off every window; the ratio compares its load
// rate with the event on to the windows around it. The buffer's size sets
// how much the loads depend on the TLB and caches.

const irqAbout = `Measures what the sampling interrupt alone costs a thread doing random
loads over a buffer: a cpu-clock perf event on the thread at 499 and 999
Hz (no BPF program, no ring buffer), switched on and off every 500 ms, 40
pairs, over buffers of 256 KiB and 16 MiB.`

func cmdIRQ(args []string) int {
	fs := newFlagSet("irq", "", irqAbout)
	var out string
	registerOut(fs, &out, "irq-")
	if code, ok := parse(fs, args, 0); !ok {
		return code
	}
	if os.Geteuid() != 0 {
		fatal("must run as root: the probe's perf event counts in the kernel too (sudo make bench)")
	}
	res := newResult(&harness{})
	for _, f := range []int{499, 999} {
		for _, size := range []int{256 << 10, 16 << 20} {
			r := irqProbe(f, size, 40, 500*time.Millisecond)
			fmt.Fprintf(os.Stderr, "djxbench: irq %d Hz %s: %.4f\n", f, bytesStr(size), r.Geomean)
			res.IRQ = append(res.IRQ, r)
		}
	}
	res.Seconds = time.Since(res.Started).Seconds()
	printIRQ(os.Stdout, res.IRQ)
	save(res, out, "irq-")
	return 0
}

type irqResult struct {
	Freq    int     `json:"freq"`
	Bytes   int     `json:"bytes"`
	Pairs   int     `json:"pairs"`
	Geomean float64 `json:"geomean"`
	CILow   float64 `json:"ci95_low"`
	CIHigh  float64 `json:"ci95_high"`
	Err     string  `json:"error,omitempty"`
}

func irqProbe(freq, size, pairs int, win time.Duration) irqResult {
	res := irqResult{Freq: freq, Bytes: size, Pairs: pairs}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	attr := unix.PerfEventAttr{
		Type:   unix.PERF_TYPE_SOFTWARE,
		Config: unix.PERF_COUNT_SW_CPU_CLOCK,
		Size:   uint32(unsafe.Sizeof(unix.PerfEventAttr{})),
		Sample: uint64(freq),
		Bits:   unix.PerfBitFreq | unix.PerfBitDisabled,
	}
	fd, err := unix.PerfEventOpen(&attr, 0, -1, -1, unix.PERF_FLAG_FD_CLOEXEC) // this thread
	if err != nil {
		res.Err = fmt.Sprintf("perf_event_open cpu-clock: %v", err)
		return res
	}
	defer unix.Close(fd)
	buf := make([]uint64, size/8)
	for i := range buf {
		buf[i] = uint64(i)
	}
	mask := uint64(len(buf) - 1) // size is a power of two
	s, sum := uint64(0x9E3779B97F4A7C15), uint64(0)
	window := func(on bool) float64 {
		req := uint(unix.PERF_EVENT_IOC_DISABLE)
		if on {
			req = unix.PERF_EVENT_IOC_ENABLE
		}
		unix.IoctlSetInt(fd, req, 0)
		t0 := time.Now()
		n := 0
		for time.Since(t0) < win {
			for i := 0; i < 100_000; i++ {
				s = s*6364136223846793005 + 1442695040888963407
				sum += buf[(s>>20)&mask]
			}
			n += 100_000
		}
		return float64(n) / time.Since(t0).Seconds()
	}
	var ratios []float64
	before := window(false)
	for i := 0; i < pairs; i++ {
		on := window(true)
		after := window(false)
		ratios = append(ratios, (before+after)/2/on)
		before = after
	}
	unix.IoctlSetInt(fd, unix.PERF_EVENT_IOC_DISABLE, 0)
	res.Geomean, res.CILow, res.CIHigh = geomeanCI(ratios)
	irqSink = sum
	return res
}

var irqSink uint64 // keeps the loads

func printIRQ(w io.Writer, rs []irqResult) {
	fmt.Fprintln(w, "irq: the cpu-clock sampling interrupt alone on one thread doing random loads; ratio = time per load with it / without: geomean [95% CI]")
	for _, r := range rs {
		if r.Err != "" {
			fmt.Fprintf(w, "%5d Hz  %8s  error: %s\n", r.Freq, bytesStr(r.Bytes), r.Err)
			continue
		}
		fmt.Fprintf(w, "%5d Hz  %8s  %d pairs  %.4f [%.4f–%.4f]\n", r.Freq, bytesStr(r.Bytes), r.Pairs, r.Geomean, r.CILow, r.CIHigh)
	}
}

func bytesStr(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d KiB", n>>10)
}
