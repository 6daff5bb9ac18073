package attach

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/djx-bpf/djx-bpf/internal/fusetest"
	"github.com/djx-bpf/djx-bpf/safety/procfs"
)

// TestTriggerSkipsFUSEDir: a working directory on its user's FUSE
// filesystem, whose server never answers a stat, is passed over at once
// for /tmp: a stat or a create there would wait for good.
func TestTriggerSkipsFUSEDir(t *testing.T) {
	h := fusetest.StartWith(t, fusetest.Options{SilentGetattr: true})
	fuseDir := fmt.Sprintf("%s/%d/root%s", procfs.Mount, h.Pid, h.Dir)
	cwd := dirOf(t, fuseDir)
	cwd.mustOwn, cwd.ownerUID = true, os.Geteuid()
	fallback := t.TempDir()
	type result struct {
		tr  *trigger
		err error
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		tr, err := createTrigger([]triggerDir{cwd, dirOf(t, fallback)}, ".attach_pid42", os.Geteuid(), os.Getegid())
		done <- result{tr, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatal(r.err)
		}
		defer r.tr.remove()
		if r.tr.name != filepath.Join(fallback, ".attach_pid42") {
			t.Errorf("trigger made at %s, want in the fallback %s", r.tr.name, fallback)
		}
		t.Logf("fell back in %v", time.Since(start))
	case <-time.After(10 * time.Second):
		t.Fatal("createTrigger did not return in 10 s")
	}
}
