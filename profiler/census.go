package profiler

import (
	"errors"
	"fmt"
	"time"

	"github.com/djx-bpf/djx-bpf/hotspot/targetmem"
	"github.com/djx-bpf/djx-bpf/join"
	"github.com/djx-bpf/djx-bpf/profiler/walk"
)

// planCensus picks, before the agent loads, what names the objects an
// attached JVM holds already: a heap walk where one can run (package
// walk), else the agent's census. vmStructs that lead into memory whose
// reads may never answer (a FUSE mapping) end the session: the agent
// would read them too, and stall the JVM's attach.
func (s *session) planCensus() error {
	if s.opts.Census != CensusAuto || s.mode != "attach" {
		return nil
	}
	w, err := walk.Plan(s.walkEnv())
	if errors.Is(err, targetmem.ErrMayBlock) || errors.Is(err, targetmem.ErrHung) {
		return fmt.Errorf("not attaching to pid %d: %w", s.pid, err)
	}
	if err != nil {
		s.addNote("census in a pause instead of a heap walk: %v", err)
	}
	s.walk = w
	return nil
}

// planLaunchWalk readies a launched JVM's walk, which its checks start
// once its in-heap samples are mostly on objects nothing tracks.
func (s *session) planLaunchWalk() {
	if s.opts.Census != CensusAuto || s.mode != "launch" || s.conn == nil {
		return
	}
	s.walk = walk.PlanLaunched(s.walkEnv())
}

// walkEnv is what the session's walks reach.
func (s *session) walkEnv() walk.Env {
	return walk.Env{PID: s.pid, Proc: s.proc, Join: func() *join.JVM { return s.j },
		Command: s.command,
		Now:     func() time.Time { return s.clk.Now() },
		Mono:    func() uint64 { return s.clk.Mono() }, After: s.clk.After, Sync: s.lockstep, Tell: s.opts.note, Note: s.addNote,
		Gate: s.walkGate, MinSize: s.opts.MinSize, Continuous: s.cuts != nil}
}

// agentOptions are the agent's options for this session: with a heap
// walk, no census of large objects after GCs (walks again follow them).
func (s *session) agentOptions() string {
	o := s.opts
	if s.walk != nil {
		o.Recensus = 0
	}
	return o.agentOptions(s.ch.SocketPath(), s.stacks)
}

// prepareCensus starts what names the objects that exist already: for a
// walk, the agent's pass over the roots it cannot see (threads' locals).
func (s *session) prepareCensus() {
	if s.conn == nil || s.mode != "attach" || s.opts.Census == CensusOff {
		return
	}
	if s.walk == nil {
		s.askCensus()
		return
	}
	s.walk.Prepare()
}

// checkWalk checks the last walk against the heap; a launched JVM's walk
// that cannot start is given up.
func (s *session) checkWalk() {
	if !s.walk.CheckWalk() {
		s.walk = nil
	}
}
