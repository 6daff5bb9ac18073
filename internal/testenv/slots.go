package testenv

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// SlotsEnv names the directory of the machine's test slots: one lock file
// per CPU (slot0, slot1, ...) and a turnstile. `make test` runs
// cmd/djx-bpf beside the other packages; an end-to-end test holds a slot
// while it runs, so that they share the CPUs without crowding a test that
// measures shares. Unset (a plain `go test`), slots are not taken.
const SlotsEnv = "DJX_TEST_SLOTS"

// SlotHeldEnv is set for a program that holds one slot for its whole run
// (scripts/test-slot, around each fuzz target): its tests take no more.
const SlotHeldEnv = "DJX_TEST_SLOT_HELD"

// SlotLowEnv marks the test binaries of the packages tested beside
// cmd/djx-bpf: their live tests take a slot in Root and JDKs, and none
// while a test of cmd/djx-bpf waits for all of them.
const SlotLowEnv = "DJX_TEST_SLOT_LOW"

var (
	slotsMu sync.Mutex
	holders = map[string]bool{} // tests holding slots, by name
)

// Slot holds one test slot until t ends. A test whose parent holds slots
// runs in them.
func Slot(t testing.TB) { hold(t, 1) }

// Alone holds every slot until t ends: for a test whose shares or timing
// the machine's other load would disturb. Its subtests run in its slots.
func Alone(t testing.TB) { hold(t, 0) }

// hold takes n slots (0: all) for t. Single takers try in turn as slots
// free; one that waits for all slots holds the turnstile meanwhile and
// declares it through a shared lock on "wanted": takers of low priority
// (SlotLowEnv) hold back, so that it is not starved by single ones.
func hold(t testing.TB, n int) {
	t.Helper()
	holdAs(t, n, os.Getenv(SlotLowEnv) != "")
}

func holdAs(t testing.TB, n int, low bool) {
	t.Helper()
	dir := os.Getenv(SlotsEnv)
	if dir == "" || os.Getenv(SlotHeldEnv) != "" || held(t.Name()) {
		return
	}
	paths, err := filepath.Glob(filepath.Join(dir, "slot*"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("%s=%s has no slot files (make test creates them): %v", SlotsEnv, dir, err)
	}
	if n == 0 || n > len(paths) {
		n = len(paths)
	}
	wanted := filepath.Join(dir, "wanted")
	if !low && n > 1 {
		w := lockFile(t, wanted, unix.LOCK_SH)
		defer w.Close()
	}
	start := time.Now()
	var got []*os.File
	for len(got) < n {
		turn := lockFile(t, filepath.Join(dir, "turnstile"), unix.LOCK_EX)
		if n == 1 {
			// One try at a time: single takers share the slots as they
			// free, those of low priority none while a test waits for all.
			if !(low && waits(t, wanted)) {
				got = freeSlots(t, paths, 1)
			}
			turn.Close()
			if len(got) < n {
				time.Sleep(50 * time.Millisecond)
			}
			continue
		}
		// The turnstile is held until all n are taken: no single taker
		// gets in meanwhile.
		for got = freeSlots(t, paths, n); len(got) < n; {
			time.Sleep(50 * time.Millisecond)
			got = append(got, freeSlots(t, paths, n-len(got))...)
		}
		turn.Close()
	}
	if w := time.Since(start); w > 30*time.Second {
		t.Logf("waited %v for %d test slot(s)", w.Round(time.Second), n)
	}
	slotsMu.Lock()
	holders[t.Name()] = true
	slotsMu.Unlock()
	t.Cleanup(func() {
		slotsMu.Lock()
		delete(holders, t.Name())
		slotsMu.Unlock()
		for _, f := range got {
			f.Close()
		}
	})
}

// freeSlots locks up to n of the slot files that are free.
func freeSlots(t testing.TB, paths []string, n int) []*os.File {
	var got []*os.File
	for _, p := range paths {
		if len(got) == n {
			break
		}
		if f := lockFile(t, p, unix.LOCK_EX|unix.LOCK_NB); f != nil {
			got = append(got, f)
		}
	}
	return got
}

// waits says whether a taker of high priority waits for slots: it holds
// a shared lock on wanted.
func waits(t testing.TB, wanted string) bool {
	f := lockFile(t, wanted, unix.LOCK_EX|unix.LOCK_NB)
	if f == nil {
		return true
	}
	f.Close()
	return false
}

// held says whether the test named name, or one of its parents, holds
// slots.
func held(name string) bool {
	slotsMu.Lock()
	defer slotsMu.Unlock()
	for {
		if holders[name] {
			return true
		}
		i := strings.LastIndexByte(name, '/')
		if i < 0 {
			return false
		}
		name = name[:i]
	}
}

// lockFile opens path and flocks it (how: LOCK_SH or LOCK_EX, with
// LOCK_NB or not): nil when LOCK_NB finds it taken. A file locked by this
// process through another open file conflicts too, as between processes.
func lockFile(t testing.TB, path string, how int) *os.File {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatalf("open test slot: %v", err)
	}
	for {
		err = unix.Flock(int(f.Fd()), how)
		if err != unix.EINTR {
			break
		}
	}
	if err == unix.EWOULDBLOCK {
		f.Close()
		return nil
	}
	if err != nil {
		f.Close()
		t.Fatalf("lock test slot %s: %v", path, err)
	}
	return f
}
