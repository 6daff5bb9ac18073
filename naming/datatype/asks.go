package datatype

import "time"

// classesEvery bounds how often the agent is asked for classes it has not
// described: each ask walks the JVM's loaded classes (3 ms of its writer
// thread on Xalan). An ask that found none of the klass words asked for
// (stray headers) doubles the gap, up to classesEveryMax.
const (
	classesEvery    = time.Second
	classesEveryMax = 32 * time.Second
)

// Wanted is what the join knows of the classes the samples met: whether
// any are not described yet, and how many of those asked for were found.
type Wanted interface {
	WantClasses() bool
	AskedFound() int
}

// Asks paces a session's asks to the agent for the classes the samples
// met that it has not described.
type Asks struct {
	last  time.Time     // the last ask
	gap   time.Duration // until the next may go
	found int           // AskedFound at the last ask
}

// Due says whether to ask now, and counts the ask when it says yes.
func (a *Asks) Due(now time.Time, w Wanted) bool {
	if now.Sub(a.last) < a.gap || !w.WantClasses() {
		return false
	}
	found := w.AskedFound()
	a.gap = classesGap(a.gap, a.last.IsZero() || found > a.found)
	a.last, a.found = now, found
	return true
}

// classesGap is the least time before the next ask for classes, after an
// ask: classesEvery when the last one answered any (or there was none),
// else twice the gap, up to classesEveryMax.
func classesGap(gap time.Duration, answered bool) time.Duration {
	if answered || gap < classesEvery {
		return classesEvery
	}
	return min(2*gap, classesEveryMax)
}
