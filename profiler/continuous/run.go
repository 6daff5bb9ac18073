package continuous

import (
	"context"
	"time"
)

// Run cuts a window from src every cfg.Window and exports it, until ctx
// ends; then it cuts the window in progress and sends what is queued
// within cfg.Flush. It runs on one goroutine: a window's export waits for
// no other, and a backend that is down delays the next try, never a cut.
func Run(ctx context.Context, src Source, exp Exporter, cfg Config) Stats {
	cfg.fill()
	r := &runner{cfg: cfg, src: src, exp: exp, backoff: cfg.MinBackoff, start: cfg.Clock.Now()}
	tick, stop := cfg.Clock.NewTicker(cfg.Window)
	defer stop()
	for {
		select {
		case <-ctx.Done():
			r.stop(context.WithoutCancel(ctx))
			return r.st
		case <-tick:
			r.cut(ctx)
			if r.retry == nil {
				r.send(ctx)
			}
		case <-r.retry:
			r.retry = nil
			r.send(ctx)
		}
	}
}

// runner is the loop's state; owned by Run's goroutine.
type runner struct {
	cfg     Config
	src     Source
	exp     Exporter
	st      Stats
	seq     uint64
	start   time.Time // of the window in progress
	queue   []*Window // oldest first
	backoff time.Duration
	retry   <-chan time.Time // set while waiting to try the head again
}

// cut ends the window in progress and queues it.
func (r *runner) cut(ctx context.Context) {
	now := r.cfg.Clock.Now()
	jvms, err := r.src.Cut(ctx)
	if err != nil {
		r.st.CutErrors++
		r.cfg.notify("window %d not cut: %v", r.seq+1, err)
		return
	}
	r.seq++
	r.st.Windows++
	w := &Window{Seq: r.seq, Start: r.start, End: now, JVMs: jvms}
	r.start = now
	if len(r.queue) >= r.cfg.Queue {
		old := r.queue[0]
		r.queue[0] = nil
		r.queue = r.queue[1:]
		r.st.Dropped++
		r.cfg.notify("dropped window %d (%d JVMs): %d windows wait for the backend already (raise --queue, or check the backend)", old.Seq, len(old.JVMs), r.cfg.Queue)
	}
	w.Dropped = r.st.Dropped
	r.queue = append(r.queue, w)
}

// exportTimeout bounds one try: a backend that hangs counts as down.
func (r *runner) exportTimeout() time.Duration {
	return min(r.cfg.Window, 30*time.Second)
}

// send exports the queued windows, oldest first, until one fails: then it
// waits (r.retry) with a backoff that doubles up to MaxBackoff.
func (r *runner) send(ctx context.Context) {
	for len(r.queue) > 0 {
		w := r.queue[0]
		tctx, cancel := context.WithTimeout(ctx, r.exportTimeout())
		err := r.exp.Export(tctx, w)
		cancel()
		switch {
		case err == nil:
			r.st.Sent++
			r.backoff = r.cfg.MinBackoff
		case IsPermanent(err):
			r.st.Dropped++
			r.st.Refused++
			r.cfg.notify("the backend refused window %d, dropped: %v", w.Seq, err)
		default:
			r.st.Retries++
			r.cfg.notify("window %d not sent, trying again in %v: %v", w.Seq, r.backoff, err)
			r.retry = r.cfg.Clock.After(r.backoff)
			r.backoff = min(2*r.backoff, r.cfg.MaxBackoff)
			return
		}
		r.queue[0] = nil
		r.queue = r.queue[1:]
	}
}

// stop cuts the window in progress (a clean stop loses no samples) and
// sends the queue within cfg.Flush; what is left is dropped and counted.
func (r *runner) stop(ctx context.Context) {
	r.cut(ctx)
	deadline := r.cfg.Clock.After(r.cfg.Flush)
	r.backoff = min(r.backoff, r.cfg.MinBackoff)
	r.retry = nil
	for {
		r.send(ctx)
		if len(r.queue) == 0 {
			return
		}
		select {
		case <-r.retry:
			r.retry = nil
		case <-deadline:
			r.st.Dropped += uint64(len(r.queue))
			r.cfg.notify("stopped with %d windows unsent: the backend did not take them within %v", len(r.queue), r.cfg.Flush)
			r.queue = nil
			return
		}
	}
}
