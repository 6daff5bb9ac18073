package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// slotDir makes a directory of two slots and points SlotsEnv at it.
func slotDir(t *testing.T) string {
	dir := t.TempDir()
	for _, n := range []string{"slot0", "slot1"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(SlotsEnv, dir)
	t.Setenv(SlotHeldEnv, "")
	return dir
}

// At most two tests hold a slot at once, a test that holds every slot
// runs beside none, and a subtest runs in its parent's slots.
func TestSlots(t *testing.T) {
	slotDir(t)
	var running, most, alone atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := &slotT{T: t, name: fmt.Sprintf("h%d", i)}
			if i == 3 {
				Alone(h)
				alone.Add(1)
				if n := running.Load(); n != 0 {
					t.Errorf("the lone test runs beside %d others", n)
				}
				sub := &slotT{T: t, name: h.name + "/sub"}
				Slot(sub) // would wait forever outside its parent's slots
				sub.cleanup()
				time.Sleep(50 * time.Millisecond)
				alone.Add(-1)
				h.cleanup()
				return
			}
			Slot(h)
			n := running.Add(1)
			if alone.Load() != 0 {
				t.Errorf("%s runs beside the lone test", h.name)
			}
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			time.Sleep(50 * time.Millisecond)
			running.Add(-1)
			h.cleanup()
		}()
	}
	wg.Wait()
	if m := most.Load(); m != 2 {
		t.Errorf("at most %d tests held slots at once, want 2", m)
	}
}

// A taker of low priority gets no slot while a test waits for all of
// them, and gets one once none does.
func TestSlotsLowWaits(t *testing.T) {
	slotDir(t)
	a, b := &slotT{T: t, name: "a"}, &slotT{T: t, name: "b"}
	Slot(a)
	Slot(b) // both slots taken
	highGot := make(chan struct{})
	h := &slotT{T: t, name: "high"}
	go func() {
		Alone(h)
		close(highGot)
	}()
	time.Sleep(100 * time.Millisecond) // h waits, holding "wanted"
	lowGot := make(chan struct{})
	l := &slotT{T: t, name: "low"}
	go func() {
		holdAs(l, 1, true)
		close(lowGot)
	}()
	time.Sleep(100 * time.Millisecond)
	a.cleanup() // one slot free: it must go to h
	time.Sleep(200 * time.Millisecond)
	select {
	case <-lowGot:
		t.Fatal("the low-priority taker got a slot while a test waited for all")
	default:
	}
	b.cleanup()
	select {
	case <-highGot:
	case <-time.After(5 * time.Second):
		t.Fatal("the test waiting for all slots got none")
	}
	h.cleanup()
	select {
	case <-lowGot:
	case <-time.After(5 * time.Second):
		t.Fatal("the low-priority taker got no slot once one was free")
	}
	l.cleanup()
}

// Without SlotsEnv, or in a binary that holds a slot already, Slot takes
// none.
func TestSlotsOff(t *testing.T) {
	dir := slotDir(t)
	t.Setenv(SlotHeldEnv, "1")
	Alone(t)
	t.Setenv(SlotHeldEnv, "")
	t.Setenv(SlotsEnv, "")
	Alone(t)
	if held(t.Name()) {
		t.Errorf("slots taken with %s unset or %s set", SlotsEnv, SlotHeldEnv)
	}
	f := lockFile(t, filepath.Join(dir, "slot0"), unix.LOCK_EX|unix.LOCK_NB)
	if f == nil {
		t.Fatal("slot0 is taken")
	}
	f.Close()
}

// slotT is a testing.TB with its own name and cleanups, so that one test
// can act as several concurrent holders.
type slotT struct {
	*testing.T
	name     string
	cleanups []func()
}

func (s *slotT) Name() string     { return s.name }
func (s *slotT) Cleanup(f func()) { s.cleanups = append(s.cleanups, f) }
func (s *slotT) cleanup() {
	for i := len(s.cleanups) - 1; i >= 0; i-- {
		s.cleanups[i]()
	}
}
