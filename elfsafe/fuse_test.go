package elfsafe

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/djx-bpf/djx-bpf/internal/fusetest"
	"github.com/djx-bpf/djx-bpf/procfs"
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
