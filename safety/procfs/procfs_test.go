package procfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

const statusText = `Name:	java
Umask:	0022
State:	S (sleeping)
Tgid:	4242
Pid:	4242
PPid:	4200
Uid:	1000	1001	1001	1001
Gid:	2000	2001	2001	2001
NSpid:	4242	77	1
SigBlk:	0000000000000000
SigIgn:	0000000000000002
SigCgt:	0000000101005ccd
`

func TestParseStatus(t *testing.T) {
	st, err := ParseStatus([]byte(statusText))
	if err != nil {
		t.Fatal(err)
	}
	if st.UID != 1001 || st.GID != 2001 || st.NSPID != 1 || st.State != 'S' || st.Tgid != 4242 {
		t.Errorf("status = %+v; want effective ids 1001/2001, innermost nspid 1, state S", st)
	}
	if !st.Handles(syscall.SIGQUIT) || !st.Handles(syscall.SIGINT) || st.Handles(syscall.SIGUSR1) {
		t.Errorf("Handles: SIGQUIT %v SIGINT %v SIGUSR1 %v", st.Handles(syscall.SIGQUIT), st.Handles(syscall.SIGINT), st.Handles(syscall.SIGUSR1))
	}
	// A process that has not installed a SIGQUIT handler (e.g. sleep, or a
	// JVM early in startup) must not be signalled.
	st.SigCgt, st.SigIgn = 0, 0
	if st.Handles(syscall.SIGQUIT) {
		t.Error("Handles SIGQUIT with empty masks")
	}
	if _, err := ParseStatus([]byte("Name:\tx\n")); err == nil {
		t.Error("status without Uid accepted")
	}
}

func TestParseStartTime(t *testing.T) {
	stat := "4242 (weird ) name) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 20 0 987654 1000 100\n"
	got, err := ParseStartTime([]byte(stat))
	if err != nil || got != 987654 {
		t.Errorf("ParseStartTime = %d, %v; want 987654", got, err)
	}
	if _, err := ParseStartTime([]byte("4242 (x) S 1")); err == nil {
		t.Error("short stat accepted")
	}
}

func mapsLine(path string) string {
	return fmt.Sprintf("7f0000000000-7f0000100000 r-xp 00000000 08:01 1234   %s\n", path)
}

// openJ9Maps is an OpenJ9 JVM's maps: the lib/j9vm/libjvm.so redirector
// first, then the VM itself.
var openJ9Maps = mapsLine("/opt/openj9/lib/j9vm/libjvm.so") + mapsLine("/opt/openj9/lib/default/libj9vm29.so")

func TestClassifyMaps(t *testing.T) {
	for _, c := range []struct {
		maps  string
		want  string
		agent bool
	}{
		{mapsLine("/usr/bin/sleep") + mapsLine("/usr/lib/x86_64-linux-gnu/libc.so.6"), "", false},
		{mapsLine("/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so"), HotSpot, false},
		{mapsLine("/opt/jdk/lib/server/libjvm.so (deleted)"), HotSpot, false},
		{openJ9Maps, OpenJ9, false},
		{mapsLine("/opt/openj9/lib/default/libj9vm29.so") + mapsLine("/opt/openj9/lib/j9vm/libjvm.so"), OpenJ9, false},
		{mapsLine("/opt/libjvm.so.bak") + "7f0000000000-7f0000100000 rw-p 00000000 00:00 0   [heap]\n", "", false},
		{mapsLine("/usr/lib/jvm/x/lib/server/libjvm.so") + mapsLine("/tmp/djx-1/libdjxagent.so"), HotSpot, true},
		{"", "", false},
	} {
		if got, agent := ClassifyMaps([]byte(c.maps)); got != c.want || agent != c.agent {
			t.Errorf("ClassifyMaps(%q) = %q, %v; want %q, %v", c.maps, got, agent, c.want, c.agent)
		}
	}
}

// fakeProc writes a /proc/PID directory below root.
func fakeProc(t *testing.T, root string, pid int, status, maps string) {
	t.Helper()
	dir := filepath.Join(root, strconv.Itoa(pid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	stat := strconv.Itoa(pid) + " (java) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 20 0 4200 1000 100\n"
	for name, text := range map[string]string{"status": status, "maps": maps, "stat": stat} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestInspect(t *testing.T) {
	root := t.TempDir()
	fakeProc(t, root, 4242, statusText, openJ9Maps)
	p, err := Inspect(root, 4242)
	want := Process{PID: 4242, NSPID: 1, UID: 1001, GID: 2001, Kind: OpenJ9, Container: true, Start: 4200}
	if err != nil || p != want {
		t.Errorf("Inspect = %+v, %v; want %+v", p, err, want)
	}
	fakeProc(t, root, 4243, "Tgid:\t4242\nUid:\t0 0 0 0\nGid:\t0 0 0 0\n", openJ9Maps)
	if _, err := Inspect(root, 4243); err == nil {
		t.Error("a thread inspected as a process")
	}
	fakeProc(t, root, 4244, "State:\tZ (zombie)\nUid:\t0 0 0 0\nGid:\t0 0 0 0\n", "")
	if _, err := Inspect(root, 4244); !errors.Is(err, ErrNoProcess) {
		t.Errorf("zombie: %v, want ErrNoProcess", err)
	}
	fakeProc(t, root, 4245, "Uid:\t0 0 0 0\nGid:\t0 0 0 0\n", mapsLine("/usr/bin/sleep"))
	if p, err := Inspect(root, 4245); err != nil || p.Kind != "" || p.NSPID != 4245 || p.Container {
		t.Errorf("no JVM, no NSpid: %+v, %v", p, err)
	}
	for _, pid := range []int{0, -1, 9999} {
		if _, err := Inspect(root, pid); !errors.Is(err, ErrNoProcess) {
			t.Errorf("Inspect(%d) = %v, want ErrNoProcess", pid, err)
		}
	}
}

// TestThreadIDs reads each task's innermost NSpid and skips tasks that are
// not threads or have no NSpid line.
func TestThreadIDs(t *testing.T) {
	proc := t.TempDir()
	write := func(task, nspid string) {
		dir := filepath.Join(proc, "4242", "task", task)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		st := "Name:\tjava\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\n"
		if nspid != "" {
			st += "NSpid:\t" + task + "\t" + nspid + "\n"
		}
		if err := os.WriteFile(filepath.Join(dir, "status"), []byte(st), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("4242", "1")
	write("4250", "9")
	write("4251", "")
	write("x", "3")
	m, err := ThreadIDs(proc, 4242)
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 2 || m[1] != 4242 || m[9] != 4250 {
		t.Errorf("thread ids %v, want map[1:4242 9:4250]", m)
	}
	if _, err := ThreadIDs(proc, 1); !errors.Is(err, ErrNoProcess) {
		t.Errorf("a pid without tasks: %v, want ErrNoProcess", err)
	}
}

func TestRootMapped(t *testing.T) {
	if !RootMapped(Mount, os.Getpid()) {
		t.Error("our own user namespace does not map root")
	}
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "7"), 0o755)
	os.WriteFile(filepath.Join(root, "7", "uid_map"), []byte("         0     100000      65536\n"), 0o644)
	if RootMapped(root, 7) {
		t.Error("a user namespace mapping 0 to 100000 maps root")
	}
}

// FuzzParse: status, stat and maps are the kernel's format, but a target
// chooses its name and the names of the files it maps.
func FuzzParse(f *testing.F) {
	f.Add([]byte(statusText))
	f.Add([]byte(openJ9Maps))
	f.Add([]byte("4242 (weird ) name) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 20 0 987654 1000 100\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if st, err := ParseStatus(data); err == nil {
			st.Handles(syscall.SIGQUIT)
		}
		ParseStartTime(data)
		ClassifyMaps(data)
		ParseMaps(data)
		ParseMountinfo(data)
		SplitNUL(data)
	})
}

// TestMapsAndMounts parses maps and mountinfo as the kernel writes them
// and says which files lie on filesystems that may block.
func TestMapsAndMounts(t *testing.T) {
	maps := "7f0000000000-7f0000001000 r--s 00001000 00:2f 12 /home/u/my fuse/f (deleted)\n" +
		"7f0000002000-7f0000003000 rw-p 00000000 00:00 0 \n" +
		"7f0000003000-7f0000004000 r-xp 00000000 fe:00 99      /usr/lib/jvm/lib/server/libjvm.so\n" +
		"7ffc00000000-7ffc00021000 rw-p 00000000 00:00 0                          [stack]\n"
	ms, err := ParseMaps([]byte(maps))
	if err != nil {
		t.Fatal(err)
	}
	want := []Mapping{
		{Start: 0x7f0000000000, End: 0x7f0000001000, Offset: 0x1000, Perms: "r--s", Major: 0, Minor: 0x2f, Inode: 12, Path: "/home/u/my fuse/f (deleted)"},
		{Start: 0x7f0000002000, End: 0x7f0000003000, Perms: "rw-p"},
		{Start: 0x7f0000003000, End: 0x7f0000004000, Perms: "r-xp", Major: 0xfe, Inode: 99, Path: "/usr/lib/jvm/lib/server/libjvm.so"},
		{Start: 0x7ffc00000000, End: 0x7ffc00021000, Perms: "rw-p", Path: "[stack]"},
	}
	if len(ms) != len(want) {
		t.Fatalf("%d mappings, want %d", len(ms), len(want))
	}
	for i := range want {
		if ms[i] != want[i] {
			t.Errorf("mapping %d: %+v, want %+v", i, ms[i], want[i])
		}
	}
	if _, err := ParseMaps([]byte("7f-zz r--p 0 00:00 0\n")); err == nil {
		t.Error("a bad range parsed")
	}

	mounts := ParseMountinfo([]byte("27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n" +
		"99 27 0:47 / /home/u/my\\040fuse rw,nosuid shared:5 - fuse.sshfs u@h: rw\n" +
		"100 27 0:48 / /mnt/n rw - nfs4 srv:/x rw\n" +
		"garbage\n"))
	if len(mounts) != 3 || mounts[1].Point != "/home/u/my fuse" || mounts[1].Minor != 47 {
		t.Fatalf("mounts %+v", mounts)
	}
	for _, c := range []struct {
		path, typ string
	}{{"/home/u/my fuse/f", "fuse.sshfs"}, {"/home/u/my fusex", "ext4"}, {"/mnt/n", "nfs4"}, {"/tmp/perf-1.map", "ext4"}} {
		if got := FSTypeAt(mounts, c.path); got != c.typ {
			t.Errorf("FSTypeAt(%q) = %q, want %q", c.path, got, c.typ)
		}
	}
	if got := FSTypeOf(mounts, 0, 47); got != "fuse.sshfs" {
		t.Errorf("FSTypeOf(0:47) = %q", got)
	}
	for typ, want := range map[string]bool{"fuse": true, "fuse.sshfs": true, "fuseblk": true, "nfs4": true, "cifs": true, "ext4": false, "tmpfs": false, "overlay": false, "": false} {
		if MayBlock(typ) != want {
			t.Errorf("MayBlock(%q) = %v", typ, !want)
		}
	}
}
