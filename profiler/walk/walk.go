// Package walk decides when a session walks its JVM's heap: the walk
// names the objects an attached JVM holds already, from outside it and
// with no pause (package heapwalk), where the census would stop the world
// for a time that grows with the heap. What one walk does and whether its
// result still holds is package walkplan's; this package asks the agent
// for the roots, starts the walks, hands their results to the join and
// checks them against the heap on the session loop's timers.
package walk

import (
	"context"
	"slices"
	"time"

	"github.com/djx-bpf/djx-bpf/hotspot/heapwalk"
	"github.com/djx-bpf/djx-bpf/hotspot/walkplan"
	"github.com/djx-bpf/djx-bpf/join"
	"github.com/djx-bpf/djx-bpf/sources/agentwire"
)

// Env is what a session's walks reach of the session: its JVM, its join
// (built after the walk is planned), the agent, the clocks and the notes.
type Env struct {
	PID     int
	Proc    walkplan.Target // the JVM's process, which a walk reads
	Join    func() *join.JVM
	Command func(cmd []byte) error // writes a command to the agent
	Now     func() time.Time       // wall time
	Mono    func() uint64          // the streams' clock
	// After is the timers' clock (time.After); Sync runs each walk to its
	// end as it starts, on the session's loop. A replay sets both, so
	// that its walks and checks fall between the same batches each time.
	After func(time.Duration) <-chan time.Time
	Sync  bool
	// Tell tells the user; Note also keeps the note in the report.
	Tell, Note func(format string, args ...any)
	Gate       *walkplan.Gate // shares the CPU among a scan's walks (nil: not a scan)
	MinSize    uint64
	// Continuous: a continuous scan's session, whose walks take less.
	Continuous bool
}

// Driver drives one session's heap walks. The loop's channels (Ready,
// Done, Check, RootsWanted) are nil on a nil Driver.
type Driver struct {
	*walkplan.Walker
	env   Env
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

// Plan readies a heap walk of the attached JVM env.PID, or says why it
// cannot (OpenJ9, a JVM without vmStructs, a heap layout heapwalk refuses).
func Plan(env Env) (*Driver, error) {
	l, mem, err := walkplan.OpenLayout(env.Proc)
	if err != nil {
		return nil, err
	}
	w := newDriver(env)
	w.Layout, w.Mem = l, mem
	return w, nil
}

func newDriver(env Env) *Driver {
	if env.After == nil {
		env.After = time.After
	}
	return &Driver{Walker: walkplan.New(), env: env, done: make(chan *join.HeapWalk, 1)}
}

// A launched JVM builds its data after the profile starts: its small
// objects are not tracked one by one, and only their types would be
// named. Once the in-heap samples since the start are mostly on objects
// nothing tracks (unnamed), it is walked as an attached one is, and
// walked again on the same terms.

// launchWalkTries bounds the checks that try to read a launched JVM's
// heap layout (it is not there while the VM starts).
const launchWalkTries = 3

// PlanLaunched readies a launched JVM's walk: the class descriptions
// are kept from the start, and the checks start it.
func PlanLaunched(env Env) *Driver {
	w := newDriver(env)
	w.checking, w.Launched = true, true
	w.checkAt = w.env.After(w.checkEvery())
	return w
}

// firstLaunchWalk starts a launched JVM's first walk once its in-heap
// samples are mostly unnamed; false: the walk is given up.
func (w *Driver) firstLaunchWalk() bool {
	w.checkAt = w.env.After(w.checkEvery())
	if !w.Unnamed(walkplan.CountsOf(w.env.Join())) {
		return true
	}
	l, mem, err := walkplan.OpenLayout(w.env.Proc)
	if err != nil {
		if w.layoutTries++; w.layoutTries >= launchWalkTries {
			w.env.Note("no heap walk of the launched JVM: %v", err)
			return false
		}
		return true
	}
	w.Layout, w.Mem = l, mem
	w.env.Tell("in-heap samples of pid %d are mostly on objects nothing tracks: walking its heap", w.env.PID)
	w.checking = false
	w.askRoots()
	if !w.collecting {
		w.Start()
	}
	return true
}

// Prepare starts what names the objects that exist already: the agent's
// pass over the roots a walk cannot see (threads' locals); the walk
// starts when they arrive.
func (w *Driver) Prepare() {
	w.ready = w.env.After(walkNoTypes)
	w.askRoots()
}

// askRoots asks the agent for the roots a walk cannot see; the walk
// starts when they arrive (or, failing that, when ready fires).
func (w *Driver) askRoots() {
	w.roots, w.collecting = w.roots[:0], true
	if err := w.env.Command([]byte{agentwire.CommandRoots}); err != nil {
		w.env.Note("heap walk without the threads' locals: %v", err)
		w.collecting = false
		return
	}
	w.ready = w.env.After(walkNoRoots)
}

// OnBatch collects the class descriptions the walk names fields by and
// the roots it starts from; the roots pass's end starts the walk.
func (w *Driver) OnBatch(b *agentwire.Batch) {
	if w == nil {
		return
	}
	start := false
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
					start = true
					continue
				}
				w.refreshing = false
				w.Answer(walkplan.RootsPass{Roots: slices.Clone(w.roots), End: r, GC: w.rootsGC, Ok: true})
			}
		}
	}
	if start {
		// Once the batch's class descriptions are in: the agent's may
		// follow its roots' end, and name the fields of what the walk
		// reads first (the statics).
		w.Start()
	}
}

// Ready is the loop's channel that starts a walk whose roots have not
// come (nil: none waits).
func (w *Driver) Ready() <-chan time.Time {
	if w == nil || w.running || w.checking {
		return nil
	}
	return w.ready
}

// maxRoots bounds the roots kept for a walk: the agent's pass sends what
// the target's threads hold.
const maxRoots = 1 << 20

// Start starts a walk; samples from now on wait for its result.
func (w *Driver) Start() {
	j := w.env.Join()
	w.running, w.checking, w.collecting = true, false, false
	w.walks++
	w.lastStart = w.env.Now()
	start := w.env.Mono()
	j.BeginHeapWalk(start)
	w.Hot = j.HotAddrs()
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	if w.walks == 1 {
		w.env.Tell("walking the heap of pid %d", w.env.PID)
	}
	w.DropAnswers()
	rp := walkplan.RootsPass{Roots: slices.Clone(w.roots), End: w.rootsEnd, GC: w.rootsGC, Ok: w.rootsEnd != nil}
	if w.env.Sync {
		w.OnWalk(w.Run(ctx, w.env.Gate, start, w.env.MinSize, w.env.Mono, rp))
		return
	}
	go func() {
		w.done <- w.Run(ctx, w.env.Gate, start, w.env.MinSize, w.env.Mono, rp)
	}()
}

// RootsWanted is the loop's channel of a running walk's asking for the
// roots anew (nil: no walk runs).
func (w *Driver) RootsWanted() <-chan struct{} {
	if w == nil || !w.running {
		return nil
	}
	return w.Walker.RootsWanted()
}

// RefreshRoots asks the agent for the roots anew for the running walk.
func (w *Driver) RefreshRoots() {
	if w.collecting {
		w.refreshing = true // the pass under way answers
		return
	}
	w.askRoots()
	if w.refreshing = w.collecting; !w.collecting {
		// The agent cannot be asked: the walk drops its stale roots, or
		// takes an answer already waiting in the channel.
		w.Answer(walkplan.RootsPass{})
	}
}

// Done is the loop's channel of the walk's result (nil: none to wait for).
func (w *Driver) Done() <-chan *join.HeapWalk {
	if w == nil || !w.running {
		return nil
	}
	return w.done
}

// OnWalk hands the walk's result to the join.
func (w *Driver) OnWalk(hw *join.HeapWalk) {
	j := w.env.Join()
	w.running, w.checking = false, true
	w.lastTook = w.env.Now().Sub(w.lastStart)
	w.checkAt = w.env.After(w.checkEvery())
	if w.again = hw == nil; w.again {
		j.AbandonHeapWalk()
		return
	}
	j.OnHeapWalk(hw)
	w.Mark(walkplan.CountsOf(j))
	if w.walks == 1 {
		w.env.Tell("heap walk of pid %d: %d objects in %.1fs", w.env.PID, hw.Visited, float64(hw.End-hw.Start)/1e9)
	}
}

// walkAgain walks again, with the roots as they are now.
func (w *Driver) walkAgain() {
	w.checking = false // no checks until the next walk's result
	if w.rootsEnd == nil {
		w.Start() // the agent sent no roots the first time
		return
	}
	w.askRoots()
	if !w.collecting {
		w.Start()
	}
}

// share is how many times as long as the last walk took must pass from
// its start before another: a continuous scan's walks take less.
func (w *Driver) share() time.Duration {
	if w.env.Continuous {
		return continuousWalkShare
	}
	return walkShare
}

// checkEvery is how often the last walk is checked against the heap.
func (w *Driver) checkEvery() time.Duration {
	if w.env.Continuous {
		return continuousCheckEvery
	}
	return walkCheckEvery
}

// Check is the loop's channel that checks the last walk against the
// heap (nil: no walk to check).
func (w *Driver) Check() <-chan time.Time {
	if w == nil || !w.checking {
		return nil
	}
	return w.checkAt
}

// CheckWalk walks again when a GC moved what the last walk found, as far
// as the walks' share of the time allows; false: a launched JVM's walk is
// given up, and the session has none.
func (w *Driver) CheckWalk() bool {
	if w.Layout == nil {
		return w.firstLaunchWalk()
	}
	w.checkAt = w.env.After(w.checkEvery())
	if w.env.Now().Sub(w.lastStart) < w.share()*w.lastTook {
		return true
	}
	if w.again || w.Stale(walkplan.CountsOf(w.env.Join())) || w.GCMoved() {
		w.walkAgain()
	}
	return true
}

// walkGrace is how long a profile that ends during its walk waits for
// what the cancelled walk found so far.
const walkGrace = 2 * time.Second

// Finish ends a walk still running when the profile ends, and keeps
// what it found.
func (w *Driver) Finish() {
	ch := w.Done()
	if ch == nil {
		return
	}
	w.cancel()
	select {
	case hw := <-ch:
		w.OnWalk(hw)
	case <-time.After(walkGrace):
	}
}
