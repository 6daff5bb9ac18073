package attach

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/djx-bpf/djx-bpf/hotspot/targetmem"
	"github.com/djx-bpf/djx-bpf/safety/procfs"
	"github.com/djx-bpf/djx-bpf/safety/safefs"
)

// triggerDir is a directory where HotSpot looks for .attach_pid<pid>: its
// working directory first, then /tmp (attachListener_linux.cpp).
type triggerDir struct {
	path string              // as seen from the host, for messages
	open func() (int, error) // O_PATH directory fd
	// tmp is a sticky /tmp, where a file may be handed to the target's user.
	tmp bool
	// mustOwn: the directory is used only if ownerUID owns it. The target
	// picks its working directory: any it can enter (/etc), where root is
	// not to create files.
	mustOwn  bool
	ownerUID int
}

func (p *proc) triggerDirs() []triggerDir {
	cwd := filepath.Join(procfs.Dir(procRoot, p.t.PID), "cwd")
	var dirs []triggerDir
	if p.t.UID != 0 {
		// A root JVM's directory may be any system directory: it gets
		// the trigger in /tmp, where HotSpot looks next.
		dirs = append(dirs, triggerDir{path: cwd, mustOwn: true, ownerUID: p.t.UID, open: func() (int, error) {
			return targetmem.Openat(unix.AT_FDCWD, cwd, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC)
		}})
	}
	return append(dirs,
		triggerDir{path: filepath.Join(p.t.Root, "tmp"), tmp: true, open: func() (int, error) {
			return openInRoot(p.rootfd, "tmp", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC)
		}},
	)
}

// trigger is a created (or found) .attach_pid file.
type trigger struct {
	name  string // host path, for messages
	dirfd int
	base  string
	owned bool // created by us, so ours to remove
	// dev and ino are the file created: another user may have replaced it
	// (its own directory, or a sticky /tmp once the file was its own).
	dev, ino uint64
}

func (tr *trigger) remove() {
	var st unix.Stat_t
	if tr.owned && unix.Fstatat(tr.dirfd, tr.base, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Dev == tr.dev && st.Ino == tr.ino {
		unix.Unlinkat(tr.dirfd, tr.base, 0)
	}
	unix.Close(tr.dirfd)
}

func (p *proc) createTrigger() (*trigger, error) {
	uid, gid := p.t.UID, p.t.GID
	if os.Geteuid() == 0 && procfs.RootMapped(procRoot, p.t.PID) {
		uid, gid = 0, 0 // HotSpot accepts root's triggers: nothing for its user to write
	}
	return createTrigger(p.triggerDirs(), ".attach_pid"+strconv.Itoa(p.t.NSPID), uid, gid)
}

// createTrigger creates base, owned by uid:gid, in the first directory of
// dirs where that is safe, and falls back to the next one otherwise. A
// directory that must be the target user's is used only if it is. A
// trigger owned by anyone but root is made only there or in a sticky,
// world-writable /tmp: elsewhere it would be a file its user may write.
func createTrigger(dirs []triggerDir, base string, uid, gid int) (*trigger, error) {
	var errs []error
	for _, d := range dirs {
		if uid != 0 && uid != os.Geteuid() && !d.tmp && !d.mustOwn {
			errs = append(errs, fmt.Errorf("%s: %w: a trigger for uid %d is made in /tmp only", d.path, ErrUnsafePath, uid))
			continue
		}
		dirfd, err := d.open()
		if err != nil {
			errs = append(errs, fmt.Errorf("open %s: %w", d.path, err))
			continue
		}
		// On its user's FUSE filesystem, a stat or a create could wait for good.
		if err := safefs.CheckFS(dirfd, d.path); err != nil {
			unix.Close(dirfd)
			errs = append(errs, err)
			continue
		}
		if d.mustOwn {
			var st unix.Stat_t
			if err := unix.Fstat(dirfd, &st); err != nil || int(st.Uid) != d.ownerUID {
				unix.Close(dirfd)
				errs = append(errs, fmt.Errorf("%s: %w: owned by uid %d, not the JVM's uid %d", d.path, ErrUnsafePath, st.Uid, d.ownerUID))
				continue
			}
		}
		if d.tmp && uid != 0 && uid != os.Geteuid() {
			var st unix.Stat_t
			if err := unix.Fstat(dirfd, &st); err != nil || st.Mode&unix.S_ISVTX == 0 || st.Mode&0o002 == 0 || st.Uid != 0 {
				unix.Close(dirfd)
				errs = append(errs, fmt.Errorf("%s: %w: not a sticky, world-writable directory of root's (mode %o, uid %d)", d.path, ErrUnsafePath, st.Mode&0o7777, st.Uid))
				continue
			}
		}
		st, owned, err := createTriggerAt(dirfd, base, uid, gid)
		if err != nil {
			unix.Close(dirfd)
			errs = append(errs, fmt.Errorf("%s: %w", filepath.Join(d.path, base), err))
			continue
		}
		return &trigger{name: filepath.Join(d.path, base), dirfd: dirfd, base: base, owned: owned, dev: st.Dev, ino: st.Ino}, nil
	}
	return nil, fmt.Errorf("create attach trigger: %w", errors.Join(errs...))
}

// createTriggerAt creates base in dirfd, owned by uid:gid, mode 0600.
// O_EXCL|O_NOFOLLOW never follows a planted symlink (in /tmp anyone can plant
// one and make root create or chown a file elsewhere), and ownership is set
// through the fd, not the path. An existing regular file that the JVM would
// accept (owned by uid or root) is used as is and left in place: another
// attacher may be using it. owned reports whether we created the file, and
// st describes the file created.
func createTriggerAt(dirfd int, base string, uid, gid int) (st unix.Stat_t, owned bool, err error) {
	fd, err := unix.Openat(dirfd, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if errors.Is(err, unix.EEXIST) {
		if err := unix.Fstatat(dirfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return st, false, err
		}
		if st.Mode&unix.S_IFMT != unix.S_IFREG {
			return st, false, fmt.Errorf("%w: exists and is not a regular file (mode %o)", ErrUnsafePath, st.Mode)
		}
		if int(st.Uid) != uid && st.Uid != 0 {
			return st, false, fmt.Errorf("%w: exists, owned by uid %d, JVM runs as uid %d", ErrUnsafePath, st.Uid, uid)
		}
		return st, false, nil
	}
	if err != nil {
		return st, false, err
	}
	defer unix.Close(fd)
	fail := func(err error) (unix.Stat_t, bool, error) {
		unix.Unlinkat(dirfd, base, 0)
		return st, false, err
	}
	if err := unix.Fchown(fd, uid, gid); err != nil {
		return fail(fmt.Errorf("chown %d:%d: %w", uid, gid, err))
	}
	if err := unix.Fchmod(fd, 0o600); err != nil { // undo the umask
		return fail(fmt.Errorf("chmod: %w", err))
	}
	// Some filesystems (NFS root squash, FUSE) override the owner; the JVM
	// ignores a trigger owned by someone else, so try the next directory.
	if err := unix.Fstat(fd, &st); err != nil {
		return fail(err)
	}
	if int(st.Uid) != uid && st.Uid != 0 {
		return fail(fmt.Errorf("filesystem made it owned by uid %d, not %d", st.Uid, uid))
	}
	return st, true, nil
}
