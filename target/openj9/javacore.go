package openj9

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"path/filepath"

	"github.com/djx-bpf/djx-bpf/safety/safefs"
	"golang.org/x/sys/unix"
)

// MaxJavacore caps the javacore read back from a target (one of a JVM with
// thousands of threads is a few MiB).
const MaxJavacore = 64 << 20

// ErrJavacorePath means the target reported a javacore somewhere else than
// where it was asked to write it; the file is neither read nor removed.
var ErrJavacorePath = errors.New("target reported a javacore path it was not asked for")

// FetchJavacore asks the target for a javacore in its /tmp under a random
// name, reads it through root (the target's root as seen from here, e.g.
// /proc/PID/root) and removes it. The target controls its reply and its
// filesystem, so only that one name is ever read or removed: the reported
// path must be the requested one, every component resolves inside root with
// no symlink, the file must be a regular one owned by uid (the target's
// user) and at most MaxJavacore bytes, and it is removed through the /tmp
// directory fd it was read from, only while that name still is the inode
// read.
func (c *Conn) FetchJavacore(ctx context.Context, root string, uid int) ([]byte, error) {
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return nil, fmt.Errorf("openj9 %s: javacore name: %w", c.vm.ID, err)
	}
	name := "djx-bpf-javacore-" + hex.EncodeToString(rnd[:]) + ".txt"
	asked := "/tmp/" + name
	written, err := c.DumpJavacore(ctx, asked)
	if err != nil {
		return nil, err
	}
	if path.Clean(written) != asked {
		return nil, fmt.Errorf("openj9 %s: javacore: %w: asked for %s, got %q", c.vm.ID, ErrJavacorePath, asked, written)
	}
	return readAndRemove(root, "tmp", name, uid)
}

// readAndRemove reads dir/name below root (see FetchJavacore) and unlinks
// it through dir's fd.
func readAndRemove(root, dir, name string, uid int) ([]byte, error) {
	display := filepath.Join(root, dir, name)
	rootfd, err := safefs.OpenRoot(root)
	if err != nil {
		return nil, err
	}
	defer unix.Close(rootfd)
	dirfd, err := safefs.OpenAt(rootfd, dir, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", filepath.Join(root, dir), err)
	}
	defer unix.Close(dirfd)
	f, err := safefs.OpenFileAt(dirfd, name, display)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, fmt.Errorf("stat %s: %w", display, err)
	}
	if int(st.Uid) != uid {
		return nil, fmt.Errorf("%s: owned by uid %d, not the target's %d: not read", display, st.Uid, uid)
	}
	defer func() {
		var now unix.Stat_t
		if unix.Fstatat(dirfd, name, &now, unix.AT_SYMLINK_NOFOLLOW) == nil && now.Dev == st.Dev && now.Ino == st.Ino {
			unix.Unlinkat(dirfd, name, 0)
		}
	}()
	data, err := safefs.ReadAll(f, MaxJavacore)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", display, err)
	}
	return data, nil
}

// readAdvert reads an attachInfo file: a regular file of at most 1 MiB, no
// symlink below dir.
func readAdvert(dir, name string) ([]byte, error) {
	f, err := safefs.Open(dir, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return safefs.ReadAll(f, 1<<20)
}
