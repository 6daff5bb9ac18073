package elfsafe

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/djx-bpf/djx-bpf/hotspot/targetmem"
	"github.com/djx-bpf/djx-bpf/internal/fusetest"
	"github.com/djx-bpf/djx-bpf/safety/procfs"
)

func TestMain(m *testing.M) {
	fusetest.Main()
	os.Exit(m.Run())
}

// TestOpenMappedRefusesFUSE: a library mapped from a FUSE file whose
// reads never answer is refused at once, by its device in maps and
// mountinfo, before anything opens or reads it.
func TestOpenMappedRefusesFUSE(t *testing.T) {
	h := fusetest.Start(t)
	done := make(chan error, 1)
	go func() {
		f, err := OpenMapped(procfs.Mount, h.Pid, h.Addr, h.Addr+fusetest.FileSize, h.Dir+"/"+fusetest.FileName)
		if err == nil {
			f.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, procfs.ErrMayBlock) {
			t.Fatalf("OpenMapped: %v, want ErrMayBlock", err)
		}
		t.Log(err)
	case <-time.After(5 * time.Second):
		// The open or a read waits on the FUSE server: Kill aborts it.
		t.Fatal("OpenMapped did not return in 5 s")
	}
}

// TestOpenMappedUnseenFUSEEnds: when the checks cannot see the FUSE
// filesystem (here a fake /proc hides its mapping and its mount, as a
// remount between check and open would), the reads still run in an
// executor: OpenMapped fails with targetmem.ErrHung after
// targetmem.Timeout instead of hanging for good.
func TestOpenMappedUnseenFUSEEnds(t *testing.T) {
	h := fusetest.Start(t)
	proc := t.TempDir()
	pidDir := filepath.Join(proc, strconv.Itoa(h.Pid))
	if err := os.MkdirAll(pidDir, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(pidDir, "maps"), nil, 0o644)
	os.WriteFile(filepath.Join(pidDir, "mountinfo"), nil, 0o644)
	if err := os.Symlink(fmt.Sprintf("/proc/%d/root", h.Pid), filepath.Join(pidDir, "root")); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		f, err := OpenMapped(proc, h.Pid, h.Addr, h.Addr+fusetest.FileSize, h.Dir+"/"+fusetest.FileName)
		if err == nil {
			f.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		took := time.Since(start)
		if !errors.Is(err, targetmem.ErrHung) {
			t.Fatalf("OpenMapped: %v, want ErrHung", err)
		}
		if took < targetmem.Timeout {
			t.Errorf("gave up after %v, before the timeout", took)
		}
		t.Logf("gave up after %v: %v", took, err)
	case <-time.After(targetmem.Timeout + 7*time.Second):
		t.Fatalf("OpenMapped did not return in %v", targetmem.Timeout+7*time.Second)
	}
	// The process's files are given up on: the next open fails at once,
	// rather than after another Timeout.
	start = time.Now()
	f, err := OpenMapped(proc, h.Pid, h.Addr, h.Addr+fusetest.FileSize, h.Dir+"/"+fusetest.FileName)
	if err == nil {
		f.Close()
	}
	if !errors.Is(err, targetmem.ErrHung) || time.Since(start) > time.Second {
		t.Errorf("a later OpenMapped: %v after %v; want ErrHung at once", err, time.Since(start))
	}
}
