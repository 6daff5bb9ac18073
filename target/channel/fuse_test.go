package channel

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/djx-bpf/djx-bpf/internal/fusetest"
	"github.com/djx-bpf/djx-bpf/safety/procfs"
)

func TestMain(m *testing.M) {
	fusetest.Main()
	os.Exit(m.Run())
}

// TestCreateRefusesFUSETmp: a target whose /tmp is its user's FUSE
// filesystem (mounted in its user namespace), whose server never answers
// a stat of it, gets no channel, at once: a stat, a mkdir or a write there
// would wait for good.
func TestCreateRefusesFUSETmp(t *testing.T) {
	root := t.TempDir()
	tmp := filepath.Join(root, "tmp")
	if err := os.Mkdir(tmp, 0o1777); err != nil {
		t.Fatal(err)
	}
	h := fusetest.StartWith(t, fusetest.Options{Dir: tmp, SilentGetattr: true})
	spec := Spec{Root: fmt.Sprintf("%s/%d/root%s", procfs.Mount, h.Pid, root), UID: os.Getuid(), GID: os.Getgid(), Library: []byte("x")}
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		c, err := Create(spec)
		if err == nil {
			c.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, procfs.ErrMayBlock) {
			t.Fatalf("Create: %v, want ErrMayBlock", err)
		}
		t.Logf("refused in %v: %v", time.Since(start), err)
	case <-time.After(10 * time.Second):
		t.Fatal("Create did not return in 10 s")
	}
}
