package profiler

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/djx-bpf/djx-bpf/hotspot/heap"
	"github.com/djx-bpf/djx-bpf/target/jvm"
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

// fakeVM is a JVM whose heap is info, or err.
type fakeVM struct {
	jvm.VM
	info heap.Info
	err  error
}

func (f fakeVM) Heap(context.Context) (heap.Info, error) { return f.info, f.err }

// TestLoadHeap: what a JVM says of its heap (HotSpot: GC.heap_info;
// OpenJ9: the javacore read at inspection), or why it says nothing,
// reaches the session's heap and notes.
func TestLoadHeap(t *testing.T) {
	g1 := " garbage-first heap   total 397312K, used 24459K [0x0000000687400000, 0x0000000800000000)\n" +
		"  region size 4096K, 1 young (4096K), 0 survivors (0K)\n"
	j9 := heap.Info{GC: "OpenJ9", Ranges: []heap.Range{{Start: 0x1000, End: 0x2000}}}
	for _, c := range []struct {
		name  string
		vm    jvm.VM
		gc    string
		known bool
		note  string
	}{
		{"no listener", &jvm.HotSpot{PID: 7, NS: 7}, "", false, "heap range unknown (no attach listener); in_heap is not counted"},
		{"jcmd fails", &jvm.HotSpot{PID: 7, NS: 7, L: fakeListener{err: errors.New("refused")}}, "", false, "heap range unknown (GC.heap_info: refused); in_heap is not counted"},
		{"G1", &jvm.HotSpot{PID: 7, NS: 7, L: fakeListener{out: g1}}, "G1", true, ""},
		// OpenJ9's javacore as package jvm hands it on (its TestOpenJ9Heap).
		{"OpenJ9", fakeVM{info: j9}, "OpenJ9", true, ""},
		{"OpenJ9 without ranges", fakeVM{info: heap.Info{GC: "OpenJ9"}}, "OpenJ9", false, ""},
		// The javacore's failure was noted at inspection.
		{"OpenJ9 without javacore", fakeVM{err: jvm.ErrNoListener}, "", false, "heap range unknown (no attach listener); in_heap is not counted"},
	} {
		s := &session{vm: c.vm}
		s.loadHeap(context.Background())
		if s.heapKnown != c.known || s.heap.GC != c.gc || strings.Join(s.notes, "\n") != c.note {
			t.Errorf("%s: heap %+v known %v, notes %q; want %s, %v, %q", c.name, s.heap, s.heapKnown, s.notes, c.gc, c.known, c.note)
		}
	}
}
