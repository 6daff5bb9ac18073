package profiler

import (
	"io"
	"os"
	"strconv"

	"github.com/djx-bpf/djx-bpf/hotspot/targetmem"
	"github.com/djx-bpf/djx-bpf/join"
	"github.com/djx-bpf/djx-bpf/jvmsym"
	"github.com/djx-bpf/djx-bpf/naming/region"
	"github.com/djx-bpf/djx-bpf/target/attach"
)

// process is what a session reads of its JVM's process, beside the VM:
// native symbols and JIT code (which name access paths), the perf map,
// the memory regions that name addresses outside the heap, and threads.
type process interface {
	native() join.NativeSymbols
	codeMem() io.ReaderAt
	// perfMap reads /tmp/perf-NS.map, nsPID being the JVM's own pid.
	perfMap(nsPID int) (*jvmsym.PerfMap, error)
	regions(text region.JVMText) (join.Regions, error)
	// hostTID turns the thread ids of a JVM in another pid namespace, as
	// its agent reports them, into the host's.
	hostTID() func(tid uint32) (uint32, bool)
	// hasThread reports whether tid (host namespace) is one of its threads.
	hasThread(tid uint32) bool
}

// liveProcess reads the process pid through /proc.
type liveProcess int

func (p liveProcess) native() join.NativeSymbols { return jvmsym.NewNative(int(p)) }

func (p liveProcess) codeMem() io.ReaderAt { return targetmem.Open(int(p)) }

func (p liveProcess) perfMap(nsPID int) (*jvmsym.PerfMap, error) {
	return jvmsym.LoadPerfMap(int(p), nsPID)
}

func (p liveProcess) regions(text region.JVMText) (join.Regions, error) {
	n, err := region.New(int(p), text)
	if err != nil {
		return nil, err
	}
	return n, nil
}

func (p liveProcess) hostTID() func(uint32) (uint32, bool) { return attach.NewHostThreads(int(p)).Host }

func (p liveProcess) hasThread(tid uint32) bool { return threadOf(int(p), tid) }

// threadOf reports whether tid (host namespace) is a thread of process pid.
func threadOf(pid int, tid uint32) bool {
	_, err := os.Lstat("/proc/" + strconv.Itoa(pid) + "/task/" + strconv.FormatUint(uint64(tid), 10))
	return err == nil
}
