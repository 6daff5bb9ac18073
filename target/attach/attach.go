// Package attach implements HotSpot's dynamic attach protocol in Go, so that
// djx-bpf can load its agent and run jcmd commands in a running JVM without a
// JDK on the host, including JVMs in other mount and pid namespaces
// (containers).
//
// The protocol on Linux: the JVM listens on the Unix socket
// /tmp/.java_pid<pid> (its own /tmp and its own pid). It opens the socket
// lazily: on SIGQUIT it looks for a file .attach_pid<pid> in its working
// directory or /tmp, owned by its effective uid or root, and if found starts
// the listener instead of printing a thread dump. A request is
// "1\0<cmd>\0<arg1>\0<arg2>\0<arg3>\0"; the reply is a return code line
// followed by output, then EOF.
package attach

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/djx-bpf/djx-bpf/hotspot/targetmem"
	"github.com/djx-bpf/djx-bpf/safety/procfs"
	"github.com/djx-bpf/djx-bpf/safety/safefs"
)

var (
	// ErrNoProcess means the pid does not exist or the process exited.
	ErrNoProcess = procfs.ErrNoProcess
	// ErrNotJVM means the process does not map libjvm.so.
	ErrNotJVM = errors.New("not a HotSpot JVM (no libjvm.so mapped)")
	// ErrUnsupportedVM means a JVM whose attach protocol is not implemented
	// (OpenJ9).
	ErrUnsupportedVM = errors.New("an OpenJ9 JVM (libj9vm): HotSpot's attach protocol does not apply (package openj9 attaches it)")
	// ErrRefused means the attach listener never came up (e.g.
	// -XX:+DisableAttachMechanism) or the JVM refused the operation (e.g.
	// -XX:-EnableDynamicAgentLoading).
	ErrRefused = errors.New("JVM refused dynamic attach; start the application with `djx-bpf profile -- java ...` instead, which loads the agent at startup with -agentpath")
	// ErrProtocol means the JVM's reply could not be parsed.
	ErrProtocol = errors.New("malformed attach reply")
	// ErrUnsafePath means a trigger file or socket path was a symlink, not a
	// socket, or owned by an unexpected user, so it was not used.
	ErrUnsafePath = errors.New("unsafe attach path")
)

// MaxReply caps an attach reply (a class histogram or thread dump of a
// large JVM is a few MiB).
const MaxReply = 64 << 20

// replyTimeout bounds an exchange when the context does not.
var replyTimeout = 2 * time.Minute

// DefaultListenerTimeout bounds the wait for the attach listener when the
// context has no earlier deadline.
const DefaultListenerTimeout = 5 * time.Second

// Target is a JVM process as seen from this (host) process: what /proc
// says of it (its Start detects pid reuse), and its root.
type Target struct {
	procfs.Process
	Root string // /proc/PID/root: the JVM's root in its mount namespace
	// MaxReply, when positive, caps replies below the package's MaxReply:
	// a caller asking many JVMs at once bounds what each may send.
	MaxReply int
}

// Inspect checks that pid is a live HotSpot JVM and reads what attaching
// needs. It never signals the process.
func Inspect(pid int) (*Target, error) {
	p, err := procfs.Inspect(procRoot, pid)
	if err != nil {
		return nil, fmt.Errorf("attach pid %d: %w", pid, err)
	}
	switch p.Kind {
	case procfs.OpenJ9:
		return nil, fmt.Errorf("attach pid %d: %w", pid, ErrUnsupportedVM)
	case procfs.HotSpot:
	default:
		return nil, fmt.Errorf("attach pid %d: %w", pid, ErrNotJVM)
	}
	return &Target{Process: p, Root: filepath.Join(procfs.Dir(procRoot, pid), "root")}, nil
}

// Exec runs one attach operation and returns the JVM's return code (the
// first reply line) and the rest of the reply. A nonzero code is not an
// error here; Jcmd and LoadAgent interpret it. The context bounds the whole
// exchange; the wait for the listener is additionally capped at
// DefaultListenerTimeout.
func (t *Target) Exec(ctx context.Context, cmd string, args ...string) (code int, output string, err error) {
	reply, err := t.exchange(ctx, cmd, args...)
	if err != nil {
		return 0, "", err
	}
	code, output, err = parseReply(reply)
	if err != nil {
		return 0, "", fmt.Errorf("attach pid %d: %s: %w", t.PID, cmd, err)
	}
	return code, output, nil
}

// Jcmd runs a diagnostic command line (e.g. "GC.heap_info") and returns its
// output. A nonzero return code is a *CommandError.
func (t *Target) Jcmd(ctx context.Context, command string) (string, error) {
	code, out, err := t.Exec(ctx, "jcmd", command)
	if err != nil {
		return "", err
	}
	if code != 0 {
		return out, fmt.Errorf("attach pid %d: jcmd %s: %w", t.PID, command, &CommandError{Code: code, Output: out})
	}
	return out, nil
}

// LoadAgent loads a JVMTI agent library and calls its Agent_OnAttach with
// options. absolute=false lets the JVM search its library path for
// lib<path>.so. A library that cannot be loaded or an agent returning
// nonzero is an *AgentError; a JVM that forbids dynamic agents is ErrRefused.
func (t *Target) LoadAgent(ctx context.Context, path string, absolute bool, options string) error {
	code, out, err := t.Exec(ctx, "load", path, strconv.FormatBool(absolute), options)
	if err != nil {
		return err
	}
	if err := loadResult(path, code, out); err != nil {
		return fmt.Errorf("attach pid %d: load agent %s: %w", t.PID, path, err)
	}
	return nil
}

// exchange sends one request and returns the raw reply.
func (t *Target) exchange(ctx context.Context, cmd string, args ...string) ([]byte, error) {
	req, err := encodeRequest(cmd, args...)
	if err != nil {
		return nil, fmt.Errorf("attach pid %d: %w", t.PID, err)
	}
	p, err := t.open()
	if err != nil {
		return nil, err
	}
	defer p.close()

	conn, err := p.connect(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	// Unblock reads and writes when ctx ends; the JVM may take long to answer.
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	if _, err := conn.Write(req); err != nil {
		return nil, p.ioErr(ctx, "send "+cmd, err)
	}
	// The target writes the reply: capped, and bounded in time even when
	// the caller's context has no deadline.
	if _, ok := ctx.Deadline(); !ok {
		conn.SetDeadline(time.Now().Add(replyTimeout))
	}
	limit := MaxReply
	if t.MaxReply > 0 && t.MaxReply < limit {
		limit = t.MaxReply
	}
	reply, err := io.ReadAll(io.LimitReader(conn, int64(limit)+1))
	if err != nil {
		return nil, p.ioErr(ctx, "read reply to "+cmd, err)
	}
	if len(reply) > limit {
		return nil, fmt.Errorf("attach pid %d: reply to %s: %w: more than %d bytes", t.PID, cmd, ErrProtocol, limit)
	}
	if len(reply) == 0 {
		return nil, p.ioErr(ctx, "read reply to "+cmd, io.ErrUnexpectedEOF)
	}
	return reply, nil
}

// proc pins the target process for one exchange: a pidfd (signals cannot
// reach a recycled pid, and exit is observable) and its root directory.
type proc struct {
	t      *Target
	pidfd  int
	rootfd int
}

func (t *Target) open() (*proc, error) {
	pidfd, err := unix.PidfdOpen(t.PID, 0)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return nil, fmt.Errorf("attach pid %d: %w", t.PID, ErrNoProcess)
		}
		return nil, fmt.Errorf("attach pid %d: pidfd_open: %w", t.PID, err)
	}
	p := &proc{t: t, pidfd: pidfd, rootfd: -1}
	// Checked after pidfd_open: if the pid is reused later, the pidfd still
	// refers to the original (exited) process.
	if t.Start != 0 {
		st, err := procfs.StartTime(procRoot, t.PID)
		if err != nil || st != t.Start {
			p.close()
			return nil, fmt.Errorf("attach pid %d: process exited (pid reused): %w", t.PID, ErrNoProcess)
		}
	}
	root := t.Root
	if root == "" {
		root = filepath.Join(procfs.Dir(procRoot, t.PID), "root")
	}
	p.rootfd, err = unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		p.close()
		return nil, fmt.Errorf("attach pid %d: open %s: %w", t.PID, root, p.mapGone(err))
	}
	return p, nil
}

func (p *proc) close() {
	if p.rootfd >= 0 {
		unix.Close(p.rootfd)
	}
	unix.Close(p.pidfd)
}

// exited reports whether the process has exited (a pidfd polls readable then).
func (p *proc) exited() bool {
	fds := []unix.PollFd{{Fd: int32(p.pidfd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0
}

// mapGone turns err into ErrNoProcess when the process has exited.
func (p *proc) mapGone(err error) error {
	if p.exited() {
		return fmt.Errorf("%w: %w", ErrNoProcess, err)
	}
	return err
}

func (p *proc) ioErr(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil {
		err = fmt.Errorf("%w (%w)", ctx.Err(), err)
	}
	return fmt.Errorf("attach pid %d: %s: %w", p.t.PID, what, p.mapGone(err))
}

// connect returns a connection to the attach listener, starting it first if
// needed.
func (p *proc) connect(ctx context.Context) (net.Conn, error) {
	t := p.t
	conn, err := p.dial()
	if err == nil || !retryable(err) {
		return conn, p.wrapDial(err)
	}

	if disabled, _ := p.attachDisabled(); disabled {
		return nil, fmt.Errorf("attach pid %d: started with -XX:+DisableAttachMechanism: %w", t.PID, ErrRefused)
	}
	began := time.Now()
	deadline := began.Add(DefaultListenerTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}

	trigger, err := p.createTrigger()
	if err != nil {
		return nil, fmt.Errorf("attach pid %d: %w", t.PID, err)
	}
	defer trigger.remove()

	signaled := false
	why := "listener socket did not appear"
	delay := 10 * time.Millisecond
	for {
		if p.exited() {
			return nil, fmt.Errorf("attach pid %d: exited while waiting for the attach listener: %w", t.PID, ErrNoProcess)
		}
		if !signaled {
			ok, err := p.sigquitSafe()
			if err != nil {
				return nil, fmt.Errorf("attach pid %d: %w", t.PID, p.mapGone(err))
			}
			if ok {
				// pidfd_send_signal cannot hit a recycled pid.
				if err := unix.PidfdSendSignal(p.pidfd, unix.SIGQUIT, nil, 0); err != nil {
					return nil, fmt.Errorf("attach pid %d: send SIGQUIT: %w", t.PID, p.mapGone(err))
				}
				signaled = true
			} else {
				// SIGQUIT's default action would kill the process: the JVM
				// has not installed its handlers yet (still starting).
				why = "SIGQUIT has no handler yet, not signalled"
			}
		}
		wait := min(delay, time.Until(deadline))
		if wait <= 0 {
			return nil, fmt.Errorf("attach pid %d: %s within %v (trigger %s): %w",
				t.PID, why, time.Since(began).Round(time.Millisecond), trigger.name, ErrRefused)
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil, fmt.Errorf("attach pid %d: %s before the context deadline: %w", t.PID, why, ErrRefused)
			}
			return nil, fmt.Errorf("attach pid %d: wait for attach listener: %w", t.PID, ctx.Err())
		case <-time.After(wait):
		}
		delay = min(delay*2, 200*time.Millisecond)

		conn, err := p.dial()
		if err == nil || !retryable(err) {
			return conn, p.wrapDial(err)
		}
	}
}

func (p *proc) wrapDial(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("attach pid %d: connect %s: %w", p.t.PID, p.socketPath(), p.mapGone(err))
}

// socketPath is the socket's path as seen from the host, for messages.
func (p *proc) socketPath() string {
	return filepath.Join(p.t.Root, "tmp", ".java_pid"+strconv.Itoa(p.t.NSPID))
}

// retryable reports dial errors that mean "listener not (yet) up": no socket
// file, or a stale one left by a killed JVM with the same pid.
func retryable(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ECONNREFUSED)
}

// dial connects to /tmp/.java_pid<NSPID> inside the target's root. The path is
// resolved with RESOLVE_IN_ROOT so that symlinks in the container (e.g. /tmp
// -> /var/tmp) resolve inside it, never on the host, and the socket is
// checked (a socket, owned by the JVM's euid or root, as jattach and the JDK
// do) on the same inode that is then connected through /proc/self/fd.
func (p *proc) dial() (net.Conn, error) {
	name := "tmp/.java_pid" + strconv.Itoa(p.t.NSPID)
	fd, err := openInRoot(p.rootfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	// A /tmp on its user's FUSE filesystem could stall the stat and the
	// connect for good.
	if err := safefs.CheckFS(fd, filepath.Join(procfs.Dir(procRoot, p.t.PID), "root", name)); err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := targetmem.Fstat(fd, &st); err != nil {
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return nil, fmt.Errorf("%w: not a socket (mode %o)", ErrUnsafePath, st.Mode)
	}
	if int(st.Uid) != p.t.UID && st.Uid != 0 {
		return nil, fmt.Errorf("%w: socket owned by uid %d, JVM runs as uid %d", ErrUnsafePath, st.Uid, p.t.UID)
	}
	return net.Dial("unix", "/proc/self/fd/"+strconv.Itoa(fd))
}

// openInRoot opens name relative to rootfd as if rootfd were "/", in an
// executor: a lookup on its user's FUSE filesystem may never answer.
func openInRoot(rootfd int, name string, flags int) (int, error) {
	fd, err := targetmem.Openat2(rootfd, name, &unix.OpenHow{
		Flags:   uint64(flags),
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS,
	})
	if errors.Is(err, unix.ENOSYS) {
		// Before Linux 5.6: refuse symlinks anywhere below the root instead.
		return openNoSymlinks(rootfd, name, flags)
	}
	return fd, err
}

func openNoSymlinks(rootfd int, name string, flags int) (int, error) {
	dir, base := filepath.Split(name)
	dirfd := rootfd
	if dir != "" {
		fd, err := unix.Openat(rootfd, filepath.Clean(dir), unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, err
		}
		defer unix.Close(fd)
		dirfd = fd
	}
	return unix.Openat(dirfd, base, flags|unix.O_NOFOLLOW, 0)
}

// sigquitSafe reports whether the process catches or ignores SIGQUIT, so that
// sending it cannot terminate it.
func (p *proc) sigquitSafe() (bool, error) {
	st, err := procfs.ReadStatus(procRoot, p.t.PID)
	if err != nil {
		return false, err
	}
	return st.Handles(syscall.SIGQUIT), nil
}

func (p *proc) attachDisabled() (bool, error) {
	cmdline, err := procfs.Read(procRoot, p.t.PID, "cmdline")
	if err != nil {
		return false, err
	}
	environ, _ := procfs.Read(procRoot, p.t.PID, "environ") // best effort
	return disabledByFlags(cmdline, environ), nil
}
