package jvm

import (
	"context"
	"errors"
	"testing"

	"github.com/djx-bpf/djx-bpf/hotspot/heap"
)

// TestOpenJ9Heap: an OpenJ9 JVM's heap is the javacore read at
// inspection, ranges or not; without one there is no listener to ask.
func TestOpenJ9Heap(t *testing.T) {
	j9 := heap.Info{GC: "OpenJ9", Ranges: []heap.Range{{Start: 0x1000, End: 0x2000}}}
	for _, c := range []struct {
		name   string
		vm     *openJ9
		gc     string
		ranges int
		err    error
	}{
		{"OpenJ9", &openJ9{geo: &j9}, "OpenJ9", 1, nil},
		{"OpenJ9 without ranges", &openJ9{geo: &heap.Info{GC: "OpenJ9"}}, "OpenJ9", 0, nil},
		{"OpenJ9 without javacore", &openJ9{}, "", 0, ErrNoListener},
	} {
		info, err := c.vm.Heap(context.Background())
		if info.GC != c.gc || len(info.Ranges) != c.ranges || !errors.Is(err, c.err) || (err == nil) != (c.err == nil) {
			t.Errorf("%s: heap %+v, %v; want %s with %d ranges, %v", c.name, info, err, c.gc, c.ranges, c.err)
		}
	}
}
