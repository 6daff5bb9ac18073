package walk

import (
	"testing"
	"time"

	"github.com/djx-bpf/djx-bpf/sources/agentwire"
)

// A session without a walk has a nil Driver: the loop's channels are
// never ready, and a batch or the profile's end does nothing.
func TestNilDriver(t *testing.T) {
	var w *Driver
	if w.Ready() != nil || w.Done() != nil || w.Check() != nil || w.RootsWanted() != nil {
		t.Error("a nil Driver has a channel the loop would wait on")
	}
	w.OnBatch(&agentwire.Batch{Records: []agentwire.Record{&agentwire.RootsEnd{}}})
	w.Finish()
}

// A launched JVM's walk waits for its checks, which a continuous scan's
// session runs less often.
func TestPlanLaunched(t *testing.T) {
	for _, continuous := range []bool{false, true} {
		w := PlanLaunched(Env{PID: 7, Continuous: continuous})
		if !w.Launched || w.Check() == nil || w.Ready() != nil || w.Done() != nil || w.Layout != nil {
			t.Errorf("continuous %v: launched %v, checking %v; want a launched walk its checks start", continuous, w.Launched, w.Check() != nil)
		}
		want := walkCheckEvery
		if continuous {
			want = continuousCheckEvery
		}
		if got := w.checkEvery(); got != want {
			t.Errorf("continuous %v: checks every %v, want %v", continuous, got, want)
		}
	}
	if continuousWalkShare <= walkShare || continuousCheckEvery < time.Second {
		t.Error("a continuous scan's walks take more than a profile's")
	}
}
