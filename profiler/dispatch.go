package profiler

import (
	"sync"
	"time"

	"github.com/djx-bpf/djx-bpf/loader"
)

// sampleBatch is samples of one JVM in arrival order, with how far the
// sample stream is complete (loader.Sampler.ReadBatch; 0: unknown).
type sampleBatch struct {
	samples  []loader.Sample
	complete uint64
}

// dispatcher is the one reader of a sampler's ring buffer. In a scan it
// hands each JVM's samples to its session; a session that owns its sampler
// (solo) gets every batch whole.
type dispatcher struct {
	smp sampleSource
	// solo, when set, receives every batch; the reader waits for it, as
	// nothing else shares the ring buffer.
	solo  chan sampleBatch
	mu    sync.Mutex
	chans map[uint32]chan sampleBatch
	// lost counts samples dropped because a session did not keep up (its
	// channel was full): one slow JVM must not stall the others.
	lost uint64
	// free holds batches their sessions have applied: a sample is ~300
	// bytes, and allocating per batch made the loader's GC its biggest cost.
	free chan []loader.Sample
	done chan struct{}
}

// newDispatcher reads smp for the JVMs of a scan (add, remove).
func newDispatcher(smp sampleSource) *dispatcher {
	d := &dispatcher{smp: smp, chans: make(map[uint32]chan sampleBatch), free: make(chan []loader.Sample, 64), done: make(chan struct{})}
	go d.run()
	return d
}

// newSoloDispatcher reads smp for the one session that owns it, up to
// depth batches ahead of it; the channel closes when the sampler is
// closed or flushed.
func newSoloDispatcher(smp sampleSource, depth int) (*dispatcher, <-chan sampleBatch) {
	d := &dispatcher{smp: smp, solo: make(chan sampleBatch, depth), free: make(chan []loader.Sample, 64), done: make(chan struct{})}
	go d.run()
	return d, d.solo
}

func (d *dispatcher) run() {
	defer close(d.done)
	groups := make(map[uint32][]loader.Sample)
	buf := d.buffer()
	for {
		b, complete, err := d.smp.ReadBatch(buf)
		buf = b[:0]
		if d.solo != nil {
			if len(b) > 0 {
				d.solo <- sampleBatch{b, complete}
				buf = d.buffer() // the session owns b until it recycles it
			} else if complete != 0 {
				d.solo <- sampleBatch{nil, complete}
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
func (d *dispatcher) route(groups map[uint32][]loader.Sample, complete uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for pid, c := range d.chans {
		g := groups[pid]
		if len(g) == 0 && complete == 0 {
			continue
		}
		select {
		case c <- sampleBatch{g, complete}:
		default:
			d.lost += uint64(len(g))
		}
	}
}

func (d *dispatcher) closeAll() {
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
func (d *dispatcher) buffer() []loader.Sample {
	select {
	case b := <-d.free:
		return b[:0]
	default:
		return make([]loader.Sample, 0, 64)
	}
}

// recycle takes back a batch its session has applied.
func (d *dispatcher) recycle(b []loader.Sample) {
	if cap(b) == 0 {
		return
	}
	select {
	case d.free <- b:
	default:
	}
}

// add registers pid and returns its samples; the channel is closed by
// remove, closeAfter or when the sampler closes.
func (d *dispatcher) add(pid int) <-chan sampleBatch {
	c := make(chan sampleBatch, 1024)
	d.mu.Lock()
	d.chans[uint32(pid)] = c
	d.mu.Unlock()
	return c
}

// remove unregisters pid and closes its channel.
func (d *dispatcher) remove(pid int) {
	d.mu.Lock()
	if c, ok := d.chans[uint32(pid)]; ok {
		close(c)
		delete(d.chans, uint32(pid))
	}
	d.mu.Unlock()
}

// closeAfter removes pid once the samples already in the ring buffer have
// had time to pass.
func (d *dispatcher) closeAfter(pid int, wait time.Duration) {
	go func() {
		time.Sleep(wait)
		d.remove(pid)
	}()
}

// lostSamples is the number of samples dropped for slow sessions.
func (d *dispatcher) lostSamples() uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.lost
}
