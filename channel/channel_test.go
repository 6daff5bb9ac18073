package channel

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func newRoot(t *testing.T) string {
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "tmp"), 0o1777); err != nil {
		t.Fatal(err)
	}
	unix.Chmod(filepath.Join(root, "tmp"), 0o1777) // past the umask; os.Chmod drops 0o1000
	return root
}

func TestCreateAcceptClose(t *testing.T) {
	root := newRoot(t)
	c, err := Create(Spec{Root: root, UID: os.Getuid(), GID: os.Getgid(), Library: []byte("ELF")})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st, err := os.Stat(c.HostDir())
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o711 {
		t.Errorf("directory mode %v, want 0711", st.Mode().Perm())
	}
	lib, err := os.ReadFile(filepath.Join(root, c.LibraryPath()))
	if err != nil || string(lib) != "ELF" {
		t.Fatalf("library: %q, %v", lib, err)
	}
	go func() {
		conn, err := net.Dial("unix", filepath.Join(root, c.SocketPath()))
		if err == nil {
			conn.Write([]byte("x"))
			conn.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := c.Accept(ctx, os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(c.HostDir()); !os.IsNotExist(err) {
		t.Errorf("directory left behind: %v", err)
	}
}

func TestAcceptRejectsOtherPID(t *testing.T) {
	root := newRoot(t)
	c, err := Create(Spec{Root: root, UID: os.Getuid(), GID: os.Getgid(), Library: []byte("x")})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go func() {
		conn, err := net.Dial("unix", filepath.Join(root, c.SocketPath()))
		if err == nil {
			defer conn.Close()
			time.Sleep(time.Second)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	// Our own pid connects, but we wait for pid 1: must be refused.
	if _, err := c.Accept(ctx, 1); !errors.Is(err, ErrWrongPeer) {
		t.Fatalf("Accept = %v, want ErrWrongPeer", err)
	}
}

func TestCreateRefusesSymlinkedTmp(t *testing.T) {
	root := t.TempDir()
	if err := os.Symlink(t.TempDir(), filepath.Join(root, "tmp")); err != nil {
		t.Fatal(err)
	}
	if _, err := Create(Spec{Root: root, UID: os.Getuid(), GID: os.Getgid()}); err == nil {
		t.Fatal("Create followed a symlinked tmp")
	}
}
