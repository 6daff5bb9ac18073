package jvm

import (
	"io"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/djx-bpf/djx-bpf/hotspot/targetmem"
	"github.com/djx-bpf/djx-bpf/join"
	"github.com/djx-bpf/djx-bpf/jvmsym"
	"github.com/djx-bpf/djx-bpf/naming/region"
	"github.com/djx-bpf/djx-bpf/target/attach"
)

// Process is what a session reads of its JVM's process, beside the VM:
// native symbols and JIT code (which name access paths), the perf map,
// the memory regions that name addresses outside the heap, and threads.
type Process interface {
	Native() join.NativeSymbols
	CodeMem() io.ReaderAt
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
