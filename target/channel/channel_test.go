package channel

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
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

// The library stays at one path per /tmp and build, so that a JVM's dlopen
// hands back the copy it loaded at the first attach: the same path for
// every channel, another for another library, and kept after Close.
func TestLibraryOnePath(t *testing.T) {
	root := newRoot(t)
	spec := Spec{Root: root, UID: os.Getuid(), GID: os.Getgid(), Library: []byte("ELF one")}
	var paths []string
	for range 3 {
		c, err := Create(spec)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.LibraryShared(); err != nil {
			t.Errorf("library not shared: %v", err)
		}
		paths = append(paths, c.LibraryPath())
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if paths[0] != paths[1] || paths[1] != paths[2] || !strings.HasPrefix(paths[0], "/tmp/"+libDirPrefix) {
		t.Errorf("library paths %q, want one in /tmp/%s*", paths, libDirPrefix)
	}
	if lib, err := os.ReadFile(filepath.Join(root, paths[0])); err != nil || string(lib) != "ELF one" {
		t.Errorf("library after Close: %q, %v", lib, err)
	}
	var st unix.Stat_t
	unix.Lstat(filepath.Join(root, filepath.Dir(paths[0])), &st)
	if int(st.Uid) != os.Geteuid() || st.Mode&0o7777 != dirMode {
		t.Errorf("library directory owned by %d, mode %o", st.Uid, st.Mode&0o7777)
	}
	// A damaged library is written again, in place.
	os.WriteFile(filepath.Join(root, paths[0]), []byte("ELF on"), 0o644)
	c, err := Create(spec)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if lib, _ := os.ReadFile(filepath.Join(root, paths[0])); string(lib) != "ELF one" || c.LibraryPath() != paths[0] {
		t.Errorf("damaged library: %q at %s", lib, c.LibraryPath())
	}
	// Another build, another path.
	c, err = Create(Spec{Root: root, UID: os.Getuid(), GID: os.Getgid(), Library: []byte("ELF two")})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.LibraryPath() == paths[0] {
		t.Error("another library at the same path")
	}
}

// A name taken first (a symlink, or a directory of another user's) is not
// used: the channel gets a copy of its own, as before.
func TestLibraryPathTaken(t *testing.T) {
	lib := []byte("ELF taken")
	for _, plant := range []func(p string) error{
		func(p string) error { return os.Symlink(os.TempDir(), p) },
		func(p string) error {
			if err := os.Mkdir(p, 0o777); err != nil {
				return err
			}
			return os.Chown(p, 65534, 65534)
		},
	} {
		root := newRoot(t)
		planted := filepath.Join(root, "tmp", libDirName(lib))
		if err := plant(planted); err != nil {
			t.Fatal(err)
		}
		var st unix.Stat_t
		if unix.Lstat(planted, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR && int(st.Uid) == os.Geteuid() {
			t.Skip("needs root to give the directory to another user")
		}
		c, err := Create(Spec{Root: root, UID: os.Getuid(), GID: os.Getgid(), Library: lib})
		if err != nil {
			t.Fatal(err)
		}
		if c.LibraryShared() == nil {
			t.Errorf("planted %s: library shared at %s", planted, c.LibraryPath())
		}
		if got, err := os.ReadFile(filepath.Join(root, c.LibraryPath())); err != nil || string(got) != string(lib) ||
			!strings.HasPrefix(c.LibraryPath(), "/tmp/djx-bpf-") || filepath.Dir(filepath.Join(root, c.LibraryPath())) != c.HostDir() {
			t.Errorf("planted %s: library %s: %q, %v", planted, c.LibraryPath(), got, err)
		}
		c.Close()
		if _, err := os.Lstat(filepath.Join(c.HostDir(), libName)); !os.IsNotExist(err) {
			t.Errorf("the channel's copy left behind: %v", err)
		}
	}
}

// In a library directory of ours, a file at the library's name that is not
// a private regular file of ours with the library's bytes (a symlink to
// the same bytes, another user's copy, a copy others may write) is
// replaced, never followed or kept; the directory's mode is put back.
func TestLibraryFileReplaced(t *testing.T) {
	lib := []byte("ELF replaced")
	for _, tc := range []struct {
		name  string
		plant func(t *testing.T, p string)
	}{
		{"symlink", func(t *testing.T, p string) {
			other := filepath.Join(t.TempDir(), "other.so")
			if err := os.WriteFile(other, lib, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(other, p); err != nil {
				t.Fatal(err)
			}
		}},
		{"writable", func(t *testing.T, p string) {
			if err := os.WriteFile(p, lib, 0o644); err != nil {
				t.Fatal(err)
			}
			unix.Chmod(p, 0o666)
		}},
		{"another user's", func(t *testing.T, p string) {
			if os.Geteuid() != 0 {
				t.Skip("needs root to give the file to another user")
			}
			if err := os.WriteFile(p, lib, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(p, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := newRoot(t)
			dir := filepath.Join(root, "tmp", libDirName(lib))
			if err := os.Mkdir(dir, 0o777); err != nil {
				t.Fatal(err)
			}
			unix.Chmod(dir, 0o777)
			tc.plant(t, filepath.Join(dir, libName))
			c, err := Create(Spec{Root: root, UID: os.Getuid(), GID: os.Getgid(), Library: lib})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if err := c.LibraryShared(); err != nil {
				t.Fatalf("library not shared: %v", err)
			}
			var st unix.Stat_t
			if err := unix.Lstat(filepath.Join(dir, libName), &st); err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(filepath.Join(dir, libName))
			if st.Mode&unix.S_IFMT != unix.S_IFREG || int(st.Uid) != os.Geteuid() || st.Mode&0o7777 != 0o644 || string(got) != string(lib) {
				t.Errorf("library: mode %o, uid %d, %q; want a regular file of ours, 0644, the library", st.Mode, st.Uid, got)
			}
			if unix.Stat(dir, &st) != nil || st.Mode&0o7777 != dirMode {
				t.Errorf("library directory mode %o, want %o", st.Mode&0o7777, dirMode)
			}
		})
	}
}
