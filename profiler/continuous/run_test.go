package continuous

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/djx-bpf/djx-bpf/report"
)

// fakeClock runs the loop by hand: the test sends its ticks and fires its
// timers, each send returning once the loop has taken it, so that the
// loop has finished the step before when the next one starts.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	tick   chan time.Time
	timers []fakeTimer
}

type fakeTimer struct {
	d  time.Duration
	ch chan time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Unix(1_700_000_000, 0), tick: make(chan time.Time)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) NewTicker(time.Duration) (<-chan time.Time, func()) { return c.tick, func() {} }

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time)
	c.timers = append(c.timers, fakeTimer{d, ch})
	return ch
}

// step advances the clock by d and ticks.
func (c *fakeClock) step(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	now := c.now
	c.mu.Unlock()
	c.tick <- now
}

// fire fires the newest timer of duration d not fired yet, waiting for
// the loop to ask for it.
func (c *fakeClock) fire(t *testing.T, d time.Duration) {
	t.Helper()
	var ch chan time.Time
	for i := 0; ch == nil && i < 500; i++ {
		ch = c.take(d)
		if ch == nil {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if ch == nil {
		t.Fatalf("no timer of %v to fire", d)
	}
	select {
	case ch <- c.Now():
	case <-time.After(5 * time.Second):
		t.Fatalf("the loop did not wait on the %v timer", d)
	}
}

func (c *fakeClock) take(d time.Duration) chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := len(c.timers) - 1; i >= 0; i-- {
		if c.timers[i].d == d && c.timers[i].ch != nil {
			ch := c.timers[i].ch
			c.timers[i].ch = nil
			return ch
		}
	}
	return nil
}

// durations are the timers asked for, in order.
func (c *fakeClock) durations() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []time.Duration
	for _, tm := range c.timers {
		out = append(out, tm.d)
	}
	return out
}

// fakeSource cuts windows of one JVM whose report counts the cuts.
type fakeSource struct{ n int }

func (s *fakeSource) Cut(context.Context) ([]JVMProfile, error) {
	s.n++
	return []JVMProfile{{PID: 42, Main: "Hot", Report: &report.Report{PID: 42, DurationSec: float64(s.n)}}}, nil
}

// fakeExporter records the windows it took; while down it fails, and a
// window in refuse is refused.
type fakeExporter struct {
	mu     sync.Mutex
	down   bool
	refuse map[uint64]bool
	got    []uint64
	tries  int
}

func (e *fakeExporter) Export(_ context.Context, w *Window) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.tries++
	switch {
	case e.down:
		return errors.New("connection refused")
	case e.refuse[w.Seq]:
		return Permanent(errors.New("HTTP 400"))
	}
	e.got = append(e.got, w.Seq)
	return nil
}

func (e *fakeExporter) setDown(down bool) {
	e.mu.Lock()
	e.down = down
	e.mu.Unlock()
}

const testFlush = time.Hour // told apart from the backoffs by the fake clock

func startLoop(t *testing.T, exp Exporter, cfg Config) (*fakeClock, func() Stats) {
	t.Helper()
	clk := newFakeClock()
	cfg.Clock, cfg.Flush = clk, testFlush
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan Stats, 1)
	go func() { done <- Run(ctx, &fakeSource{}, exp, cfg) }()
	stop := func() Stats {
		cancel()
		select {
		case st := <-done:
			return st
		case <-time.After(5 * time.Second):
			t.Fatal("the loop did not stop")
		}
		return Stats{}
	}
	t.Cleanup(func() { cancel() })
	return clk, stop
}

// Windows are cut each tick and sent in order; the stop cuts and sends
// the window in progress.
func TestRunSendsEveryWindow(t *testing.T) {
	exp := &fakeExporter{}
	clk, stop := startLoop(t, exp, Config{Window: time.Minute})
	for range 3 {
		clk.step(time.Minute)
	}
	st := stop()
	if !slices.Equal(exp.got, []uint64{1, 2, 3, 4}) {
		t.Errorf("backend got windows %v, want 1-3 and the stop's 4", exp.got)
	}
	if st != (Stats{Windows: 4, Sent: 4}) {
		t.Errorf("stats %+v, want 4 cut and sent", st)
	}
}

// With the backend down, the windows wait in the bounded queue, the
// oldest are dropped and counted, the head is retried with a doubling
// backoff, and once the backend is back the queue is sent in order.
func TestRunBackendDownQueuesRetriesDrops(t *testing.T) {
	exp := &fakeExporter{down: true}
	clk, stop := startLoop(t, exp, Config{Window: time.Minute, Queue: 3, MinBackoff: time.Second, MaxBackoff: 4 * time.Second})
	clk.step(time.Minute) // window 1 fails: retry in 1s
	clk.fire(t, time.Second)
	clk.fire(t, 2*time.Second)
	clk.fire(t, 4*time.Second)
	clk.step(time.Minute) // 2, 3 queue behind 1
	clk.step(time.Minute)
	clk.step(time.Minute) // 4: the queue is full, 1 is dropped
	exp.setDown(false)
	clk.fire(t, 4*time.Second) // backoff capped at 4s
	st := stop()
	if !slices.Equal(exp.got, []uint64{2, 3, 4, 5}) {
		t.Errorf("backend got windows %v, want 2-5 (1 dropped)", exp.got)
	}
	if want := (Stats{Windows: 5, Sent: 4, Retries: 4, Dropped: 1}); st != want {
		t.Errorf("stats %+v, want %+v", st, want)
	}
	if d := clk.durations(); !slices.Equal(d[:4], []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second}) {
		t.Errorf("backoffs %v, want 1s 2s 4s 4s", d)
	}
}

// A window the backend refuses is dropped, counted, and not retried; the
// next ones go on.
func TestRunRefusedWindowDropped(t *testing.T) {
	exp := &fakeExporter{refuse: map[uint64]bool{2: true}}
	clk, stop := startLoop(t, exp, Config{Window: time.Minute})
	clk.step(time.Minute)
	clk.step(time.Minute)
	clk.step(time.Minute)
	st := stop()
	if !slices.Equal(exp.got, []uint64{1, 3, 4}) || exp.tries != 4 {
		t.Errorf("backend got %v in %d tries, want 1, 3, 4 in 4", exp.got, exp.tries)
	}
	if st.Dropped != 1 || st.Refused != 1 {
		t.Errorf("stats %+v, want 1 dropped, refused", st)
	}
}

// At the stop, windows the backend does not take within the flush time
// are dropped and counted.
func TestRunStopDropsUnsent(t *testing.T) {
	exp := &fakeExporter{down: true}
	clk := newFakeClock()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan Stats, 1)
	go func() {
		done <- Run(ctx, &fakeSource{}, exp, Config{Window: time.Minute, Queue: 5, Clock: clk, Flush: testFlush})
	}()
	clk.step(time.Minute)
	clk.step(time.Minute)
	cancel()
	// The stop's try fails; the flush deadline passes before the retry.
	clk.fire(t, testFlush)
	st := <-done
	if st.Windows != 3 || st.Sent != 0 || st.Dropped != 3 {
		t.Errorf("stats %+v, want 3 windows cut, none sent, 3 dropped", st)
	}
}
