package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/djx-bpf/djx-bpf/internal/testenv"
)

// TestReattachOneCopy: twenty short profiles of one JVM, one after
// another, each a complete attach and detach, leave one copy of the agent
// in it (each used to leave its own, deleted, for good); each profile,
// with stacks from BPF or from the agent's signal handler, finds the hot
// object, its access paths and its data types, and the JVM runs on.
func TestReattachOneCopy(t *testing.T) {
	setupBuild(t)
	parallel(t) // its own JVM's agent copies and top object
	j := startJVM(t, jdks()["jdk17"], nil, "0")
	pid := j.cmd.Process.Pid
	dir := t.TempDir()
	var took []time.Duration
	for i := range 20 {
		out := filepath.Join(dir, fmt.Sprintf("p%d.json", i))
		args := []string{"profile", "--pid", fmt.Sprint(pid), "--duration", "1s", "--format", "json", "-o", out}
		if i%2 == 1 { // the agent's stacks: its signal handler, installed once, serves each session
			args = append(args, "--stacks", "agent")
		}
		start := time.Now()
		code, _, stderr := djx(t, args...)
		took = append(took, time.Since(start).Round(10*time.Millisecond))
		if code != 0 {
			t.Fatalf("profile %d exited %d:\n%s", i+1, code, stderr)
		}
		r := readReport(t, out)
		if len(r.Objects) == 0 || !strings.Contains(r.Objects[0].Site, "allocHot") || len(r.Objects[0].Accesses) == 0 {
			t.Errorf("profile %d (%v): top object %+v, want allocHot's, with access paths", i+1, args[7:], r.Objects[:min(1, len(r.Objects))])
		}
		// Each session's types self-check passed: the in-heap samples are typed.
		if len(r.DataTypes) == 0 {
			t.Errorf("profile %d: no data types; notes %q", i+1, r.Notes)
		}
		if n, del := testenv.AgentCopies(t, pid); n != 1 || del != 0 {
			t.Fatalf("after profile %d: %d copies of the agent mapped (%d deleted), want 1", i+1, n, del)
		}
	}
	if err := j.cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("JVM gone after the profiles: %v", err)
	}
	t.Logf("1 s profiles took %v (the first loads the library)", took)
}
