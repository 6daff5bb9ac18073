package join

import (
	"fmt"
	"sync/atomic"
)

// Budget bounds, in bytes, what the joins of several JVMs (a scan) keep
// of their agents' streams together: each JVM's own byte budgets (caps.go)
// times the JVMs a scan may profile would be far more than a host has. It
// is safe for concurrent use; each join publishes what it holds when it
// admits a record that would grow it.
type Budget struct {
	limit int64
	used  atomic.Int64
}

// NewBudget returns a budget of limit bytes.
func NewBudget(limit int64) *Budget { return &Budget{limit: limit} }

// Used is what the joins held at their latest records.
func (b *Budget) Used() int64 { return b.used.Load() }

// held estimates what the join keeps of its agent's stream and of what
// the JVM names: the tables with a byte budget, the queued records and
// samples, the access paths and the frames' names.
func (j *JVM) held() int64 {
	return int64(j.syms.Bytes() + j.classBytes + j.codeBytes + j.siteBytes + j.censusPathBytes + j.queuedSize + j.stackBytes +
		j.names.Bytes() + j.accessBytes + j.pendingSize)
}

// overShared says whether the shared budget is spent, after publishing
// what this join holds now.
func (j *JVM) overShared() (string, bool) {
	if j.budget == nil {
		return "", false
	}
	h := j.held()
	if d := h - j.published; d != 0 {
		j.published = h
		j.budget.used.Add(d)
	}
	if j.budget.used.Load() <= j.budget.limit {
		return "", false
	}
	return fmt.Sprintf("records past the scan's %d MiB shared by its JVMs", j.budget.limit>>20), true
}
