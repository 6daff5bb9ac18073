package vmstructs

import (
	"bufio"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/djx-bpf/djx-bpf/internal/fusetest"
	"github.com/djx-bpf/djx-bpf/internal/testenv"
	"github.com/djx-bpf/djx-bpf/safety/procfs"
)

func TestMain(m *testing.M) {
	fusetest.Main()
	os.Exit(m.Run())
}

// TestOpenFUSEVMStructs: a JVM whose gHotSpotVMStructs points into a
// mapping of a FUSE file that never answers a read (its user maps it, and
// overwrites the pointer, which the JVM never reads after start-up) makes
// Open fail at once with a clear error, where it used to hang for good.
func TestOpenFUSEVMStructs(t *testing.T) {
	testenv.Root(t)
	jdk := testenv.JDKs(t)[0]
	h := fusetest.Start(t)
	file := filepath.Join(h.Dir, fusetest.FileName)
	src, err := filepath.Abs(filepath.Join("testdata", "MapIdle.java"))
	if err != nil {
		t.Fatal(err)
	}
	// The JVM runs in the helper's mount namespace, where the file is.
	cmd := exec.Command("nsenter", "-t", strconv.Itoa(h.Pid), "-m", "--", jdk.Java(), "-Xmx32m",
		src, file)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); stdin.Close(); cmd.Wait() })
	line := make(chan string, 1)
	go func() { s, _ := bufio.NewReader(stdout).ReadString('\n'); line <- s }()
	select {
	case s := <-line:
		if s != "ready\n" {
			t.Fatalf("MapIdle said %q", s)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("MapIdle not ready in 60 s")
	}
	pid := cmd.Process.Pid // nsenter execs java in place

	ms, err := procfs.Maps(procfs.Mount, pid)
	if err != nil {
		t.Fatal(err)
	}
	var addr uint64
	for _, m := range ms {
		if strings.HasSuffix(m.Path, "/"+fusetest.FileName) && strings.Contains(m.Path, filepath.Base(h.Dir)) {
			addr = m.Start
		}
	}
	if addr == 0 {
		t.Fatalf("pid %d does not map %s", pid, file)
	}
	syms, err := FindSymbols(procfs.Mount, pid)
	if err != nil {
		t.Fatal(err)
	}
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], addr)
	at := syms.Addrs["gHotSpotVMStructs"]
	local := []unix.Iovec{{Base: &b[0], Len: 8}}
	if n, err := unix.ProcessVMWritev(pid, local, []unix.RemoteIovec{{Base: uintptr(at), Len: 8}}, 0); n != 8 || err != nil {
		t.Fatalf("overwrite gHotSpotVMStructs: %d, %v", n, err)
	}

	done := make(chan error, 1)
	start := time.Now()
	go func() { _, err := Open(pid); done <- err }()
	select {
	case err := <-done:
		// vmstructs calls the table malformed, quoting why.
		if err == nil || !strings.Contains(err.Error(), procfs.ErrMayBlock.Error()) || !strings.Contains(err.Error(), "fuse.djxfusetest") {
			t.Fatalf("Open: %v; want the mapping refused", err)
		}
		t.Logf("Open failed after %v: %v", time.Since(start), err)
	case <-time.After(10 * time.Second):
		t.Fatal("Open did not return in 10 s") // the helper's cleanup aborts the read
	}
}
