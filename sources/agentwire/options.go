package agentwire

import (
	"strconv"
	"time"
)

// Options are the agent's options, the text after -agentpath's "=" or
// in the attach's load command.
type Options struct {
	Sock     string // the unix socket to connect to
	Interval uint64 // heap sampling interval, bytes
	MinSize  uint64 // objects smaller are not recorded
	Budget   uint64 // sampled allocations per second before the interval rises (0: no cap)
	// Reconcile rescans the tracked objects after each GC.
	Reconcile bool
	// StackSignal installs the stack handler on that signal (0 or less: none).
	StackSignal int
	// NoJITCode leaves JIT code records off on HotSpot (code=2): the
	// join reads JIT code from the code cache.
	NoJITCode bool
	// Census is the census's level when asked (CommandCensus): 2 with
	// holder chains, 1 objects only, 0 none, and no census after GCs
	// either. CensusBudget bounds a census pause (0: none), Recensus is
	// the least time between censuses after GCs (0 or less: none).
	Census       int
	CensusBudget time.Duration
	Recensus     time.Duration
	// Types has the agent describe every class's klass and field layout.
	Types bool
}

// String is the options as the agent parses them.
func (o Options) String() string {
	s := "sock=" + o.Sock + ",interval=" + strconv.FormatUint(o.Interval, 10) + ",minsize=" + strconv.FormatUint(o.MinSize, 10) +
		",budget=" + strconv.FormatUint(o.Budget, 10)
	if o.Reconcile {
		s += ",reconcile=1"
	}
	if o.StackSignal > 0 {
		s += ",stacks=" + strconv.Itoa(o.StackSignal)
	}
	if o.NoJITCode {
		s += ",code=2"
	}
	if o.Census > 0 {
		s += ",census=" + strconv.Itoa(o.Census) + ",census_budget=" + strconv.FormatInt(o.CensusBudget.Microseconds(), 10)
		if o.Recensus > 0 {
			s += ",recensus=" + strconv.FormatInt(o.Recensus.Milliseconds(), 10)
		}
	}
	if o.Types {
		s += ",types=1"
	}
	return s
}
