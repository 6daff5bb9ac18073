package main

import (
	"flag"
	"io"
	"testing"

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
		{nil, profiler.DefaultStacks, profiler.DefaultStackSignal},
		{[]string{"--stack-signal", "40"}, profiler.StacksAgent, 40},
		{[]string{"--stack-signal", "0"}, profiler.StacksAgent, -1},
		{[]string{"--stack-interval", "1ms"}, profiler.StacksAgent, profiler.DefaultStackSignal},
		{[]string{"--stack-signal", "40", "--stacks", "bpf"}, profiler.StacksBPF, 40},
		{[]string{"--stacks", "agent"}, profiler.StacksAgent, profiler.DefaultStackSignal},
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
