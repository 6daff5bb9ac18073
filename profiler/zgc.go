package profiler

import (
	"github.com/djx-bpf/djx-bpf/hotspot/heapwalk"
)

// zLayout sets and returns s.zl under ZGC, whose GC.heap_info prints no
// addresses: the walk's layout, or without a walk (launched, --census
// other than auto) one read for its views alone; nil under other
// collectors or when the JVM's layout cannot be read.
func (s *session) zLayout() *heapwalk.Layout {
	if s.zl != nil {
		return s.zl
	}
	l := (*heapwalk.Layout)(nil)
	if s.walk != nil {
		l = s.walk.Layout
	} else if tab, err := s.proc.VMStructs(); err == nil {
		l, _ = heapwalk.NewLayout(tab, s.proc.Mem(), heapwalk.Options{})
	}
	if l != nil && l.GC == "z" {
		s.zl = l
	}
	return s.zl
}
