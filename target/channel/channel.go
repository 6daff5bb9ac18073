// Package channel sets up the private link between the loader and one agent:
// a directory in the target's /tmp, owned by root (mode 0711: the target can
// enter it but neither list nor change it), holding the unix socket the
// agent connects to (the only file handed to the target's user) and a
// marker naming the djx-bpf process that made it, so that a later run can
// remove it if that process was killed. The peer's credentials are checked
// on accept. The agent library sits beside it in a directory of its own
// that stays, so that each JVM loads it once (library.go).
package channel

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/djx-bpf/djx-bpf/hotspot/targetmem"
	"github.com/djx-bpf/djx-bpf/safety/safefs"
	"golang.org/x/sys/unix"
)

// ErrWrongPeer is returned when a process other than the target connects.
var ErrWrongPeer = errors.New("unexpected peer on agent socket")

// ErrUnsafeTmp is a target /tmp that its user could redirect: not a
// sticky, world-writable directory owned by root.
var ErrUnsafeTmp = errors.New("the target's /tmp is not a sticky, world-writable directory owned by root; start the application with its /tmp so, or with `djx-bpf profile -- java ...`")

const (
	libName    = "libdjxagent.so"
	sockName   = "agent.sock"
	markerName = "owner"
	dirPrefix  = "djx-bpf-"
	dirMode    = 0o711
)

// Spec says where and for whom the channel is made.
type Spec struct {
	// Root is the target's root directory as seen from here: "/" for a
	// process in our mount namespace, "/proc/PID/root" otherwise.
	Root string
	// UID and GID own the directory so that the target can enter it.
	UID, GID int
	// Library is the agent shared object to place in the directory.
	Library []byte
}

// Channel is a private directory with the agent library and a listening socket.
type Channel struct {
	tmpFD     int    // the target's /tmp
	name      string // our directory in it
	dirFD     int
	hostDir   string
	targetDir string
	libPath   string // the library as the target sees it
	libShared error  // why the library is this channel's own copy; nil: shared
	ln        *net.UnixListener
}

// Create makes the directory <Root>/tmp/djx-bpf-<random>, writes the agent
// library and listens on the socket inside. Nothing follows symlinks: the
// directory is created fresh with mkdirat and the files with O_EXCL|O_NOFOLLOW,
// so a hostile /tmp cannot redirect our writes.
func Create(spec Spec) (c *Channel, err error) {
	tmp := filepath.Join(spec.Root, "tmp")
	// O_RDONLY, not O_PATH: Close removes the directory through this fd,
	// which stays valid after the target (and its /proc/PID/root) is gone.
	tmpFD, err := openTmp(spec.Root)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", tmp, err)
	}
	CleanStale(tmpFD)
	var name string
	for try := 0; ; try++ {
		var rnd [8]byte
		if _, err := rand.Read(rnd[:]); err != nil {
			return nil, fmt.Errorf("random directory name: %w", err)
		}
		name = "djx-bpf-" + hex.EncodeToString(rnd[:])
		err := unix.Mkdirat(tmpFD, name, dirMode)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EEXIST) || try > 10 {
			unix.Close(tmpFD)
			return nil, fmt.Errorf("create directory in %s: %w", tmp, err)
		}
	}
	c = &Channel{tmpFD: tmpFD, name: name, dirFD: -1, hostDir: filepath.Join(tmp, name), targetDir: "/tmp/" + name}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	c.dirFD, err = unix.Openat(tmpFD, name, unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_RDONLY, 0)
	if err != nil {
		return c, fmt.Errorf("open %s: %w", c.hostDir, err)
	}
	// Root's, not the target's: its user cannot plant a file that would
	// keep Close from removing it.
	if err := unix.Fchmod(c.dirFD, dirMode); err != nil { // umask may have cut bits
		return c, fmt.Errorf("chmod %s: %w", c.hostDir, err)
	}
	if err := c.writeFile(markerName, []byte(marker(os.Getpid()))); err != nil {
		return c, err
	}
	// One library per /tmp and agent build, loaded once per JVM; a copy
	// of its own when that place is taken (library.go).
	if lib, err := placeLibrary(tmpFD, spec.Library); err == nil {
		c.libPath = "/tmp/" + lib + "/" + libName
	} else {
		c.libShared = err
		if err := c.writeFile(libName, spec.Library); err != nil {
			return c, err
		}
		c.libPath = c.targetDir + "/" + libName
	}
	// Bind through our directory fd so the socket lands in exactly the
	// directory we created, whatever happens to the path meanwhile.
	bindPath := "/proc/self/fd/" + strconv.Itoa(c.dirFD) + "/" + sockName
	c.ln, err = net.ListenUnix("unix", &net.UnixAddr{Name: bindPath, Net: "unix"})
	if err != nil {
		return c, fmt.Errorf("listen on %s: %w", filepath.Join(c.hostDir, sockName), err)
	}
	c.ln.SetUnlinkOnClose(false) // the bind path is not the real one; Close removes it
	// Through an O_PATH fd checked to be the socket: chmod and chown by name
	// would follow whatever the name points to by then.
	sfd, err := unix.Openat(c.dirFD, sockName, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return c, fmt.Errorf("open socket: %w", err)
	}
	defer unix.Close(sfd)
	var st unix.Stat_t
	if err := unix.Fstat(sfd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return c, fmt.Errorf("socket %s: not a socket (mode %o, %v)", sockName, st.Mode, err)
	}
	if err := unix.Chmod("/proc/self/fd/"+strconv.Itoa(sfd), 0o600); err != nil {
		return c, fmt.Errorf("chmod socket: %w", err)
	}
	if err := unix.Fchownat(sfd, "", spec.UID, spec.GID, unix.AT_EMPTY_PATH); err != nil {
		return c, fmt.Errorf("chown socket: %w", err)
	}
	return c, nil
}

// openTmp opens <root>/tmp with no symlink on the way and checks that the
// target's user cannot redirect it: a sticky, world-writable directory
// owned by root (or by us, when not root), on a filesystem that cannot
// stall what we do in it (a FUSE /tmp in the target's user namespace
// could: safefs.CheckFS). The open and the stat run in executors.
func openTmp(root string) (int, error) {
	rootfd, err := safefs.OpenRoot(root)
	if err != nil {
		return -1, err
	}
	defer unix.Close(rootfd)
	fd, err := safefs.OpenAt(rootfd, "tmp", unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return -1, err
	}
	if err := safefs.CheckFS(fd, filepath.Join(root, "tmp")); err != nil {
		unix.Close(fd) // a directory: its release is not waited for
		return -1, err
	}
	var st unix.Stat_t
	if err := targetmem.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if (st.Uid != 0 && int(st.Uid) != os.Geteuid()) || st.Mode&unix.S_ISVTX == 0 || st.Mode&0o002 == 0 {
		unix.Close(fd)
		return -1, fmt.Errorf("%w (owner uid %d, mode %o)", ErrUnsafeTmp, st.Uid, st.Mode&0o7777)
	}
	return fd, nil
}

func (c *Channel) writeFile(name string, data []byte) error {
	fd, err := unix.Openat(c.dirFD, name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return fmt.Errorf("create %s in %s: %w", name, c.hostDir, err)
	}
	f := os.NewFile(uintptr(fd), filepath.Join(c.hostDir, name))
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", f.Name(), err)
	}
	if err := unix.Fchmod(fd, 0o644); err != nil {
		f.Close()
		return fmt.Errorf("chmod %s: %w", f.Name(), err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", f.Name(), err)
	}
	return nil
}

// LibraryPath is the agent library's path as the target sees it.
func (c *Channel) LibraryPath() string { return c.libPath }

// LibraryShared says why the library is a copy of this channel's own, which
// the JVM keeps loaded after the profile; nil when it is the one the JVM
// loads once for every profile.
func (c *Channel) LibraryShared() error { return c.libShared }

// SocketPath is the socket's path as the target sees it.
func (c *Channel) SocketPath() string { return c.targetDir + "/" + sockName }

// HostDir is the directory's path as seen from here.
func (c *Channel) HostDir() string { return c.hostDir }

// Accept waits for the agent of process pid (as seen from our pid namespace)
// to connect. Connections from any other process are closed and reported
// through ErrWrongPeer only if ctx ends before the right one arrives.
func (c *Channel) Accept(ctx context.Context, pid int) (*net.UnixConn, error) {
	var wrong error
	for {
		// Short slices so that a cancelled ctx ends the wait promptly.
		dl := time.Now().Add(100 * time.Millisecond)
		if d, ok := ctx.Deadline(); ok && d.Before(dl) {
			dl = d
		}
		c.ln.SetDeadline(dl)
		conn, err := c.ln.AcceptUnix()
		if err != nil {
			if ctx.Err() != nil {
				if wrong != nil {
					return nil, fmt.Errorf("wait for agent of pid %d: %w", pid, wrong)
				}
				return nil, fmt.Errorf("wait for agent of pid %d: %w", pid, ctx.Err())
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return nil, fmt.Errorf("accept agent connection: %w", err)
		}
		got, err := peerPID(conn)
		if err != nil {
			conn.Close()
			return nil, err
		}
		if got != pid {
			conn.Close()
			wrong = fmt.Errorf("%w: pid %d connected, want %d", ErrWrongPeer, got, pid)
			continue
		}
		return conn, nil
	}
}

func peerPID(conn *net.UnixConn) (int, error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return 0, fmt.Errorf("peer credentials: %w", err)
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, fmt.Errorf("peer credentials: %w", err)
	}
	if cerr != nil {
		return 0, fmt.Errorf("peer credentials: %w", cerr)
	}
	return int(cred.Pid), nil
}

// Close stops listening and removes the directory and its files. A library
// already loaded by the JVM stays mapped there; unlinking it is harmless.
func (c *Channel) Close() error {
	var errs []error
	if c.ln != nil {
		errs = append(errs, c.ln.Close())
	}
	if c.dirFD >= 0 {
		for _, n := range []string{sockName, libName, markerName} {
			if err := unix.Unlinkat(c.dirFD, n, 0); err != nil && !errors.Is(err, unix.ENOENT) {
				errs = append(errs, fmt.Errorf("remove %s: %w", n, err))
			}
		}
		unix.Close(c.dirFD)
		c.dirFD = -1
		if err := unix.Unlinkat(c.tmpFD, c.name, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("remove %s: %w", c.hostDir, err))
		}
	}
	if c.tmpFD >= 0 {
		unix.Close(c.tmpFD)
		c.tmpFD = -1
	}
	return errors.Join(errs...)
}
