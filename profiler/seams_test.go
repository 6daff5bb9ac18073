package profiler

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/djx-bpf/djx-bpf/hotspot/heap"
	"github.com/djx-bpf/djx-bpf/join"
	"github.com/djx-bpf/djx-bpf/sources/reloc"
)

// fakeListener answers GC.heap_info with out, or fails with err.
type fakeListener struct {
	out string
	err error
}

func (f fakeListener) Jcmd(context.Context, string) (string, error) { return f.out, f.err }
func (f fakeListener) LoadAgent(context.Context, string, bool, string) error {
	return errors.New("not here")
}

// TestLoadHeap: what a JVM says of its heap (HotSpot: GC.heap_info;
// OpenJ9: the javacore read at inspection), or why it says nothing,
// reaches the session's heap and notes.
func TestLoadHeap(t *testing.T) {
	g1 := " garbage-first heap   total 397312K, used 24459K [0x0000000687400000, 0x0000000800000000)\n" +
		"  region size 4096K, 1 young (4096K), 0 survivors (0K)\n"
	j9 := heap.Info{GC: "OpenJ9", Ranges: []heap.Range{{Start: 0x1000, End: 0x2000}}}
	for _, c := range []struct {
		name  string
		vm    vmAttacher
		gc    string
		known bool
		note  string
	}{
		{"no listener", &hotspot{pid: 7, ns: 7}, "", false, "heap range unknown (no attach listener); in_heap is not counted"},
		{"jcmd fails", &hotspot{pid: 7, ns: 7, l: fakeListener{err: errors.New("refused")}}, "", false, "heap range unknown (GC.heap_info: refused); in_heap is not counted"},
		{"G1", &hotspot{pid: 7, ns: 7, l: fakeListener{out: g1}}, "G1", true, ""},
		{"OpenJ9", &openJ9{geo: &j9}, "OpenJ9", true, ""},
		{"OpenJ9 without ranges", &openJ9{geo: &heap.Info{GC: "OpenJ9"}}, "OpenJ9", false, ""},
		// The javacore's failure was noted at inspection.
		{"OpenJ9 without javacore", &openJ9{}, "", false, "heap range unknown (no attach listener); in_heap is not counted"},
	} {
		s := &session{vm: c.vm}
		s.loadHeap(context.Background())
		if s.heapKnown != c.known || s.heap.GC != c.gc || strings.Join(s.notes, "\n") != c.note {
			t.Errorf("%s: heap %+v known %v, notes %q; want %s, %v, %q", c.name, s.heap, s.heapKnown, s.notes, c.gc, c.known, c.note)
		}
	}
}

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
	r := &relocation{src: src, pid: 42, mono: func() uint64 { return 99 }, msgs: make(chan relocMsg, 16)}
	go r.read()
	for _, want := range []reloc.Kind{reloc.GCBegin, reloc.Copy, reloc.GCEnd} {
		if m := <-r.msgs; m.ev.Kind != want || m.wm != 0 {
			t.Fatalf("got %+v, want a %v event", m, want)
		}
	}
	if m := <-r.msgs; m.wm != 99 {
		t.Fatalf("got %+v, want the watermark 99", m)
	}
	c, err := r.stop(join.New(join.Config{}))
	if err != nil || c.Hits != 3 || src.removed != 42 || !src.closed {
		t.Errorf("stop: counters %+v, %v; removed pid %d, closed %v", c, err, src.removed, src.closed)
	}
}
