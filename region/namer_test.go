package region

import (
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The Namer on this test process: a mapping made after the snapshot is a
// miss that re-reads the maps, at most once per ReloadInterval; a sampled
// rsp makes its mapping the sampling thread's stack.
func TestNamerReloadAndLearn(t *testing.T) {
	n, err := New(os.Getpid(), JVMText{})
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Now()
	n.now = func() time.Time { return clock }
	mmap := func() uint64 {
		b, err := unix.Mmap(-1, 0, 1<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Munmap(b) })
		b[0] = 1
		return uint64(uintptr(unsafePointer(b)))
	}
	clock = clock.Add(ReloadInterval)
	a := mmap()
	if got := n.Name(a, 0, 0); got.Name != Anonymous {
		t.Errorf("new mapping after the interval: %+v, want anonymous", got)
	}
	if s := n.Stats(); s.Reloads != 2 || s.Misses != 1 {
		t.Errorf("stats %+v, want 2 reloads (New and the miss), 1 miss", s)
	}
	b := mmap()
	if got := n.Name(b, 0, 0); got.Name != Unknown {
		t.Errorf("new mapping within the interval: %+v, want unknown (rate-limited)", got)
	}
	clock = clock.Add(ReloadInterval)
	if got := n.Name(b, 0, 0); got.Name != Anonymous {
		t.Errorf("new mapping after the interval: %+v, want anonymous", got)
	}
	// A sample on thread tid with its rsp in a's mapping.
	tid := uint32(unix.Gettid())
	if got := n.Name(a+64, tid, a+512); got.Name != Stack || got.TID != tid || got.Thread == "" {
		t.Errorf("address in the sampled rsp's mapping: %+v, want the stack of %d", got, tid)
	}
	if got := n.Name(a+4096, 0, 0); got.TID != tid {
		t.Errorf("learned stack forgotten: %+v", got)
	}
	if s := n.Stats(); s.Learned != 1 {
		t.Errorf("stats %+v, want 1 learned", s)
	}
}
