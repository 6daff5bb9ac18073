package scan

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/djx-bpf/djx-bpf/report"
	"github.com/djx-bpf/djx-bpf/target/discover"
)

// Live is a continuous scan: the scan of Run, with its shared sampler,
// caps and attaches, that runs until Stop and is cut into windows by
// Cut. Each JVM's join is attached (and its census taken) once; a cut
// reports and clears its window only.
type Live struct {
	sr     *scanRun
	cancel context.CancelFunc
	done   chan struct{}
}

// JVMWindow is one JVM's report of a window. Final: the JVM's session
// ended (it exited, or its agent left) and this is its last window.
type JVMWindow struct {
	JVM    discover.JVM
	Report *report.Report
	Final  bool
}

// Cut is what a continuous scan reports at a window's end: the JVMs'
// windows, and the JVMs skipped and notes made during the window.
type Cut struct {
	JVMs    []JVMWindow
	Skipped []report.SkippedJVM
	Notes   []string
}

// ErrStopped is returned by Cut once the scan has stopped.
var ErrStopped = errors.New("the continuous scan has stopped")

// cutWait bounds how long a cut waits for the sessions to take its
// request: one still attaching (census, heap walk) reports its first
// window at the next cut.
var cutWait = 2 * time.Second

// Start starts a continuous scan of the JVMs cfg selects, each profiled
// through h, until Stop.
func Start(ctx context.Context, cfg Config, h Host) *Live {
	sr := newScanRun(cfg, h)
	sr.live = &liveState{reqs: make(chan chan Cut), members: make(map[int]*liveMember)}
	sctx, cancel := context.WithCancel(ctx)
	l := &Live{sr: sr, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		defer h.Close()
		sr.watch(sctx)
		sr.drain()
	}()
	return l
}

// Cut ends the current window of every JVM and returns their reports,
// with those of the JVMs whose sessions ended since the last cut.
func (l *Live) Cut(ctx context.Context) (Cut, error) {
	reply := make(chan Cut, 1)
	select {
	case l.sr.live.reqs <- reply:
	case <-l.done:
		return Cut{}, ErrStopped
	case <-ctx.Done():
		return Cut{}, fmt.Errorf("cut a window: %w", ctx.Err())
	}
	return <-reply, nil
}

// Stop ends the scan: the sessions detach from their JVMs. What they
// collected since the last cut is dropped: cut first to keep it.
func (l *Live) Stop() {
	l.cancel()
	<-l.done
}

// liveState is what a continuous scan keeps beside a scan's: the
// sessions it can ask for a cut, and the last windows of those that ended.
type liveState struct {
	reqs    chan chan Cut
	members map[int]*liveMember
	pending []JVMWindow
}

// liveMember is a running session of a continuous scan.
type liveMember struct {
	jvm  discover.JVM
	cuts chan CutRequest
	done chan struct{} // closed when the session has ended
}

// requests is the channel of cut requests; nil (never ready) outside a
// continuous scan.
func (ls *liveState) requests() <-chan chan Cut {
	if ls == nil {
		return nil
	}
	return ls.reqs
}

// join registers the session of j; nil outside a continuous scan.
func (ls *liveState) join(j discover.JVM) *liveMember {
	if ls == nil {
		return nil
	}
	m := &liveMember{jvm: j, cuts: make(chan CutRequest), done: make(chan struct{})}
	ls.members[j.PID] = m
	return m
}

// cutsOf is the channel m's session takes cut requests from; nil outside
// a continuous scan.
func (m *liveMember) cutsOf() <-chan CutRequest {
	if m == nil {
		return nil
	}
	return m.cuts
}

// end says m's session has ended: cuts no longer wait for it.
func (m *liveMember) end() {
	if m != nil {
		close(m.done)
	}
}

// ended forgets the session of r and keeps its last window, if any.
func (ls *liveState) ended(r scanResult) {
	delete(ls.members, r.jvm.PID)
	if r.err == nil {
		ls.pending = append(ls.pending, JVMWindow{JVM: r.jvm, Report: r.rep, Final: true})
	}
}

// cut asks every running session for its window and takes the windows of
// the sessions that ended, and the skipped JVMs and notes since the last
// cut, so that none of them grows across windows.
func (sr *scanRun) cut() Cut {
	ls := sr.live
	c := Cut{Skipped: sr.sc.Skipped, Notes: sr.sc.Notes}
	sr.sc.Skipped, sr.sc.Notes = nil, nil
	pids := make([]int, 0, len(ls.members))
	for pid := range ls.members {
		pids = append(pids, pid)
	}
	slices.Sort(pids)
	deadline := time.NewTimer(cutWait)
	defer deadline.Stop()
	late := false
	type asked struct {
		m   *liveMember
		req CutRequest
	}
	var waits []asked
	for _, pid := range pids {
		m := ls.members[pid]
		req := CutRequest{Reply: make(chan *report.Report, 1)}
		if sent, timedOut := offer(m, req, deadline.C, late); sent {
			waits = append(waits, asked{m, req})
		} else if timedOut {
			late = true
		}
	}
	for _, a := range waits {
		c.JVMs = append(c.JVMs, JVMWindow{JVM: a.m.jvm, Report: <-a.req.Reply})
	}
	c.JVMs = append(c.JVMs, ls.pending...)
	ls.pending = nil
	return c
}

// offer hands req to m's session, unless it has ended or the cut's
// deadline passed (late: it has; only a session ready now takes it).
func offer(m *liveMember, req CutRequest, deadline <-chan time.Time, late bool) (sent, timedOut bool) {
	if late {
		select {
		case m.cuts <- req:
			return true, false
		default:
			return false, false
		}
	}
	select {
	case m.cuts <- req:
		return true, false
	case <-m.done:
		return false, false
	case <-deadline:
		return false, true
	}
}
