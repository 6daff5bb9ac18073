package safefs

import (
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/djx-bpf/djx-bpf/internal/fusetest"
	"github.com/djx-bpf/djx-bpf/safety/procfs"
)

func TestMain(m *testing.M) {
	fusetest.Main()
	os.Exit(m.Run())
}

// TestReadFileRefusesFUSE: a file on its owner's FUSE filesystem, whose
// server answers the open but never a READ, is refused after the open by
// its mount (found in the owner's mountinfo through the /proc/PID/root
// path), before anything reads it. (An os.File read of it never returns.)
func TestReadFileRefusesFUSE(t *testing.T) {
	h := fusetest.Start(t)
	root := fmt.Sprintf("%s/%d/root", procfs.Mount, h.Pid)
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := ReadFile(root, h.Dir+"/"+fusetest.FileName, 1<<20)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, procfs.ErrMayBlock) {
			t.Fatalf("ReadFile: %v, want ErrMayBlock", err)
		}
		t.Logf("refused in %v: %v", time.Since(start), err)
	case <-time.After(10 * time.Second):
		t.Fatal("ReadFile did not return in 10 s")
	}
}
