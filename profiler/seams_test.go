package profiler

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/djx-bpf/djx-bpf/hotspot/heap"
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
