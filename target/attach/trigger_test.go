package attach

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/djx-bpf/djx-bpf/safety/procfs"
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

// TestTriggerNotTheTargetUsers: as root, a trigger in the target's cwd is
// made only if the directory is its user's, and then is root's, 0600, not
// a file its user may write; one for another user (a JVM whose user
// namespace does not map root) is made only in a sticky /tmp of root's.
func TestTriggerNotTheTargetUsers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	cwd := t.TempDir()
	cwdDir := triggerDir{path: cwd, mustOwn: true, ownerUID: 65534, open: dirOf(t, cwd).open}
	if _, err := createTrigger([]triggerDir{cwdDir}, ".attach_pid42", 0, 0); !errors.Is(err, ErrUnsafePath) {
		t.Errorf("trigger in root's directory for uid 65534's JVM: %v, want ErrUnsafePath", err)
	}
	if err := os.Chown(cwd, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	tr, err := createTrigger([]triggerDir{cwdDir}, ".attach_pid42", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	unix.Lstat(filepath.Join(cwd, ".attach_pid42"), &st)
	if st.Uid != 0 || st.Mode&0o777 != 0o600 {
		t.Errorf("trigger in cwd owned by %d mode %o, want root's 0600", st.Uid, st.Mode&0o777)
	}
	tr.remove()
	os.Chown(cwd, 0, 0)

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

// TestTriggerNotInRootOwnedCwd: a JVM of nobody's whose working directory
// is root's (/etc, say) does not make root create its trigger there: it
// goes to the JVM's /tmp, where HotSpot looks next. In a directory of its
// own it may, and a root JVM's always goes to /tmp.
func TestTriggerNotInRootOwnedCwd(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run the fake target as nobody")
	}
	rootDir := t.TempDir() // root's, as /etc is
	ownDir := t.TempDir()
	for _, d := range []string{filepath.Dir(rootDir), rootDir, filepath.Dir(ownDir), ownDir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(ownDir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		uid   int
		cwd   string
		inTmp bool
	}{
		{"nobody in root's directory", 65534, rootDir, true},
		{"nobody in its own directory", 65534, ownDir, false},
		{"root", 0, rootDir, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command("sleep", "60")
			cmd.Dir = c.cwd
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(c.uid), Gid: uint32(c.uid)}}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() {
				cmd.Process.Kill()
				cmd.Wait()
			}()
			pid := cmd.Process.Pid
			tg := &Target{Process: procfs.Process{PID: pid, NSPID: pid, UID: c.uid, GID: c.uid},
				Root: filepath.Join(procfs.Dir(procRoot, pid), "root")}
			p, err := tg.open()
			if err != nil {
				t.Fatal(err)
			}
			defer p.close()
			tr, err := p.createTrigger()
			if err != nil {
				t.Fatal(err)
			}
			base := ".attach_pid" + strconv.Itoa(pid)
			_, inCwd := os.Lstat(filepath.Join(c.cwd, base))
			tr.remove()
			if c.inTmp {
				if inCwd == nil {
					t.Errorf("root created %s in the JVM's working directory %s", base, c.cwd)
				}
				if want := filepath.Join(tg.Root, "tmp", base); tr.name != want {
					t.Errorf("trigger at %s, want %s", tr.name, want)
				}
			} else if inCwd != nil || !strings.HasSuffix(tr.name, "/cwd/"+base) {
				t.Errorf("trigger at %s (%v), want in the JVM's own directory", tr.name, inCwd)
			}
			if _, err := os.Lstat(filepath.Join(c.cwd, base)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("trigger left behind in %s: %v", c.cwd, err)
			}
			if _, err := os.Lstat(filepath.Join("/tmp", base)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("trigger left behind in /tmp: %v", err)
			}
		})
	}
}

// TestTriggerRemovesOnlyItsOwn: a trigger the target's user replaced (its
// own directory, or a sticky /tmp once the file was handed to it) is not
// root's to remove.
func TestTriggerRemovesOnlyItsOwn(t *testing.T) {
	dir := t.TempDir()
	tr, err := createTrigger([]triggerDir{dirOf(t, dir)}, ".attach_pid42", os.Geteuid(), os.Getegid())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, ".attach_pid42")
	if err := os.Rename(path, path+".old"); err != nil { // kept: its inode is not reused
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("someone else's"), 0o600); err != nil {
		t.Fatal(err)
	}
	tr.remove()
	if _, err := os.Lstat(path); err != nil {
		t.Errorf("replaced trigger removed: %v", err)
	}
}
