package control

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func mkfifo(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func next(t *testing.T, c *Channel) Command {
	t.Helper()
	select {
	case cmd, ok := <-c.Commands():
		if !ok {
			t.Fatal("commands closed")
		}
		return cmd
	case <-time.After(5 * time.Second):
		t.Fatal("no command within 5s")
	}
	return Command{}
}

func TestFifoCommandsAndAcks(t *testing.T) {
	ctl, ack := mkfifo(t, "ctl"), mkfifo(t, "ack")
	c, err := Open("fifo:" + ctl + "," + ack)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ackR, err := os.Open(ack) // the channel holds the other end open
	if err != nil {
		t.Fatal(err)
	}
	defer ackR.Close()
	acks := bufio.NewReader(ackR)
	// Two writers one after the other, as two `echo > fifo` would be: the
	// first one's close must not end the channel.
	for _, text := range []string{"disable\n", "enable\n  stop \nbogus\nping\n"} {
		w, err := os.OpenFile(ctl, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		w.WriteString(text)
		w.Close()
	}
	want := []Op{Disable, Enable, Stop, Unknown, Ping}
	for i, op := range want {
		cmd := next(t, c)
		if cmd.Op != op {
			t.Fatalf("command %d: %+v, want op %d", i, cmd, op)
		}
		if err := c.Ack(); err != nil {
			t.Fatal(err)
		}
		line, err := acks.ReadString('\n')
		if err != nil || line != "ack\n" {
			t.Fatalf("ack %d: %q, %v", i, line, err)
		}
	}
}

func TestFDChannelEndsWithItsWriter(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	fd, err := syscall.Dup(int(r.Fd())) // the channel's own, closed by it
	r.Close()
	if err != nil {
		w.Close()
		t.Fatal(err)
	}
	c, err := Open("fd:" + strconv.Itoa(fd))
	if err != nil {
		syscall.Close(fd)
		w.Close()
		t.Fatal(err)
	}
	defer c.Close()
	w.WriteString("disable\n")
	w.Close()
	if cmd := next(t, c); cmd.Op != Disable {
		t.Fatalf("got %+v", cmd)
	}
	select {
	case _, ok := <-c.Commands():
		if ok {
			t.Fatal("a command after the writer ended")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("commands not closed at end of file")
	}
	if err := c.Ack(); err != nil { // no ACK: nothing to do
		t.Fatal(err)
	}
}

func TestBadSpecs(t *testing.T) {
	plain := filepath.Join(t.TempDir(), "plain")
	os.WriteFile(plain, nil, 0o600)
	for spec, want := range map[string]string{
		"":                      "want fifo:CTL",
		"pipe:/tmp/x":           "want fifo:CTL",
		"fifo:":                 "want fifo:CTL",
		"fifo:/nonexistent/ctl": "mkfifo",
		"fifo:" + plain:         "not a named pipe",
		"fd:abc":                "not a file descriptor",
		"fd:987654":             "bad file descriptor",
	} {
		c, err := Open(spec)
		if err == nil {
			c.Close()
			t.Errorf("%q: no error", spec)
			continue
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want it to say %q", spec, err, want)
		}
	}
}
