package attach

import (
	"os"
	"testing"
	"time"
)

// TestThreadIDsSelf: in our own namespace every thread maps to itself.
func TestThreadIDsSelf(t *testing.T) {
	m, err := ThreadIDs(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if len(m) == 0 {
		t.Fatal("no threads")
	}
	for ns, host := range m {
		if ns != host {
			t.Errorf("thread %d maps to %d in our own namespace", ns, host)
		}
	}
}

// TestHostThreadsRereadBounded: a miss rereads the JVM's threads, at most
// every rereadEvery; a thread that started is found after that.
func TestHostThreadsRereadBounded(t *testing.T) {
	now := time.Unix(100, 0)
	ns := &HostThreads{pid: 4000, now: func() time.Time { return now }}
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
	if h, ok := ns.Host(5); !ok || h != 4005 {
		t.Fatalf("host(5) = %d, %v", h, ok)
	}
	threads[9] = 4009
	if _, ok := ns.Host(9); ok || reads != 1 {
		t.Errorf("miss within %v: found %v after %d reads, want a miss after 1", rereadEvery, ok, reads)
	}
	now = now.Add(rereadEvery)
	if h, ok := ns.Host(9); !ok || h != 4009 || reads != 2 {
		t.Errorf("after %v: host(9) = %d, %v after %d reads, want 4009 after 2", rereadEvery, h, ok, reads)
	}
}
