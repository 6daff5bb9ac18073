// Package dispatch is the one reader of a sampler's ring buffer: in a
// scan it hands each JVM's samples to that JVM's session; a session that
// owns its sampler (solo) gets every batch whole.
package dispatch

import (
	"sync"
	"time"

	"github.com/djx-bpf/djx-bpf/sources/sample"
)

// Source is a stream of samples (sample.Sampler): ReadBatch returns the
// next samples in buf[:0], and how far the stream is complete (0:
// unknown); it fails once the source is closed or flushed, after
// returning what it held.
type Source interface {
	ReadBatch(buf []sample.Sample) ([]sample.Sample, uint64, error)
}

// Batch is samples of one JVM in arrival order, with how far the sample
// stream is complete (0: unknown).
type Batch struct {
	Samples  []sample.Sample
	Complete uint64
}

// Dispatcher reads one sampler for the sessions it feeds.
type Dispatcher struct {
	smp Source
	// solo, when set, receives every batch; the reader waits for it, as
	// nothing else shares the ring buffer.
	solo  chan Batch
	mu    sync.Mutex
	chans map[uint32]chan Batch
	// lost counts samples dropped because a session did not keep up (its
	// channel was full): one slow JVM must not stall the others.
	lost uint64
	// free holds batches their sessions have applied: a sample is ~300
	// bytes, and allocating per batch made the loader's GC its biggest cost.
	free chan []sample.Sample
	done chan struct{}
}

// New reads smp for the JVMs of a scan (Add, Remove).
func New(smp Source) *Dispatcher {
	d := &Dispatcher{smp: smp, chans: make(map[uint32]chan Batch), free: make(chan []sample.Sample, 64), done: make(chan struct{})}
	go d.run()
	return d
}

// NewSolo reads smp for the one session that owns it, up to depth
// batches ahead of it; the channel closes when the sampler is closed or
// flushed.
func NewSolo(smp Source, depth int) (*Dispatcher, <-chan Batch) {
	d := &Dispatcher{smp: smp, solo: make(chan Batch, depth), free: make(chan []sample.Sample, 64), done: make(chan struct{})}
	go d.run()
	return d, d.solo
}

func (d *Dispatcher) run() {
	defer close(d.done)
	groups := make(map[uint32][]sample.Sample)
	buf := d.buffer()
	for {
		b, complete, err := d.smp.ReadBatch(buf)
		buf = b[:0]
		if d.solo != nil {
			if len(b) > 0 {
				d.solo <- Batch{b, complete}
				buf = d.buffer() // the session owns b until it recycles it
			} else if complete != 0 {
				d.solo <- Batch{nil, complete}
			}
		} else {
			for _, smp := range b {
				g, ok := groups[smp.PID]
				if !ok {
					g = d.buffer()
				}
				groups[smp.PID] = append(g, smp)
			}
			d.route(groups, complete)
			clear(groups)
		}
		if err != nil {
			d.closeAll()
			return // closed, or flushed at the end
		}
	}
}

// route hands each registered JVM its group of samples, or drops them
// when its session is behind.
func (d *Dispatcher) route(groups map[uint32][]sample.Sample, complete uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for pid, c := range d.chans {
		g := groups[pid]
		if len(g) == 0 && complete == 0 {
			continue
		}
		select {
		case c <- Batch{g, complete}:
		default:
			d.lost += uint64(len(g))
		}
	}
}

func (d *Dispatcher) closeAll() {
	if d.solo != nil {
		close(d.solo)
		return
	}
	d.mu.Lock()
	for pid, c := range d.chans {
		close(c)
		delete(d.chans, pid)
	}
	d.mu.Unlock()
}

// buffer is an applied batch back from a session, or a new one.
func (d *Dispatcher) buffer() []sample.Sample {
	select {
	case b := <-d.free:
		return b[:0]
	default:
		return make([]sample.Sample, 0, 64)
	}
}

// Recycle takes back a batch its session has applied.
func (d *Dispatcher) Recycle(b []sample.Sample) {
	if cap(b) == 0 {
		return
	}
	select {
	case d.free <- b:
	default:
	}
}

// Add registers pid and returns its samples; the channel is closed by
// Remove, CloseAfter or when the sampler closes.
func (d *Dispatcher) Add(pid int) <-chan Batch {
	c := make(chan Batch, 1024)
	d.mu.Lock()
	d.chans[uint32(pid)] = c
	d.mu.Unlock()
	return c
}

// Remove unregisters pid and closes its channel.
func (d *Dispatcher) Remove(pid int) {
	d.mu.Lock()
	if c, ok := d.chans[uint32(pid)]; ok {
		close(c)
		delete(d.chans, uint32(pid))
	}
	d.mu.Unlock()
}

// CloseAfter removes pid once the samples already in the ring buffer have
// had time to pass.
func (d *Dispatcher) CloseAfter(pid int, wait time.Duration) {
	go func() {
		time.Sleep(wait)
		d.Remove(pid)
	}()
}

// Lost is the number of samples dropped for slow sessions.
func (d *Dispatcher) Lost() uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.lost
}
