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

// A thread's stack merged by the kernel with a 64 MiB anonymous mapping
// below it (a direct buffer): only what is near the stack pointer is the
// stack, the rest stays anonymous, and the mapping is not learned whole.
func TestMergedStack(t *testing.T) {
	maps := "7f0000000000-7f0004100000 rw-p 00000000 00:00 0 \n"
	m := Build(maps, JVMText{}, nil, 1)
	n := &Namer{m: m, hints: map[uint32]uint64{}, now: time.Now, last: time.Now()}
	const top = 0x7f0004100000
	rsp := uint64(top - 0x2000)
	if r := n.Name(rsp+0x40, 42, rsp); r.Name != Stack || r.TID != 42 {
		t.Errorf("a spill slot above rsp: %+v", r)
	}
	if r := n.Name(0x7f0000001000, 42, rsp); r.Name != Anonymous {
		t.Errorf("the buffer at the mapping's bottom: %+v", r)
	}
	if r := n.Name(0x7f0000001000, 0, 0); r.Name != Anonymous {
		t.Errorf("the buffer without a stack pointer: %+v", r)
	}
}

// An address that a re-read leaves unmapped doubles the wait before the
// next re-read, up to maxReloadWait; one that a re-read finds resets it.
func TestNamerBacksOffStrays(t *testing.T) {
	n, err := New(os.Getpid(), JVMText{})
	if err != nil {
		t.Fatal(err)
	}
	clock := n.last
	n.now = func() time.Time { return clock }
	const stray = 0x10 // never mapped
	reloads := func() uint64 { return n.Stats().Reloads }
	want := []time.Duration{ReloadInterval, 2 * ReloadInterval, 4 * ReloadInterval}
	for _, w := range want {
		before := reloads()
		clock = clock.Add(w - time.Millisecond)
		n.Name(stray, 0, 0)
		if reloads() != before {
			t.Fatalf("re-read %v after the last, want a wait of %v", w-time.Millisecond, w)
		}
		clock = clock.Add(time.Millisecond)
		n.Name(stray, 0, 0)
		if reloads() != before+1 {
			t.Fatalf("no re-read after %v", w)
		}
	}
	for i := 0; i < 10; i++ {
		clock = clock.Add(maxReloadWait)
		n.Name(stray, 0, 0)
	}
	if n.wait != maxReloadWait {
		t.Errorf("wait %v, want at most %v", n.wait, maxReloadWait)
	}
	b, err := unix.Mmap(-1, 0, 1<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(b)
	b[0] = 1
	clock = clock.Add(maxReloadWait)
	if got := n.Name(uint64(uintptr(unsafePointer(b))), 0, 0); got.Name != Anonymous {
		t.Errorf("new mapping: %+v, want anonymous", got)
	}
	if n.wait != ReloadInterval {
		t.Errorf("wait %v after a re-read that found the address, want %v", n.wait, ReloadInterval)
	}
}
