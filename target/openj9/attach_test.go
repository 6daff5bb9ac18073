package openj9

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/djx-bpf/djx-bpf/hotspot/heap"
	"golang.org/x/sys/unix"
)

func TestParseAttachInfo(t *testing.T) {
	// As Advertisement.createAdvertContent writes it.
	data := "version=0.1\nuserId=j\\ doe\nuserUid=1000\nprocessId=4242\nvmId=4242\n" +
		"displayName=org.example.Main --opt\\=x \\u00e9\\ttab\nnotifier=_notifier\nglobalSemaphore=true\n"
	vm, err := ParseAttachInfo([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	if vm.ID != "4242" || vm.PID != 4242 || vm.UID != 1000 || vm.User != "j doe" || vm.Version != "0.1" {
		t.Errorf("got %+v", vm)
	}
	if want := "org.example.Main --opt=x é\ttab"; vm.DisplayName != want {
		t.Errorf("displayName %q, want %q", vm.DisplayName, want)
	}
	for _, bad := range []string{
		"processId=1\ndisplayName=x\n",           // no vmId
		"vmId=1\nprocessId=1\n",                  // no displayName
		"vmId=1\ndisplayName=x\nprocessId=abc\n", // bad pid
		"vmId=1\ndisplayName=x\nprocessId=1\nuserUid=-4\n",
		"vmId=1\ndisplayName=\\u00zz\nprocessId=1\n",
	} {
		if _, err := ParseAttachInfo([]byte(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

func TestParseProperties(t *testing.T) {
	text := "# comment\n! other comment\n\n  a = 1\nb:2\nc 3\nlong = x\\\n    y\\\\\nkey\\ with\\=sep=v\\nw\nempty\n"
	p, err := ParseProperties([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a": "1", "b": "2", "c": "3", "long": "xy\\", "key with=sep": "v\nw", "empty": ""}
	for k, v := range want {
		if p[k] != v {
			t.Errorf("%q = %q, want %q", k, p[k], v)
		}
	}
	if len(p) != len(want) {
		t.Errorf("got %d keys: %q", len(p), p)
	}
	// The fake's encoder and this parser agree on awkward values.
	in := map[string]string{"odd=key: x": "é", "sp": " lead", "nl": "a\nb", "bs": `c:\dir`}
	out, err := ParseProperties([]byte(storeProperties(in)))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range in {
		if out[k] != v {
			t.Errorf("round trip %q: %q, want %q", k, out[k], v)
		}
	}
}

func TestDiscover(t *testing.T) {
	root := t.TempDir()
	common, sem := attachDir(t, root)
	newFake(t, root, common, sem, "4242", 4242, os.Getuid())
	newFake(t, root, common, sem, "17", 17, os.Getuid())
	bad := filepath.Join(common, "999")
	os.Mkdir(bad, 0o700)
	os.WriteFile(filepath.Join(bad, "attachInfo"), []byte("processId=999\n"), 0o600)
	os.Mkdir(filepath.Join(common, "_private"), 0o700) // control entries are not VMs

	vms, err := Discover(root)
	if len(vms) != 2 || vms[0].PID != 17 || vms[1].PID != 4242 {
		t.Fatalf("got %+v", vms)
	}
	if vms[1].DisplayName != "org.example.Main arg=1" || vms[1].User != "fake user" || vms[1].CommonDir != common ||
		vms[1].Dir != filepath.Join(common, "4242") {
		t.Errorf("got %+v", vms[1])
	}
	var ae *AdvertError
	if !errors.As(err, &ae) || ae.Dir != bad || !strings.Contains(err.Error(), "no vmId") {
		t.Errorf("err = %v, want an AdvertError for %s", err, bad)
	}
	if vms, err := Discover(t.TempDir()); vms != nil || err != nil {
		t.Errorf("empty root: %v, %v", vms, err)
	}
}

// TestAttachFake runs the whole protocol against the fake target, with a
// second advertised VM that must be woken but left alone.
func TestAttachFake(t *testing.T) {
	root := t.TempDir()
	common, sem := attachDir(t, root)
	target := newFake(t, root, common, sem, "4242", 4242, os.Getuid())
	other := newFake(t, root, common, sem, "5151", 5151, os.Getuid())
	target.serve()
	other.serve()

	vms, err := Discover(root)
	if err != nil || len(vms) != 2 {
		t.Fatalf("discover: %v, %v", vms, err)
	}
	vm := vms[0]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := vm.Attach(ctx, AttachOptions{HostPID: os.Getpid()})
	if err != nil {
		t.Fatal(err)
	}
	// The handshake cleaned up after itself.
	if _, err := os.Lstat(filepath.Join(vm.Dir, "replyInfo")); !os.IsNotExist(err) {
		t.Errorf("replyInfo left behind: %v", err)
	}
	if v, err := sem.value(); err != nil || v != 0 {
		t.Errorf("semaphore value %d (%v) after attach, want 0", v, err)
	}
	assertUnlocked(t, filepath.Join(common, "_attachlock"))

	props, err := conn.SystemProperties(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if props["java.vm.name"] != "Eclipse OpenJ9 VM" || props["user.dir"] != "/srv/my app" || props["odd=key: x"] != "é" {
		t.Errorf("properties %q", props)
	}

	agent := filepath.Join(root, "opt", "libdjx.so")
	os.MkdirAll(filepath.Dir(agent), 0o755)
	os.WriteFile(agent, nil, 0o644)
	if err := conn.LoadAgentPath(ctx, "/opt/libdjx.so", "sock=/tmp/x,interval=(1)"); err != nil {
		t.Errorf("load agent: %v", err)
	}
	var ie *AgentInitError
	if err := conn.LoadAgentPath(ctx, "/opt/init-fails.so", ""); !errors.As(err, &ie) || ie.Code != 7 {
		t.Errorf("failing Agent_OnAttach: %v", err)
	}
	if err := conn.LoadAgentPath(ctx, "/nonexistent.so", "x"); !errors.Is(err, ErrAgentLoad) {
		t.Errorf("missing library: %v", err)
	}
	if err := conn.LoadAgentPath(ctx, "/a,b.so", ""); err == nil {
		t.Error("accepted a path OpenJ9 would split")
	}

	// Geometry through a javacore, the way the profiler gets it.
	written, err := conn.DumpJavacore(ctx, "/tmp/djx-javacore.txt")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, written))
	if err != nil {
		t.Fatal(err)
	}
	g, err := heap.ParseJavacore(string(data))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := heap.Place(5*heap.GiB, heap.ZLinuxPolicy())
	if g.Reserved.Start != want.Range.Start || g.Reserved.End != want.Range.End || g.Shift != want.Shift {
		t.Errorf("javacore geometry %v, model %+v", g.String(), want)
	}
	var ce *CommandError
	if _, err := conn.Diagnostic(ctx, "VM.bogus"); !errors.As(err, &ce) || !strings.Contains(ce.Message, "not recognized") {
		t.Errorf("unknown diagnostic: %v", err)
	}
	if _, err := conn.Exec(ctx, "ATTACH_NONSENSE"); err != nil {
		t.Errorf("exec: %v", err)
	}
	if err := conn.Close(); err != nil {
		t.Errorf("close: %v", err)
	}

	cmds, attached := target.seen()
	wantCmds := []string{
		"ATTACH_GETSYSTEMPROPERTIES",
		"ATTACH_LOADAGENTPATH(/opt/libdjx.so,sock=/tmp/x,interval=(1))",
		"ATTACH_LOADAGENTPATH(/opt/init-fails.so,)",
		"ATTACH_LOADAGENTPATH(/nonexistent.so,x)",
		"ATTACH_DIAGNOSTICS:Dump.java,/tmp/djx-javacore.txt",
		"ATTACH_DIAGNOSTICS:VM.bogus",
		"ATTACH_NONSENSE",
		"ATTACH_DETACH",
	}
	if attached != 1 || strings.Join(cmds, "\n") != strings.Join(wantCmds, "\n") {
		t.Errorf("target saw %d attachments, commands:\n%s", attached, strings.Join(cmds, "\n"))
	}
	if _, n := other.seen(); n != 0 {
		t.Errorf("the other VM was attached %d times", n)
	}

	// A second attach works too: nothing was left locked or posted.
	conn, err = vm.Attach(ctx, AttachOptions{})
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
}

// TestAttachAsRootToUser checks that root hands replyInfo to the target's
// user, as OpenJ9 requires: with no pid known, the owner of its VM
// directory.
func TestAttachAsRootToUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: needs root to chown replyInfo")
	}
	root := t.TempDir()
	common, sem := attachDir(t, root)
	target := newFake(t, root, common, sem, "77", 77, 1234)
	if err := os.Chown(target.dir, 1234, 1234); err != nil { // the JVM makes its directory
		t.Fatal(err)
	}
	target.serve()
	vms, err := Discover(root)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := vms[0].Attach(ctx, AttachOptions{})
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
}

func TestAttachNoResponse(t *testing.T) {
	root := t.TempDir()
	common, sem := attachDir(t, root)
	newFake(t, root, common, sem, "4242", 4242, os.Getuid()) // advertised, never serves
	vms, _ := Discover(root)
	start := time.Now()
	_, err := vms[0].Attach(context.Background(), AttachOptions{ConnectTimeout: 300 * time.Millisecond})
	if !errors.Is(err, ErrNoResponse) {
		t.Fatalf("err = %v, want ErrNoResponse", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("took %v", d)
	}
	if !strings.Contains(err.Error(), "4242") {
		t.Errorf("error %q does not name the VM", err)
	}
	if _, err := os.Lstat(filepath.Join(vms[0].Dir, "replyInfo")); !os.IsNotExist(err) {
		t.Errorf("replyInfo left behind: %v", err)
	}
	if v, _ := sem.value(); v != 0 {
		t.Errorf("semaphore left at %d: the unconsumed post was not taken back", v)
	}
	assertUnlocked(t, filepath.Join(common, "_attachlock"))

	// A context deadline earlier than the timeout wins.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := vms[0].Attach(ctx, AttachOptions{}); !errors.Is(err, ErrNoResponse) && !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("with context deadline: %v", err)
	}
}

func TestAttachWrongKey(t *testing.T) {
	root := t.TempDir()
	common, sem := attachDir(t, root)
	target := newFake(t, root, common, sem, "4242", 4242, os.Getuid())
	target.wrongKey = true
	target.serve()
	vms, _ := Discover(root)
	_, err := vms[0].Attach(context.Background(), AttachOptions{ConnectTimeout: time.Second})
	if !errors.Is(err, ErrNoResponse) || !strings.Contains(err.Error(), "does not carry our key") {
		t.Fatalf("err = %v", err)
	}
}

func TestAttachNoNotifier(t *testing.T) {
	root := t.TempDir()
	common := filepath.Join(root, "tmp", AttachDirName)
	os.MkdirAll(filepath.Join(common, "1"), 0o755)
	vm := VM{ID: "1", PID: 1, Dir: filepath.Join(common, "1"), CommonDir: common}
	if _, err := vm.Attach(context.Background(), AttachOptions{}); !errors.Is(err, ErrNoNotifier) {
		t.Errorf("no _notifier: %v", err)
	}
}

func TestLoadResult(t *testing.T) {
	for reply, want := range map[string]string{
		"ATTACH_ACK": "",
		"ATTACH_ERR AgentInitializationException-1":       "Agent_OnAttach returned -1",
		"ATTACH_ERR AgentLoadException /x.so:opts":        "could not be loaded",
		"ATTACH_ERR syntax error":                         "ATTACH_ERR: syntax error",
		"ATTACH_ERR AgentInitializationExceptionnonsense": "malformed",
		"HELLO": "malformed",
	} {
		err := loadResult(reply)
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("%q: %v, want %q", reply, err, want)
		}
	}
}

func assertUnlocked(t *testing.T, path string) {
	t.Helper()
	fd, err := unix.Open(path, unix.O_RDWR, 0)
	if err != nil {
		t.Errorf("open %s: %v", path, err)
		return
	}
	defer unix.Close(fd)
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Errorf("%s still locked: %v", path, err)
	}
	unix.Flock(fd, unix.LOCK_UN)
}

// sleeper starts a process as uid that stands for a JVM's process (its
// credentials are what root trusts), ended when the test ends.
func sleeper(t *testing.T, uid int) int {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd.Process.Pid
}

// TestAttachReplyOwnerFromProcess: replyInfo is handed to the user the
// JVM's process runs as, not to the userUid its attachInfo claims (a
// target could name any uid and have root chown a file to it).
func TestAttachReplyOwnerFromProcess(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run the process as nobody and chown replyInfo")
	}
	pid := sleeper(t, 65534)
	root := t.TempDir()
	common, sem := attachDir(t, root)
	target := newFake(t, root, common, sem, "77", 77, 65534)
	if err := os.Chown(target.dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	info := filepath.Join(target.dir, "attachInfo")
	advert, err := os.ReadFile(info)
	if err != nil {
		t.Fatal(err)
	}
	lie := strings.Replace(string(advert), "userUid=65534", "userUid=4321", 1)
	if err := os.WriteFile(info, []byte(lie), 0o600); err != nil {
		t.Fatal(err)
	}
	target.serve()
	vms, err := Discover(root)
	if err != nil || len(vms) != 1 || vms[0].UID != 4321 {
		t.Fatalf("discover: %+v, %v", vms, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := vms[0].Attach(ctx, AttachOptions{HostPID: pid})
	if err != nil {
		t.Fatal(err) // the fake says whose replyInfo it saw
	}
	conn.Close()
}

// TestAttachRefusesForeignVMDir: a VM directory that is not the JVM
// user's (another user advertised a VM under the JVM's pid) is left alone:
// root neither removes the replyInfo in it nor creates one.
func TestAttachRefusesForeignVMDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run the process as nobody")
	}
	pid := sleeper(t, 65534)
	root := t.TempDir()
	common, sem := attachDir(t, root)
	fake := newFake(t, root, common, sem, "77", 77, 4321)
	reply := filepath.Join(fake.dir, "replyInfo")
	if err := os.WriteFile(reply, []byte("planted\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fake.dir, reply} {
		if err := os.Chown(p, 4321, 4321); err != nil {
			t.Fatal(err)
		}
	}
	vms, err := Discover(root)
	if err != nil || len(vms) != 1 {
		t.Fatalf("discover: %+v, %v", vms, err)
	}
	_, err = vms[0].Attach(context.Background(), AttachOptions{HostPID: pid, ConnectTimeout: 300 * time.Millisecond})
	if !errors.Is(err, ErrForeignDir) {
		t.Errorf("VM directory of uid 4321 for a JVM of uid 65534: %v, want ErrForeignDir", err)
	}
	var st unix.Stat_t
	data, rerr := os.ReadFile(reply)
	if rerr != nil || string(data) != "planted\n" || unix.Lstat(reply, &st) != nil || st.Uid != 4321 {
		t.Errorf("planted replyInfo touched: %q, %v, owner %d", data, rerr, st.Uid)
	}
	if v, _ := sem.value(); v != 0 {
		t.Errorf("semaphore posted (%d)", v)
	}
}
