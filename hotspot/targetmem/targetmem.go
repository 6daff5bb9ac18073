// Package targetmem reads a target process's memory: the one reader of a
// JVM's memory in djx-bpf (vmstructs, the heap walk, the code cache's
// names, the JIT code of samples and relocation all read through it). Its
// executors also run the opens, stats, reads and closes of the files a
// target controls (File, used by safefs and elfsafe).
//
// A target's user may back the memory root follows with a file of their
// own FUSE filesystem and never answer the read; process_vm_readv then
// sleeps uninterruptibly, and a task so stuck keeps its whole process
// alive, SIGKILL or not. So no read runs on a thread of djx-bpf: each
// read is handed to an executor from a pool, a task of its own that
// shares djx-bpf's memory (executor.c). A read that outlasts Timeout
// strands the executor, which is abandoned; the pid is marked, and every
// later read of it fails at once. Past MaxStranded stuck executors, only
// what the checks prove safe is read. Before that, a read of a file mapping on a filesystem
// that may block (FUSE, network filesystems: procfs.MayBlock, by the
// mapping's device in /proc/PID/maps and /proc/PID/mountinfo, which the
// kernel writes) is refused without being issued.
package targetmem

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/djx-bpf/djx-bpf/safety/procfs"
)

// Timeout is how long one read may take before its pid is given up on.
const Timeout = 3 * time.Second

// timeout is Timeout; tests shorten it.
var timeout = Timeout

// mapsReread limits how often reads outside the known mappings reread
// the maps.
const mapsReread = 100 * time.Millisecond

var (
	// ErrHung means a read of the process (or a call on a file) did not
	// return within Timeout; no read of that process (or file) is issued
	// any more.
	ErrHung = errors.New("no answer in time")
	// ErrMayBlock means the memory is a mapping of a file on a
	// filesystem whose reads may wait on another party for good.
	ErrMayBlock = procfs.ErrMayBlock
)

// Span is one range of the target's memory to read.
type Span struct {
	Addr uint64
	Len  int
}

// Mem is a process's memory as a session reads it: a Reader, or a
// recording of one that a replay serves.
type Mem interface {
	ReadAt(p []byte, off int64) (int, error)
	// ReadVector is Reader.ReadVector.
	ReadVector(dst []byte, spans []Span) (int, error)
}

var _ Mem = (*Reader)(nil)

// Stats counts the reads issued to the kernel and the bytes they returned.
type Stats struct {
	Reads   int64
	Bytes   int64
	Refused int64 // reads refused by the mapping check
}

// Reader reads the memory of one process. It is safe for concurrent use;
// its reads are serialized.
type Reader struct {
	pid  int
	proc string // where procfs is mounted

	mu    sync.Mutex
	maps  []procfs.Mapping // sorted by Start
	fs    []string         // per file mapping: its filesystem's type, "" if unknown
	last  int              // index of the mapping the last check found
	read  time.Time        // when maps was read; zero: never
	stats Stats
}

// Open returns a reader of process pid's memory. Reading needs the right
// to: root, or the process's own user where kernel.yama.ptrace_scope
// allows it.
func Open(pid int) *Reader {
	return &Reader{pid: pid, proc: procfs.Mount}
}

// PID is the process read.
func (r *Reader) PID() int { return r.pid }

// Stats returns the reads so far.
func (r *Reader) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats
}

// ReadAt reads len(p) bytes at the address off. Where the memory at
// off+n is unreadable it reads n < len(p) bytes and says why.
func (r *Reader) ReadAt(p []byte, off int64) (int, error) {
	return r.ReadVector(p, []Span{{Addr: uint64(off), Len: len(p)}})
}

// ReadVector reads the spans, in order, into dst one after the other
// (len(dst) is their total length): one system call for up to 1024 of
// them. It returns the bytes read before the first it could not read,
// and then why.
func (r *Reader) ReadVector(dst []byte, spans []Span) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var remote [maxIov]unix.RemoteIovec
	done := 0
	for len(spans) > 0 {
		if err := hung(r.proc, r.pid); err != nil {
			return done, err
		}
		// Fill one call: whole spans and a piece of the one that
		// overflows the staging buffer.
		k, total := 0, 0
		for k < maxIov && k < len(spans) && total < stageSize {
			s := spans[k]
			if s.Addr > uint64(1<<63-1)-uint64(s.Len) {
				return done + total, r.err(s.Addr, syscall.EFAULT)
			}
			if err := r.check(s.Addr, s.Len); err != nil {
				if total == 0 {
					return done, err
				}
				break
			}
			n := min(s.Len, stageSize-total)
			remote[k] = unix.RemoteIovec{Base: uintptr(s.Addr), Len: n}
			total += n
			k++
			if n < s.Len {
				break
			}
		}
		if total == 0 { // empty spans
			spans = spans[k:]
			continue
		}
		n, err := r.readv(remote[:k], dst[done:done+total])
		done += n
		if err != nil || n < total {
			if errors.Is(err, ErrHung) {
				return done, err
			}
			return done, r.err(firstUnread(remote[:k], n), err)
		}
		if remote[k-1].Len < spans[k-1].Len { // split: its rest comes next
			rest := spans[k-1]
			rest.Addr += uint64(remote[k-1].Len)
			rest.Len -= remote[k-1].Len
			spans = append([]Span{rest}, spans[k:]...)
		} else {
			spans = spans[k:]
		}
	}
	return done, nil
}

// firstUnread is the address of the first byte not read, n read.
func firstUnread(remote []unix.RemoteIovec, n int) uint64 {
	for _, v := range remote {
		if n < v.Len {
			return uint64(v.Base) + uint64(n)
		}
		n -= v.Len
	}
	return 0
}

// readv runs one process_vm_readv into dst in an executor; a read that
// outlasts timeout marks the pid hung.
func (r *Reader) readv(remote []unix.RemoteIovec, dst []byte) (int, error) {
	r.stats.Reads++
	n, err := readv(r.pid, remote, dst, timeout)
	if errors.Is(err, errTimeout) {
		return 0, markHung(r.proc, r.pid, uint64(remote[0].Base))
	}
	r.stats.Bytes += int64(n)
	return n, err
}

// err says why reading at addr failed (err from process_vm_readv; nil: a
// short read), and what to do about it.
func (r *Reader) err(addr uint64, err error) error { return ReadError(r.pid, addr, err) }

// ReadError says why reading pid's memory at addr failed (err from
// process_vm_readv; nil: a short read), and what to do about it.
func ReadError(pid int, addr uint64, err error) error {
	switch {
	case err == nil:
		return fmt.Errorf("memory at %#x of pid %d is unreadable", addr, pid)
	case errors.Is(err, syscall.ESRCH):
		return fmt.Errorf("read pid %d: %w: %w", pid, procfs.ErrNoProcess, err)
	case errors.Is(err, syscall.EPERM):
		return fmt.Errorf("read memory of pid %d: %w (run as root, or as the JVM's user with kernel.yama.ptrace_scope at 0)", pid, err)
	}
	return fmt.Errorf("read memory at %#x of pid %d: %w", addr, pid, err)
}

// check refuses a read of [addr, addr+n) that touches a file mapping on a
// filesystem that may block; in strict mode (MaxStranded executors stuck)
// also one that touches a file on a filesystem not found in mountinfo, or
// memory the maps do not show. The maps are reread (at most every
// mapsReread) when the range reaches beyond the mappings known.
func (r *Reader) check(addr uint64, n int) error {
	if n <= 0 {
		return nil
	}
	strict := Strict()
	covered, err := r.scan(addr, uint64(n), strict)
	if err == nil && !covered && time.Since(r.read) >= mapsReread {
		r.loadMaps()
		covered, err = r.scan(addr, uint64(n), strict)
	}
	if err == nil && !covered && strict {
		err = strictErr(fmt.Sprintf("read memory at %#x of pid %d, which its maps do not show", addr, r.pid))
	}
	if err != nil {
		r.stats.Refused++
	}
	return err
}

// scan looks up [addr, addr+n) in the known mappings: whether they cover
// it all, and an error if one of them may block (or, strict, lies on a
// filesystem of unknown type).
func (r *Reader) scan(addr, n uint64, strict bool) (covered bool, err error) {
	end := addr + n
	i := r.last
	if i >= len(r.maps) || r.maps[i].Start > addr || r.maps[i].End <= addr {
		i = sort.Search(len(r.maps), func(i int) bool { return r.maps[i].End > addr })
	}
	covered, at := true, addr
	for ; i < len(r.maps) && r.maps[i].Start < end; i++ {
		m := r.maps[i]
		if m.Start > at {
			covered = false
		}
		if t := r.fs[i]; procfs.MayBlock(t) {
			return covered, fmt.Errorf("read memory at %#x of pid %d: it maps %s, %w (%s): not read, as its owner could stall the read for good",
				max(addr, m.Start), r.pid, m.Path, ErrMayBlock, t)
		} else if strict && t == "" && m.File() {
			return covered, strictErr(fmt.Sprintf("read memory at %#x of pid %d, a mapping of %s on a filesystem not in its mountinfo", max(addr, m.Start), r.pid, m.Path))
		}
		r.last = i
		at = m.End
	}
	return covered && at >= end, nil
}

// loadMaps reads the maps and the filesystem type of each file mapping.
// Without them (the process exited, or a fake /proc), the check lets
// reads through (but in strict mode): the executor still bounds their
// time.
func (r *Reader) loadMaps() {
	r.read = time.Now()
	ms, err := procfs.Maps(r.proc, r.pid)
	if err != nil {
		return
	}
	var mounts []procfs.MountPoint
	fs := make([]string, len(ms))
	for i, m := range ms {
		if !m.File() {
			continue
		}
		if mounts == nil {
			if mounts, err = procfs.Mounts(r.proc, r.pid); err != nil {
				return
			}
		}
		fs[i] = procfs.FSTypeOf(mounts, m.Major, m.Minor)
	}
	r.maps, r.fs, r.last = ms, fs, 0
}

// hangs records the processes whose memory, or whose files, did not
// answer, by pid and start time (a pid reused by another process is read
// again).
var hangs struct {
	sync.Mutex
	m map[hangKey]hang
}

type hangKey struct {
	pid   int
	files bool
}

type hang struct {
	start uint64
	err   error
}

// markHung records that a read of pid at addr did not answer in time.
func markHung(proc string, pid int, addr uint64) error {
	err := fmt.Errorf("memory of pid %d did not answer a read at %#x within %v (a FUSE or other blocking mapping); reads of it stopped: %w",
		pid, addr, timeout, ErrHung)
	setHang(proc, hangKey{pid, false}, err)
	return err
}

func setHang(proc string, k hangKey, err error) {
	start, _ := procfs.StartTime(proc, k.pid)
	hangs.Lock()
	defer hangs.Unlock()
	if hangs.m == nil {
		hangs.m = make(map[hangKey]hang)
	}
	hangs.m[k] = hang{start, err}
}

// hung returns the error of the hang of pid's memory, nil if none.
func hung(proc string, pid int) error { return getHang(proc, hangKey{pid, false}) }

func getHang(proc string, k hangKey) error {
	hangs.Lock()
	h, ok := hangs.m[k]
	hangs.Unlock()
	if !ok {
		return nil
	}
	if start, err := procfs.StartTime(proc, k.pid); err == nil && start != h.start {
		hangs.Lock()
		delete(hangs.m, k)
		hangs.Unlock()
		return nil
	}
	return h.err
}

// MarkFilesHung records that a call on a file process pid controls (a
// library it maps, its /tmp) did not answer (err, an ErrHung): FilesHung
// then fails at once, so that a target whose files all stall costs one
// Timeout, not one per file. procfs is mounted at proc.
func MarkFilesHung(proc string, pid int, err error) {
	setHang(proc, hangKey{pid, true}, fmt.Errorf("files of pid %d are not opened any more: %w", pid, err))
}

// FilesHung returns why pid's files are not opened any more, nil if they
// still are.
func FilesHung(proc string, pid int) error { return getHang(proc, hangKey{pid, true}) }
