// Package control reads commands that switch a running profile's sampling
// on and off, in the form perf record's --control takes: fifo:CTL[,ACK]
// (named pipes, created beforehand with mkfifo) or fd:CTL[,ACK] (file
// descriptors the caller passed). Commands are lines: enable, disable,
// ping and stop. Each command, once carried out, is answered with "ack\n"
// on ACK, so that a script knows when the switch took effect.
//
// djx-bpf runs as root: a fifo is accepted only if it is owned by root or
// the invoking user and not writable by every user, lines are capped at
// MaxLine bytes, and an ack that cannot be written at once is dropped
// rather than waited for.
package control

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// MaxLine caps a command line, newline included; a longer line is read
// to its end and delivered as TooLong.
const MaxLine = 4096

// ErrAckDropped says an ack was not written: its pipe was full or had no
// reader left.
var ErrAckDropped = errors.New("ack dropped")

// Command is one control command.
type Command struct {
	Op   Op
	Text string // the line as given, for an unknown command
}

// Op is what a command asks for.
type Op int

// Ops.
const (
	Unknown Op = iota
	Enable     // sampling on
	Disable    // sampling off
	Ping       // only the ack
	Stop       // end the profile and report
	TooLong    // a line of more than MaxLine bytes, ignored
)

func parse(line string) Command {
	t := strings.TrimSpace(line)
	switch t {
	case "enable":
		return Command{Op: Enable, Text: t}
	case "disable":
		return Command{Op: Disable, Text: t}
	case "ping":
		return Command{Op: Ping, Text: t}
	case "stop":
		return Command{Op: Stop, Text: t}
	}
	return Command{Op: Unknown, Text: t}
}

// Channel is an open control channel.
type Channel struct {
	ctl, ack *os.File
	cmds     chan Command
	done     chan struct{}
	dropped  atomic.Uint64 // acks not written
}

// Open opens the channel spec names (fifo:CTL[,ACK] or fd:CTL[,ACK]) and
// starts reading commands. A fifo must be owned by root, by djx-bpf's own
// user or by one of users (the user who ran sudo), and not be writable by
// others: anyone else could switch the profile or read its acks.
func Open(spec string, users ...int) (*Channel, error) {
	kind, rest, ok := strings.Cut(spec, ":")
	ctlName, ackName, _ := strings.Cut(rest, ",")
	if !ok || ctlName == "" || (kind != "fifo" && kind != "fd") {
		return nil, fmt.Errorf("control %q: want fifo:CTL[,ACK] or fd:CTL[,ACK]", spec)
	}
	owners := append([]int{0, os.Geteuid()}, users...)
	open := func(path string) (*os.File, error) { return openFifo(path, owners) }
	if kind == "fd" {
		open = openFD
	}
	c := &Channel{cmds: make(chan Command, 16), done: make(chan struct{})}
	var err error
	if c.ctl, err = open(ctlName); err != nil {
		return nil, err
	}
	if ackName != "" {
		if c.ack, err = open(ackName); err != nil {
			c.ctl.Close()
			return nil, err
		}
	}
	go c.read()
	return c, nil
}

// openFifo opens a named pipe read-write: the open does not wait for the
// other end, and the reader sees no end of file between two writers. The
// path is first opened with O_PATH, which opens no device and waits for
// nothing, and checked; the pipe itself is then opened through that fd,
// so the inode checked is the inode used. It is non-blocking: reads wait
// in the poller (Close ends them) and an ack never waits.
func openFifo(path string, owners []int) (*os.File, error) {
	pfd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("control fifo: %w (create it with mkfifo)", &os.PathError{Op: "open", Path: path, Err: err})
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		return nil, fmt.Errorf("control fifo %s: %w", path, err)
	}
	if err := checkFifo(path, &st, owners); err != nil {
		return nil, err
	}
	fd, err := unix.Open("/proc/self/fd/"+strconv.Itoa(pfd), unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("control fifo %s: %w", path, err)
	}
	return os.NewFile(uintptr(fd), path), nil
}

// checkFifo refuses what is not a named pipe, or is one that a user other
// than root and the owners could have planted or can write to.
func checkFifo(path string, st *unix.Stat_t, owners []int) error {
	if st.Mode&unix.S_IFMT != unix.S_IFIFO {
		return fmt.Errorf("control fifo %s: not a named pipe (create it with mkfifo)", path)
	}
	if !slices.Contains(owners, int(st.Uid)) {
		return fmt.Errorf("control fifo %s: owned by uid %d, not by root or you: remove it and create your own with mkfifo", path, st.Uid)
	}
	if st.Mode&unix.S_IWOTH != 0 {
		return fmt.Errorf("control fifo %s: writable by every user (mode %04o): chmod o-w %s", path, st.Mode&0o7777, path)
	}
	return nil
}

func openFD(s string) (*os.File, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return nil, fmt.Errorf("control fd %q: not a file descriptor number", s)
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(n, &st); err != nil {
		return nil, fmt.Errorf("control fd %d: %w", n, err)
	}
	return os.NewFile(uintptr(n), "control-fd-"+s), nil
}

func (c *Channel) read() {
	defer close(c.cmds)
	readLines(c.ctl, func(cmd Command) bool {
		select {
		case c.cmds <- cmd:
			return true
		case <-c.done:
			return false
		}
	})
}

// readLines reads commands from r until it ends or emit returns false. A
// line of more than MaxLine bytes is read to its end without being kept
// and emitted as TooLong.
func readLines(r io.Reader, emit func(Command) bool) {
	br := bufio.NewReaderSize(r, MaxLine)
	long := false
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = true
			continue
		}
		var cmd Command
		if long {
			cmd, long = Command{Op: TooLong, Text: fmt.Sprintf("a line of more than %d bytes", MaxLine)}, false
		} else if t := strings.TrimSpace(string(line)); t != "" {
			cmd = parse(t)
		}
		if cmd.Text != "" && !emit(cmd) {
			return
		}
		if err != nil {
			return // closed, or the writer of an fd went away
		}
	}
}

// Commands delivers the commands as they come; it is closed when the
// channel is closed or its writer ends (fd).
func (c *Channel) Commands() <-chan Command { return c.cmds }

// Ack answers the last command; without an ACK channel it does nothing. It
// never waits: when the pipe is full (nobody reads the acks) or has no
// reader, the ack is dropped with ErrAckDropped.
func (c *Channel) Ack() error {
	if c.ack == nil {
		return nil
	}
	rc, err := c.ack.SyscallConn()
	if err != nil {
		return fmt.Errorf("control ack: %w", err)
	}
	var werr error
	err = rc.Write(func(fd uintptr) bool {
		werr = writeNow(int(fd), []byte("ack\n"))
		return true // done, never wait for the poller
	})
	if err == nil {
		err = werr
	}
	if err != nil {
		n := c.dropped.Add(1)
		return fmt.Errorf("control ack: %w (%d so far): %w; read the ACK pipe, or give no ACK", ErrAckDropped, n, err)
	}
	return nil
}

// writeNow writes b whole if that can be done at once: a descriptor passed
// with fd: may be blocking, so it is polled first; b is shorter than
// PIPE_BUF, so a pipe with room takes it in one write.
func writeNow(fd int, b []byte) error {
	p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
	n, err := unix.Poll(p, 0)
	if err != nil {
		return err
	}
	if n == 0 || p[0].Revents&unix.POLLOUT == 0 || p[0].Revents&(unix.POLLERR|unix.POLLHUP) != 0 {
		return errors.New("the pipe is full or has no reader")
	}
	k, err := unix.Write(fd, b)
	if err != nil {
		return err
	}
	if k != len(b) {
		return errors.New("short write")
	}
	return nil
}

// Close stops reading and closes both ends. A blocking fd given with fd:
// is only let go at its next line or end of file.
func (c *Channel) Close() error {
	close(c.done)
	errs := []error{c.ctl.Close()}
	if c.ack != nil {
		errs = append(errs, c.ack.Close())
	}
	return errors.Join(errs...)
}
