package join

import (
	"strings"
	"testing"

	"github.com/djx-bpf/djx-bpf/report"
	"github.com/djx-bpf/djx-bpf/sources/agentwire"
	"github.com/djx-bpf/djx-bpf/sources/sample"
)

// stackJVM is an exactJVM whose agent has a stack handler and whose BPF
// program signals from time 0 on.
func stackJVM() *JVM {
	j := exactJVM(1)
	h := hello(100)
	h.StackSignal = 42
	j.OnBatch(batch(100, h,
		method(7, "LHot;", "make", 12), method(8, "LHot;", "main", 30),
		method(20, "LHot;", "scanA", 27), method(21, "LHot;", "scanB", 37), method(22, "LHot;", "run", 55)))
	j.stackSig = j.agentStackSig
	return j
}

func tsample(t, addr, ip uint64, tid uint32) *sample.Sample {
	s := &sample.Sample{Time: t, Addr: addr, TID: tid}
	s.Regs[16] = ip
	return s
}

func stack(t uint64, tid uint32, pc uint64, frames ...agentwire.Frame) *agentwire.Stack {
	return &agentwire.Stack{Time: t, TID: tid, Status: int32(len(frames)), PC: pc, Frames: frames}
}

func TestStacksJoinBySameThreadAndPC(t *testing.T) {
	j := stackJVM()
	a := alloc(110, 0x1000_0000, 1<<20, "[J", agentwire.Frame{Method: 7}, agentwire.Frame{Method: 8})
	j.OnBatch(batch(120, a))
	scanA := []agentwire.Frame{{Method: 20, BCI: 5}, {Method: 22, BCI: 2}}
	scanB := []agentwire.Frame{{Method: 21, BCI: 5}, {Method: 22, BCI: 9}}
	// Thread 5: three samples in scanA, one in scanB; thread 6 in scanA
	// (the same path from another thread merges).
	j.OnSample(tsample(1000, 0x1000_0008, 0xA0, 5), sample.PageFaults)
	j.OnSample(tsample(2000, 0x1000_0010, 0xA0, 5), sample.PageFaults)
	j.OnSample(tsample(2100, 0x1000_0010, 0xA0, 6), sample.PageFaults)
	j.OnSample(tsample(3000, 0x1000_0018, 0xB0, 5), sample.PageFaults)
	// Its signal was refused: no stack of its own; the next stack (for the
	// sample at 5000, another pc) must not be taken.
	j.OnSample(tsample(4000, 0x1000_0018, 0xA4, 5), sample.PageFaults)
	j.OnSample(tsample(5000, 0x1000_0020, 0xA0, 5), sample.PageFaults)
	// No address: goes to the remainder with its stack.
	j.OnSample(tsample(6000, 0, 0xC0, 5), sample.PageFaults)
	j.OnBatch(batch(7000,
		stack(1020, 5, 0xA0, scanA...), stack(2020, 5, 0xA0, scanA...), stack(2120, 6, 0xA0, scanA...),
		stack(3020, 5, 0xB0, scanB...), stack(5020, 5, 0xA0, scanA...),
		&agentwire.Stack{Time: 6020, TID: 5, Status: agentwire.StackGCActive, PC: 0xC0},
		// A stack whose sample was dropped: never claimed.
		stack(6500, 5, 0xD0, scanB...)))
	j.Drain(true)
	s := j.stats
	if s.Attributed != 6 || s.SamplesWithStack != 6 || s.SamplesJavaStack != 5 || s.StackMismatch != 1 || s.StacksUnmatched != 1 {
		t.Fatalf("stats %+v", s)
	}
	if s.StackErrors["GC active"] != 1 || s.Stacks != 7 || s.StacksJava != 6 {
		t.Errorf("stack counters %+v", s)
	}
	objs := j.Report()
	if len(objs) != 1 {
		t.Fatalf("objects %+v", objs)
	}
	got := pathSamples(objs[0].Accesses)
	want := map[string]uint64{
		"Hot.scanA:27 <- Hot.run:55":     4,
		"Hot.scanB:37 <- Hot.run:55":     1,
		"[unknown code] <- [stack lost]": 1,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("path %q: %d samples, want %d (all: %v)", k, got[k], v, got)
		}
	}
	rem := j.accesses(j.remainder)
	if len(rem) != 1 || rem[0].Where != "no data address" || strings.Join(rem[0].Path, " <- ") != "[unknown code] <- [no Java stack: GC active]" {
		t.Errorf("remainder %+v", rem)
	}
}

// A sample in JIT code whose stack failed is named from the code's pc map;
// one in a stub by the stub's name.
func TestStackFallbackFromJITCode(t *testing.T) {
	j := stackJVM()
	j.OnBatch(batch(120,
		alloc(110, 0x1000_0000, 1<<20, "[J", agentwire.Frame{Method: 7}),
		&agentwire.Code{Time: 111, Method: 22, Start: 0x7000, Size: 0x100, PCs: []agentwire.PCInfo{
			{PC: 0x7010, Frames: []agentwire.Frame{{Method: 20, BCI: 5}, {Method: 22, BCI: 2}}},
			{PC: 0x7080, Frames: []agentwire.Frame{{Method: 22, BCI: 9}}},
		}},
		&agentwire.Stub{Time: 112, Start: 0x9000, Size: 0x1000, Name: "Interpreter"}))
	j.OnSample(tsample(1000, 0x1000_0008, 0x700c, 5), sample.PageFaults)
	j.OnSample(tsample(2000, 0x1000_0008, 0x9100, 5), sample.PageFaults)
	j.OnBatch(batch(9000,
		&agentwire.Stack{Time: 1010, TID: 5, Status: agentwire.StackNotWalkableJ, PC: 0x700c},
		&agentwire.Stack{Time: 2010, TID: 5, Status: agentwire.StackUnknownJava, PC: 0x9100}))
	j.Drain(true)
	got := pathSamples(j.Report()[0].Accesses)
	for _, k := range []string{
		"Hot.scanA:27 <- Hot.run:55 <- [no Java stack: not walkable, in Java]",
		"[Interpreter] <- [no Java stack: unknown, in Java]",
	} {
		if got[k] != 1 {
			t.Errorf("missing path %q in %v", k, got)
		}
	}
}

// Samples wait for the stacks that come after them.
func TestStacksHoldSamplesForGrace(t *testing.T) {
	j := stackJVM()
	j.OnBatch(batch(120, alloc(110, 0x1000_0000, 1<<20, "[J", agentwire.Frame{Method: 7})))
	j.OnSample(tsample(1000, 0x1000_0008, 0xA0, 5), sample.PageFaults)
	j.OnBatch(batch(1000 + stackGrace/2))
	if j.stats.Attributed != 0 {
		t.Fatal("sample attributed before its stack could arrive")
	}
	j.OnBatch(batch(1000+stackGrace+10, stack(1020, 5, 0xA0, agentwire.Frame{Method: 20, BCI: 5})))
	if j.stats.Attributed != 1 || j.stats.SamplesJavaStack != 1 {
		t.Fatalf("stats %+v", j.stats)
	}
}

// AsyncGetCallTrace names the descriptor after pc+1 (in a C2 loop, often
// the next iteration's first line); the JIT pc map at the access itself
// replaces the frames of that compiled frame.
func TestStackLeafFromJITMap(t *testing.T) {
	j := stackJVM()
	j.OnBatch(batch(120,
		alloc(110, 0x1000_0000, 1<<20, "[J", agentwire.Frame{Method: 7}),
		// run (22) compiled with scanA (20) inlined; the load ends at 0x7010.
		&agentwire.Code{Time: 111, Method: 22, Start: 0x7000, Size: 0x100, PCs: []agentwire.PCInfo{
			{PC: 0x7010, Frames: []agentwire.Frame{{Method: 20, BCI: 5}, {Method: 22, BCI: 2}}},
			{PC: 0x7020, Frames: []agentwire.Frame{{Method: 21, BCI: 1}, {Method: 22, BCI: 9}}},
		}}))
	// Look-back found the load ending at ip 0x7010; ASGCT named scanB.
	j.OnSample(tsample(1000, 0x1000_0008, 0x7010, 5), sample.PageFaults)
	j.queue[len(j.queue)-1].accessPC = 0x7010
	j.OnBatch(batch(9000, stack(1010, 5, 0x7010, agentwire.Frame{Method: 21, BCI: 1}, agentwire.Frame{Method: 22, BCI: 9}, agentwire.Frame{Method: 8, BCI: 4})))
	j.Drain(true)
	a := j.Report()[0].Accesses
	if len(a) != 1 || strings.Join(a[0].Path, " <- ") != "Hot.scanA:27 <- Hot.run:55 <- Hot.main:30" || j.stats.StackLeafFromJIT != 1 {
		t.Fatalf("accesses %+v, stats %+v", a, j.stats)
	}
}

// Samples between two stacks of a thread (the stack interval) take the
// callers of the thread's last stack when they run in the same compiled
// code; their own frames inside it come from the JIT pc map. Elsewhere they
// keep their leaf and say the stack was not taken.
func TestStackBorrowedWithinCompiledCode(t *testing.T) {
	j := stackJVM()
	j.OnBatch(batch(120,
		alloc(110, 0x1000_0000, 1<<20, "[J", agentwire.Frame{Method: 7}),
		// run (22) with scanA (20) and scanB (21) inlined.
		&agentwire.Code{Time: 111, Method: 22, Start: 0x7000, Size: 0x100, PCs: []agentwire.PCInfo{
			{PC: 0x7010, Frames: []agentwire.Frame{{Method: 20, BCI: 5}, {Method: 22, BCI: 2}}},
			{PC: 0x7040, Frames: []agentwire.Frame{{Method: 21, BCI: 5}, {Method: 22, BCI: 9}}},
		}},
		&agentwire.Code{Time: 112, Method: 7, Start: 0x8000, Size: 0x100, PCs: []agentwire.PCInfo{
			{PC: 0x8010, Frames: []agentwire.Frame{{Method: 7, BCI: 1}}},
		}}))
	noStack := func(t, ip uint64) *sample.Sample {
		s := tsample(t, 0x1000_0008, ip, 5)
		s.Flags = sample.FlagNoStack
		return s
	}
	j.OnSample(tsample(1000, 0x1000_0008, 0x700c, 5), sample.PageFaults) // stacked, in scanA
	j.OnSample(noStack(2000, 0x703c), sample.PageFaults)                 // in scanB, same code
	j.OnSample(noStack(3000, 0x800c), sample.PageFaults)                 // other code
	j.OnSample(noStack(1000+borrowMaxAge+10, 0x700c), sample.PageFaults) // too late to borrow
	j.OnBatch(batch(1<<40, stack(1010, 5, 0x700c, agentwire.Frame{Method: 20, BCI: 4}, agentwire.Frame{Method: 22, BCI: 2}, agentwire.Frame{Method: 8, BCI: 3})))
	j.Drain(true)
	got := pathSamples(j.Report()[0].Accesses)
	want := map[string]uint64{
		"Hot.scanA:27 <- Hot.run:55 <- Hot.main:30":       1, // its own stack, leaf from the JIT map
		"Hot.scanB:37 <- Hot.run:55 <- Hot.main:30":       1, // borrowed callers
		"Hot.make:12 <- [stack not taken]":                1,
		"Hot.scanA:27 <- Hot.run:55 <- [stack not taken]": 1,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("path %q: %d samples, want %d (all: %v)", k, got[k], v, got)
		}
	}
	if j.stats.SamplesStackBorrowed != 1 || j.stats.SamplesWithStack != 1 {
		t.Errorf("borrowed %d, with stack %d; want 1 and 1", j.stats.SamplesStackBorrowed, j.stats.SamplesWithStack)
	}
}

// pathSamples sums samples per access path, its frames joined by " <- ".
func pathSamples(as []report.Access) map[string]uint64 {
	got := map[string]uint64{}
	for _, a := range as {
		got[strings.Join(a.Path, " <- ")] += a.Samples
	}
	return got
}

// TestNoEnvThreadsLeaveTheSignal: a stack from a thread without a JNIEnv
// stops BPF's signals to it, once per thread; Java stacks and other
// failures do not.
func TestNoEnvThreadsLeaveTheSignal(t *testing.T) {
	j := stackJVM()
	var marked []uint32
	j.noJava = func(tid uint32) { marked = append(marked, tid) }
	noEnv := func(t uint64, tid uint32) *agentwire.Stack {
		return &agentwire.Stack{Time: t, TID: tid, Status: agentwire.StackNoEnv, PC: 0x7000}
	}
	gcActive := &agentwire.Stack{Time: 203, TID: 7, Status: agentwire.StackGCActive, PC: 0x7000}
	j.OnBatch(batch(210, noEnv(200, 5), noEnv(201, 6), noEnv(202, 5), gcActive,
		stack(204, 8, 0x7000, agentwire.Frame{Method: 22, BCI: 2})))
	if len(marked) != 2 || marked[0] != 5 || marked[1] != 6 {
		t.Errorf("threads marked non-Java: %v, want [5 6]", marked)
	}
	if got := j.stats.StackErrors["thread without JNIEnv"]; got != 3 {
		t.Errorf("stack errors without JNIEnv: %d, want 3", got)
	}
}

// TestStacksFromAnotherPIDNamespace: the agent of a JVM in its own pid
// namespace reports the thread ids it sees; turned into the host's, its
// stacks meet BPF's samples. A thread the JVM no longer has stays
// unmatched, and is not handed to BPF as non-Java.
func TestStacksFromAnotherPIDNamespace(t *testing.T) {
	j := stackJVM()
	host := map[uint32]uint32{1: 4000, 5: 4005}
	j.hostTID = func(tid uint32) (uint32, bool) { h, ok := host[tid]; return h, ok }
	var marked []uint32
	j.noJava = func(tid uint32) { marked = append(marked, tid) }
	j.OnBatch(batch(120, alloc(110, 0x1000_0000, 1<<20, "[J", agentwire.Frame{Method: 7}, agentwire.Frame{Method: 8})))
	j.OnSample(tsample(1000, 0x1000_0008, 0xA0, 4005), sample.PageFaults)
	j.OnBatch(batch(7000, stack(1020, 5, 0xA0, agentwire.Frame{Method: 20, BCI: 5}),
		&agentwire.Stack{Time: 1100, TID: 1, Status: agentwire.StackNoEnv, PC: 0x7000},
		&agentwire.Stack{Time: 1200, TID: 9, Status: agentwire.StackNoEnv, PC: 0x7000}))
	j.Drain(true)
	if s := j.stats; s.SamplesWithStack != 1 || s.StacksUnmatched != 2 {
		t.Errorf("samples with a stack %d, unmatched stacks %d; want 1 and 2 (the two without JNIEnv)", s.SamplesWithStack, s.StacksUnmatched)
	}
	if len(marked) != 1 || marked[0] != 4000 {
		t.Errorf("threads marked non-Java: %v, want [4000]", marked)
	}
}
