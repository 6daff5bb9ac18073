package targetmem

/*
#cgo CFLAGS: -Wall -Werror -O2 -fno-stack-protector
#include "executor.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

const (
	stIdle      = C.DJX_EX_IDLE
	stReq       = C.DJX_EX_REQ
	stDone      = C.DJX_EX_DONE
	stExit      = C.DJX_EX_EXIT
	stAbandoned = C.DJX_EX_ABANDONED

	opReadv = C.DJX_OP_READV

	futexWaitPrivate = 0 | 128 // FUTEX_WAIT | FUTEX_PRIVATE_FLAG: the executor shares our mm
	futexWakePrivate = 1 | 128

	maxIov    = C.DJX_EX_MAXIOV
	stageSize = C.DJX_EX_STAGE
)

// idleExit is how long an executor waits for a request before it exits.
const idleExit = 5 * time.Second

var (
	// errExited: the executor exited, idle; start another.
	errExited = errors.New("executor exited")
	// errTimeout: the call did not return in time; the executor is
	// abandoned.
	errTimeout = errors.New("no answer")
)

// executor runs system calls in a task of its own that shares our memory
// (executor.c). A call stuck in the kernel strands that task, which we
// abandon; djx-bpf itself can still exit.
type executor struct {
	e     *C.struct_djx_exec
	pid   int
	state *uint32
	stage []byte
}

func startExecutor() (*executor, error) {
	reap()
	e := C.djx_exec_new()
	if e == nil {
		return nil, errors.New("start memory reader: cannot map its stack")
	}
	e.idle_ms = C.int32_t(idleExit / time.Millisecond)
	pid := int(C.djx_exec_start(e))
	if pid < 0 {
		C.djx_exec_free(e)
		return nil, fmt.Errorf("start memory reader: clone: %w", unix.Errno(-pid))
	}
	return &executor{
		e: e, pid: pid,
		state: (*uint32)(unsafe.Pointer(&e.state)),
		stage: unsafe.Slice((*byte)(unsafe.Pointer(e.stage)), stageSize),
	}, nil
}

// readv reads the remote ranges into the staging buffer, one after the
// other, with process_vm_readv; it returns the bytes read or the errno.
// A call that outlasts timeout is errTimeout, and x is abandoned.
func (x *executor) readv(pid int, remote []unix.RemoteIovec, total int, timeout time.Duration) (int, error) {
	iov := unsafe.Slice((*uint64)(unsafe.Pointer(&x.e.iov[0])), len(x.e.iov))
	iov[0], iov[1] = uint64(uintptr(unsafe.Pointer(x.e.stage))), uint64(total)
	for i, r := range remote {
		iov[2+2*i], iov[3+2*i] = uint64(r.Base), uint64(r.Len)
	}
	args := [6]int64{int64(pid), int64(uintptr(unsafe.Pointer(&x.e.iov[0]))), 1,
		int64(uintptr(unsafe.Pointer(&x.e.iov[2]))), int64(len(remote)), 0}
	ret, err := x.call(opReadv, args, timeout)
	if err != nil {
		return 0, err
	}
	if ret < 0 {
		return 0, unix.Errno(-ret)
	}
	return int(ret), nil
}

// call posts op and waits for its result (a value, or -errno).
func (x *executor) call(op int32, args [6]int64, timeout time.Duration) (int64, error) {
	x.e.op = C.int32_t(op)
	for i, a := range args {
		x.e.arg[i] = C.int64_t(a)
	}
	if !atomic.CompareAndSwapUint32(x.state, stIdle, stReq) {
		return 0, errExited
	}
	futex(x.state, futexWakePrivate, 1, nil)
	deadline := time.Now().Add(timeout)
	for {
		if atomic.LoadUint32(x.state) == stDone {
			ret := int64(x.e.ret)
			atomic.StoreUint32(x.state, stIdle)
			return ret, nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			if atomic.CompareAndSwapUint32(x.state, stReq, stAbandoned) {
				retire(x)
				return 0, errTimeout
			}
			continue // it answered just now
		}
		ts := unix.NsecToTimespec(int64(min(left, 100*time.Millisecond)))
		futex(x.state, futexWaitPrivate, stReq, &ts)
	}
}

func futex(addr *uint32, op int, val uint32, ts *unix.Timespec) {
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), uintptr(op), uintptr(val), uintptr(unsafe.Pointer(ts)), 0, 0)
}

// retired holds executors that exited or were abandoned, until their task
// is reaped: an abandoned one may still write into its staging buffer.
var retired struct {
	sync.Mutex
	list []*executor
}

// retire hands x over to be reaped and freed.
func retire(x *executor) {
	retired.Lock()
	retired.list = append(retired.list, x)
	retired.Unlock()
	reap()
}

// reap frees the retired executors whose task has exited. The task's exit
// signal is 0, so only a waitid with __WCLONE reaps it, and no wait of
// os/exec's ever does.
func reap() {
	retired.Lock()
	defer retired.Unlock()
	keep := retired.list[:0]
	for _, x := range retired.list {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, x.pid, &info, unix.WEXITED|unix.WNOHANG|unix.WCLONE, nil)
		if err == nil && siginfoPid(&info) == 0 {
			keep = append(keep, x) // still running (or stuck)
			continue
		}
		// Reaped, or not our child any more (ECHILD): it no longer runs.
		C.djx_exec_free(x.e)
	}
	clear(retired.list[len(keep):])
	retired.list = keep
}

// siginfoPid is si_pid, which waitid leaves 0 when no child changed state.
func siginfoPid(info *unix.Siginfo) int32 {
	// si_signo, si_errno, si_code (3 int32), padding on 64-bit, then si_pid.
	return *(*int32)(unsafe.Add(unsafe.Pointer(info), 4*4))
}

// abandoned counts the executors that never answered, for tests.
func retiredCount() int {
	retired.Lock()
	defer retired.Unlock()
	return len(retired.list)
}
