//go:build linux && (amd64 || arm64 || ppc64le || s390x || riscv64 || loong64 || mips64 || mips64le)

package openj9

import (
	"fmt"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// SysV IPC as OpenJ9 uses it for attach notification. golang.org/x/sys/unix
// has no wrappers for these, so they are raw syscalls (64-bit ABIs, where
// semget/semtimedop/semctl are direct system calls).

const (
	ipcCreat  = 0o1000
	ipcNowait = 0o4000
	ipcRmid   = 0
	getVal    = 12
)

// notifierProjID is the ftok project id of the attach notifier semaphore.
// From jattach's OpenJ9 support (ftok("<dir>/_notifier", 0xa1)), which
// interoperates with real OpenJ9; not verified against an OpenJ9 here.
const notifierProjID = 0xa1

// ftok computes the System V IPC key the way glibc does.
func ftok(path string, projID byte) (int, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, err
	}
	return int(uint32(st.Ino&0xffff) | uint32(st.Dev&0xff)<<16 | uint32(projID)<<24), nil
}

type sembuf struct {
	num uint16
	op  int16
	flg int16
}

func semget(key, nsems, flags int) (int, error) {
	id, _, errno := unix.Syscall(unix.SYS_SEMGET, uintptr(key), uintptr(nsems), uintptr(flags))
	if errno != 0 {
		return -1, errno
	}
	return int(id), nil
}

// semop applies op to semaphore 0 of set id. timeout < 0 waits forever.
func semop(id int, op int16, flags int16, timeout time.Duration) error {
	b := sembuf{num: 0, op: op, flg: flags}
	var ts *unix.Timespec
	if timeout >= 0 {
		t := unix.NsecToTimespec(timeout.Nanoseconds())
		ts = &t
	}
	_, _, errno := unix.Syscall6(unix.SYS_SEMTIMEDOP, uintptr(id), uintptr(unsafe.Pointer(&b)), 1,
		uintptr(unsafe.Pointer(ts)), 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

func semctl(id, cmd int) (int, error) {
	r, _, errno := unix.Syscall6(unix.SYS_SEMCTL, uintptr(id), 0, uintptr(cmd), 0, 0, 0)
	if errno != 0 {
		return -1, errno
	}
	return int(r), nil
}

// notifier is the attach notification semaphore of one attach directory.
type notifier struct {
	id  int
	key int
}

// openNotifier opens the existing semaphore keyed on <dir>/_notifier.
// create is for the fake target in tests: OpenJ9 creates it, not attachers.
func openNotifier(dir string, create bool) (*notifier, error) {
	path := dir + "/_notifier"
	key, err := ftok(path, notifierProjID)
	if err != nil {
		return nil, fmt.Errorf("notifier key: %w", err)
	}
	flags := 0
	if create {
		flags = ipcCreat | 0o600
	}
	id, err := semget(key, 1, flags)
	if err != nil {
		return nil, fmt.Errorf("notifier semaphore %s (key %#x): %w", path, key, err)
	}
	return &notifier{id: id, key: key}, nil
}

// post adds n to the semaphore, waking up to n waiting VMs.
func (s *notifier) post(n int) error {
	for ; n > 0; n -= 0x7fff {
		if err := semop(s.id, int16(min(n, 0x7fff)), 0, -1); err != nil {
			return err
		}
	}
	return nil
}

// cancel takes back up to n posts that no VM consumed, without blocking.
func (s *notifier) cancel(n int) {
	for ; n > 0; n-- {
		if semop(s.id, -1, ipcNowait, -1) != nil {
			return
		}
	}
}

// wait consumes one post, waiting at most timeout; false on timeout.
func (s *notifier) wait(timeout time.Duration) (bool, error) {
	err := semop(s.id, -1, 0, timeout)
	switch err {
	case nil:
		return true, nil
	case unix.EAGAIN, unix.EINTR:
		return false, nil
	}
	return false, err
}

func (s *notifier) value() (int, error) { return semctl(s.id, getVal) }

func (s *notifier) remove() error {
	_, err := semctl(s.id, ipcRmid)
	return err
}
