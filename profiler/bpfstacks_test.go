package profiler

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/djx-bpf/djx-bpf/target/openj9"
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

// Under auto, a java command of an OpenJ9 JDK (lib/*/libj9vm*.so) gets the
// agent's stacks, with a note; a HotSpot JDK's keeps auto.
func TestAutoForOpenJ9Launch(t *testing.T) {
	jdk := func(lib string) string {
		home := t.TempDir()
		for _, f := range []string{"bin/java", lib} {
			p := filepath.Join(home, f)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, nil, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		return filepath.Join(home, "bin", "java")
	}
	for _, c := range []struct {
		lib, want string
	}{{"lib/default/libj9vm29.so", StacksAgent}, {"lib/server/libjvm.so", StacksAuto}} {
		java := jdk(c.lib)
		s := &session{opts: Options{Stacks: StacksAuto}}
		s.autoForOpenJ9(openj9.Launches(java))
		if s.opts.Stacks != c.want {
			t.Errorf("%s: stacks %s, want %s", c.lib, s.opts.Stacks, c.want)
		}
		if got := len(s.notes) > 0; got != (c.want == StacksAgent) {
			t.Errorf("%s: notes %q", c.lib, s.notes)
		}
	}
	if openj9.Launches(filepath.Join(t.TempDir(), "no-such-java")) {
		t.Error("a missing java command is OpenJ9")
	}
}

// Asked for no stacks (a negative stack signal), the default takes the
// agent's path, which then sends no signal: nothing is unwound.
func TestNoStacksIsNotAuto(t *testing.T) {
	o := Options{StackSignal: -1}
	o.fill()
	if o.Stacks != StacksAgent {
		t.Errorf("stacks %q with no stack signal, want %q", o.Stacks, StacksAgent)
	}
	o = Options{}
	o.fill()
	if o.Stacks != DefaultStacks {
		t.Errorf("stacks %q by default, want %q", o.Stacks, DefaultStacks)
	}
}
