package main

import (
	"math"
	"testing"
	"time"
)

// TestOpsRate: the rate counts only the ops lines inside the window, from
// its first to its last.
func TestOpsRate(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var l opsLog
	for i, ops := range []float64{10, 20, 40, 60, 80, 90} {
		l.t = append(l.t, t0.Add(time.Duration(i)*time.Second))
		l.ops = append(l.ops, ops)
	}
	got, ok := l.rate(t0.Add(1500*time.Millisecond), t0.Add(4500*time.Millisecond))
	if !ok || got != 20 {
		t.Errorf("rate over lines 2..4 = %v, %v; want 20/s", got, ok)
	}
	if _, ok := l.rate(t0.Add(1500*time.Millisecond), t0.Add(2500*time.Millisecond)); ok {
		t.Error("a window with one line has no rate")
	}
}

// TestOpsLost: work is interpolated between lines, and the time lost is
// the span less the time its work takes at the base rate.
func TestOpsLost(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var l opsLog
	for i, ops := range []float64{0, 20, 30, 50} { // 20/s, but 10 in the second second
		l.t = append(l.t, t0.Add(time.Duration(i)*time.Second))
		l.ops = append(l.ops, ops)
	}
	if got, ok := l.at(t0.Add(1500 * time.Millisecond)); !ok || got != 25 {
		t.Errorf("at 1.5s = %v, %v; want 25", got, ok)
	}
	if got, ok := l.lost(t0.Add(500*time.Millisecond), t0.Add(2500*time.Millisecond), 20); !ok || math.Abs(got-0.5) > 1e-9 {
		t.Errorf("lost over 0.5..2.5s = %v, %v; want 0.5s", got, ok)
	}
	if _, ok := l.lost(t0.Add(-time.Second), t0.Add(time.Second), 20); ok {
		t.Error("lost before the first line")
	}
	if _, ok := l.lost(t0, t0.Add(4*time.Second), 20); ok {
		t.Error("lost after the last line")
	}
}

// TestOpsPerSecond: per-second counts are summed into a running total.
func TestOpsPerSecond(t *testing.T) {
	l := opsLog{perSecond: true}
	ch := make(chan string, 8)
	for _, s := range []string{"ready", "ops 5", "ops 7", "ops 6", "done"} {
		ch <- s
	}
	close(ch)
	l.follow(ch)
	if want := []float64{5, 12, 18}; len(l.ops) != 3 || l.ops[0] != want[0] || l.ops[1] != want[1] || l.ops[2] != want[2] {
		t.Errorf("ops %v, want %v", l.ops, want)
	}
}

// TestGeomeanCI: ratios 0.9 and 1.1 around 1 give a geomean just below 1
// and an interval around it.
func TestGeomeanCI(t *testing.T) {
	g, lo, hi := geomeanCI([]float64{0.9, 1.1, 0.9, 1.1})
	if g < 0.99 || g > 1.0 || lo >= g || hi <= g || lo < 0.85 || hi > 1.15 {
		t.Errorf("geomeanCI = %.3f [%.3f, %.3f]", g, lo, hi)
	}
}
