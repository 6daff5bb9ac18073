package profiler

import (
	"fmt"
	"time"

	"github.com/djx-bpf/djx-bpf/sources/agentwire"
)

// switcher switches one session's sampling off and on (Options.Control),
// like perf record's --control: the perf events stop, and so does the JVM's
// allocation sampling, so that a disabled stretch costs the JVM what an
// unprofiled one does but for tags, GC events and JIT records, which go on
// so that the objects already tracked stay right.
type switcher struct {
	off   bool
	since time.Time     // when the current off stretch began
	total time.Duration // off time of the stretches that ended
}

// setSampling switches sampling on or off; a repeated state is a no-op.
func (s *session) setSampling(on bool) error {
	w := &s.sw
	if on != w.off {
		return nil
	}
	if s.shared != nil {
		return fmt.Errorf("sampling of one JVM cannot be switched in a scan")
	}
	cmd := byte(agentwire.CommandPause)
	if on {
		cmd = agentwire.CommandResume
		if err := s.sampler.Enable(); err != nil {
			return err
		}
		w.total += s.clk.Now().Sub(w.since)
	} else {
		s.sampler.Disable()
		w.since = s.clk.Now()
	}
	w.off = !on
	if s.conn != nil {
		if _, err := s.conn.Write([]byte{cmd}); err != nil {
			return fmt.Errorf("tell the agent: %w", err)
		}
	}
	return nil
}

// offTime is how long sampling has been off, up to now.
func (w *switcher) offTime(now time.Time) time.Duration {
	if w.off {
		return w.total + now.Sub(w.since)
	}
	return w.total
}
