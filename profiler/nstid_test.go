package profiler

import (
	"testing"
	"time"
)

// TestNSThreadsRereadBounded: a miss rereads the JVM's threads, at most
// every rereadEvery; a thread that started is found after that.
func TestNSThreadsRereadBounded(t *testing.T) {
	now := time.Unix(100, 0)
	ns := &nsThreads{pid: 4000, now: func() time.Time { return now }}
	reads := 0
	threads := map[uint32]uint32{1: 4000, 5: 4005}
	ns.read = func(int) (map[uint32]uint32, error) {
		reads++
		m := make(map[uint32]uint32, len(threads))
		for k, v := range threads {
			m[k] = v
		}
		return m, nil
	}
	if h, ok := ns.host(5); !ok || h != 4005 {
		t.Fatalf("host(5) = %d, %v", h, ok)
	}
	threads[9] = 4009
	if _, ok := ns.host(9); ok || reads != 1 {
		t.Errorf("miss within %v: found %v after %d reads, want a miss after 1", rereadEvery, ok, reads)
	}
	now = now.Add(rereadEvery)
	if h, ok := ns.host(9); !ok || h != 4009 || reads != 2 {
		t.Errorf("after %v: host(9) = %d, %v after %d reads, want 4009 after 2", rereadEvery, h, ok, reads)
	}
}
