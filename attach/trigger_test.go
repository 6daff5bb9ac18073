package attach

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/djx-bpf/djx-bpf/procfs"
)

func dirOf(t *testing.T, path string) triggerDir {
	return triggerDir{path: path, open: func() (int, error) {
		return unix.Open(path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	}}
}

func TestTriggerCreatesAndRemoves(t *testing.T) {
	dir := t.TempDir()
	uid, gid := os.Geteuid(), os.Getegid()
	tr, err := createTrigger([]triggerDir{dirOf(t, dir)}, ".attach_pid42", uid, gid)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(filepath.Join(dir, ".attach_pid42"))
	if err != nil {
		t.Fatal(err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
		t.Errorf("trigger mode %v, want regular 0600", fi.Mode())
	}
	tr.remove()
	if _, err := os.Lstat(filepath.Join(dir, ".attach_pid42")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("trigger not removed: %v", err)
	}
}

func TestTriggerRefusesSymlink(t *testing.T) {
	dir, other, fallback := t.TempDir(), t.TempDir(), t.TempDir()
	victim := filepath.Join(other, "victim")
	if err := os.Symlink(victim, filepath.Join(dir, ".attach_pid42")); err != nil {
		t.Fatal(err)
	}
	uid, gid := os.Geteuid(), os.Getegid()

	// Alone, the planted directory is refused.
	if _, err := createTrigger([]triggerDir{dirOf(t, dir)}, ".attach_pid42", uid, gid); !errors.Is(err, ErrUnsafePath) {
		t.Errorf("createTrigger over a symlink: err = %v, want ErrUnsafePath", err)
	}
	if _, err := os.Lstat(victim); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("symlink target was created: %v", err)
	}
	// With a fallback, the next directory is used and the symlink survives.
	tr, err := createTrigger([]triggerDir{dirOf(t, dir), dirOf(t, fallback)}, ".attach_pid42", uid, gid)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.remove()
	if tr.name != filepath.Join(fallback, ".attach_pid42") {
		t.Errorf("trigger at %s, want in %s", tr.name, fallback)
	}
	if fi, err := os.Lstat(filepath.Join(dir, ".attach_pid42")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("planted symlink touched: %v %v", fi, err)
	}
}

func TestTriggerExistingFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, ".attach_pid42")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tr, err := createTrigger([]triggerDir{dirOf(t, dir)}, ".attach_pid42", os.Geteuid(), os.Getegid())
	if err != nil {
		t.Fatal(err)
	}
	tr.remove()
	// Not ours: another attacher may be waiting on it.
	if _, err := os.Lstat(path); err != nil {
		t.Errorf("pre-existing trigger removed: %v", err)
	}
}

func TestTriggerAllDirsFail(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	_, err := createTrigger([]triggerDir{dirOf(t, missing)}, ".attach_pid42", os.Geteuid(), os.Getegid())
	if err == nil || !errors.Is(err, unix.ENOENT) {
		t.Errorf("err = %v, want ENOENT", err)
	}
}

// TestTriggerNotTheTargetUsers: as root, the trigger in the target's cwd
// (which may be /etc) is root's, 0600, not a file its user may write; one
// for another user (a JVM whose user namespace does not map root) is made
// only in a sticky /tmp of root's.
func TestTriggerNotTheTargetUsers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	cwd := t.TempDir()
	p := &proc{t: &Target{Process: procfs.Process{PID: os.Getpid(), NSPID: 42, UID: 65534, GID: 65534}}}
	dirs := []triggerDir{dirOf(t, cwd)}
	uid, gid := p.t.UID, p.t.GID
	if procfs.RootMapped(procRoot, os.Getpid()) {
		uid, gid = 0, 0
	}
	tr, err := createTrigger(dirs, ".attach_pid42", uid, gid)
	if err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	unix.Lstat(filepath.Join(cwd, ".attach_pid42"), &st)
	if st.Uid != 0 || st.Mode&0o777 != 0o600 {
		t.Errorf("trigger in cwd owned by %d mode %o, want root's 0600", st.Uid, st.Mode&0o777)
	}
	tr.remove()

	// For uid 65534 itself: never in cwd, and not in a /tmp that is not sticky.
	tmp := t.TempDir()
	unix.Chmod(tmp, 0o777)
	_, err = createTrigger([]triggerDir{dirOf(t, cwd), {path: tmp, tmp: true, open: dirOf(t, tmp).open}}, ".attach_pid42", 65534, 65534)
	if !errors.Is(err, ErrUnsafePath) {
		t.Errorf("trigger for uid 65534 with no sticky /tmp: %v, want ErrUnsafePath", err)
	}
	unix.Chmod(tmp, 0o1777)
	tr, err = createTrigger([]triggerDir{dirOf(t, cwd), {path: tmp, tmp: true, open: dirOf(t, tmp).open}}, ".attach_pid42", 65534, 65534)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.remove()
	if tr.name != filepath.Join(tmp, ".attach_pid42") {
		t.Errorf("trigger for uid 65534 at %s, want in the sticky /tmp", tr.name)
	}
}
