// Package control reads commands that switch a running profile's sampling
// on and off, in the form perf record's --control takes: fifo:CTL[,ACK]
// (named pipes, created beforehand with mkfifo) or fd:CTL[,ACK] (file
// descriptors the caller passed). Commands are lines: enable, disable,
// ping and stop. Each command, once carried out, is answered with "ack\n"
// on ACK, so that a script knows when the switch took effect.
package control

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
)

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
}

// Open opens the channel spec names (fifo:CTL[,ACK] or fd:CTL[,ACK]) and
// starts reading commands.
func Open(spec string) (*Channel, error) {
	kind, rest, ok := strings.Cut(spec, ":")
	ctlName, ackName, _ := strings.Cut(rest, ",")
	if !ok || ctlName == "" || (kind != "fifo" && kind != "fd") {
		return nil, fmt.Errorf("control %q: want fifo:CTL[,ACK] or fd:CTL[,ACK]", spec)
	}
	open := openFifo
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
// other end, and the reader sees no end of file between two writers.
func openFifo(path string) (*os.File, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("control fifo: %w (create it with mkfifo)", err)
	}
	if fi.Mode()&os.ModeNamedPipe == 0 {
		return nil, fmt.Errorf("control fifo %s: not a named pipe (create it with mkfifo)", path)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("control fifo: %w", err)
	}
	return f, nil
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
	r := bufio.NewReader(c.ctl)
	for {
		line, err := r.ReadString('\n')
		if line = strings.TrimSpace(line); line != "" {
			select {
			case c.cmds <- parse(line):
			case <-c.done:
				return
			}
		}
		if err != nil {
			return // closed, or the writer of an fd went away
		}
	}
}

// Commands delivers the commands as they come; it is closed when the
// channel is closed or its writer ends (fd).
func (c *Channel) Commands() <-chan Command { return c.cmds }

// Ack answers the last command; without an ACK channel it does nothing.
func (c *Channel) Ack() error {
	if c.ack == nil {
		return nil
	}
	if _, err := io.WriteString(c.ack, "ack\n"); err != nil {
		return fmt.Errorf("control ack: %w", err)
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
