package heapwalk

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/djx-bpf/djx-bpf/hotspot/targetmem"
	"github.com/djx-bpf/djx-bpf/hotspot/vmstructs"
	"github.com/djx-bpf/djx-bpf/internal/testenv"
)

// BenchmarkWalkLive walks a big GroundTruth heap (about 23M small
// objects, 2 GiB) on each JDK and collector:
//
//	go test ./heapwalk -run '^$' -bench WalkLive -benchtime 1x
//
// It scales the heap down to what /proc/meminfo says is available, or
// to DJX_WALK_SCALE (0.17: about 4M objects, HSQLDB's size).
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
	if v, err := strconv.ParseFloat(os.Getenv("DJX_WALK_SCALE"), 64); err == nil && v > 0 && v < scale {
		scale = v
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

// BenchmarkWalkPID walks the heap of a running JVM, DJX_WALK_PID (an
// HSQLDB service, say), to compare with the JVM's own inspection
// (jcmd PID GC.class_histogram under -Xlog:safepoint):
//
//	DJX_WALK_PID=1234 go test ./heapwalk -run '^$' -bench WalkPID -benchtime 3x
func BenchmarkWalkPID(b *testing.B) {
	testenv.Root(b)
	pid, err := strconv.Atoi(os.Getenv("DJX_WALK_PID"))
	if err != nil {
		b.Skip("DJX_WALK_PID names no JVM")
	}
	l, mem, err := Open(pid, Options{})
	if err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	resetPeak()
	var res *Result
	var cpu, reader time.Duration
	for b.Loop() {
		c0, r0 := cpuTime()
		batch, _ := strconv.Atoi(os.Getenv("DJX_WALK_BATCH"))
		maxCopy, _ := strconv.Atoi(os.Getenv("DJX_WALK_COPY"))
		res, err = Walk(context.Background(), l, mem, Config{MinSize: 1 << 20, Batch: batch, MaxCopy: maxCopy})
		if err != nil {
			b.Fatal(err)
		}
		c1, r1 := cpuTime()
		cpu += c1 - c0
		reader += r1 - r0
	}
	_, peak := rss()
	if path := os.Getenv("DJX_WALK_DUMP"); path != "" {
		if err := os.WriteFile(path, dumpResult(res), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	st := res.Stats
	b.ReportMetric(float64(st.Objects), "objects")
	b.ReportMetric(float64(st.Objects)/st.Time.Seconds(), "objects/s")
	b.ReportMetric(float64(st.Bytes)/(1<<20)/st.Time.Seconds(), "heap-MiB/s")
	b.ReportMetric(float64(cpu.Microseconds())/1e3/float64(b.N), "cpu-ms/op")
	b.ReportMetric(float64(reader.Microseconds())/1e3/float64(b.N), "reader-cpu-ms/op")
	b.ReportMetric(float64(peak)/(1<<20), "peak-RSS-MiB")
	b.Logf("%s %s: %d objects, %d MiB in %d rows: %v (roots %v); %d reads, %d MiB read, %d pieces, %d reread; gc %+v",
		l.Release, l.GC, st.Objects, st.Bytes>>20, st.Rows, st.Time.Round(time.Millisecond),
		st.RootsTime.Round(time.Millisecond), st.Reads, st.BytesRead>>20, st.Pieces, st.Reread, res.GC)
}

// dumpResult is what a walk found, row by row in the walk's order with
// the address lookup's runs, to compare two builds' walks of one JVM
// stopped (SIGSTOP) while they run: DJX_WALK_DUMP=file.
func dumpResult(res *Result) []byte {
	var sb strings.Builder
	st := res.Stats
	fmt.Fprintf(&sb, "objects %d bytes %d large %d chains %d rows %d runs %d klasses %d invalid %d unreadable %d outofheap %d cross %d\n",
		st.Objects, st.Bytes, st.Large, st.Chains, st.Rows, st.Runs, st.Klasses, st.Invalid, st.Unreadable, st.OutOfHeap, st.CrossEdges)
	for i, r := range res.Rows {
		fmt.Fprintf(&sb, "%s | %s %#x: %d %d rec %v other %d retained %d sample %x\n",
			res.Name(i), r.Class, r.Klass, r.Count, r.Bytes, r.Recursive, r.OtherRoots, r.Retained, r.Sample)
	}
	for _, seg := range res.runs.segs {
		for _, ru := range seg {
			fmt.Fprintf(&sb, "run %#x %d %d\n", ru.start, ru.words, ru.row)
		}
	}
	return []byte(sb.String())
}

// cpuTime is the CPU time of this process and of its children tasks
// (targetmem's executor, a process of its own that runs the reads), and
// of the children alone.
func cpuTime() (all, children time.Duration) {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	t := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	ents, _ := os.ReadDir("/proc")
	me := strconv.Itoa(os.Getpid())
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		if len(f) > 12 && f[1] == me {
			u, _ := strconv.ParseInt(f[11], 10, 64)
			k, _ := strconv.ParseInt(f[12], 10, 64)
			children += time.Duration(u+k) * 10 * time.Millisecond // USER_HZ is 100
		}
	}
	return t + children, children
}
