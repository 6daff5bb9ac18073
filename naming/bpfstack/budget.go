package bpfstack

import (
	"errors"
	"time"
)

// Time budgets for naming frames from a JVM's memory. A frame no cache
// names costs reads (a few µs each on a real JVM), but a forged code
// cache or huge names made each cost ms, and one ALLOC_RAW record of the
// in-target agent holds up to 1024 frames: root's CPU, shared by every
// JVM of a scan, went to one of them. Past a budget a frame is not
// named: its path ends there ("naming time budget"), and the frames
// left are counted. Variables so that tests can lower them.
var (
	// RecordBudget bounds the time naming one stack (a sample's or an
	// allocation's) or one code lookup.
	RecordBudget = 50 * time.Millisecond
	// SecondBudget is the time one JVM's naming may take per second of
	// wall time, on average; BurstBudget what it may save up (a JVM's
	// first stacks name most of its hot code at once).
	SecondBudget = 200 * time.Millisecond
	BurstBudget  = time.Second
)

// errBudget means a frame was not named: the time budgets were spent.
var errBudget = errors.New("past the time budget for naming frames")

// budgetEnd is the Missing reason of a path cut by the time budgets.
const budgetEnd = "naming time budget"

// timeBudget is a token bucket of time for one JVM's reads, refilled at
// SecondBudget per second up to BurstBudget, and the time spent on the
// current record. Not safe for concurrent use.
type timeBudget struct {
	now    func() time.Time
	tokens time.Duration
	last   time.Time
	spent  time.Duration // on the current record
}

func newTimeBudget() *timeBudget { return &timeBudget{now: time.Now, tokens: BurstBudget} }

// record starts a record: its own budget is whole again.
func (b *timeBudget) record() { b.spent = 0 }

// run runs f, a read of the JVM, and charges its time; it says false,
// without running f, when the record's or the JVM's budget is spent.
func (b *timeBudget) run(f func()) bool {
	t := b.now()
	if !b.last.IsZero() && t.After(b.last) {
		b.tokens = min(BurstBudget, b.tokens+time.Duration(float64(t.Sub(b.last))*float64(SecondBudget)/float64(time.Second)))
	}
	b.last = t
	if b.spent >= RecordBudget || b.tokens <= 0 {
		return false
	}
	f()
	d := max(b.now().Sub(t), 0)
	b.spent += d
	b.tokens -= d
	return true
}
