package attach

import (
	"time"

	"github.com/djx-bpf/djx-bpf/safety/procfs"
)

// ThreadIDs maps the ids pid's threads have in its own pid namespace (what
// gettid returns there, e.g. to the agent) to their ids as this /proc
// shows them (what BPF sees when djx-bpf runs in the host's namespace).
// Threads that exit while it reads are left out.
func ThreadIDs(pid int) (map[uint32]uint32, error) {
	return procfs.ThreadIDs(procRoot, pid)
}

// HostThreads turns the thread ids of a JVM in another pid namespace, as its
// agent reports them, into the host's, as BPF reports samples, so that
// stacks meet their samples. A miss rereads the JVM's threads, at most
// every rereadEvery: a thread that starts is found within that.
type HostThreads struct {
	pid    int
	read   func(pid int) (map[uint32]uint32, error) // ThreadIDs; replaced in tests
	now    func() time.Time
	m      map[uint32]uint32
	readAt time.Time
}

const rereadEvery = 100 * time.Millisecond

// NewHostThreads maps the threads of the JVM pid.
func NewHostThreads(pid int) *HostThreads {
	return &HostThreads{pid: pid, read: ThreadIDs, now: time.Now}
}

// Host returns the host's id of the thread the JVM calls tid.
func (n *HostThreads) Host(tid uint32) (uint32, bool) {
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
