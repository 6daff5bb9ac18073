package control

import (
	"bytes"
	"errors"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/djx-bpf/djx-bpf/internal/testenv"
)

// A fifo another user planted (in /tmp, say) is refused: its owner could
// switch root's profile off and on, or read its acks.
func TestFifoOfAnotherUserRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give the fifo to another user")
	}
	ctl := mkfifo(t, "ctl")
	if err := os.Chown(ctl, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	var err error
	testenv.Within(t, 5*time.Second, "open", func() {
		var c *Channel
		if c, err = Open("fifo:" + ctl); err == nil {
			c.Close()
		}
	})
	if err == nil || !strings.Contains(err.Error(), "owned by uid 65534") || !strings.Contains(err.Error(), "mkfifo") {
		t.Errorf("another user's fifo: %v", err)
	}
	// The user who ran sudo may own it.
	c, err := Open("fifo:"+ctl, 65534)
	if err != nil {
		t.Fatalf("the invoking user's fifo: %v", err)
	}
	c.Close()

	good, ack := mkfifo(t, "good"), mkfifo(t, "ack")
	if err := os.Chown(ack, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if c, err := Open("fifo:" + good + "," + ack); err == nil {
		c.Close()
		t.Error("another user's ACK fifo accepted")
	}
}

func TestFifoWritableByAllRefused(t *testing.T) {
	ctl := mkfifo(t, "ctl")
	if err := os.Chmod(ctl, 0o666); err != nil {
		t.Fatal(err)
	}
	c, err := Open("fifo:" + ctl)
	if err == nil {
		c.Close()
		t.Fatal("a world-writable fifo accepted")
	}
	if !strings.Contains(err.Error(), "writable by every user") || !strings.Contains(err.Error(), "chmod o-w") {
		t.Errorf("world-writable fifo: %v", err)
	}
}

// A device is not opened at all (opening one can block or act).
func TestFifoDeviceRefused(t *testing.T) {
	testenv.Within(t, 5*time.Second, "open /dev/null", func() {
		if c, err := Open("fifo:" + os.DevNull); err == nil || !strings.Contains(err.Error(), "not a named pipe") {
			if c != nil {
				c.Close()
			}
			t.Errorf("device: %v", err)
		}
	})
}

// A line without end is not kept whole: it is read through in MaxLine
// pieces and reported as TooLong, and the next command still works.
func TestLongLineBounded(t *testing.T) {
	ctl := mkfifo(t, "ctl")
	c, err := Open("fifo:" + ctl)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w, err := os.OpenFile(ctl, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	const size = 32 << 20
	go func() {
		chunk := bytes.Repeat([]byte("x"), 1<<20)
		for range size >> 20 {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
		w.WriteString("\nping\n")
	}()
	if cmd := next(t, c); cmd.Op != TooLong || len(cmd.Text) > 100 {
		t.Fatalf("got op %d, text of %d bytes; want TooLong", cmd.Op, len(cmd.Text))
	}
	if cmd := next(t, c); cmd.Op != Ping {
		t.Fatalf("after the long line: %+v", cmd)
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > size/4 {
		t.Errorf("allocated %d MiB for a %d MiB line", grew>>20, size>>20)
	}
}

// Nobody reads the acks: they are dropped once the pipe is full, and Ack
// never waits for a reader.
func TestAckNeverBlocks(t *testing.T) {
	ctl, ack := mkfifo(t, "ctl"), mkfifo(t, "ack")
	c, err := Open("fifo:" + ctl + "," + ack)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var dropped error
	testenv.Within(t, 10*time.Second, "acks with no reader", func() {
		for range 1 << 15 { // 128 KiB of acks: twice a default pipe
			if err := c.Ack(); err != nil {
				dropped = err
				return
			}
		}
	})
	if !errors.Is(dropped, ErrAckDropped) || !strings.Contains(dropped.Error(), "read the ACK pipe") {
		t.Errorf("full ACK pipe: %v, want ErrAckDropped", dropped)
	}
}

// fd: may pass a blocking pipe: a full one drops the ack too.
func TestAckFDNeverBlocks(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer ctlW.Close()
	cfd, _ := syscall.Dup(int(ctlR.Fd()))
	afd, _ := syscall.Dup(int(w.Fd()))
	ctlR.Close()
	w.Close()
	syscall.SetNonblock(afd, false)
	c, err := Open("fd:" + itoa(cfd) + "," + itoa(afd))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var dropped error
	testenv.Within(t, 10*time.Second, "acks on a blocking fd with no reader", func() {
		for range 1 << 15 {
			if err := c.Ack(); err != nil {
				dropped = err
				return
			}
		}
	})
	if !errors.Is(dropped, ErrAckDropped) {
		t.Errorf("full ACK fd: %v, want ErrAckDropped", dropped)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// FuzzReadLines: any byte stream gives commands of bounded text, one per
// line at most.
func FuzzReadLines(f *testing.F) {
	f.Add([]byte("enable\ndisable\n  stop \nbogus\nping"))
	f.Add(append(bytes.Repeat([]byte("y"), MaxLine+10), "\nping\n"...))
	f.Add([]byte("\n\n\r\n\x00\xff\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		lines := bytes.Count(data, []byte("\n")) + 1
		n := 0
		readLines(bytes.NewReader(data), func(c Command) bool {
			n++
			if len(c.Text) >= MaxLine || c.Text == "" {
				t.Fatalf("command text of %d bytes", len(c.Text))
			}
			if (c.Op == TooLong) != strings.HasPrefix(c.Text, "a line of more than") {
				t.Fatalf("op %d for %q", c.Op, c.Text)
			}
			return true
		})
		if n > lines {
			t.Fatalf("%d commands from %d lines", n, lines)
		}
	})
}

// Close ends the reading of a fifo at once: the fifo is read through the
// poller, not in a blocked read.
func TestCloseEndsFifoRead(t *testing.T) {
	c, err := Open("fifo:" + mkfifo(t, "ctl"))
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	testenv.Within(t, 5*time.Second, "commands after Close", func() {
		for range c.Commands() {
		}
	})
}
