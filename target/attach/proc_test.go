package attach

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

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

// fakeJVM writes /proc/PID of a JVM whose maps hold libs below root.
func fakeJVM(t *testing.T, root string, pid int, libs ...string) {
	t.Helper()
	dir := filepath.Join(root, strconv.Itoa(pid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var maps string
	for _, l := range libs {
		maps += "7f0000000000-7f0000100000 r-xp 00000000 08:01 1234   " + l + "\n"
	}
	files := map[string]string{
		"status": "Name:\tjava\nState:\tS (sleeping)\nTgid:\t" + strconv.Itoa(pid) + "\nUid:\t1000\t1000\t1000\t1000\nGid:\t1000\t1000\t1000\t1000\nNSpid:\t" + strconv.Itoa(pid) + "\t1\n",
		"stat":   strconv.Itoa(pid) + " (java) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 20 0 4200 1000 100\n",
		"maps":   maps,
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestInspectVMKind: an OpenJ9 JVM, which maps lib/j9vm/libjvm.so beside
// libj9vm29.so, is OpenJ9 (discover says so too: TestInspectVMKind there),
// and HotSpot's libjvm.so alone is HotSpot.
func TestInspectVMKind(t *testing.T) {
	saved := procRoot
	procRoot = t.TempDir()
	defer func() { procRoot = saved }()
	fakeJVM(t, procRoot, 4242, "/opt/openj9/lib/j9vm/libjvm.so", "/opt/openj9/lib/default/libj9vm29.so")
	if _, err := Inspect(4242); !errors.Is(err, ErrUnsupportedVM) {
		t.Errorf("OpenJ9: Inspect = %v, want ErrUnsupportedVM", err)
	}
	fakeJVM(t, procRoot, 4243, "/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so")
	tg, err := Inspect(4243)
	if err != nil {
		t.Fatalf("HotSpot: Inspect = %v", err)
	}
	if tg.PID != 4243 || tg.NSPID != 1 || tg.UID != 1000 || tg.Start != 4200 || tg.Root != filepath.Join(procRoot, "4243", "root") {
		t.Errorf("HotSpot: target %+v", tg)
	}
}
