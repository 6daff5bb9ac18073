package follow

import (
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/djx-bpf/djx-bpf/join"
	"github.com/djx-bpf/djx-bpf/sources/reloc"
)

// fakeReloc is a relocation source that holds evs, then times out until
// it is closed.
type fakeReloc struct {
	mu      sync.Mutex
	evs     []reloc.Event
	removed int
	closed  bool
}

func (f *fakeReloc) Read(ev *reloc.Event) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.closed:
		return errors.New("closed")
	case len(f.evs) == 0:
		return os.ErrDeadlineExceeded
	}
	*ev, f.evs = f.evs[0], f.evs[1:]
	return nil
}

func (f *fakeReloc) SetDeadline(time.Time) {}

func (f *fakeReloc) Counters() (reloc.Counters, error) { return reloc.Counters{Hits: 3}, nil }

func (f *fakeReloc) RemoveJVM(pid int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.removed = pid
	return nil
}

func (f *fakeReloc) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	return nil
}

// TestRelocationStream: the relocation stream forwards the source's
// events in order, then a watermark when it has none; stop detaches the
// JVM, returns the counters and closes the source.
func TestRelocationStream(t *testing.T) {
	src := &fakeReloc{evs: []reloc.Event{{Kind: reloc.GCBegin, Time: 10}, {Kind: reloc.Copy, Src: 0x1000, Dst: 0x2000, Len: 4096}, {Kind: reloc.GCEnd, Time: 20}}}
	r := &Stream{src: src, pid: 42, mono: func() uint64 { return 99 }, msgs: make(chan Msg, 16)}
	go r.read()
	for _, want := range []reloc.Kind{reloc.GCBegin, reloc.Copy, reloc.GCEnd} {
		if m := <-r.msgs; m.ev.Kind != want || m.wm != 0 {
			t.Fatalf("got %+v, want a %v event", m, want)
		}
	}
	if m := <-r.msgs; m.wm != 99 {
		t.Fatalf("got %+v, want the watermark 99", m)
	}
	c, err := r.Stop(join.New(join.Config{}))
	if err != nil || c.Hits != 3 || src.removed != 42 || !src.closed {
		t.Errorf("stop: counters %+v, %v; removed pid %d, closed %v", c, err, src.removed, src.closed)
	}
}
