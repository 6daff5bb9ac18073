package profiler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/djx-bpf/djx-bpf/hotspot/heapwalk"
	"github.com/djx-bpf/djx-bpf/hotspot/targetmem"
	"github.com/djx-bpf/djx-bpf/hotspot/walkplan"
	"github.com/djx-bpf/djx-bpf/join"
	"github.com/djx-bpf/djx-bpf/sources/agentwire"
)

// The heap walk names the objects an attached JVM holds already, from
// outside it and with no pause (package heapwalk), where the census would
// stop the world for a time that grows with the heap. What one walk does
// and whether its result still holds is package walkplan's; when to walk,
// and the agent's roots, are the session's.

// walker drives one session's heap walks.
type walker struct {
	*walkplan.Walker
	roots []heapwalk.Root

	// ready starts a walk whose roots have not come: after walkNoRoots,
	// or walkNoTypes when the agent could not be asked for them.
	ready    <-chan time.Time
	rootsEnd *agentwire.RootsEnd // the agent's last roots pass
	// collecting: the agent was asked for roots, and a walk waits for
	// them; running: a walk runs; checking: a walk's result is in the
	// join, and checked against the heap.
	collecting, running, checking bool
	cancel                        context.CancelFunc
	done                          chan *join.HeapWalk
	// refreshing: a running walk asked for the roots anew, and the pass
	// under way answers it.
	refreshing bool

	// checkAt fires the next check; a walk takes at most 1/walkShare of
	// the time since the last one began.
	checkAt   <-chan time.Time
	lastStart time.Time
	lastTook  time.Duration
	walks     int
	// again says the last walk was thrown away, and the next check walks.
	again       bool
	rootsGC     uint32 // the collection count when the roots pass ended
	layoutTries int    // a launched JVM's checks that could not read its layout
}

// How often a walk's result is checked against the heap, and how often a
// GC that moved it may start another walk.
const (
	walkCheckEvery = 500 * time.Millisecond
	walkShare      = 4 // at most a quarter of the time walking
)

// A continuous scan's session, which runs for days and costs its host as
// long, walks again at most 0.5% of the time (a 50 ms walk every 10 s at
// most, a 2 s walk every 400 s: continuous profiling's goal for its whole
// cost) and checks every 2 s: in windows of a minute, samples on objects
// a GC moved are named again a little later.
const (
	continuousWalkShare  = 200
	continuousCheckEvery = 2 * time.Second
)

// walkNoTypes is how long a walk that gets no roots waits for the agent's
// class descriptions to arrive, and walkNoRoots how long one waits for
// roots the agent never sends (the roots come after the classes).
const (
	walkNoTypes = 2 * time.Second
	walkNoRoots = walkplan.NoRoots
)

// planWalk readies a heap walk of the attached JVM, or says why it cannot
// (OpenJ9, a JVM without vmStructs, a heap layout heapwalk refuses).
func (s *session) planWalk() (*walker, error) {
	if s.opts.Census != CensusAuto || s.mode != "attach" {
		return nil, nil
	}
	l, mem, err := walkplan.OpenLayout(s.pid)
	if err != nil {
		return nil, err
	}
	w := newWalker()
	w.Layout, w.Mem = l, mem
	return w, nil
}

func newWalker() *walker {
	return &walker{Walker: walkplan.New(), done: make(chan *join.HeapWalk, 1)}
}

// A launched JVM builds its data after the profile starts: its small
// objects are not tracked one by one, and only their types would be
// named. Once the in-heap samples since the start are mostly on objects
// nothing tracks (unnamed), it is walked as an attached one is, and
// walked again on the same terms.

// launchWalkTries bounds the checks that try to read a launched JVM's
// heap layout (it is not there while the VM starts).
const launchWalkTries = 3

// planLaunchWalk readies a launched JVM's walk: the class descriptions
// are kept from the start, and the checks start it.
func (s *session) planLaunchWalk() {
	if s.opts.Census != CensusAuto || s.mode != "launch" || s.conn == nil {
		return
	}
	w := newWalker()
	w.checking, w.Launched = true, true
	w.checkAt = time.After(s.walkCheckEvery())
	s.walk = w
}

// firstLaunchWalk starts a launched JVM's first walk once its in-heap
// samples are mostly unnamed.
func (s *session) firstLaunchWalk() {
	w := s.walk
	w.checkAt = time.After(s.walkCheckEvery())
	if !w.Unnamed(walkplan.CountsOf(s.j)) {
		return
	}
	l, mem, err := walkplan.OpenLayout(s.pid)
	if err != nil {
		if w.layoutTries++; w.layoutTries >= launchWalkTries {
			s.addNote("no heap walk of the launched JVM: %v", err)
			s.walk = nil
		}
		return
	}
	w.Layout, w.Mem = l, mem
	s.opts.note("in-heap samples of pid %d are mostly on objects nothing tracks: walking its heap", s.pid)
	w.checking = false
	s.askRoots()
	if !w.collecting {
		s.startWalk()
	}
}

// planCensus picks, before the agent loads, what names the objects an
// attached JVM holds already: a heap walk where one can run, else the
// agent's census. vmStructs that lead into memory whose reads may never
// answer (a FUSE mapping) end the session: the agent would read them
// too, and stall the JVM's attach.
func (s *session) planCensus() error {
	w, err := s.planWalk()
	if errors.Is(err, targetmem.ErrMayBlock) || errors.Is(err, targetmem.ErrHung) {
		return fmt.Errorf("not attaching to pid %d: %w", s.pid, err)
	}
	if err != nil {
		s.addNote("census in a pause instead of a heap walk: %v", err)
	}
	s.walk = w
	return nil
}

// agentOptions are the agent's options for this session: with a heap
// walk, no census of large objects after GCs (walks again follow them).
func (s *session) agentOptions() string {
	o := s.opts
	if s.walk != nil {
		o.Recensus = 0
	}
	return o.agentOptions(s.ch.SocketPath())
}

// prepareCensus starts what names the objects that exist already: for a
// walk, the agent's pass over the roots it cannot see (threads' locals);
// the walk starts when they arrive.
func (s *session) prepareCensus() {
	if s.conn == nil || s.mode != "attach" || s.opts.Census == CensusOff {
		return
	}
	if s.walk == nil {
		s.askCensus()
		return
	}
	s.walk.ready = time.After(walkNoTypes)
	s.askRoots()
}

// askRoots asks the agent for the roots a walk cannot see; the walk
// starts when they arrive (or, failing that, when ready fires).
func (s *session) askRoots() {
	w := s.walk
	w.roots, w.collecting = w.roots[:0], true
	if _, err := s.conn.Write([]byte{agentwire.CommandRoots}); err != nil {
		s.addNote("heap walk without the threads' locals: %v", err)
		w.collecting = false
		return
	}
	w.ready = time.After(walkNoRoots)
}

// onWalkBatch collects the class descriptions the walk names fields by and
// the roots it starts from; the roots pass's end starts the walk.
func (s *session) onWalkBatch(b *agentwire.Batch) {
	w := s.walk
	if w == nil {
		return
	}
	for _, r := range b.Records {
		switch r := r.(type) {
		case *agentwire.Class:
			w.AddClass(r)
		case *agentwire.Root:
			if w.collecting && len(w.roots) < maxRoots {
				w.roots = append(w.roots, walkplan.RootOf(r))
			}
		case *agentwire.RootsEnd:
			if w.collecting {
				w.collecting = false
				w.rootsEnd = r
				w.rootsGC, _, _ = w.Layout.Collections(w.Mem)
				if !w.refreshing {
					s.startWalk()
					continue
				}
				w.refreshing = false
				w.Answer(walkplan.RootsPass{Roots: slices.Clone(w.roots), End: r, GC: w.rootsGC, Ok: true})
			}
		}
	}
}

// walkReady is the loop's channel that starts a walk whose roots have not
// come (nil: none waits).
func (s *session) walkReady() <-chan time.Time {
	if s.walk == nil || s.walk.running || s.walk.checking {
		return nil
	}
	return s.walk.ready
}

// maxRoots bounds the roots kept for a walk: the agent's pass sends what
// the target's threads hold.
const maxRoots = 1 << 20

// startWalk starts a walk; samples from now on wait for its result.
func (s *session) startWalk() {
	w := s.walk
	w.running, w.checking, w.collecting = true, false, false
	w.walks++
	w.lastStart = s.clk.Now()
	start := s.clk.Mono()
	s.j.BeginHeapWalk(start)
	w.Hot = s.j.HotAddrs()
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	if w.walks == 1 {
		s.opts.note("walking the heap of pid %d", s.pid)
	}
	w.DropAnswers()
	rp := walkplan.RootsPass{Roots: slices.Clone(w.roots), End: w.rootsEnd, GC: w.rootsGC, Ok: w.rootsEnd != nil}
	go func() {
		w.done <- w.Run(ctx, s.walkGate, start, s.opts.MinSize, s.clk.Mono, rp)
	}()
}

// walkRootsReq is the loop's channel of a running walk's asking for the
// roots anew (nil: no walk runs).
func (s *session) walkRootsReq() <-chan struct{} {
	if s.walk == nil || !s.walk.running {
		return nil
	}
	return s.walk.RootsWanted()
}

// refreshRoots asks the agent for the roots anew for the running walk.
func (s *session) refreshRoots() {
	w := s.walk
	if w.collecting {
		w.refreshing = true // the pass under way answers
		return
	}
	s.askRoots()
	if w.refreshing = w.collecting; !w.collecting {
		// The agent cannot be asked: the walk drops its stale roots, or
		// takes an answer already waiting in the channel.
		w.Answer(walkplan.RootsPass{})
	}
}

// walkDone is the loop's channel of the walk's result (nil: none to wait for).
func (s *session) walkDone() <-chan *join.HeapWalk {
	if s.walk == nil || !s.walk.running {
		return nil
	}
	return s.walk.done
}

// onWalk hands the walk's result to the join.
func (s *session) onWalk(hw *join.HeapWalk) {
	w := s.walk
	w.running, w.checking = false, true
	w.lastTook = s.clk.Now().Sub(w.lastStart)
	w.checkAt = time.After(s.walkCheckEvery())
	if w.again = hw == nil; w.again {
		s.j.AbandonHeapWalk()
		return
	}
	s.j.OnHeapWalk(hw)
	w.Mark(walkplan.CountsOf(s.j))
	if w.walks == 1 {
		s.opts.note("heap walk of pid %d: %d objects in %.1fs", s.pid, hw.Visited, float64(hw.End-hw.Start)/1e9)
	}
}

// walkAgain walks again, with the roots as they are now.
func (s *session) walkAgain() {
	w := s.walk
	w.checking = false // no checks until the next walk's result
	if w.rootsEnd == nil {
		s.startWalk() // the agent sent no roots the first time
		return
	}
	s.askRoots()
	if !w.collecting {
		s.startWalk()
	}
}

// walkShare is how many times as long as the last walk took must pass
// from its start before another: a continuous scan's walks take less.
func (s *session) walkShare() time.Duration {
	if s.cuts != nil {
		return continuousWalkShare
	}
	return walkShare
}

// walkCheckEvery is how often the last walk is checked against the heap.
func (s *session) walkCheckEvery() time.Duration {
	if s.cuts != nil {
		return continuousCheckEvery
	}
	return walkCheckEvery
}

// walkCheck is the loop's channel that checks the last walk against the
// heap (nil: no walk to check).
func (s *session) walkCheck() <-chan time.Time {
	if s.walk == nil || !s.walk.checking {
		return nil
	}
	return s.walk.checkAt
}

// checkWalk walks again when a GC moved what the last walk found, as far
// as the walks' share of the time allows.
func (s *session) checkWalk() {
	w := s.walk
	if w.Layout == nil {
		s.firstLaunchWalk()
		return
	}
	w.checkAt = time.After(s.walkCheckEvery())
	if s.clk.Now().Sub(w.lastStart) < s.walkShare()*w.lastTook {
		return
	}
	if w.again || w.Stale(walkplan.CountsOf(s.j)) || w.GCMoved() {
		s.walkAgain()
	}
}

// walkGrace is how long a profile that ends during its walk waits for
// what the cancelled walk found so far.
const walkGrace = 2 * time.Second

// finishWalk ends a walk still running when the profile ends, and keeps
// what it found.
func (s *session) finishWalk() {
	ch := s.walkDone()
	if ch == nil {
		return
	}
	s.walk.cancel()
	select {
	case hw := <-ch:
		s.onWalk(hw)
	case <-time.After(walkGrace):
	}
}
