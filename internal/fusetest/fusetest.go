// Package fusetest serves, for tests, a FUSE filesystem whose reads never
// answer: the way a target's user can stall whatever reads their file
// (fusermount is setuid on many hosts). It speaks the kernel's /dev/fuse
// protocol itself, so no FUSE library or fusermount is needed; mounting
// needs root.
//
// The server runs in a helper process (the test binary run again, see
// Main), never in the test's own: a task of the test stuck on the
// filesystem could otherwise keep the test from exiting, and the server
// with it. Killing the helper closes /dev/fuse, which aborts the
// connection and ends every read waiting on it.
package fusetest

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// FileName is the one file in the filesystem's root.
const FileName = "f"

// FileSize is its size.
const FileSize = 1 << 20

const (
	envDir    = "DJX_FUSETEST_DIR"
	envSilent = "DJX_FUSETEST_SILENT_GETATTR"
)

// Main runs the helper when the test binary was started as one, and then
// exits; call it first in TestMain.
func Main() {
	dir := os.Getenv(envDir)
	if dir == "" {
		return
	}
	if err := helper(dir, os.Getenv(envSilent) != ""); err != nil {
		fmt.Fprintln(os.Stderr, "fusetest:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// Helper is a running helper process: it serves the filesystem mounted
// at Dir (in its own mount namespace) and maps File, untouched, at Addr.
type Helper struct {
	Pid  int
	Dir  string // mount point, in the helper's mount namespace
	Addr uint64 // where the helper maps the file
	conn int    // FUSE connection: its device minor
	cmd  *exec.Cmd
	done chan struct{}
}

// Start starts the helper, or skips the test where FUSE cannot be
// mounted. Cleanup kills it, which ends any read stuck on its file.
func Start(t testing.TB) *Helper { return StartWith(t, Options{}) }

// Options vary the helper.
type Options struct {
	// Dir is the mount point (an existing directory); "" for a new
	// temporary one.
	Dir string
	// SilentGetattr leaves GETATTR unanswered too: a stat of the
	// filesystem's root, which the kernel has no attributes of, waits.
	SilentGetattr bool
}

// StartWith is Start with options.
func StartWith(t testing.TB, o Options) *Helper {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting FUSE needs root")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("no /dev/fuse: %v", err)
	}
	dir := o.Dir
	if dir == "" {
		dir = t.TempDir()
	}
	cmd := exec.Command("/proc/self/exe")
	cmd.Env = append(os.Environ(), envDir+"="+dir)
	if o.SilentGetattr {
		cmd.Env = append(cmd.Env, envSilent+"=1")
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS, Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &Helper{Pid: cmd.Process.Pid, Dir: dir, cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(h.done) }()
	t.Cleanup(h.Kill)
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(out).ReadString('\n')
		line <- s
	}()
	select {
	case s := <-line:
		if _, err := fmt.Sscanf(s, "%x %d", &h.Addr, &h.conn); err != nil {
			t.Fatalf("fusetest helper said %q: %v", s, err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("fusetest helper did not start in 20 s")
	}
	return h
}

// Kill kills the helper and waits for it. Should its exit wait on its
// own filesystem, the connection is aborted through fusectl.
func (h *Helper) Kill() {
	h.cmd.Process.Kill()
	select {
	case <-h.done:
		return
	case <-time.After(3 * time.Second):
	}
	abort(h.conn)
	<-h.done
}

// abort aborts FUSE connection conn, mounting fusectl if needed.
func abort(conn int) {
	dir := "/sys/fs/fuse/connections"
	if _, err := os.Stat(dir + "/" + strconv.Itoa(conn)); err != nil {
		tmp, err := os.MkdirTemp("", "fusectl")
		if err != nil {
			return
		}
		defer os.Remove(tmp)
		if unix.Mount("fusectl", tmp, "fusectl", 0, "") != nil {
			return
		}
		defer unix.Unmount(tmp, unix.MNT_DETACH)
		dir = tmp
	}
	os.WriteFile(dir+"/"+strconv.Itoa(conn)+"/abort", []byte("1"), 0)
}

// helper mounts the filesystem at dir, maps its file and serves it until
// killed; it prints the mapping's address in hex once mapped.
func helper(dir string, silentGetattr bool) error {
	fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	opts := fmt.Sprintf("fd=%d,rootmode=40000,user_id=0,group_id=0,allow_other", fd)
	if err := unix.Mount("djxfusetest", dir, "fuse.djxfusetest", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mount fuse at %s: %w", dir, err)
	}
	go serve(fd, silentGetattr)
	f, err := os.Open(dir + "/" + FileName)
	if err != nil {
		return err
	}
	m, err := unix.Mmap(int(f.Fd()), 0, FileSize, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return err
	}
	// Closed now, while it is served: closing it at exit would FLUSH to
	// a server that is exiting, and wait for good.
	f.Close()
	// The device from mountinfo: a stat of the root could wait on GETATTR.
	minor, err := mountMinor(dir)
	if err != nil {
		return err
	}
	fmt.Printf("%x %d\n", uintptr(unsafe.Pointer(&m[0])), minor)
	select {}
}

// mountMinor is the device minor of the filesystem mounted at dir, from
// mountinfo.
func mountMinor(dir string) (int, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && f[4] == dir {
			_, min, _ := strings.Cut(f[2], ":")
			return strconv.Atoi(min)
		}
	}
	return 0, fmt.Errorf("%s not in mountinfo", dir)
}

// Opcodes and sizes of the FUSE protocol (include/uapi/linux/fuse.h).
const (
	opLookup      = 1
	opForget      = 2
	opGetattr     = 3
	opOpen        = 14
	opRead        = 15
	opRelease     = 18
	opFlush       = 25
	opInit        = 26
	opInterrupt   = 36
	opBatchForget = 42

	inHeader = 40
	rootID   = 1
	fileID   = 2
)

var le = binary.LittleEndian

// serve answers requests on fd, except READ, which it leaves unanswered.
func serve(fd int, silentGetattr bool) {
	buf := make([]byte, 1<<20+4096)
	for {
		n, err := unix.Read(fd, buf)
		if err == unix.EINTR || err == unix.ENOENT { // ENOENT: an interrupted request
			continue
		}
		if err != nil || n < inHeader {
			return
		}
		req := buf[:n]
		op, unique, node := le.Uint32(req[4:]), le.Uint64(req[8:]), le.Uint64(req[16:])
		body := req[inHeader:]
		switch op {
		case opInit:
			out := make([]byte, 64)
			le.PutUint32(out[0:], 7)      // major
			le.PutUint32(out[4:], 31)     // minor
			le.PutUint32(out[8:], 0)      // max_readahead 0: a fault reads its page itself, and waits uninterruptibly
			le.PutUint16(out[16:], 16)    // max_background
			le.PutUint16(out[18:], 12)    // congestion_threshold
			le.PutUint32(out[20:], 1<<17) // max_write
			le.PutUint32(out[24:], 1)     // time_gran
			reply(fd, unique, 0, out)
		case opLookup:
			if node != rootID || string(trimNUL(body)) != FileName {
				reply(fd, unique, unix.ENOENT, nil)
				continue
			}
			out := make([]byte, 40, 128)
			le.PutUint64(out[0:], fileID)
			le.PutUint64(out[8:], 1)     // generation
			le.PutUint64(out[16:], 3600) // entry_valid
			le.PutUint64(out[24:], 3600) // attr_valid
			reply(fd, unique, 0, append(out, attr(fileID)...))
		case opGetattr:
			if silentGetattr {
				continue
			}
			out := make([]byte, 16, 104)
			le.PutUint64(out[0:], 3600)
			reply(fd, unique, 0, append(out, attr(node)...))
		case opOpen:
			reply(fd, unique, 0, make([]byte, 16))
		case opRead:
			// Never answered: the reader waits until the connection ends.
		case opFlush, opRelease:
			reply(fd, unique, 0, nil)
		case opForget, opBatchForget, opInterrupt:
		default:
			reply(fd, unique, unix.ENOSYS, nil)
		}
	}
}

// attr is a fuse_attr: the root directory, or the file.
func attr(node uint64) []byte {
	a := make([]byte, 88)
	le.PutUint64(a[0:], node)
	mode, nlink := uint32(unix.S_IFDIR|0o755), uint32(2)
	if node == fileID {
		le.PutUint64(a[8:], FileSize)
		le.PutUint64(a[16:], FileSize/512)
		mode, nlink = unix.S_IFREG|0o644, 1
	}
	le.PutUint32(a[60:], mode)
	le.PutUint32(a[64:], nlink)
	le.PutUint32(a[80:], 4096) // blksize
	return a
}

func reply(fd int, unique uint64, errno unix.Errno, payload []byte) {
	out := make([]byte, 16+len(payload))
	le.PutUint32(out[0:], uint32(len(out)))
	le.PutUint32(out[4:], uint32(-int32(errno)))
	le.PutUint64(out[8:], unique)
	copy(out[16:], payload)
	unix.Write(fd, out)
}

func trimNUL(b []byte) []byte {
	for i, c := range b {
		if c == 0 {
			return b[:i]
		}
	}
	return b
}
