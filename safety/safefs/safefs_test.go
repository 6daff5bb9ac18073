package safefs

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestReadFileRefusesSymlinks(t *testing.T) {
	root := t.TempDir()
	outside := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(outside, []byte("secret"), 0o600)
	os.Mkdir(filepath.Join(root, "tmp"), 0o755)
	os.Symlink(outside, filepath.Join(root, "tmp", "abs"))
	os.Symlink("../tmp", filepath.Join(root, "link"))
	os.WriteFile(filepath.Join(root, "tmp", "ok"), []byte("ok"), 0o644)
	for _, name := range []string{"/tmp/abs", "tmp/abs", "/link/ok", "/../../" + outside} {
		if data, err := ReadFile(root, name, 100); err == nil {
			t.Errorf("ReadFile(%s) = %q, want an error", name, data)
		}
	}
	if data, err := ReadFile(root, "/tmp/ok", 100); err != nil || string(data) != "ok" {
		t.Errorf("ReadFile(/tmp/ok) = %q, %v", data, err)
	}
	// ".." stays inside the root.
	if data, err := ReadFile(root, "/../../tmp/ok", 100); err != nil || string(data) != "ok" {
		t.Errorf("ReadFile(/../../tmp/ok) = %q, %v", data, err)
	}
}

func TestReadFileFIFODoesNotBlock(t *testing.T) {
	root := t.TempDir()
	if err := unix.Mkfifo(filepath.Join(root, "fifo"), 0o666); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := ReadFile(root, "fifo", 100)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrNotRegular) {
			t.Errorf("ReadFile(fifo): %v, want ErrNotRegular", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ReadFile blocked on a FIFO")
	}
	if _, err := ReadFile(root, ".", 100); !errors.Is(err, ErrNotRegular) {
		t.Errorf("ReadFile(dir): %v, want ErrNotRegular", err)
	}
}

func TestReadFileCap(t *testing.T) {
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "f"), bytes.Repeat([]byte("x"), 101), 0o644)
	if _, err := ReadFile(root, "f", 100); !errors.Is(err, ErrTooLarge) {
		t.Errorf("101 bytes with cap 100: %v, want ErrTooLarge", err)
	}
	if data, err := ReadFile(root, "f", 101); err != nil || len(data) != 101 {
		t.Errorf("101 bytes with cap 101: %d, %v", len(data), err)
	}
}

func TestLimitReader(t *testing.T) {
	data, err := io.ReadAll(LimitReader(strings.NewReader("abcdef"), 6))
	if err != nil || string(data) != "abcdef" {
		t.Errorf("at the cap: %q, %v", data, err)
	}
	data, err = io.ReadAll(LimitReader(strings.NewReader("abcdefg"), 6))
	if !errors.Is(err, ErrTooLarge) || len(data) > 6 {
		t.Errorf("over the cap: %q, %v, want ErrTooLarge and at most 6 bytes", data, err)
	}
}

func TestWalkFallback(t *testing.T) {
	root := t.TempDir()
	os.Mkdir(filepath.Join(root, "d"), 0o755)
	os.WriteFile(filepath.Join(root, "d", "f"), []byte("f"), 0o644)
	os.Symlink("d", filepath.Join(root, "s"))
	rootfd, err := OpenRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(rootfd)
	fd, err := walk(rootfd, "/d/f", unix.O_RDONLY|unix.O_NOFOLLOW)
	if err != nil {
		t.Fatalf("walk /d/f: %v", err)
	}
	unix.Close(fd)
	for _, name := range []string{"s/f", "d/../d/f"} {
		if fd, err := walk(rootfd, name, unix.O_RDONLY|unix.O_NOFOLLOW); err == nil {
			unix.Close(fd)
			t.Errorf("walk %s succeeded, want an error", name)
		}
	}
}

// TestOpenNeverOpensASpecialFile: a FIFO (or a device) is refused before
// it is opened for reading, which a writer waiting on the FIFO would see.
func TestOpenNeverOpensASpecialFile(t *testing.T) {
	root := t.TempDir()
	fifo := filepath.Join(root, "fifo")
	if err := unix.Mkfifo(fifo, 0o666); err != nil {
		t.Fatal(err)
	}
	opened := make(chan struct{})
	go func() {
		// Blocks until someone opens the FIFO for reading.
		if w, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			w.Close()
		}
		close(opened)
	}()
	time.Sleep(50 * time.Millisecond)
	if _, err := ReadFile(root, "fifo", 100); !errors.Is(err, ErrNotRegular) {
		t.Errorf("ReadFile(fifo): %v, want ErrNotRegular", err)
	}
	select {
	case <-opened:
		t.Error("the FIFO was opened for reading")
	case <-time.After(200 * time.Millisecond):
	}
	// Release the writer.
	if r, err := os.OpenFile(fifo, os.O_RDONLY|unix.O_NONBLOCK, 0); err == nil {
		<-opened
		r.Close()
	}
}
