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

	opReadv   = C.DJX_OP_READV
	opOpenat  = C.DJX_OP_OPENAT
	opPread   = C.DJX_OP_PREAD
	opFstat   = C.DJX_OP_FSTAT
	opClose   = C.DJX_OP_CLOSE
	opOpenat2 = C.DJX_OP_OPENAT2

	futexWaitPrivate = 0 | 128 // FUTEX_WAIT | FUTEX_PRIVATE_FLAG: the executor shares our mm
	futexWakePrivate = 1 | 128

	maxIov    = C.DJX_EX_MAXIOV
	stageSize = C.DJX_EX_STAGE
)

// idleExit is how long an executor waits for a request before it exits.
const idleExit = 5 * time.Second

// reapEvery is how often exited executors are reaped and freed.
const reapEvery = time.Second

// MaxStranded caps the executors stranded in a call that never returned.
// Past it, reads and opens the mapping and filesystem checks cannot
// prove safe are refused instead of issued (see Strict), so that a
// target cannot pile up stuck tasks without bound.
const MaxStranded = 64

// maxStranded is MaxStranded; tests lower it.
var maxStranded int64 = MaxStranded

var (
	// errExited: the executor exited, idle; start another.
	errExited = errors.New("executor exited")
	// errTimeout: the call did not return in time; the executor is
	// abandoned.
	errTimeout = errors.New("no answer")
	// ErrStranded means a read or open was refused because MaxStranded
	// executors are already stuck; only what the checks prove cannot
	// block is still issued.
	ErrStranded = errors.New("too many reads stuck on filesystems that never answered")
)

// executor runs system calls in a task of its own that shares our memory
// (executor.c). A call stuck in the kernel strands that task, which we
// abandon; djx-bpf itself can still exit.
type executor struct {
	e         *C.struct_djx_exec
	pid       int
	state     *uint32
	stage     []byte
	abandoned bool // stranded in a call: counted in stranded until reaped
	files     bool // shares our file table (see djx_exec_start)
}

func startExecutor(files bool) (*executor, error) {
	e := C.djx_exec_new()
	if e == nil {
		return nil, errors.New("start memory reader: cannot map its stack")
	}
	x := &executor{e: e, files: files}
	x.setIdle(idleExit)
	share := C.int(0)
	if files {
		share = 1
	}
	pid := int(C.djx_exec_start(e, share))
	if pid < 0 {
		C.djx_exec_free(e)
		return nil, fmt.Errorf("start memory reader: clone: %w", unix.Errno(-pid))
	}
	startReaper()
	x.pid = pid
	x.state = (*uint32)(unsafe.Pointer(&e.state))
	x.stage = unsafe.Slice((*byte)(unsafe.Pointer(e.stage)), stageSize)
	return x, nil
}

// setIdle sets how long x waits for a request before it exits.
func (x *executor) setIdle(d time.Duration) { x.e.idle_ms = C.int32_t(d / time.Millisecond) }

// pool holds the idle executors: those for memory reads, which hold no
// file, and those for calls on files, which share our file table. Each
// call takes one, so concurrent callers never share one; an executor that
// exited idle is retired here or by the reaper.
var pool struct {
	sync.Mutex
	idle [2][]*executor // by files
}

func getExecutor(files bool) (*executor, error) {
	pool.Lock()
	idle := &pool.idle[b2i(files)]
	for len(*idle) > 0 {
		x := (*idle)[len(*idle)-1]
		*idle = (*idle)[:len(*idle)-1]
		if atomic.LoadUint32(x.state) == stIdle {
			pool.Unlock()
			return x, nil
		}
		retire(x)
	}
	pool.Unlock()
	return startExecutor(files)
}

func putExecutor(x *executor) {
	pool.Lock()
	pool.idle[b2i(x.files)] = append(pool.idle[b2i(x.files)], x)
	pool.Unlock()
	startReaper()
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// run runs op in an idle executor: prep fills its block and staging
// buffer and returns the arguments, out reads the result from them before
// the executor goes back to the pool. A call that outlasts timeout is
// errTimeout, and its executor stranded.
func run(op int32, timeout time.Duration, prep func(x *executor) [6]int64, out func(x *executor, ret int64)) (int64, error) {
	for try := 0; ; try++ {
		x, err := getExecutor(op != opReadv)
		if err != nil {
			return 0, err
		}
		ret, err := x.call(op, prep(x), timeout)
		switch {
		case errors.Is(err, errExited) && try == 0:
			retire(x)
			continue
		case err != nil:
			if !errors.Is(err, errTimeout) {
				retire(x)
			}
			return 0, err
		}
		if out != nil {
			out(x, ret)
		}
		putExecutor(x)
		return ret, nil
	}
}

// readv reads the remote ranges of pid, one after the other, into dst
// with process_vm_readv; it returns the bytes read or the errno. A call
// that outlasts timeout is errTimeout.
func readv(pid int, remote []unix.RemoteIovec, dst []byte, timeout time.Duration) (int, error) {
	n := 0
	ret, err := run(opReadv, timeout, func(x *executor) [6]int64 {
		iov := unsafe.Slice((*uint64)(unsafe.Pointer(&x.e.iov[0])), len(x.e.iov))
		iov[0], iov[1] = uint64(uintptr(unsafe.Pointer(x.e.stage))), uint64(len(dst))
		for i, r := range remote {
			iov[2+2*i], iov[3+2*i] = uint64(r.Base), uint64(r.Len)
		}
		return [6]int64{int64(pid), int64(uintptr(unsafe.Pointer(&x.e.iov[0]))), 1,
			int64(uintptr(unsafe.Pointer(&x.e.iov[2]))), int64(len(remote)), 0}
	}, func(x *executor, ret int64) {
		if ret > 0 {
			n = copy(dst, x.stage[:min(int(ret), len(dst))])
		}
	})
	if err != nil {
		return 0, err
	}
	if ret < 0 {
		return 0, unix.Errno(-ret)
	}
	return n, nil
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
				x.abandoned = true
				stranded.Add(1)
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

// stranded counts the abandoned executors not yet reaped: tasks stuck in
// a call.
var stranded atomic.Int64

// Stranded returns how many executors are stuck in a call, and the cap.
func Stranded() (n, max int) { return int(stranded.Load()), int(maxStranded) }

// Strict reports whether MaxStranded executors are stuck: then only what
// the checks prove cannot block is read.
func Strict() bool { return stranded.Load() >= maxStranded }

// strictErr says why a read or open is refused in strict mode.
func strictErr(what string) error {
	return fmt.Errorf("%s: not read, as %d reads are already stuck (the cap; restart djx-bpf once the filesystems that stall them are gone): %w",
		what, stranded.Load(), ErrStranded)
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
		if x.abandoned {
			stranded.Add(-1)
		}
		C.djx_exec_free(x.e)
	}
	clear(retired.list[len(keep):])
	retired.list = keep
}

// reaperOn is set while the reaper goroutine runs.
var reaperOn atomic.Bool

// startReaper starts the reaper unless it runs: it retires the pool's
// executors that exited idle and reaps the retired ones every reapEvery,
// so that none lingers as a zombie, and stops once there are none (an
// executor put back into the pool starts it again).
func startReaper() {
	if reaperOn.Load() || !reaperOn.CompareAndSwap(false, true) {
		return
	}
	go func() {
		t := time.NewTicker(reapEvery)
		defer t.Stop()
		for range t.C {
			if sweep() {
				continue
			}
			reaperOn.Store(false)
			// Something started meanwhile may have seen it still on.
			if !sweep() || !reaperOn.CompareAndSwap(false, true) {
				return
			}
		}
	}()
}

// sweep retires the pool's exited executors and reaps; it reports
// whether any executor is left.
func sweep() bool {
	pool.Lock()
	var gone []*executor
	left := false
	for i, idle := range pool.idle {
		keep := idle[:0]
		for _, x := range idle {
			if atomic.LoadUint32(x.state) == stIdle {
				keep = append(keep, x)
			} else {
				gone = append(gone, x)
			}
		}
		clear(idle[len(keep):])
		pool.idle[i] = keep
		left = left || len(keep) > 0
	}
	pool.Unlock()
	for _, x := range gone {
		retire(x)
	}
	reap()
	retired.Lock()
	left = left || len(retired.list) > 0
	retired.Unlock()
	return left
}

// siginfoPid is si_pid, which waitid leaves 0 when no child changed state.
func siginfoPid(info *unix.Siginfo) int32 {
	// si_signo, si_errno, si_code (3 int32), padding on 64-bit, then si_pid.
	return *(*int32)(unsafe.Add(unsafe.Pointer(info), 4*4))
}

// retiredCount counts the executors not yet reaped, for tests.
func retiredCount() int {
	retired.Lock()
	defer retired.Unlock()
	return len(retired.list)
}

// Shutdown ends the idle executors and waits up to 200 ms for them to exit:
// one for files shares our file table, so until it exits what djx-bpf
// opened (the agent's socket, BPF links, perf events) stays open after
// djx-bpf has exited, and the agent sees its loader still there. An
// executor stuck in a call is left, as always. Call it before exiting.
func Shutdown() {
	pool.Lock()
	var all []*executor
	for i := range pool.idle {
		all = append(all, pool.idle[i]...)
		pool.idle[i] = nil
	}
	pool.Unlock()
	for _, x := range all {
		if atomic.CompareAndSwapUint32(x.state, stIdle, stAbandoned) {
			futex(x.state, futexWakePrivate, 1, nil)
		}
		retire(x)
	}
	for deadline := time.Now().Add(200 * time.Millisecond); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		reap()
		if !anyRetired(all) {
			return
		}
	}
}

// anyRetired reports whether any of xs is still waiting to be reaped.
func anyRetired(xs []*executor) bool {
	retired.Lock()
	defer retired.Unlock()
	for _, r := range retired.list {
		for _, x := range xs {
			if r == x {
				return true
			}
		}
	}
	return false
}
