package jvm

import (
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/djx-bpf/djx-bpf/hotspot/targetmem"
	"github.com/djx-bpf/djx-bpf/hotspot/vmcode"
	"github.com/djx-bpf/djx-bpf/hotspot/vmstructs"
	"github.com/djx-bpf/djx-bpf/join"
	"github.com/djx-bpf/djx-bpf/jvmsym"
	"github.com/djx-bpf/djx-bpf/naming/region"
	"github.com/djx-bpf/djx-bpf/safety/procfs"
	"github.com/djx-bpf/djx-bpf/target/attach"
)

// Process is what a session reads of its JVM's process, beside the VM:
// native symbols and JIT code (which name access paths), the perf map,
// the memory regions that name addresses outside the heap, threads, and
// the memory the heap walk and the BPF stacks' names are read from.
type Process interface {
	Native() join.NativeSymbols
	CodeMem() io.ReaderAt
	// Mem is the process's memory, which its vmStructs lead into.
	Mem() targetmem.Mem
	// VMStructs is HotSpot's table of its own types and fields.
	VMStructs() (*vmstructs.Table, error)
	// Continuation is what the BPF unwinder needs of virtual threads.
	Continuation(t *vmstructs.Table) (vmcode.Continuation, error)
	// Comm is the name of thread tid (host namespace).
	Comm(tid uint32) (string, error)
	// PerfMap reads /tmp/perf-NS.map, nsPID being the JVM's own pid.
	PerfMap(nsPID int) (*jvmsym.PerfMap, error)
	Regions(text region.JVMText) (join.Regions, error)
	// HostTID turns the thread ids of a JVM in another pid namespace, as
	// its agent reports them, into the host's.
	HostTID() func(tid uint32) (uint32, bool)
	// HasThread reports whether tid (host namespace) is one of its threads.
	HasThread(tid uint32) bool
}

// LiveProcess reads the process pid through /proc.
type LiveProcess int

// Native is the process's native symbols.
func (p LiveProcess) Native() join.NativeSymbols { return jvmsym.NewNative(int(p)) }

// CodeMem reads the process's memory.
func (p LiveProcess) CodeMem() io.ReaderAt { return targetmem.Open(int(p)) }

// Mem reads the process's memory.
func (p LiveProcess) Mem() targetmem.Mem { return targetmem.Open(int(p)) }

// VMStructs reads the JVM's vmStructs.
func (p LiveProcess) VMStructs() (*vmstructs.Table, error) { return vmstructs.Open(int(p)) }

// Continuation reads the JVM's continuation stubs and offsets.
func (p LiveProcess) Continuation(t *vmstructs.Table) (vmcode.Continuation, error) {
	return vmcode.ReadContinuation(int(p), t)
}

// Comm reads the name of thread tid.
func (p LiveProcess) Comm(tid uint32) (string, error) {
	b, err := procfs.Read("/proc", int(p), "task/"+strconv.FormatUint(uint64(tid), 10)+"/comm")
	return strings.TrimSuffix(string(b), "\n"), err
}

// PerfMap reads the JVM's perf map.
func (p LiveProcess) PerfMap(nsPID int) (*jvmsym.PerfMap, error) {
	return jvmsym.LoadPerfMap(int(p), nsPID)
}

// Regions names the process's memory outside the heap.
func (p LiveProcess) Regions(text region.JVMText) (join.Regions, error) {
	n, err := region.New(int(p), text)
	if err != nil {
		return nil, err
	}
	return n, nil
}

// HostTID maps the JVM's thread ids to the host's.
func (p LiveProcess) HostTID() func(uint32) (uint32, bool) { return attach.NewHostThreads(int(p)).Host }

// HasThread reports whether tid is one of the process's threads.
func (p LiveProcess) HasThread(tid uint32) bool { return threadOf(int(p), tid) }

// threadOf reports whether tid (host namespace) is a thread of process pid.
func threadOf(pid int, tid uint32) bool {
	_, err := os.Lstat("/proc/" + strconv.Itoa(pid) + "/task/" + strconv.FormatUint(uint64(tid), 10))
	return err == nil
}

// WatchExit returns a channel closed when pid exits.
func WatchExit(pid int) <-chan struct{} {
	done := make(chan struct{})
	fd, err := unix.PidfdOpen(pid, 0)
	go func() {
		defer close(done)
		if err != nil {
			for unix.Kill(pid, 0) == nil {
				time.Sleep(200 * time.Millisecond)
			}
			return
		}
		defer unix.Close(fd)
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			n, err := unix.Poll(fds, -1)
			if n > 0 || (err != nil && err != unix.EINTR) {
				return
			}
		}
	}()
	return done
}
