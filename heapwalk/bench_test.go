package heapwalk

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/djx-bpf/djx-bpf/internal/testenv"
	"github.com/djx-bpf/djx-bpf/targetmem"
	"github.com/djx-bpf/djx-bpf/vmstructs"
)

// BenchmarkWalkLive walks a big GroundTruth heap (about 23M small
// objects, 2 GiB) on each JDK and collector:
//
//	go test ./heapwalk -run '^$' -bench WalkLive -benchtime 1x
//
// It scales the heap down to what /proc/meminfo says is available.
func BenchmarkWalkLive(b *testing.B) {
	testenv.Root(b)
	jdks := testenv.JDKs(b)
	classes := compileGroundTruth(b, jdks[0])
	// Per unit of scale: 3M map entries (Node, Long, long[16]), 2M
	// tree entries (Entry, Integer, Small), 8M list arrays (long[16]).
	scale := 1.0
	if avail := memAvailable(); avail > 0 && avail < 7<<30 {
		scale = float64(avail) / float64(7<<30)
		b.Logf("%d MiB available: heap scaled by %.2f", avail>>20, scale)
	}
	n := func(v float64) string { return strconv.Itoa(int(v * scale)) }
	for _, jdk := range jdks {
		for _, gc := range []string{"Serial", "Parallel", "G1"} {
			b.Run(jdk.Name+"/"+gc, func(b *testing.B) {
				gt := startGroundTruth(b, jdk, classes, gc, []string{"-Xmx" + strconv.Itoa(int(4096*scale)) + "m"},
					n(3e6), "16", n(2e6), n(8e6), "16", "64")
				tab, err := vmstructs.Open(gt.pid)
				if err != nil {
					b.Fatal(err)
				}
				mem := targetmem.Open(gt.pid)
				l, err := NewLayout(tab, mem, Options{})
				if err != nil {
					b.Fatal(err)
				}
				runtime.GC()
				base, _ := rss()
				resetPeak()
				var res *Result
				for b.Loop() {
					res, err = Walk(context.Background(), l, mem, Config{FieldName: gt.fieldName, MinSize: 1 << 20})
					if err != nil {
						b.Fatal(err)
					}
				}
				_, peak := rss()
				st := res.Stats
				b.ReportMetric(float64(st.Objects), "objects")
				b.ReportMetric(float64(st.Bytes)/(1<<20), "heap-MiB")
				b.ReportMetric(float64(st.Objects)/st.Time.Seconds(), "objects/s")
				b.ReportMetric(float64(st.Reads), "reads")
				b.ReportMetric(float64(st.BytesRead)/(1<<20), "MiB-read")
				b.ReportMetric(float64(peak)/(1<<20), "peak-RSS-MiB")
				b.Logf("%s %s: %d objects, %d MiB in %d rows, %d chains: %v (roots %v); %d reads, %d MiB read; "+
					"queue %d, bitmap %d MiB, %d runs; RSS %d MiB before, peak %d MiB; gc %+v",
					l.Release, l.GC, st.Objects, st.Bytes>>20, st.Rows, st.Chains, st.Time.Round(time.Millisecond),
					st.RootsTime.Round(time.Millisecond), st.Reads, st.BytesRead>>20, st.MaxQueueLen, st.BitmapBytes>>20,
					st.Runs, base>>20, peak>>20, res.GC)
				logTop(b, res, 8)
			})
		}
	}
}

// memAvailable is MemAvailable from /proc/meminfo, in bytes.
func memAvailable() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemAvailable:" {
			v, _ := strconv.ParseInt(f[1], 10, 64)
			return v << 10
		}
	}
	return 0
}

// resetPeak resets the process's peak RSS (VmHWM) to its current RSS.
func resetPeak() { os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }
