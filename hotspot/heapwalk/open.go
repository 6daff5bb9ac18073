package heapwalk

import (
	"fmt"

	"github.com/djx-bpf/djx-bpf/hotspot/targetmem"
	"github.com/djx-bpf/djx-bpf/hotspot/vmstructs"
)

// Open reads the vmStructs and the heap layout of the HotSpot JVM pid,
// and returns them with a reader of its memory, ready for Walk. It needs
// the right to read the process's memory (root, or the JVM's user where
// kernel.yama.ptrace_scope allows).
func Open(pid int, opts Options) (*Layout, VectorMem, error) {
	tab, err := vmstructs.Open(pid)
	if err != nil {
		return nil, nil, err
	}
	mem := targetmem.Open(pid)
	l, err := NewLayout(tab, mem, opts)
	if err != nil {
		return nil, nil, fmt.Errorf("pid %d: %w", pid, err)
	}
	return l, mem, nil
}
