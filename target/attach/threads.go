package attach

import "github.com/djx-bpf/djx-bpf/safety/procfs"

// ThreadIDs maps the ids pid's threads have in its own pid namespace (what
// gettid returns there, e.g. to the agent) to their ids as this /proc
// shows them (what BPF sees when djx-bpf runs in the host's namespace).
// Threads that exit while it reads are left out.
func ThreadIDs(pid int) (map[uint32]uint32, error) {
	return procfs.ThreadIDs(procRoot, pid)
}
