package bpfstack

import (
	"strconv"
	"strings"

	"github.com/djx-bpf/djx-bpf/loader"
	"github.com/djx-bpf/djx-bpf/safety/procfs"
)

// VMThreads tells the BPF unwinder which of a JVM's threads are HotSpot's
// own (its compilers, GC workers, the VM thread): they run no Java code,
// so the program stops walking their stacks, which climbed native frames
// only to end without a Java one (a quarter to a half of the samples of a
// JVM's first seconds, JIT compiling). A thread is judged once, by its
// name, after a walk of it found no Java frames; Java threads, whose
// walks find them, never cost the read.
type VMThreads struct {
	pid    int
	comm   func(tid uint32) (string, error)
	judged map[uint32]struct{}
	mark   func(pid int, tid uint32) error
	failed bool // a mark was refused: no more tries
}

// maxJudged bounds the threads remembered; past it they are judged again.
const maxJudged = 4096

// NewVMThreads judges the threads of the JVM pid by their names, which
// comm reads (nil: /proc), and marks its own with mark
// (loader.Sampler.VMThread).
func NewVMThreads(pid int, comm func(tid uint32) (string, error), mark func(pid int, tid uint32) error) *VMThreads {
	v := &VMThreads{pid: pid, comm: comm, judged: make(map[uint32]struct{}), mark: mark}
	if v.comm == nil {
		v.comm = v.procComm
	}
	return v
}

// procComm reads the name of thread tid of the JVM through /proc.
func (v *VMThreads) procComm(tid uint32) (string, error) {
	b, err := procfs.Read("/proc", v.pid, "task/"+strconv.FormatUint(uint64(tid), 10)+"/comm")
	return strings.TrimSuffix(string(b), "\n"), err
}

// See judges the thread of smp if its walk found no Java frames.
func (v *VMThreads) See(smp *loader.Sample) {
	if v.failed || smp.Stack == nil || smp.Stack.End != loader.UnwindNoJava || len(smp.Stack.Frames) == 0 {
		return
	}
	if _, ok := v.judged[smp.TID]; ok {
		return
	}
	if len(v.judged) >= maxJudged {
		clear(v.judged)
	}
	comm, err := v.comm(smp.TID)
	v.judged[smp.TID] = struct{}{}
	if err == nil && hotspotThread(comm) && v.mark(v.pid, smp.TID) != nil {
		v.failed = true
	}
}

// hotspotThread says whether comm (a thread's name, cut to 15 bytes by
// the kernel) is one HotSpot gives its own threads that never run Java
// code. Those that may (the Service, Notification and JVMCI compiler
// threads, Signal Dispatcher, Finalizer, Reference Handler, Common-Cleaner,
// Attach Listener) are left out. A Java thread that names itself so only
// loses its own stacks.
func hotspotThread(comm string) bool {
	for _, p := range []string{
		"C1 CompilerThre", "C2 CompilerThre", "VM Thread", "VM Periodic Tas", "Sweeper thread",
		"Monitor Deflati", "GC Thread#", "G1 ", "ZDriver", "ZDirector", "ZStat", "ZUnmapper",
		"ZUncommitter", "ZWorker", "ZRuntimeWorker", "Shenandoah", "StrDedup", "StringDedup",
	} {
		if strings.HasPrefix(comm, p) {
			return true
		}
	}
	return false
}
