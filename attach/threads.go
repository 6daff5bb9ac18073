package attach

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// ThreadIDs maps the ids pid's threads have in its own pid namespace (what
// gettid returns there, e.g. to the agent) to their ids as this /proc
// shows them (what BPF sees when djx-bpf runs in the host's namespace).
// Threads that exit while it reads are left out.
func ThreadIDs(pid int) (map[uint32]uint32, error) {
	return threadIDs(procfs, pid)
}

func threadIDs(proc string, pid int) (map[uint32]uint32, error) {
	dir := filepath.Join(proc, strconv.Itoa(pid), "task")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list threads of pid %d: %w", pid, procErr(err))
	}
	m := make(map[uint32]uint32, len(entries))
	for _, e := range entries {
		host, err := strconv.ParseUint(e.Name(), 10, 32)
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name(), "status"))
		if err != nil {
			continue // exited meanwhile
		}
		st, err := parseStatus(data)
		if err != nil || st.nspid <= 0 {
			continue // no NSpid line (kernels before 4.1)
		}
		m[uint32(st.nspid)] = uint32(host)
	}
	return m, nil
}
