package otlp

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/djx-bpf/djx-bpf/profiler/continuous"
)

// tickClock is a clock whose ticker the test drives; timers never fire
// (the backend is up).
type tickClock struct {
	tick chan time.Time
	now  atomic.Int64
}

func (c *tickClock) Now() time.Time { return time.Unix(0, c.now.Load()) }
func (c *tickClock) NewTicker(time.Duration) (<-chan time.Time, func()) {
	return c.tick, func() {}
}
func (c *tickClock) After(time.Duration) <-chan time.Time { return nil }

// windowSource cuts a fresh report each window, as a live scan does:
// 2 JVMs of 20 objects with 4 access paths each.
type windowSource struct{ n int }

func (s *windowSource) Cut(context.Context) ([]continuous.JVMProfile, error) {
	s.n++
	return []continuous.JVMProfile{
		{PID: 1, Main: "A", Report: testReport(1, 20, 4)},
		{PID: 2, Main: "B", Report: testReport(2, 20, 4)},
	}, nil
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// 1,000 windows through the loop and the exporter to an HTTP backend:
// the heap after them is what it was after 100, within 1 MiB. Reports are
// built per window and dropped once sent; nothing of a window outlives
// its export.
func TestMemoryAfter1000Windows(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 windows take a few seconds")
	}
	var bodies, reqs atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		bodies.Add(n)
		reqs.Add(1)
	}))
	defer srv.Close()
	exp, err := New(srv.URL, "host", nil)
	if err != nil {
		t.Fatal(err)
	}
	clk := &tickClock{tick: make(chan time.Time)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan continuous.Stats, 1)
	go func() {
		done <- continuous.Run(ctx, &windowSource{}, exp, continuous.Config{Window: time.Minute, Clock: clk, Flush: time.Second})
	}()
	// The heap is measured once the windows ticked so far are exported:
	// one in flight holds its report and body, and on a busy machine the
	// two measurements could otherwise differ by one export.
	settled := func(n int64) uint64 {
		for deadline := time.Now().Add(10 * time.Second); reqs.Load() < n && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		return heapInUse()
	}
	var at100 uint64
	for i := 1; i <= 1000; i++ {
		clk.now.Add(int64(time.Minute))
		clk.tick <- clk.Now()
		if i == 100 {
			at100 = settled(int64(i))
		}
	}
	at1000 := settled(1000)
	cancel()
	st := <-done
	t.Logf("heap after 100 windows %.2f MiB, after 1000 %.2f MiB; %d windows sent, %.1f KiB each on the wire",
		float64(at100)/(1<<20), float64(at1000)/(1<<20), st.Sent, float64(bodies.Load())/float64(st.Sent)/1024)
	if st.Sent != st.Windows || st.Windows < 1001 {
		t.Errorf("stats %+v, want every window sent", st)
	}
	if at1000 > at100+1<<20 {
		t.Errorf("heap grew from %d to %d bytes between window 100 and 1000", at100, at1000)
	}
}
