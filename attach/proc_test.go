package attach

import (
	"errors"
	"fmt"
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
	st, err := parseStatus([]byte(statusText))
	if err != nil {
		t.Fatal(err)
	}
	if st.uid != 1001 || st.gid != 2001 || st.nspid != 1 || st.state != 'S' || st.tgid != 4242 {
		t.Errorf("status = %+v; want effective ids 1001/2001, innermost nspid 1, state S", st)
	}
	if !st.handles(syscall.SIGQUIT) || !st.handles(syscall.SIGINT) || st.handles(syscall.SIGUSR1) {
		t.Errorf("handles: SIGQUIT %v SIGINT %v SIGUSR1 %v", st.handles(syscall.SIGQUIT), st.handles(syscall.SIGINT), st.handles(syscall.SIGUSR1))
	}
	// A process that has not installed a SIGQUIT handler (e.g. sleep, or a
	// JVM early in startup) must not be signalled.
	st.sigCgt, st.sigIgn = 0, 0
	if st.handles(syscall.SIGQUIT) {
		t.Error("handles SIGQUIT with empty masks")
	}
	if _, err := parseStatus([]byte("Name:\tx\n")); err == nil {
		t.Error("status without Uid accepted")
	}
}

func TestParseStartTime(t *testing.T) {
	stat := "4242 (weird ) name) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 20 0 987654 1000 100\n"
	got, err := parseStartTime([]byte(stat))
	if err != nil || got != 987654 {
		t.Errorf("parseStartTime = %d, %v; want 987654", got, err)
	}
	if _, err := parseStartTime([]byte("4242 (x) S 1")); err == nil {
		t.Error("short stat accepted")
	}
}

func TestClassifyMaps(t *testing.T) {
	line := func(path string) string {
		return fmt.Sprintf("7f0000000000-7f0000100000 r-xp 00000000 08:01 1234   %s\n", path)
	}
	for _, c := range []struct {
		maps string
		want vmKind
	}{
		{line("/usr/bin/sleep") + line("/usr/lib/x86_64-linux-gnu/libc.so.6"), vmNone},
		{line("/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so"), vmHotSpot},
		{line("/opt/jdk/lib/server/libjvm.so (deleted)"), vmHotSpot},
		{line("/opt/j9/lib/j9vm/libjvm.so") + line("/opt/j9/lib/default/libj9vm29.so"), vmOpenJ9},
		{line("/opt/libjvm.so.bak") + "7f0000000000-7f0000100000 rw-p 00000000 00:00 0   [heap]\n", vmNone},
		{"", vmNone},
	} {
		if got := classifyMaps([]byte(c.maps)); got != c.want {
			t.Errorf("classifyMaps(%q) = %v, want %v", c.maps, got, c.want)
		}
	}
}

func TestDisabledByFlags(t *testing.T) {
	cmd := func(args ...string) []byte {
		var b []byte
		for _, a := range args {
			b = append(append(b, a...), 0)
		}
		return b
	}
	for _, c := range []struct {
		cmdline, environ []byte
		want             bool
	}{
		{cmd("java", "-cp", ".", "Main"), nil, false},
		{cmd("java", "-XX:+DisableAttachMechanism", "Main"), nil, true},
		{cmd("java", "-XX:+DisableAttachMechanism", "-XX:-DisableAttachMechanism", "Main"), nil, false},
		{cmd("java", "Main"), cmd("JAVA_TOOL_OPTIONS=-Xmx1g -XX:+DisableAttachMechanism"), true},
		{cmd("java", "-XX:-DisableAttachMechanism", "Main"), cmd("JAVA_TOOL_OPTIONS=-XX:+DisableAttachMechanism"), false},
		{cmd("java", "-XX:-DisableAttachMechanism", "Main"), cmd("_JAVA_OPTIONS=-XX:+DisableAttachMechanism"), true},
	} {
		if got := disabledByFlags(c.cmdline, c.environ); got != c.want {
			t.Errorf("disabledByFlags(%q, %q) = %v, want %v", c.cmdline, c.environ, got, c.want)
		}
	}
}

func TestInspectErrors(t *testing.T) {
	if _, err := Inspect(0); !errors.Is(err, ErrNoProcess) {
		t.Errorf("Inspect(0) err = %v, want ErrNoProcess", err)
	}
	// pid_max is at most 2^22, so this pid cannot exist.
	if _, err := Inspect(1 << 23); !errors.Is(err, ErrNoProcess) {
		t.Errorf("Inspect(1<<23) err = %v, want ErrNoProcess", err)
	}
	// The test binary itself is not a JVM.
	if _, err := Inspect(syscall.Getpid()); !errors.Is(err, ErrNotJVM) {
		t.Errorf("Inspect(self) err = %v, want ErrNotJVM", err)
	}
}
