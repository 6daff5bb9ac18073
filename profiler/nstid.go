package profiler

import (
	"time"

	"github.com/djx-bpf/djx-bpf/target/attach"
)

// nsThreads turns the thread ids of a JVM in another pid namespace, as its
// agent reports them, into the host's, as BPF reports samples, so that
// stacks meet their samples. A miss rereads the JVM's threads, at most
// every rereadEvery: a thread that starts is found within that.
type nsThreads struct {
	pid    int
	read   func(pid int) (map[uint32]uint32, error) // attach.ThreadIDs; replaced in tests
	now    func() time.Time
	m      map[uint32]uint32
	readAt time.Time
}

const rereadEvery = 100 * time.Millisecond

func newNSThreads(pid int) *nsThreads {
	return &nsThreads{pid: pid, read: attach.ThreadIDs, now: time.Now}
}

// host returns the host's id of the thread the JVM calls tid.
func (n *nsThreads) host(tid uint32) (uint32, bool) {
	if h, ok := n.m[tid]; ok {
		return h, true
	}
	if t := n.now(); n.readAt.IsZero() || t.Sub(n.readAt) >= rereadEvery {
		n.readAt = t
		if m, err := n.read(n.pid); err == nil {
			n.m = m // a failed read (the JVM exiting) keeps the old map
		}
	}
	h, ok := n.m[tid]
	return h, ok
}
