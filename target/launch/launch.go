// Package launch runs an application djx-bpf launches: as another user
// when asked, in a session of its own with no terminal, its standard
// streams relayed through pipes, the terminal's signals forwarded to it, and
// its exit code given back as a shell reports it.
package launch

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// RunAs is the user a launched application runs as: under sudo, the
// invoking user rather than root.
type RunAs struct {
	UID, GID uint32
	Groups   []uint32 // supplementary groups
	Name     string   // for messages
}

// apply makes cmd run as r (nil: as djx-bpf itself).
func (r *RunAs) apply(cmd *exec.Cmd) {
	if r == nil {
		return
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: r.UID, Gid: r.GID, Groups: r.Groups}
}

// Owner is who the launched process runs as (nil: djx-bpf's effective
// user), for whom its agent channel is made.
func (r *RunAs) Owner() (uid, gid int) {
	if r == nil {
		return os.Geteuid(), os.Getegid()
	}
	return int(r.UID), int(r.GID)
}

// outputGrace bounds the wait for a launched child's output once it has
// exited: a daemon it started may hold its stdout open for good.
var outputGrace = 2 * time.Second

// Child is a launched application. It runs in a session of its own, with
// pipes for its standard streams and no controlling terminal, so that a
// child run as another user cannot reach root's terminal (TIOCSTI would
// push input into root's shell). Pipes rather than a pty: a profiled JVM
// needs no terminal, and a pty would mean raw mode on root's terminal and
// relaying its size. Output and input are relayed, and the signals the
// terminal sends its foreground group, which the child left, are forwarded.
type Child struct {
	cmd  *exec.Cmd
	pid  int
	done chan struct{} // closed once the child is reaped and its output copied
	err  error         // from Wait, set before done is closed

	mu     sync.Mutex
	exited bool // once set, the pid (and group id) may be reused: no signals
}

// forwarded are the signals relayed to the child's process group, those a
// terminal sends with Ctrl-C, Ctrl-Z and hangup, and kill's default. One
// that djx-bpf inherited as ignored (nohup) stays ignored.
func forwarded() []os.Signal {
	var sigs []os.Signal
	for _, s := range []syscall.Signal{unix.SIGINT, unix.SIGTERM, unix.SIGHUP, unix.SIGTSTP, unix.SIGCONT} {
		if !signal.Ignored(s) {
			sigs = append(sigs, s)
		}
	}
	return sigs
}

// Start starts path with args as runAs (nil: as djx-bpf) in a new
// session, relaying stdin to it and its output to stdout and stderr (nil:
// /dev/null).
func Start(path string, args []string, runAs *RunAs, stdin io.Reader, stdout, stderr io.Writer) (*Child, error) {
	cmd := &exec.Cmd{Path: path, Args: args, SysProcAttr: &syscall.SysProcAttr{Setsid: true}}
	runAs.apply(cmd)
	p, err := openPipes(cmd, stdin, stdout, stderr)
	if err != nil {
		return nil, err
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwarded()...) // before Start: none is missed
	err = cmd.Start()
	closeFiles(p.theirs)
	if err != nil {
		signal.Stop(sigs)
		closeFiles(p.ours)
		p.closeDups()
		return nil, err
	}
	c := &Child{cmd: cmd, pid: cmd.Process.Pid, done: make(chan struct{})}
	stopSignals := make(chan struct{})
	go c.forward(sigs, stopSignals)
	stopInput := make(chan struct{})
	if p.stdinW != nil {
		go relayInput(stdin, p.stdinW, stopInput)
	}
	copied := p.copyOutput()
	go func() {
		c.waitExit()
		signal.Stop(sigs)
		close(stopSignals)
		c.err = cmd.Wait()
		close(stopInput)
		p.drain(copied)
		p.closeDups()
		close(c.done)
	}()
	return c, nil
}

// waitExit waits for the child to exit without reaping it: until it is
// reaped, its pid and its process group's id cannot name another process,
// so signals may go to them until exited is set.
func (c *Child) waitExit() {
	var info unix.Siginfo
	for unix.Waitid(unix.P_PID, c.pid, &info, unix.WEXITED|unix.WNOWAIT, nil) == unix.EINTR {
	}
	c.mu.Lock()
	c.exited = true
	c.mu.Unlock()
}

// childPipes are the pipes of a child's standard streams: the child's
// ends, ours, and where its output is copied.
type childPipes struct {
	theirs, ours []*os.File
	outs         []outputRelay
	stdinW       *os.File // nil: no input is relayed
}

// outputRelay copies the child's output from a pipe to a writer.
type outputRelay struct {
	from *os.File
	to   io.Writer
}

// openPipes gives cmd a pipe for each stream that is set: stdin relayed
// to it, its output to stdout and stderr.
func openPipes(cmd *exec.Cmd, stdin io.Reader, stdout, stderr io.Writer) (*childPipes, error) {
	p := &childPipes{}
	if err := p.open(cmd, stdin, stdout, stderr); err != nil {
		closeFiles(p.theirs)
		closeFiles(p.ours)
		p.closeDups()
		return nil, err
	}
	return p, nil
}

func (p *childPipes) open(cmd *exec.Cmd, stdin io.Reader, stdout, stderr io.Writer) error {
	if stdin != nil {
		r, w, err := os.Pipe()
		if err != nil {
			return err
		}
		p.theirs, p.ours = append(p.theirs, r), append(p.ours, w)
		cmd.Stdin, p.stdinW = r, w
	}
	if stdout != nil {
		w, err := p.pipeTo(stdout)
		if err != nil {
			return err
		}
		cmd.Stdout = w
	}
	if stderr != nil && sameDestination(stdout, stderr) {
		// One pipe keeps the order in which the child wrote both.
		cmd.Stderr = cmd.Stdout
	} else if stderr != nil {
		w, err := p.pipeTo(stderr)
		if err != nil {
			return err
		}
		cmd.Stderr = w
	}
	return nil
}

// pipeTo is a new pipe whose read end is copied to dst; it returns the
// write end, the child's.
func (p *childPipes) pipeTo(dst io.Writer) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	p.theirs, p.ours = append(p.theirs, w), append(p.ours, r)
	to, err := writerFor(dst)
	if err != nil {
		return nil, err
	}
	p.outs = append(p.outs, outputRelay{r, to})
	return w, nil
}

// copyOutput copies each output pipe until the child and its children
// close it.
func (p *childPipes) copyOutput() *sync.WaitGroup {
	var copied sync.WaitGroup
	for _, o := range p.outs {
		copied.Add(1)
		go func() {
			defer copied.Done()
			// On a write error the child is cut off and sees EPIPE, as it
			// would have writing to our stdout itself.
			io.Copy(struct{ io.Writer }{o.to}, struct{ io.Reader }{o.from})
			o.from.Close()
		}()
	}
	return &copied
}

// drain waits for the output to be copied, at most outputGrace: a daemon
// the child started may hold its stdout open for good.
func (p *childPipes) drain(copied *sync.WaitGroup) {
	drained := make(chan struct{})
	go func() { copied.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(outputGrace):
		for _, o := range p.outs {
			o.from.Close()
		}
	}
}

// closeDups closes the duplicates of djx-bpf's files the output went to.
func (p *childPipes) closeDups() {
	for _, o := range p.outs {
		if d, ok := o.to.(dupWriter); ok {
			d.Close()
		}
	}
}

func closeFiles(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

// forward relays the signals djx-bpf receives to the child's process group
// until it exits. Ctrl-Z stops the child, then djx-bpf, as the terminal
// would have; the shell's SIGCONT on fg is forwarded like the rest. The
// group of a session leader with no terminal is orphaned, where SIGTSTP does
// nothing, hence SIGSTOP.
func (c *Child) forward(sigs <-chan os.Signal, stop <-chan struct{}) {
	for {
		var sig syscall.Signal
		select {
		case <-stop:
			return
		case s := <-sigs:
			sig = s.(syscall.Signal)
		}
		to := sig
		if sig == unix.SIGTSTP {
			to = unix.SIGSTOP
		}
		c.mu.Lock()
		if !c.exited {
			unix.Kill(-c.pid, to)
		}
		c.mu.Unlock()
		if sig == unix.SIGTSTP {
			unix.Kill(os.Getpid(), unix.SIGSTOP)
		}
	}
}

// PID is the child's process id.
func (c *Child) PID() int { return c.pid }

// Done is closed once the child has exited and its output is copied.
func (c *Child) Done() <-chan struct{} { return c.done }

// ExitCode waits for the child and gives its exit status as a shell reports
// it: 128+N when signal N killed it.
func (c *Child) ExitCode() (int, error) {
	<-c.done
	ps := c.cmd.ProcessState
	if ps == nil {
		return -1, c.err
	}
	var ee *exec.ExitError
	if c.err != nil && !errors.As(c.err, &ee) {
		return -1, c.err
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), nil
	}
	return ps.ExitCode(), nil
}

// dupWriter writes to a duplicate of one of djx-bpf's files: on a broken
// pipe, a write to fd 1 or 2 itself would kill djx-bpf with SIGPIPE before
// it could write its report.
type dupWriter struct{ *os.File }

// writerFor is what the child's output is copied to: a duplicate of w when
// it is a file.
func writerFor(w io.Writer) (io.Writer, error) {
	f, ok := w.(*os.File)
	if !ok {
		return w, nil
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	nfd := -1
	var derr error
	if err := rc.Control(func(fd uintptr) { nfd, derr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 3) }); err != nil {
		return nil, err
	}
	if derr != nil {
		return nil, derr
	}
	return dupWriter{os.NewFile(uintptr(nfd), f.Name())}, nil
}

// sameDestination reports whether a and b write to the same place: the same
// writer, or files on the same inode (a terminal, or 2>&1).
func sameDestination(a, b io.Writer) (same bool) {
	fa, oka := a.(*os.File)
	fb, okb := b.(*os.File)
	if oka && okb {
		sa, ea := fa.Stat()
		sb, eb := fb.Stat()
		return ea == nil && eb == nil && os.SameFile(sa, sb)
	}
	defer func() {
		if recover() != nil { // writers of an uncomparable type
			same = false
		}
	}()
	return a == b
}

// relayInput copies src to the child's stdin w until src ends or stop is
// closed. A file is polled, so that the relay ends with the child instead
// of waiting in a read (and taking a line typed for the shell); a terminal
// is read only while djx-bpf is in its foreground, where the child would
// have read it: a background read would stop djx-bpf with SIGTTIN.
func relayInput(src io.Reader, w *os.File, stop <-chan struct{}) {
	var once sync.Once
	closeW := func() { once.Do(func() { w.Close() }) }
	go func() { <-stop; closeW() }() // also ends a write the child does not read
	f, ok := src.(*os.File)
	if !ok {
		io.Copy(w, src)
		closeW()
		return
	}
	defer closeW()
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	var fd int
	rc.Control(func(u uintptr) { fd = int(u) })
	_, terr := unix.IoctlGetTermios(fd, unix.TCGETS)
	tty := terr == nil
	buf := make([]byte, 32<<10)
	for {
		select {
		case <-stop:
			return
		default:
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 200)
		if err == unix.EINTR || n == 0 {
			continue
		}
		if err != nil {
			return
		}
		if tty {
			if pgrp, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP); err != nil || pgrp != unix.Getpgrp() {
				time.Sleep(200 * time.Millisecond)
				continue
			}
		}
		n, err = unix.Read(fd, buf)
		if err == unix.EINTR || err == unix.EAGAIN {
			continue
		}
		if n <= 0 || err != nil {
			return
		}
		if _, err := w.Write(buf[:n]); err != nil {
			return
		}
	}
}
