package attach

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/djx-bpf/djx-bpf/safety/procfs"
)

// fakeListener plays a hostile JVM's attach listener at
// <root>/tmp/.java_pid<nspid>; serve answers each connection.
func fakeListener(t *testing.T, serve func(c net.Conn)) *Target {
	t.Helper()
	root := t.TempDir()
	os.Mkdir(filepath.Join(root, "tmp"), 0o755)
	nspid := 4000000 + os.Getpid()%100000
	l, err := net.Listen("unix", filepath.Join(root, "tmp", ".java_pid"+strconv.Itoa(nspid)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				serve(c)
			}()
		}
	}()
	return &Target{Process: procfs.Process{PID: os.Getpid(), NSPID: nspid, UID: os.Geteuid(), GID: os.Getegid()}, Root: root}
}

// TestExecReplyBomb: a target answering with an endless reply must not make
// root allocate without bound (it took 829 MiB before the cap).
func TestExecReplyBomb(t *testing.T) {
	tg := fakeListener(t, func(c net.Conn) {
		buf := make([]byte, 1<<20)
		c.Read(buf)
		c.Write([]byte("0\n"))
		for i := range buf {
			buf[i] = 'x'
		}
		for {
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	})
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _, err := tg.Exec(ctx, "jcmd", "VM.version")
	if !errors.Is(err, ErrProtocol) {
		t.Errorf("endless reply: %v, want ErrProtocol", err)
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 4*MaxReply {
		t.Errorf("allocated %d MiB for one reply", grew>>20)
	}
}

// A caller's lower cap holds: a reply one byte past it is refused, one
// at it is read.
func TestExecReplyCallerCap(t *testing.T) {
	const limit = 64 << 10
	for _, n := range []int{limit, limit + 1} {
		tg := fakeListener(t, func(c net.Conn) {
			c.Read(make([]byte, 1<<10))
			c.Write([]byte("0\n"))
			c.Write(make([]byte, n-2))
		})
		tg.MaxReply = limit
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, out, err := tg.Exec(ctx, "jcmd", "VM.info")
		cancel()
		if n > limit && !errors.Is(err, ErrProtocol) || n <= limit && (err != nil || len(out) != n-2) {
			t.Errorf("reply of %d bytes under a cap of %d: %d bytes, %v", n, limit, len(out), err)
		}
	}
}

// TestExecReplyStall: a target that never answers is given up on even
// when the caller set no deadline.
func TestExecReplyStall(t *testing.T) {
	old := replyTimeout
	replyTimeout = 300 * time.Millisecond
	defer func() { replyTimeout = old }()
	tg := fakeListener(t, func(c net.Conn) { io.Copy(io.Discard, c) })
	done := make(chan error, 1)
	go func() {
		_, _, err := tg.Exec(context.Background(), "jcmd", "VM.version")
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("stalled reply: %v, want a deadline error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Exec waited on a stalled target with no deadline")
	}
}
