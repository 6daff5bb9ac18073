package openj9

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/djx-bpf/djx-bpf/safety/procfs"
	"github.com/djx-bpf/djx-bpf/safety/safefs"
	"golang.org/x/sys/unix"
)

var (
	// ErrNoNotifier means the attach directory has no live notification
	// semaphore: no JVM is listening (or it is in another IPC namespace).
	ErrNoNotifier = errors.New("no OpenJ9 attach notification semaphore")
	// ErrNoResponse means the target did not connect back in time: its
	// attach API is disabled (-Dcom.ibm.tools.attach.enable=no), busy, or
	// the advertisement is stale.
	ErrNoResponse = errors.New("OpenJ9 target did not connect back")
	// ErrNamespace means the target is in another IPC or network namespace,
	// which the semaphore and the loopback connection cannot cross.
	ErrNamespace = errors.New("target JVM is in another IPC or network namespace; attach from inside its namespaces (not implemented)")
	// ErrProtocol means an unexpected message from the target.
	ErrProtocol = errors.New("malformed OpenJ9 attach message")
	// ErrAgentLoad means the target could not load the agent library
	// (AgentLoadException).
	ErrAgentLoad = errors.New("agent library could not be loaded")
	// ErrForeignDir means the VM directory does not belong to the JVM's
	// user: another user advertised a VM under its pid, or it changed
	// user. Nothing is written there.
	ErrForeignDir = errors.New("OpenJ9 VM directory is not owned by the JVM's user; not attaching (check who owns it in the attach directory)")
)

// AgentInitError is an agent whose Agent_OnAttach returned nonzero.
type AgentInitError struct{ Code int }

func (e *AgentInitError) Error() string {
	return fmt.Sprintf("agent initialization failed: Agent_OnAttach returned %d", e.Code)
}

// CommandError is an ATTACH_ERR reply or a diagnostic command that failed.
type CommandError struct {
	Type    string // openj9_diagnostics.errortype, or "ATTACH_ERR"
	Message string
}

func (e *CommandError) Error() string { return fmt.Sprintf("%s: %s", e.Type, e.Message) }

// DefaultConnectTimeout bounds the wait for the target to connect back when
// the context has no earlier deadline. OpenJ9 targets sleep up to 300 ms
// between notifications; jattach waits 5 s.
const DefaultConnectTimeout = 10 * time.Second

// AttachOptions tune Attach. The zero value is ready to use.
type AttachOptions struct {
	// ConnectTimeout overrides DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// HostPID is the target's pid in this process's pid namespace, when
	// known; Attach then refuses targets in other IPC or net namespaces
	// with ErrNamespace instead of timing out, and a VM directory that is
	// not its user's with ErrForeignDir.
	HostPID int
}

// Conn is an attached session with one target VM. It is not safe for
// concurrent use.
type Conn struct {
	vm   *VM
	conn net.Conn
	r    *bufio.Reader
}

// maxReply caps a reply's size (a class histogram of a large heap is a few
// MiB).
const maxReply = 256 << 20

// Attach performs the attach handshake with v and returns the session.
// The context bounds the handshake; each command takes its own context.
func (v *VM) Attach(ctx context.Context, opts AttachOptions) (*Conn, error) {
	fail := func(what string, err error) error {
		return fmt.Errorf("openj9 attach %s (pid %d): %s: %w", v.ID, v.PID, what, err)
	}
	if opts.HostPID > 0 {
		if err := sameNamespaces(opts.HostPID); err != nil {
			return nil, fail("check namespaces", err)
		}
	}
	timeout := opts.ConnectTimeout
	if timeout <= 0 {
		timeout = DefaultConnectTimeout
	}
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}

	// The attach directory is world-writable and the target's root is its
	// own: every file below is reached through this fd, never a symlink.
	cfd, err := v.openCommon()
	if err != nil {
		return nil, fail("open attach directory", err)
	}
	defer unix.Close(cfd)
	var nst unix.Stat_t
	err = unix.Fstatat(cfd, "_notifier", &nst, unix.AT_SYMLINK_NOFOLLOW)
	if err == nil && nst.Mode&unix.S_IFMT != unix.S_IFREG {
		err = fmt.Errorf("_notifier is not a regular file (mode %o)", nst.Mode)
	}
	if err == nil {
		var sem *notifier
		sem, err = openNotifier("/proc/self/fd/"+strconv.Itoa(cfd), false)
		if err == nil {
			return v.attach(ctx, cfd, sem, opts.HostPID, deadline, fail)
		}
	}
	if errors.Is(err, unix.ENOENT) {
		err = fmt.Errorf("%w: %w", ErrNoNotifier, err)
	}
	return nil, fail("open notifier", err)
}

// openCommon opens the attach directory below the root Discover was given,
// with no symlink in any component.
func (v *VM) openCommon() (int, error) {
	root, rel := v.root, v.rel
	if root == "" { // a VM not from Discover: its absolute path, from "/"
		root, rel = "/", v.CommonDir
	}
	rootfd, err := safefs.OpenRoot(root)
	if err != nil {
		return -1, err
	}
	defer unix.Close(rootfd)
	return safefs.OpenAt(rootfd, rel, unix.O_RDONLY|unix.O_DIRECTORY)
}

func (v *VM) attach(ctx context.Context, cfd int, sem *notifier, hostPID int, deadline time.Time, fail func(string, error) error) (*Conn, error) {
	vmfd, err := safefs.OpenAt(cfd, filepath.Base(v.Dir), unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, fail("open VM directory", err)
	}
	defer unix.Close(vmfd)
	uid, err := replyOwner(vmfd, hostPID)
	if err != nil {
		return nil, fail("check VM directory", err)
	}
	lock, err := lockFile(ctx, cfd, "_attachlock", true, deadline)
	if err != nil {
		return nil, fail("lock _attachlock", err)
	}
	defer unlockFile(lock)

	ln, err := listenLoopback()
	if err != nil {
		return nil, fail("listen", err)
	}
	defer ln.Close()

	var raw [8]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return nil, fail("make key", err)
	}
	key := hex.EncodeToString(raw[:])
	if err := writeReply(v, vmfd, uid, key, ln.port); err != nil {
		return nil, fail("write replyInfo", err)
	}
	defer unix.Unlinkat(vmfd, "replyInfo", 0)

	// Hold every other VM's sync file so that each woken VM consumes one
	// post only: it blocks on its own sync file after checking for a reply.
	// Unlike jattach, the target's own file is left alone: a target still
	// blocked on it from a previous attach (which released it moments ago)
	// could otherwise lose the race to our lock and never wake (seen with
	// the fake under CPU load). If the target eats a second post, a VM that
	// had no reason to wake stays asleep; leftovers are cancelled below.
	dirs := vmDirs(cfd)
	var held []int
	for _, d := range dirs {
		if d == filepath.Base(v.Dir) {
			continue
		}
		if fd, err := lockFile(ctx, cfd, d+"/attachNotificationSync", false, deadline); err == nil {
			held = append(held, fd)
		}
	}
	defer func() {
		for _, fd := range held {
			unlockFile(fd)
		}
	}()
	if err := sem.post(len(dirs)); err != nil {
		return nil, fail("post notifier", err)
	}
	defer sem.cancel(len(dirs))

	c, err := ln.accept(ctx, key, deadline)
	if err != nil {
		return nil, fail("wait for the target", err)
	}
	return &Conn{vm: v, conn: c, r: bufio.NewReader(c)}, nil
}

// VM returns the attached VM.
func (c *Conn) VM() *VM { return c.vm }

// Exec sends one command and returns the raw reply (without its NUL).
func (c *Conn) Exec(ctx context.Context, cmd string) (string, error) {
	if strings.IndexByte(cmd, 0) >= 0 {
		return "", fmt.Errorf("openj9 %s: command contains NUL", c.vm.ID)
	}
	stop := context.AfterFunc(ctx, func() { c.conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if d, ok := ctx.Deadline(); ok {
		c.conn.SetDeadline(d)
	} else {
		c.conn.SetDeadline(time.Time{})
	}
	verb, _, _ := strings.Cut(cmd, "(")
	// One write: OpenJ9 only recognises the NUL at the end of a read.
	if _, err := c.conn.Write(append([]byte(cmd), 0)); err != nil {
		return "", c.ioErr(ctx, "send "+verb, err)
	}
	reply, err := readMessage(c.r)
	if err != nil {
		return "", c.ioErr(ctx, "read reply to "+verb, err)
	}
	return reply, nil
}

func (c *Conn) ioErr(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil {
		err = fmt.Errorf("%w (%w)", ctx.Err(), err)
	}
	return fmt.Errorf("openj9 %s (pid %d): %s: %w", c.vm.ID, c.vm.PID, what, err)
}

// LoadAgentPath loads the JVMTI agent library at path (absolute, in the
// target's mount namespace) and calls its Agent_OnAttach with options.
func (c *Conn) LoadAgentPath(ctx context.Context, path, options string) error {
	// OpenJ9 splits at the first ',' and the last ')': the path may contain
	// neither, options may contain both.
	if strings.ContainsAny(path, ",)") || path == "" {
		return fmt.Errorf("openj9 %s: load agent %q: path must be non-empty and contain no ',' or ')'", c.vm.ID, path)
	}
	reply, err := c.Exec(ctx, "ATTACH_LOADAGENTPATH("+path+","+options+")")
	if err != nil {
		return err
	}
	if err := loadResult(reply); err != nil {
		return fmt.Errorf("openj9 %s (pid %d): load agent %s: %w", c.vm.ID, c.vm.PID, path, err)
	}
	return nil
}

// loadResult interprets the reply to ATTACH_LOADAGENT*.
func loadResult(reply string) error {
	const initErr = "ATTACH_ERR AgentInitializationException"
	switch {
	case reply == "ATTACH_ACK":
		return nil
	case strings.HasPrefix(reply, initErr):
		code, err := strconv.Atoi(strings.TrimSpace(reply[len(initErr):]))
		if err != nil {
			return fmt.Errorf("%w: %q", ErrProtocol, reply)
		}
		return &AgentInitError{Code: code}
	case strings.HasPrefix(reply, "ATTACH_ERR AgentLoadException"):
		return fmt.Errorf("%w: %s", ErrAgentLoad, strings.TrimPrefix(reply, "ATTACH_ERR "))
	case strings.HasPrefix(reply, "ATTACH_ERR"):
		return &CommandError{Type: "ATTACH_ERR", Message: strings.TrimSpace(strings.TrimPrefix(reply, "ATTACH_ERR"))}
	}
	return fmt.Errorf("%w: %q", ErrProtocol, reply)
}

// SystemProperties returns the target's system properties (plus
// sun.jvm.args, which OpenJ9 adds).
func (c *Conn) SystemProperties(ctx context.Context) (map[string]string, error) {
	reply, err := c.Exec(ctx, "ATTACH_GETSYSTEMPROPERTIES")
	if err != nil {
		return nil, err
	}
	return c.properties("get system properties", reply)
}

func (c *Conn) properties(what, reply string) (map[string]string, error) {
	if strings.HasPrefix(reply, "ATTACH_ERR") {
		return nil, fmt.Errorf("openj9 %s: %s: %w", c.vm.ID, what,
			&CommandError{Type: "ATTACH_ERR", Message: strings.TrimSpace(strings.TrimPrefix(reply, "ATTACH_ERR"))})
	}
	props, err := ParseProperties([]byte(reply))
	if err != nil {
		return nil, fmt.Errorf("openj9 %s: %s: %w: %w", c.vm.ID, what, ErrProtocol, err)
	}
	return props, nil
}

// Diagnostic runs a diagnostic command (OpenJ9's jcmd: "Thread.print",
// "GC.class_histogram", "Dump.java,<file>", ...; arguments separated by
// ',') and returns its text result.
func (c *Conn) Diagnostic(ctx context.Context, command string) (string, error) {
	reply, err := c.Exec(ctx, "ATTACH_DIAGNOSTICS:"+command)
	if err != nil {
		return "", err
	}
	props, err := c.properties("diagnostic "+command, reply)
	if err != nil {
		return "", err
	}
	if props["openj9_diagnostics.error"] == "true" {
		return "", fmt.Errorf("openj9 %s: diagnostic %s: %w", c.vm.ID, command,
			&CommandError{Type: props["openj9_diagnostics.errortype"], Message: props["openj9_diagnostics.errormsg"]})
	}
	res, ok := props["openj9_diagnostics.string_result"]
	if !ok {
		return "", fmt.Errorf("openj9 %s: diagnostic %s: %w: no string_result", c.vm.ID, command, ErrProtocol)
	}
	return res, nil
}

// DumpJavacore asks the target to write a javacore to path (absolute, in
// the target's mount namespace; the dump agent may pick another name if it
// exists) and returns the path it wrote, as the target reports it. Read it
// through the target's root (e.g. /proc/PID/root) and parse it with
// heap.ParseJavacore.
func (c *Conn) DumpJavacore(ctx context.Context, path string) (string, error) {
	if strings.ContainsAny(path, ",\x00") || !filepath.IsAbs(path) {
		return "", fmt.Errorf("openj9 %s: javacore path %q must be absolute and contain no ','", c.vm.ID, path)
	}
	res, err := c.Diagnostic(ctx, "Dump.java,"+path)
	if err != nil {
		return "", err
	}
	written, ok := strings.CutPrefix(strings.TrimSpace(res), "Dump written to ")
	if !ok {
		return "", fmt.Errorf("openj9 %s: Dump.java: %w: %q", c.vm.ID, ErrProtocol, res)
	}
	return written, nil
}

// Close detaches (ATTACH_DETACH, answered by ATTACH_DETACHED) and closes
// the connection. The target keeps running.
func (c *Conn) Close() error {
	c.conn.SetDeadline(time.Now().Add(2 * time.Second))
	_, werr := c.conn.Write([]byte("ATTACH_DETACH\x00"))
	if werr == nil {
		readMessage(c.r) // best effort: ATTACH_DETACHED
	}
	err := c.conn.Close()
	if werr != nil {
		return fmt.Errorf("openj9 %s: detach: %w", c.vm.ID, werr)
	}
	return err
}

// readMessage reads up to and excluding a NUL.
func readMessage(r *bufio.Reader) (string, error) {
	var buf []byte
	for {
		chunk, err := r.ReadSlice(0)
		buf = append(buf, chunk...)
		if len(buf) > maxReply {
			return "", fmt.Errorf("%w: reply exceeds %d bytes", ErrProtocol, maxReply)
		}
		switch {
		case err == nil:
			return string(buf[:len(buf)-1]), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			return "", io.ErrUnexpectedEOF
		default:
			return "", err
		}
	}
}

// vmDirs lists the names of the VM directories of the attach directory
// cfd: each VM waits on the semaphore once, so this is the number of posts
// needed.
func vmDirs(cfd int) []string {
	fd, err := unix.Openat(cfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	d := os.NewFile(uintptr(fd), "attach directory")
	defer d.Close()
	entries, _ := d.ReadDir(-1)
	var out []string
	for _, e := range entries {
		if isVMDir(e) {
			out = append(out, e.Name())
		}
	}
	return out
}

// replyOwner is the uid replyInfo is made for, in the VM directory vmfd:
// the JVM's, from its process's credentials when its pid is known, not
// from attachInfo, which the target writes. Root removes and creates files
// only in a directory of that user's, so the directory must be its own;
// with no pid, its owner is taken for the JVM's user.
func replyOwner(vmfd, hostPID int) (int, error) {
	var st unix.Stat_t
	if err := unix.Fstat(vmfd, &st); err != nil {
		return -1, err
	}
	if hostPID <= 0 {
		return int(st.Uid), nil
	}
	ps, err := procfs.ReadStatus(procfs.Mount, hostPID)
	if err != nil {
		return -1, fmt.Errorf("read the credentials of pid %d: %w", hostPID, err)
	}
	if int(st.Uid) != ps.UID {
		return -1, fmt.Errorf("%w: owned by uid %d, pid %d runs as uid %d", ErrForeignDir, st.Uid, hostPID, ps.UID)
	}
	return ps.UID, nil
}

// writeReply creates <vm dir>/replyInfo as "<key>\n<port>\n", mode 0600,
// owned by uid, the target's user (OpenJ9 rejects a reply file others can
// read or that another user owns, root excepted), in the VM directory
// dirfd, which replyOwner checked is that user's. Nothing in it is
// followed as a symlink.
func writeReply(v *VM, dirfd, uid int, key string, port int) error {
	if err := unix.Unlinkat(dirfd, "replyInfo", 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("remove stale replyInfo: %w", err)
	}
	fd, err := unix.Openat(dirfd, "replyInfo", unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), filepath.Join(v.Dir, "replyInfo"))
	defer f.Close()
	if os.Geteuid() == 0 && uid != 0 {
		if err := f.Chown(uid, -1); err != nil {
			return err
		}
	}
	if err := f.Chmod(0o600); err != nil { // umask-proof
		return err
	}
	_, err = fmt.Fprintf(f, "%s\n%d\n", key, port)
	return err
}

// lockFile opens name below dirfd (creating it only if create; no symlink
// followed, a regular file only) and takes an exclusive flock, polling
// until deadline so that a stuck holder cannot hang us.
func lockFile(ctx context.Context, dirfd int, name string, create bool, deadline time.Time) (int, error) {
	path := name
	var fd int
	var err error
	if create {
		fd, err = unix.Openat(dirfd, name, unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0o666)
	} else {
		fd, err = safefs.OpenAt(dirfd, name, unix.O_RDWR)
	}
	if err != nil {
		return -1, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return -1, fmt.Errorf("%s: %w", name, safefs.ErrNotRegular)
	}
	for delay := time.Millisecond; ; delay = min(delay*2, 50*time.Millisecond) {
		err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return fd, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			unix.Close(fd)
			return -1, err
		}
		if time.Until(deadline) <= 0 {
			unix.Close(fd)
			return -1, fmt.Errorf("%s held by another process: %w", path, os.ErrDeadlineExceeded)
		}
		select {
		case <-ctx.Done():
			unix.Close(fd)
			return -1, ctx.Err()
		case <-time.After(min(delay, time.Until(deadline))):
		}
	}
}

func unlockFile(fd int) {
	unix.Flock(fd, unix.LOCK_UN)
	unix.Close(fd)
}

// listener accepts the target's connection on 127.0.0.1 and, when
// available, ::1 on the same port: the target connects to
// InetAddress.getLoopbackAddress(), which is ::1 with
// -Djava.net.preferIPv6Addresses=true. Unlike jattach it never listens on
// all interfaces.
type listener struct {
	lns  []net.Listener
	port int
}

func listenLoopback() (*listener, error) {
	ln4, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	l := &listener{lns: []net.Listener{ln4}, port: ln4.Addr().(*net.TCPAddr).Port}
	if ln6, err := net.Listen("tcp6", net.JoinHostPort("::1", strconv.Itoa(l.port))); err == nil {
		l.lns = append(l.lns, ln6)
	}
	return l, nil
}

func (l *listener) Close() {
	for _, ln := range l.lns {
		ln.Close()
	}
}

// accept waits for a connection that proves it read replyInfo by sending
// "ATTACH_CONNECTED <key> ". Connections with a wrong key are dropped.
func (l *listener) accept(ctx context.Context, key string, deadline time.Time) (net.Conn, error) {
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 8)
	done := make(chan struct{})
	defer close(done)
	for _, ln := range l.lns {
		ln.(*net.TCPListener).SetDeadline(deadline)
		go func(ln net.Listener) {
			for {
				c, err := ln.Accept()
				select {
				case ch <- result{c, err}:
				case <-done:
					if c != nil {
						c.Close()
					}
					return
				}
				if err != nil {
					return
				}
			}
		}(ln)
	}
	want := "ATTACH_CONNECTED " + key + " "
	var bad error
	for pending := len(l.lns); pending > 0; {
		var res result
		select {
		case res = <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if res.err != nil {
			pending--
			continue
		}
		// Read exactly the expected length, so nothing after it is consumed.
		res.c.SetDeadline(deadline)
		msg := make([]byte, len(want)+1)
		_, err := io.ReadFull(res.c, msg)
		if err == nil && string(msg) == want+"\x00" {
			res.c.SetDeadline(time.Time{})
			return res.c, nil
		}
		res.c.Close()
		if err != nil {
			bad = fmt.Errorf("read connect message: %w", err)
		} else {
			bad = fmt.Errorf("%w: connect message %q does not carry our key", ErrProtocol, msg)
		}
	}
	if bad != nil {
		return nil, fmt.Errorf("%w (%w)", ErrNoResponse, bad)
	}
	return nil, ErrNoResponse
}

// sameNamespaces checks that pid shares our IPC and network namespaces.
func sameNamespaces(pid int) error {
	for _, ns := range []string{"ipc", "net"} {
		var self, other unix.Stat_t
		if err := unix.Stat("/proc/self/ns/"+ns, &self); err != nil {
			return err
		}
		if err := unix.Stat(fmt.Sprintf("/proc/%d/ns/%s", pid, ns), &other); err != nil {
			return err
		}
		if self.Ino != other.Ino || self.Dev != other.Dev {
			return fmt.Errorf("%s namespace differs: %w", ns, ErrNamespace)
		}
	}
	return nil
}
