package datatype

import (
	"testing"
	"time"
)

// TestClassesGap: asks whose klass words never get a class (stray
// headers) back off to classesEveryMax; an answered ask resets the gap.
func TestClassesGap(t *testing.T) {
	gap := classesGap(0, true)
	if gap != classesEvery {
		t.Fatalf("first gap %v, want %v", gap, classesEvery)
	}
	var gaps []time.Duration
	for range 8 {
		gap = classesGap(gap, false)
		gaps = append(gaps, gap)
	}
	want := []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second,
		32 * time.Second, 32 * time.Second, 32 * time.Second, 32 * time.Second}
	for i := range want {
		if gaps[i] != want[i] {
			t.Fatalf("gaps after unanswered asks %v, want %v", gaps, want)
		}
	}
	if gap = classesGap(gap, true); gap != classesEvery {
		t.Errorf("gap after an answered ask %v, want %v", gap, classesEvery)
	}
}
