package profiler

import (
	"fmt"
	"io"

	"golang.org/x/sys/unix"
)

// procMem reads a process's memory with process_vm_readv: no file to hold
// open, and a process that has exited reads as an error.
type procMem int

func (p procMem) ReadAt(b []byte, off int64) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	local := []unix.Iovec{{Base: &b[0], Len: uint64(len(b))}}
	remote := []unix.RemoteIovec{{Base: uintptr(off), Len: len(b)}}
	n, err := unix.ProcessVMReadv(int(p), local, remote, 0)
	if err != nil {
		return 0, fmt.Errorf("read pid %d memory at %#x: %w", int(p), off, err)
	}
	if n < len(b) {
		return n, io.ErrUnexpectedEOF
	}
	return n, nil
}
