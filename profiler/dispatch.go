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

// dispatcher reads the one sampler a scan shares among its JVMs and hands
// each JVM's samples to its session.
type dispatcher struct {
	smp   *loader.Sampler
	mu    sync.Mutex
	chans map[uint32]chan sampleBatch
	// lost counts samples dropped because a session did not keep up (its
	// channel was full): one slow JVM must not stall the others.
	lost uint64
	done chan struct{}
}

func newDispatcher(smp *loader.Sampler) *dispatcher {
	d := &dispatcher{smp: smp, chans: make(map[uint32]chan sampleBatch), done: make(chan struct{})}
	go d.run()
	return d
}

func (d *dispatcher) run() {
	defer close(d.done)
	groups := make(map[uint32][]loader.Sample)
	buf := make([]loader.Sample, 0, 64)
	for {
		b, complete, err := d.smp.ReadBatch(buf)
		buf = b
		for _, smp := range b {
			groups[smp.PID] = append(groups[smp.PID], smp)
		}
		d.mu.Lock()
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
		clear(groups)
		if err != nil {
			for pid, c := range d.chans {
				close(c)
				delete(d.chans, pid)
			}
		}
		d.mu.Unlock()
		if err != nil {
			return
		}
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
