package jvmsym

import (
	"slices"
	"sort"
)

// span is a half-open address range [start, end) carrying a value.
type span[T any] struct {
	start, end uint64
	v          T
}

// spans is a set of non-overlapping address ranges sorted by start, so that
// lookups are a binary search without allocation.
type spans[T any] struct {
	s []span[T]
}

// find returns the range containing pc.
func (s *spans[T]) find(pc uint64) (*span[T], bool) {
	// Ranges do not overlap, so ends are sorted too.
	i := sort.Search(len(s.s), func(i int) bool { return s.s[i].end > pc })
	if i == len(s.s) || s.s[i].start > pc {
		return nil, false
	}
	return &s.s[i], true
}

// insert adds n, which wins over the older ranges it overlaps. An older range
// is dropped entirely unless keep(old, n) says its parts outside n are still
// valid, in which case they stay as remnants.
func (s *spans[T]) insert(n span[T], keep func(old, n T) bool) {
	if n.end <= n.start {
		return
	}
	i := sort.Search(len(s.s), func(i int) bool { return s.s[i].end > n.start })
	j := i + sort.Search(len(s.s)-i, func(k int) bool { return s.s[i+k].start >= n.end })
	repl := make([]span[T], 0, 3)
	if i < j {
		if first := s.s[i]; first.start < n.start && keep(first.v, n.v) {
			repl = append(repl, span[T]{first.start, n.start, first.v})
		}
	}
	repl = append(repl, n)
	if i < j {
		if last := s.s[j-1]; last.end > n.end && keep(last.v, n.v) {
			repl = append(repl, span[T]{n.end, last.end, last.v})
		}
	}
	s.s = slices.Replace(s.s, i, j, repl...)
}

// removeStart deletes the range starting exactly at start.
func (s *spans[T]) removeStart(start uint64) bool {
	i := sort.Search(len(s.s), func(i int) bool { return s.s[i].start >= start })
	if i == len(s.s) || s.s[i].start != start {
		return false
	}
	s.s = slices.Delete(s.s, i, i+1)
	return true
}
