package dispatch

import (
	"errors"
	"sync"
	"testing"

	"github.com/djx-bpf/djx-bpf/sources/sample"
)

// batches is a source that returns its batches once each is let out
// (next), then fails.
type batches struct {
	mu   sync.Mutex
	bs   [][]sample.Sample
	next chan struct{}
}

func (b *batches) ReadBatch(buf []sample.Sample) ([]sample.Sample, uint64, error) {
	<-b.next
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.bs) == 0 {
		return buf[:0], 0, errors.New("closed")
	}
	out := append(buf[:0], b.bs[0]...)
	b.bs = b.bs[1:]
	return out, 9, nil
}

func smp(pid uint32) sample.Sample { return sample.Sample{PID: pid} }

// TestRoutesByPID: in a scan each registered JVM gets its own samples, in
// order, with how far the stream is complete; samples of a JVM no session
// registered are dropped, and every channel closes with the source.
func TestRoutesByPID(t *testing.T) {
	src := &batches{bs: [][]sample.Sample{{smp(1), smp(2), smp(1), smp(3)}}, next: make(chan struct{})}
	d := New(src)
	one, two := d.Add(1), d.Add(2)
	close(src.next)
	b := <-one
	if len(b.Samples) != 2 || b.Complete != 9 {
		t.Errorf("pid 1: %d samples, complete %d; want 2, 9", len(b.Samples), b.Complete)
	}
	if b := <-two; len(b.Samples) != 1 || b.Samples[0].PID != 2 {
		t.Errorf("pid 2: %+v", b.Samples)
	}
	for range one {
	}
	for range two {
	}
	if d.Lost() != 0 {
		t.Errorf("lost %d, want 0", d.Lost())
	}
}

// TestSolo: a session that owns its sampler gets every batch whole.
func TestSolo(t *testing.T) {
	src := &batches{bs: [][]sample.Sample{{smp(1), smp(2)}}, next: make(chan struct{})}
	close(src.next)
	d, c := NewSolo(src, 1)
	b := <-c
	if len(b.Samples) != 2 || b.Complete != 9 {
		t.Errorf("solo: %d samples, complete %d; want 2, 9", len(b.Samples), b.Complete)
	}
	d.Recycle(b.Samples)
	if _, ok := <-c; ok {
		t.Error("solo channel open after the source failed")
	}
}
