package profiler

import (
	"strings"
	"testing"
)

// With BPF stacks the agent reports no JIT code on HotSpot (code=2) and
// installs no stack handler; with the agent's stacks it keeps both, as before.
func TestAgentOptionsByStacks(t *testing.T) {
	for _, c := range []struct {
		stacks string
		sig    int
		code0  bool
	}{{StacksAgent, 40, false}, {StacksBPF, -1, true}} {
		o := Options{Stacks: c.stacks, StackSignal: c.sig}
		opts := o.agentOptions("/s")
		if got := strings.Contains(opts, ",code=2"); got != c.code0 {
			t.Errorf("stacks %s: %q: code=2 %v, want %v", c.stacks, opts, got, c.code0)
		}
		if got := strings.Contains(opts, ",stacks="); got == c.code0 {
			t.Errorf("stacks %s: %q: a stack handler %v", c.stacks, opts, got)
		}
	}
}
