package walkplan

import (
	"context"
	"time"
)

// Gate shares a scan's heap walks out on the CPU: as many walk at a
// time as the host has CPUs, each for Slice, then hands over to the
// next that waits (a channel serves its receivers in turn). Each JVM's
// walk names the objects its samples hit first, so a scan that ends
// before its walks do has named each JVM's hot objects, where six walks
// side by side on two CPUs all ended unfinished, and none waits for
// another's whole walk.
type Gate struct {
	token chan struct{}
	slice time.Duration
}

// Slice is how long a scan's walk runs before it lets another in.
const Slice = 50 * time.Millisecond

// NewGate lets walks walk at a time, each for slice before it lets
// another in.
func NewGate(walks int, slice time.Duration) *Gate {
	walks = max(1, walks)
	g := &Gate{token: make(chan struct{}, walks), slice: slice}
	for range walks {
		g.token <- struct{}{}
	}
	return g
}

// walkTurn is one walk's hold on a gate; a nil turn (no gate) never
// waits.
type walkTurn struct {
	g     *Gate
	held  bool
	since time.Time
}

// enter waits for the gate; false when ctx ended first.
func (g *Gate) enter(ctx context.Context) (*walkTurn, bool) {
	if g == nil {
		return nil, true
	}
	t := &walkTurn{g: g}
	return t, t.take(ctx)
}

func (t *walkTurn) take(ctx context.Context) bool {
	select {
	case <-t.g.token:
		t.held, t.since = true, time.Now()
		return true
	case <-ctx.Done():
		return false
	}
}

// pace is heapwalk's Config.Pace: past its slice, the walk hands the
// gate to a walk that waits, if any, and waits for its next turn.
func (t *walkTurn) pace(ctx context.Context) bool {
	if t == nil {
		return ctx.Err() == nil
	}
	if t.held && time.Since(t.since) < t.g.slice {
		return true
	}
	t.leave()
	return t.take(ctx)
}

// leave lets the next walk in.
func (t *walkTurn) leave() {
	if t != nil && t.held {
		t.held = false
		t.g.token <- struct{}{}
	}
}
