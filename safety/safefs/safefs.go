// Package safefs opens and reads files that a profiled process controls
// (anything under its /proc/PID/root or /proc/PID/cwd) without letting that
// process steer root elsewhere: paths resolve inside the given root with no
// symlinks at all, the final file must be a regular one, opening never
// blocks (a FIFO or a device is refused after a non-blocking open), and a
// read stops at a size cap.
//
// A file the process controls may also lie on its user's FUSE filesystem
// (or a network one), whose server can leave an open, a stat, a read or
// a close waiting for good, and the task in it unkillable. So every such
// call runs in a targetmem executor that is abandoned after
// targetmem.Timeout, and a file whose open descriptor shows it on such a
// filesystem (by its mount, procfs.FDFSType) is refused before it is
// read.
package safefs

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/djx-bpf/djx-bpf/hotspot/targetmem"
	"github.com/djx-bpf/djx-bpf/safety/procfs"
)

var (
	// ErrNotRegular means the path names a directory, FIFO, device, socket
	// or anything else than a regular file.
	ErrNotRegular = errors.New("not a regular file")
	// ErrTooLarge means the file holds more than the caller's cap.
	ErrTooLarge = errors.New("file exceeds its size cap")
)

// Resolve is how every lookup below a root resolves: as if the root were
// "/", and refusing symlinks (magic links included) in any component.
const Resolve = unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// OpenAt opens name below the directory dirfd, resolved as if dirfd were
// "/" and with no symlink anywhere, adding O_NOFOLLOW, O_NONBLOCK and
// O_CLOEXEC to flags (O_NONBLOCK not with O_PATH, which openat2 refuses
// it with and which never blocks). It returns a raw fd.
func OpenAt(dirfd int, name string, flags int) (int, error) {
	flags |= unix.O_NOFOLLOW | unix.O_CLOEXEC
	if flags&unix.O_PATH == 0 {
		flags |= unix.O_NONBLOCK
	}
	fd, err := unix.Openat2(dirfd, name, &unix.OpenHow{Flags: uint64(flags), Resolve: Resolve})
	if errors.Is(err, unix.ENOSYS) {
		return walk(dirfd, name, flags) // before Linux 5.6
	}
	return fd, err
}

// walk is OpenAt without openat2: one component at a time, each opened
// with O_NOFOLLOW, ".." refused.
func walk(dirfd int, name string, flags int) (int, error) {
	parts := strings.FieldsFunc(name, func(r rune) bool { return r == '/' })
	if len(parts) == 0 {
		return targetmem.Openat(dirfd, ".", flags)
	}
	cur := dirfd
	for i, p := range parts {
		if p == ".." {
			if cur != dirfd {
				unix.Close(cur)
			}
			return -1, fmt.Errorf("%q: %w", name, unix.EXDEV)
		}
		f := unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
		if i == len(parts)-1 {
			f = flags
		}
		next, err := targetmem.Openat(cur, p, f)
		if cur != dirfd {
			unix.Close(cur)
		}
		if err != nil {
			return -1, err
		}
		cur = next
	}
	return cur, nil
}

// OpenRoot opens the directory root (e.g. /proc/PID/root, which is followed:
// it is the process's own root) as an O_PATH fd to resolve names below.
func OpenRoot(root string) (int, error) {
	fd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open %s: %w", root, err)
	}
	return fd, nil
}

// Open opens name below root for reading (see OpenAt) and checks that it
// is a regular file on a filesystem that cannot stall its reads.
func Open(root, name string) (*targetmem.File, error) {
	rootfd, err := OpenRoot(root)
	if err != nil {
		return nil, err
	}
	defer unix.Close(rootfd)
	return OpenFileAt(rootfd, name, filepath.Join(root, name))
}

// OpenFileAt opens name below dirfd for reading (see OpenAt) and checks
// that it is a regular file on a filesystem that cannot stall its reads;
// display names it in errors and the File. The name is first opened
// O_PATH, so that a device is never opened for reading (opening some, a
// watchdog, has effects) and a FIFO never waits.
func OpenFileAt(dirfd int, name, display string) (*targetmem.File, error) {
	fd, err := OpenAt(dirfd, name, unix.O_PATH)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", display, err)
	}
	defer unix.Close(fd) // O_PATH: no flush, nothing that could wait
	return ReopenRegular(fd, display)
}

// ReopenRegular opens for reading, O_NONBLOCK, the file that fd (an O_PATH
// fd, e.g. of a /proc/PID/map_files link) refers to, if it is a regular
// file on a filesystem that cannot stall its reads (CheckFS); the open
// goes through /proc/self/fd, so it reaches that very inode whatever its
// path has become. display names it in errors. The stat, the open and
// every call on the File run in executors.
func ReopenRegular(fd int, display string) (*targetmem.File, error) {
	if err := CheckFS(fd, display); err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := targetmem.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("stat %s: %w", display, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("%s: %w (mode %#o)", display, ErrNotRegular, st.Mode)
	}
	// /proc/self is the executor's own, which shares our file table.
	rfd, err := targetmem.Openat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("reopen %s: %w", display, err)
	}
	f := targetmem.NewFile(rfd, display)
	if err := Regular(f); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// CheckFS fails with procfs.ErrMayBlock when the open file fd lies on a
// filesystem whose reads may never answer (FUSE, network filesystems), by
// its mount in mountinfo, which never calls into the filesystem: ours,
// or that of the process a display path "/proc/PID/..." names (a file
// reached through its root). Once targetmem.MaxStranded calls are stuck,
// a filesystem of unknown type is refused too (targetmem.ErrStranded).
func CheckFS(fd int, display string) error {
	return targetmem.CheckFS(display, procfs.FDFSType(fd, procPID(display)))
}

// procPID is the PID of a path <procfs>/PID/..., 0 if it is not one.
func procPID(path string) int {
	rest, ok := strings.CutPrefix(path, procfs.Mount+"/")
	if !ok {
		return 0
	}
	n, _, _ := strings.Cut(rest, "/")
	pid, err := strconv.Atoi(n)
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// Regular checks that f is a regular file.
func Regular(f *targetmem.File) error {
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("stat %s: %w", f.Name(), err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("%s: %w (mode %#o)", f.Name(), ErrNotRegular, st.Mode)
	}
	return nil
}

// ReadFile reads the regular file name below root, up to max bytes; a
// longer file is ErrTooLarge.
func ReadFile(root, name string, max int64) ([]byte, error) {
	f, err := Open(root, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadAll(f, max)
}

// ReadAll reads r to its end, up to max bytes; more is ErrTooLarge.
func ReadAll(r io.Reader, max int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%w (%d bytes)", ErrTooLarge, max)
	}
	return data, nil
}

// LimitReader is an io.Reader that fails with ErrTooLarge once more than
// max bytes have been read through it, instead of ending quietly as
// io.LimitReader does (a truncated input must not pass for a whole one).
func LimitReader(r io.Reader, max int64) io.Reader { return &limited{r: r, left: max} }

type limited struct {
	r    io.Reader
	left int64
}

func (l *limited) Read(p []byte) (int, error) {
	if l.left < 0 {
		return 0, ErrTooLarge
	}
	if int64(len(p)) > l.left+1 {
		p = p[:l.left+1]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	if l.left < 0 {
		return n - int(-l.left), ErrTooLarge
	}
	return n, err
}
