package profiler

import (
	"strings"
	"testing"

	"github.com/djx-bpf/djx-bpf/naming/stacks"
)

// With BPF stacks the agent reports no JIT code on HotSpot (code=2) and
// installs no stack handler; with the agent's stacks it keeps both, as before.
func TestAgentOptionsByStacks(t *testing.T) {
	for _, c := range []struct {
		stacks string
		sig    int
		code0  bool
	}{{stacks.Agent, 40, false}, {stacks.BPF, -1, true}} {
		o := Options{}
		opts := o.agentOptions("/s", stacks.Choice{Mode: c.stacks, Signal: c.sig})
		if got := strings.Contains(opts, ",code=2"); got != c.code0 {
			t.Errorf("stacks %s: %q: code=2 %v, want %v", c.stacks, opts, got, c.code0)
		}
		if got := strings.Contains(opts, ",stacks="); got == c.code0 {
			t.Errorf("stacks %s: %q: a stack handler %v", c.stacks, opts, got)
		}
	}
}

// Asked for no stacks (a negative stack signal), the default takes the
// agent's path, which then sends no signal: nothing is unwound.
func TestNoStacksIsNotAuto(t *testing.T) {
	o := Options{StackSignal: -1}
	o.fill()
	if o.Stacks != stacks.Agent {
		t.Errorf("stacks %q with no stack signal, want %q", o.Stacks, stacks.Agent)
	}
	o = Options{}
	o.fill()
	if o.Stacks != stacks.Default {
		t.Errorf("stacks %q by default, want %q", o.Stacks, stacks.Default)
	}
}
