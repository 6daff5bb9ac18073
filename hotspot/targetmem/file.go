package targetmem

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/djx-bpf/djx-bpf/safety/procfs"
)

// The system calls on files a target controls (its libraries, its perf
// map, its /tmp) run in executors too: an open, stat, read or close of a
// file on the target user's FUSE filesystem may wait for good, and is
// abandoned after Timeout. Paths and structures go through the staging
// buffer, which outlives an abandoned call.

// Openat2 is openat2(2) run in an executor; it returns the new fd, which
// shares our file table.
func Openat2(dirfd int, path string, how *unix.OpenHow) (int, error) {
	if len(path)+1+int(unsafe.Sizeof(*how)) > stageSize {
		return -1, unix.ENAMETOOLONG
	}
	return openCall(opOpenat2, "open "+path, func(x *executor) [6]int64 {
		p := x.stage
		n := copy(p, path)
		p[n] = 0
		hp := (*unix.OpenHow)(unsafe.Pointer(&p[(n+8)&^7]))
		*hp = *how
		return [6]int64{int64(dirfd), int64(uintptr(unsafe.Pointer(&p[0]))), int64(uintptr(unsafe.Pointer(hp))), int64(unsafe.Sizeof(*how))}
	})
}

// Openat is openat(2) (mode 0) run in an executor.
func Openat(dirfd int, path string, flags int) (int, error) {
	if len(path)+1 > stageSize {
		return -1, unix.ENAMETOOLONG
	}
	return openCall(opOpenat, "open "+path, func(x *executor) [6]int64 {
		n := copy(x.stage, path)
		x.stage[n] = 0
		return [6]int64{int64(dirfd), int64(uintptr(unsafe.Pointer(&x.stage[0]))), int64(flags)}
	})
}

func openCall(op int32, what string, prep func(x *executor) [6]int64) (int, error) {
	ret, err := run(op, timeout, prep, nil)
	if err != nil {
		return -1, callErr(what, err)
	}
	if ret < 0 {
		return -1, unix.Errno(-ret)
	}
	return int(ret), nil
}

// callErr says why a call on a file failed in the executor.
func callErr(what string, err error) error {
	if errors.Is(err, errTimeout) {
		return fmt.Errorf("%s: no answer within %v (a FUSE or network filesystem?); given up: %w", what, timeout, ErrHung)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// Fstat is fstat(2) run in an executor.
func Fstat(fd int, st *unix.Stat_t) error {
	ret, err := run(opFstat, timeout, func(x *executor) [6]int64 {
		return [6]int64{int64(fd), int64(uintptr(unsafe.Pointer(&x.stage[0])))}
	}, func(x *executor, ret int64) {
		if ret == 0 {
			*st = *(*unix.Stat_t)(unsafe.Pointer(&x.stage[0]))
		}
	})
	if err != nil {
		return callErr("stat", err)
	}
	if ret < 0 {
		return unix.Errno(-ret)
	}
	return nil
}

// Pread is pread(2) run in an executor, in pieces of the staging
// buffer's size; it reads until p is full, the file ends or a call fails.
func Pread(fd int, p []byte, off int64) (int, error) {
	done := 0
	for done < len(p) {
		want := min(len(p)-done, stageSize)
		n := 0
		ret, err := run(opPread, timeout, func(x *executor) [6]int64 {
			return [6]int64{int64(fd), int64(uintptr(unsafe.Pointer(&x.stage[0]))), int64(want), off + int64(done)}
		}, func(x *executor, ret int64) {
			if ret > 0 {
				n = copy(p[done:], x.stage[:min(int(ret), want)])
			}
		})
		if err != nil {
			return done, callErr("read", err)
		}
		if ret < 0 {
			return done, unix.Errno(-ret)
		}
		done += n
		if n < want {
			break // end of file
		}
	}
	return done, nil
}

// Close is close(2) run in an executor: closing a FUSE file flushes it,
// which its server may never answer.
func Close(fd int) error {
	ret, err := run(opClose, timeout, func(x *executor) [6]int64 {
		return [6]int64{int64(fd)}
	}, nil)
	if err != nil {
		return callErr("close", err)
	}
	if ret < 0 {
		return unix.Errno(-ret)
	}
	return nil
}

// File is an open file whose every read, stat and close runs in an
// executor. It is an io.Reader and io.ReaderAt, so that parsers of the
// target's files read through it as through an *os.File. After a call
// that did not answer, every later one fails at once.
type File struct {
	name string

	mu  sync.Mutex
	fd  int // -1 once closed
	off int64
	err error // the hang, once one happened
}

// NewFile takes over fd, named name in errors.
func NewFile(fd int, name string) *File { return &File{fd: fd, name: name} }

// Name is the name given to NewFile.
func (f *File) Name() string { return f.name }

// Fd is the file descriptor, for the kernel to name it
// (/proc/self/fd/N); system calls on it belong in the executor.
func (f *File) Fd() uintptr { return uintptr(f.fd) }

// ReadAt reads len(p) bytes at off; fewer only at the file's end (io.EOF)
// or on an error.
func (f *File) ReadAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.readAt(p, off)
}

func (f *File) readAt(p []byte, off int64) (int, error) {
	if err := f.usable(); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, fmt.Errorf("read %s: negative offset", f.name)
	}
	n, err := Pread(f.fd, p, off)
	if err != nil {
		return n, f.fail(err)
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// Read reads from the file's offset on.
func (f *File) Read(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(p) == 0 {
		return 0, f.usable()
	}
	n, err := f.readAt(p, f.off)
	f.off += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

// Stat is the file's fstat.
func (f *File) Stat() (unix.Stat_t, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var st unix.Stat_t
	if err := f.usable(); err != nil {
		return st, err
	}
	if err := Fstat(f.fd, &st); err != nil {
		return st, f.fail(err)
	}
	return st, nil
}

// Close closes the file. One that hung is closed too (bounded as every
// call is), so that its fd does not stay behind.
func (f *File) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fd < 0 {
		return fmt.Errorf("close %s: %w", f.name, unix.EBADF)
	}
	fd := f.fd
	f.fd = -1
	if err := Close(fd); err != nil {
		return fmt.Errorf("close %s: %w", f.name, err)
	}
	return nil
}

func (f *File) usable() error {
	if f.fd < 0 {
		return fmt.Errorf("%s: %w", f.name, unix.EBADF)
	}
	return f.err
}

// fail keeps a hang for later calls; callers name the file.
func (f *File) fail(err error) error {
	if errors.Is(err, ErrHung) {
		f.err = err
	}
	return err
}

// CheckFS refuses a file on a filesystem of type fstype ("" when not
// known) that may block; in strict mode (MaxStranded executors stuck),
// one of unknown type too. what names the file.
func CheckFS(what, fstype string) error {
	if procfs.MayBlock(fstype) {
		return fmt.Errorf("%s is %w (%s): not used, as its owner could stall any call on it for good", what, ErrMayBlock, fstype)
	}
	if fstype == "" && Strict() {
		return strictErr(what + " lies on a filesystem of unknown type")
	}
	return nil
}
