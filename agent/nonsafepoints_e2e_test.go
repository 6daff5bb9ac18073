package agent

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// A CompiledMethodLoad listener has C1 and C2 record debug information
// between safepoints. With code=0, or code=2 on HotSpot (stacks unwound in
// BPF), there is none and no CODE or STUB record is sent,
// so the agent turns DebugNonSafepoints on itself, unless the command
// line chose it; with code=1 the flag is left alone (the listener does
// its work). Without it a sampled access in a loop is named by its
// safepoint's line.
func TestCodeOffDebugNonSafepoints(t *testing.T) {
	re := regexp.MustCompile(`bool DebugNonSafepoints\s*=\s*(\w+)`)
	for _, j := range spinJDKs(t) {
		for _, tc := range []struct {
			name, opts string
			flags      []string
			want       bool
		}{
			{"code=0", "code=0", nil, true},
			{"code=2", "code=2", nil, true},
			{"code=0 chosen off", "code=0", []string{"-XX:-DebugNonSafepoints"}, false},
			{"code=1", "", nil, false},
		} {
			t.Run(j.name+"/"+tc.name, func(t *testing.T) {
				flags := append([]string{"-XX:+UnlockDiagnosticVMOptions"}, tc.flags...)
				v := startJava(t, j, "interval=1m,minsize=1g,"+tc.opts, true, nil, append(flags, spinFlags...), "Spin")
				v.ready()
				var out []byte
				var err error
				for try := 0; try < 5; try++ { // the attach listener may be slow to start on a busy host
					out, err = exec.Command(filepath.Join(j.home, "bin", "jcmd"), strconv.Itoa(v.cmd.Process.Pid), "VM.flags", "-all").CombinedOutput()
					if err == nil {
						break
					}
					time.Sleep(time.Second)
				}
				v.send("exit")
				bs, _ := v.rest()
				var s stackStream
				s.addAll(t, bs)
				v.exitCode(3)
				if recs := len(s.codes) + len(s.stubs); (recs == 0) != (tc.opts != "") {
					t.Errorf("%d CODE, %d STUB records with %q", len(s.codes), len(s.stubs), tc.opts)
				}
				if err != nil {
					t.Fatalf("jcmd VM.flags: %v: %s", err, out)
				}
				m := re.FindSubmatch(out)
				if m == nil {
					t.Fatalf("no DebugNonSafepoints in VM.flags -all:\n%s", out)
				}
				if got := string(m[1]) == "true"; got != tc.want {
					t.Errorf("DebugNonSafepoints = %s, want %v", m[1], tc.want)
				}
			})
		}
	}
}
