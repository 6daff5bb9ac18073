package stacks

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/djx-bpf/djx-bpf/target/openj9"
)

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
	}{{"lib/default/libj9vm29.so", Agent}, {"lib/server/libjvm.so", Auto}} {
		java := jdk(c.lib)
		ch := Choice{Mode: Auto}
		var notes []string
		ch.ForOpenJ9(openj9.Launches(java), func(format string, args ...any) { notes = append(notes, fmt.Sprintf(format, args...)) })
		if ch.Mode != c.want {
			t.Errorf("%s: stacks %s, want %s", c.lib, ch.Mode, c.want)
		}
		if got := len(notes) > 0; got != (c.want == Agent) {
			t.Errorf("%s: notes %q", c.lib, notes)
		}
	}
	if openj9.Launches(filepath.Join(t.TempDir(), "no-such-java")) {
		t.Error("a missing java command is OpenJ9")
	}
}
