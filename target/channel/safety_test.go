package channel

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCreateRefusesUnsafeTmp: a target that binds a directory of root's
// (mode 0755, say) or any non-sticky one over its /tmp gets no channel
// there: root would otherwise leave a directory in it.
func TestCreateRefusesUnsafeTmp(t *testing.T) {
	for _, mode := range []uint32{0o755, 0o777, 0o1755} {
		root := t.TempDir()
		tmp := filepath.Join(root, "tmp")
		os.Mkdir(tmp, 0o700)
		unix.Chmod(tmp, mode)
		c, err := Create(Spec{Root: root, UID: os.Getuid(), GID: os.Getgid(), Library: []byte("x")})
		if err == nil {
			c.Close()
		}
		if !errors.Is(err, ErrUnsafeTmp) {
			t.Errorf("/tmp mode %o: Create = %v, want ErrUnsafeTmp", mode, err)
		}
		if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
			t.Errorf("/tmp mode %o: left %v", mode, ents)
		}
	}
}

// TestChannelTargetCannotPlant: the target's user can use the socket and
// read the library, but cannot create anything in the directory (which
// would keep root from removing it) nor replace the socket.
func TestChannelTargetCannotPlant(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to act as another user")
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("no setpriv")
	}
	root := newRoot(t)
	os.Chmod(root, 0o755) // t.TempDir's are 0700
	os.Chmod(filepath.Dir(root), 0o755)
	const uid = 65534
	c, err := Create(Spec{Root: root, UID: uid, GID: uid, Library: []byte("ELF")})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var st unix.Stat_t
	unix.Lstat(c.HostDir(), &st)
	if st.Uid != 0 || st.Mode&0o7777 != 0o711 {
		t.Errorf("directory owned by %d, mode %o; want root's, 0711", st.Uid, st.Mode&0o7777)
	}
	unix.Lstat(filepath.Join(c.HostDir(), sockName), &st)
	if st.Uid != uid || st.Mode&0o777 != 0o600 {
		t.Errorf("socket owned by %d, mode %o; want %d, 0600", st.Uid, st.Mode&0o777, uid)
	}
	as := func(args ...string) error {
		cmd := exec.Command("setpriv", append([]string{"--reuid", strconv.Itoa(uid), "--regid", strconv.Itoa(uid), "--clear-groups", "--"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	}
	if err := as("cat", filepath.Join(root, c.LibraryPath())); err != nil {
		t.Errorf("target cannot read the library: %v", err)
	}
	if err := as("sh", "-c", "echo x >> "+filepath.Join(root, c.LibraryPath())); err == nil {
		t.Error("the target's user changed the library")
	}
	if err := as("touch", filepath.Join(root, filepath.Dir(c.LibraryPath()), "planted")); err == nil {
		t.Error("the target's user planted a file beside the library")
	}
	if err := as("touch", filepath.Join(c.HostDir(), "planted")); err == nil {
		t.Error("the target's user planted a file in the channel directory")
	}
	if err := as("mv", filepath.Join(c.HostDir(), sockName), filepath.Join(c.HostDir(), "x")); err == nil {
		t.Error("the target's user moved the socket")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(c.HostDir()); !os.IsNotExist(err) {
		t.Errorf("directory left behind: %v", err)
	}
}

// TestCleanStale: a directory left by a djx-bpf killed with SIGKILL is
// removed by the next Create; anything not provably ours stays.
func TestCleanStale(t *testing.T) {
	root := newRoot(t)
	tmp := filepath.Join(root, "tmp")
	mk := func(name string, mode os.FileMode, owner string, extra ...string) string {
		d := filepath.Join(tmp, name)
		os.Mkdir(d, 0o700)
		os.Chmod(d, mode)
		if owner != "" {
			os.WriteFile(filepath.Join(d, markerName), []byte(owner), 0o644)
		}
		os.WriteFile(filepath.Join(d, libName), []byte("ELF"), 0o644)
		for _, e := range extra {
			os.WriteFile(filepath.Join(d, e), nil, 0o644)
		}
		return d
	}
	// A pid that cannot run: above pid_max's largest value.
	dead := "djx-bpf 4194305 12345\n"
	stale := mk("djx-bpf-0123456789abcdef", 0o711, dead)
	live := mk("djx-bpf-1123456789abcdef", 0o711, marker(os.Getpid()))
	reused := mk("djx-bpf-2123456789abcdef", 0o711, fmt.Sprintf("djx-bpf %d 1\n", os.Getpid()))
	foreign := []string{
		mk("djx-bpf-3123456789abcdef", 0o711, dead, "someone-elses"),
		mk("djx-bpf-4123456789abcdef", 0o700, dead),
		mk("djx-bpf-5123456789abcdef", 0o711, ""),
		mk("djx-bpf-zz23456789abcdef", 0o711, dead),
		mk("djx-bpf-0123", 0o711, dead),
	}
	c, err := Create(Spec{Root: root, UID: os.Getuid(), GID: os.Getgid(), Library: []byte("x")})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, d := range []string{stale} {
		if _, err := os.Lstat(d); !os.IsNotExist(err) {
			t.Errorf("stale %s not removed: %v", d, err)
		}
	}
	// reused: our pid, another start time: a dead process's pid reused.
	if _, err := os.Lstat(reused); !os.IsNotExist(err) {
		t.Errorf("stale %s (pid reused) not removed: %v", reused, err)
	}
	for _, d := range append(foreign, live, c.HostDir()) {
		if _, err := os.Lstat(d); err != nil {
			t.Errorf("%s removed: %v", d, err)
		}
	}
}
