package profiler

import (
	"time"

	"github.com/djx-bpf/djx-bpf/hotspot/walkplan"
	"github.com/djx-bpf/djx-bpf/report"
)

// windowFrom is when the session's current window began: its start, or
// the last cut.
func (s *session) windowFrom() time.Time {
	if s.winStart.IsZero() {
		return s.start
	}
	return s.winStart
}

// cutWindow reports the window that ends now and starts the next one: the
// join applies what its horizon allows, reports, and drops the window's
// counts and paths, so that a session that runs for days keeps one
// window's worth. The notes go with the window they were made in.
func (s *session) cutWindow() *report.Report {
	s.j.Drain(false)
	now := s.clk.Now()
	r := s.finish(now.Sub(s.windowFrom()))
	s.notes = nil
	if s.walk != nil {
		s.walk.Rebase(walkplan.CountsOf(s.j), s.j.ResetWindow)
	} else {
		s.j.ResetWindow()
	}
	s.winStart = now
	return r
}
