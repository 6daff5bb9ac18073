package vmcode

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/djx-bpf/djx-bpf/hotspot/vmstructs"
	"github.com/djx-bpf/djx-bpf/safety/procfs"
)

// Mem reads the target's address space, as vmstructs.Mem: ReadAt may read
// fewer bytes than asked where the memory ends, and then errs.
type Mem = vmstructs.Mem

// Address ranges a pointer into the target may have: above the null
// guard pages and within x86-64's 47-bit user space.
const (
	minAddr = 1 << 16
	maxAddr = 1 << 47
)

// maxQueryBytes caps the bytes one query (a pc, a method) may read: the
// biggest real nmethod's debug info is a few hundred KiB.
const maxQueryBytes = 16 << 20

// ErrGone means the process has exited.
var ErrGone = procfs.ErrNoProcess

// reader reads for one query, within its byte budget, and counts.
type reader struct {
	mem    Mem
	budget int
	reads  int
	bytes  int
}

func newReader(mem Mem) *reader { return &reader{mem: mem, budget: maxQueryBytes} }

func plausible(addr uint64, n int) bool {
	return addr >= minAddr && addr < maxAddr && uint64(n) <= maxAddr-addr
}

// prefix reads up to len(p) bytes at addr and returns how many it got.
func (r *reader) prefix(p []byte, addr uint64) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if !plausible(addr, len(p)) || addr > math.MaxInt64 {
		return 0, malformed("read of %d bytes at %#x: not a user-space address", len(p), addr)
	}
	if len(p) > r.budget {
		return 0, malformed("query needs more than %d bytes of the target's memory", maxQueryBytes)
	}
	r.budget -= len(p)
	r.reads++
	r.bytes += len(p)
	n, err := r.mem.ReadAt(p, int64(addr))
	n = max(0, min(n, len(p))) // a Mem's count is not trusted either
	if errors.Is(err, procfs.ErrNoProcess) {
		return n, err
	}
	return n, nil
}

// ReadPrefix is prefix, for vmlayout's readers.
func (r *reader) ReadPrefix(p []byte, addr uint64) (int, error) { return r.prefix(p, addr) }

// read reads exactly len(p) bytes at addr.
func (r *reader) read(p []byte, addr uint64) error {
	n, err := r.prefix(p, addr)
	if err != nil {
		return err
	}
	if n < len(p) {
		return malformed("memory at %#x is unreadable", addr+uint64(n))
	}
	return nil
}

// bytesAt reads n bytes at addr into a new slice, n capped by limit.
func (r *reader) bytesAt(addr uint64, n uint64, limit uint64, what string) ([]byte, error) {
	if n > limit {
		return nil, malformed("%s of %d bytes (at most %d)", what, n, limit)
	}
	b := make([]byte, n)
	if err := r.read(b, addr); err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	return b, nil
}

func (r *reader) u64(addr uint64) (uint64, error) {
	var b [8]byte
	if err := r.read(b[:], addr); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b[:]), nil
}

// cstr reads a NUL-terminated string of at most max bytes at addr.
func (r *reader) cstr(addr uint64, max int) (string, error) {
	b := make([]byte, max)
	n, err := r.prefix(b, addr)
	if err != nil {
		return "", err
	}
	for i, c := range b[:n] {
		if c == 0 {
			return string(b[:i]), nil
		}
	}
	return "", malformed("string at %#x: no NUL within %d readable bytes", addr, n)
}

// get decodes field f of a struct read into buf, zero-extended; 0 when
// the field is absent or buf too short (layout.check rules that out for
// whole headers).
func get(buf []byte, f field) uint64 {
	if !f.ok() || f.off+uint64(f.width) > uint64(len(buf)) {
		return 0
	}
	b := buf[f.off:]
	switch f.width {
	case 1:
		return uint64(b[0])
	case 2:
		return uint64(binary.LittleEndian.Uint16(b))
	case 4:
		return uint64(binary.LittleEndian.Uint32(b))
	case 8:
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

// sget decodes a signed field, sign-extended from its width.
func sget(buf []byte, f field) int64 {
	v := get(buf, f)
	switch f.width {
	case 1:
		return int64(int8(v))
	case 2:
		return int64(int16(v))
	case 4:
		return int64(int32(v))
	}
	return int64(v)
}
