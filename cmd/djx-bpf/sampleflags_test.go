package main

import (
	"flag"
	"io"
	"testing"

	"github.com/djx-bpf/djx-bpf/naming/stacks"
	"github.com/djx-bpf/djx-bpf/profiler"
)

// --stack-signal and --stack-interval set the agent's stacks: given
// without --stacks they mean --stacks agent; --stacks wins when given too.
func TestStackFlagsPickAgent(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
		sig  int
	}{
		{nil, stacks.Default, profiler.DefaultStackSignal},
		{[]string{"--stack-signal", "40"}, stacks.Agent, 40},
		{[]string{"--stack-signal", "0"}, stacks.Agent, -1},
		{[]string{"--stack-interval", "1ms"}, stacks.Agent, profiler.DefaultStackSignal},
		{[]string{"--stack-signal", "40", "--stacks", "bpf"}, stacks.BPF, 40},
		{[]string{"--stacks", "agent"}, stacks.Agent, profiler.DefaultStackSignal},
	} {
		var f sampleFlags
		fs := flag.NewFlagSet("profile", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		f.register(fs)
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		if err := f.check(); err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		o := f.options()
		if o.Stacks != c.want || o.StackSignal != c.sig {
			t.Errorf("%v: stacks %q signal %d, want %q %d", c.args, o.Stacks, o.StackSignal, c.want, c.sig)
		}
	}
}
