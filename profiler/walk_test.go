package profiler

import (
	"io"
	"testing"
)

// A launched JVM with an agent has its walk planned from the start, as a
// launched one: its large objects are the agent's, and its walks add none
// to the object table (walkplan's TestWalkCensusLaunched).
func TestPlanLaunchWalk(t *testing.T) {
	s := &session{opts: Options{Census: CensusAuto}, mode: "launch", conn: nopConn{}, clk: sysClock{}}
	s.planLaunchWalk()
	w := s.walk
	if w == nil {
		t.Fatal("a launched JVM with an agent has no walk planned")
	}
	if !w.Launched || w.Check() == nil || w.Layout != nil {
		t.Errorf("launched JVM's walk: launched %v, checking %v, layout %v; want a launched walk its checks start", w.Launched, w.Check() != nil, w.Layout)
	}
}

// nopConn is an agent connection that carries nothing.
type nopConn struct{}

func (nopConn) Read([]byte) (int, error)    { return 0, io.EOF }
func (nopConn) Write(p []byte) (int, error) { return len(p), nil }
func (nopConn) Close() error                { return nil }
