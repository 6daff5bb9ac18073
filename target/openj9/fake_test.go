package openj9

// A fake OpenJ9 target for the attach tests. No OpenJ9 runs on this
// machine, so the fake plays the target's side of the protocol as
// openj9.internal.tools.attach.target implements it (Advertisement,
// WaitLoop, Reply, Attachment, AttachmentConnection, IPC.sendProperties):
//
//   - it writes attachInfo and attachNotificationSync in its own directory
//     of the attach directory, with the keys OpenJ9 writes;
//   - it waits on the SysV notifier semaphore (the same ftok key and
//     semaphore calls the attacher uses: this is where the fake cannot
//     catch a mismatch with real OpenJ9);
//   - when woken it reads replyInfo, checks it is mode 0600 and owned by
//     its advertised uid (IPC.checkOwnerAccessOnly), connects to 127.0.0.1
//     on the port and sends "ATTACH_CONNECTED <key> \0"; then, like
//     WaitLoop, it flocks its own sync file (blocking while the attacher
//     holds it) before waiting again;
//   - it answers ATTACH_LOADAGENTPATH, ATTACH_GETSYSTEMPROPERTIES,
//     ATTACH_DIAGNOSTICS:Dump.java,<file> (writing a javacore) and
//     ATTACH_DETACH with OpenJ9's reply strings, NUL-terminated.

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fakeJavacore is what the fake writes for Dump.java: the note's 5 GiB
// zLinux example (../heap/testdata/openj9/note-examples.txt) under a
// made-up s390x header.
const fakeJavacore = `0SECTION       TITLE subcomponent dump routine
NULL           ===============================
1TICHARSET     UTF-8
0SECTION       ENVINFO subcomponent dump routine
NULL           =================================
1CIJAVAVERSION JRE 21 Linux s390x-64 (build 21.0.3+9)
1CIVMVERSION   VM build openj9-0.46.0, JRE 21 Linux s390x-64-Bit Compressed References 20240416_1 (JIT enabled, AOT enabled)
1CIUSERARGS    UserArgs:
2CIUSERARG               -Xmx5g
0SECTION       MEMINFO subcomponent dump routine
NULL           =================================
1STHEAPTYPE    Object Memory
NULL           id                 start              end                size               space/region
1STHEAPSPACE   0x000003FF7C084000         --                 --                 --         Generational
1STHEAPREGION  0x000003FF7C084940 0x00000000C0000000 0x00000000C0600000 0x0000000000600000 Generational/Tenured Region
1STHEAPREGION  0x000003FF7C0843A0 0x00000001FFE00000 0x00000001FFF00000 0x0000000000100000 Generational/Nursery Region
1STHEAPREGION  0x000003FF7C083E00 0x00000001FFF00000 0x0000000200000000 0x0000000000100000 Generational/Nursery Region
`

// attachDir creates <root>/tmp/.com_ibm_tools_attach with its _notifier
// file and semaphore, removed when the test ends.
func attachDir(t *testing.T, root string) (string, *notifier) {
	t.Helper()
	common := filepath.Join(root, "tmp", AttachDirName)
	if err := os.MkdirAll(common, 0o1777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(common, "_notifier"), nil, 0o666); err != nil {
		t.Fatal(err)
	}
	sem, err := openNotifier(common, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sem.remove() })
	return common, sem
}

type fakeTarget struct {
	t        *testing.T
	root     string // the "container" root: target paths resolve under it
	dir      string
	id       string
	pid, uid int
	sem      *notifier
	wrongKey bool // send a wrong key on connect
	// dump, when set, plays a hostile Dump.java: it gets the requested
	// path and returns the path to report.
	dump func(file string) string

	stop chan struct{}
	done chan struct{}

	mu       sync.Mutex
	commands []string
	attached int
	problems []string // protocol violations seen by the target
}

// newFake advertises a VM in common; serve() starts its wait loop.
func newFake(t *testing.T, root, common string, sem *notifier, id string, pid, uid int) *fakeTarget {
	t.Helper()
	f := &fakeTarget{t: t, root: root, dir: filepath.Join(common, id), id: id, pid: pid, uid: uid, sem: sem,
		stop: make(chan struct{}), done: make(chan struct{})}
	if err := os.Mkdir(f.dir, 0o711); err != nil {
		t.Fatal(err)
	}
	// Written as Advertisement.createAdvertContent does, escapes included.
	advert := fmt.Sprintf("version=0.1\nuserId=%s\nuserUid=%d\nprocessId=%d\nvmId=%s\ndisplayName=%s\nnotifier=_notifier\nglobalSemaphore=true\nreplyFile=%s\nattachNotificationSync=%s\n",
		"fake\\ user", uid, pid, id, "org.example.Main arg\\=1", "/tmp/.com_ibm_tools_attach/"+id+"/replyInfo",
		"/tmp/.com_ibm_tools_attach/"+id+"/attachNotificationSync")
	if err := os.WriteFile(filepath.Join(f.dir, "attachInfo"), []byte(advert), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.dir, "attachNotificationSync"), nil, 0o666); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fakeTarget) serve() {
	go f.waitLoop()
	f.t.Cleanup(func() {
		close(f.stop)
		select {
		case <-f.done:
		case <-time.After(5 * time.Second):
			f.t.Errorf("fake %s did not stop", f.id)
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, p := range f.problems {
			f.t.Errorf("fake %s: %s", f.id, p)
		}
	})
}

func (f *fakeTarget) problem(format string, args ...any) {
	f.mu.Lock()
	f.problems = append(f.problems, fmt.Sprintf(format, args...))
	f.mu.Unlock()
}

func (f *fakeTarget) waitLoop() {
	defer close(f.done)
	for {
		select {
		case <-f.stop:
			return
		default:
		}
		ok, err := f.sem.wait(20 * time.Millisecond)
		if err != nil {
			f.problem("wait on semaphore: %v", err)
			return
		}
		if !ok {
			continue
		}
		if key, port, ok := f.readReply(); ok {
			go f.attachment(key, port)
		}
		// WaitLoop.checkReplyAndCreateAttachment: take and drop the sync
		// lock, which waits until the attacher has posted to everyone.
		fd, err := unix.Open(filepath.Join(f.dir, "attachNotificationSync"), unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err == nil {
			unix.Flock(fd, unix.LOCK_EX)
			unix.Flock(fd, unix.LOCK_UN)
			unix.Close(fd)
		}
		// WaitLoop throttles with a 300 ms sleep; a shorter one keeps the
		// tests fast while still leaving the semaphore unwatched for a while.
		time.Sleep(20 * time.Millisecond)
	}
}

// readReply reads replyInfo as Reply.readReply does, after the ownership
// and permission check of IPC.checkOwnerAccessOnly.
func (f *fakeTarget) readReply() (key string, port int, ok bool) {
	path := filepath.Join(f.dir, "replyInfo")
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return "", 0, false // not for us
	}
	if f.uid != 0 && int(st.Uid) != f.uid {
		f.problem("replyInfo owned by uid %d, target runs as %d", st.Uid, f.uid)
		return "", 0, false
	}
	if st.Mode&0o066 != 0 || st.Mode&unix.S_IFMT != unix.S_IFREG {
		f.problem("replyInfo mode %o, want a regular file readable by its owner only", st.Mode)
		return "", 0, false
	}
	data, err := os.ReadFile(path)
	if err != nil {
		f.problem("read replyInfo: %v", err)
		return "", 0, false
	}
	lines := strings.Split(string(data), "\n")
	if len(lines) < 2 {
		f.problem("replyInfo %q", data)
		return "", 0, false
	}
	port, err = strconv.Atoi(lines[1])
	if err != nil {
		f.problem("replyInfo port %q", lines[1])
		return "", 0, false
	}
	return lines[0], port, true
}

// attachment plays Attachment.run: connect, then serve commands.
func (f *fakeTarget) attachment(key string, port int) {
	c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		f.problem("connect to attacher: %v", err)
		return
	}
	defer c.Close()
	if f.wrongKey {
		key = "0123456789abcdef"
	}
	f.mu.Lock()
	f.attached++
	f.mu.Unlock()
	send := func(s string) { c.Write(append([]byte(s), 0)) }
	send("ATTACH_CONNECTED " + key + " ")
	r := bufio.NewReader(c)
	for {
		cmd, err := readMessage(r)
		if err != nil {
			return // attacher went away
		}
		f.mu.Lock()
		f.commands = append(f.commands, cmd)
		f.mu.Unlock()
		switch {
		case strings.HasPrefix(cmd, "ATTACH_DETACH"):
			send("ATTACH_DETACHED")
			return
		case strings.HasPrefix(cmd, "ATTACH_LOADAGENT"):
			send(f.loadAgent(cmd))
		case strings.HasPrefix(cmd, "ATTACH_GETSYSTEMPROPERTIES"):
			send(storeProperties(map[string]string{
				"java.vm.name":   "Eclipse OpenJ9 VM",
				"java.vm.vendor": "Eclipse OpenJ9",
				"sun.jvm.args":   "-Xmx5g -Xcompressedrefs",
				"user.dir":       "/srv/my app",
				"line.separator": "\n",
				"odd=key: x":     "é",
			}))
		case strings.HasPrefix(cmd, "ATTACH_DIAGNOSTICS:"):
			send(storeProperties(f.diagnostic(strings.TrimPrefix(cmd, "ATTACH_DIAGNOSTICS:"))))
		default:
			send("ATTACH_ERR command invalid: " + cmd)
		}
	}
}

// loadAgent parses the command as Attachment.parseLoadAgent does.
func (f *fakeTarget) loadAgent(cmd string) string {
	open, closing, comma := strings.Index(cmd, "("), strings.LastIndex(cmd, ")"), strings.Index(cmd, ",")
	if open < 0 || closing < 0 {
		return "ATTACH_ERR syntax error"
	}
	nameEnd := closing
	if comma >= 0 {
		nameEnd = comma
	}
	name, options := cmd[open+1:nameEnd], ""
	if comma > 0 {
		options = cmd[comma+1 : closing]
	}
	switch {
	case name == "":
		return "ATTACH_ERR invalid agent name"
	case strings.HasSuffix(name, "init-fails.so"):
		return "ATTACH_ERR AgentInitializationException7"
	}
	if _, err := os.Stat(filepath.Join(f.root, name)); err != nil {
		return "ATTACH_ERR AgentLoadException " + name + ":" + options
	}
	return "ATTACH_ACK"
}

// diagnostic answers as DiagnosticUtils.executeDiagnosticCommand does.
func (f *fakeTarget) diagnostic(command string) map[string]string {
	parts := strings.Split(command, ",")
	if parts[0] != "Dump.java" || len(parts) != 2 {
		return map[string]string{
			"openj9_diagnostics.error":     "true",
			"openj9_diagnostics.errortype": "Error in command",
			"openj9_diagnostics.errormsg":  "Command " + command + " not recognized",
		}
	}
	if f.dump != nil {
		parts[1] = f.dump(parts[1])
	} else if err := os.WriteFile(filepath.Join(f.root, parts[1]), []byte(fakeJavacore), 0o644); err != nil {
		f.problem("write javacore: %v", err)
	}
	return map[string]string{
		"openj9_diagnostics.error":         "false",
		"openj9_diagnostics.errortype":     "Error in command",
		"openj9_diagnostics.string_result": "Dump written to " + parts[1],
		"command_string":                   command,
	}
}

func (f *fakeTarget) seen() (commands []string, attached int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.commands...), f.attached
}

// storeProperties formats props as java.util.Properties.store does: a
// comment and a date line, then escaped key=value lines.
func storeProperties(props map[string]string) string {
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("#\n#Mon Jan 01 00:00:00 UTC 2024\n")
	for _, k := range keys {
		b.WriteString(escapeProperty(k, true))
		b.WriteByte('=')
		b.WriteString(escapeProperty(props[k], false))
		b.WriteByte('\n')
	}
	return b.String()
}

func escapeProperty(s string, key bool) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == ' ' && (key || i == 0):
			b.WriteString(`\ `)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\f':
			b.WriteString(`\f`)
		case strings.ContainsRune(`=:#!\`, r):
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r > 0x7e:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
