package attach

import (
	"os"
	"path/filepath"
	"testing"
)

// TestThreadIDs reads each task's innermost NSpid and skips tasks that are
// not threads or have no NSpid line.
func TestThreadIDs(t *testing.T) {
	proc := t.TempDir()
	write := func(task, nspid string) {
		dir := filepath.Join(proc, "4242", "task", task)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		st := "Name:\tjava\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\n"
		if nspid != "" {
			st += "NSpid:\t" + task + "\t" + nspid + "\n"
		}
		if err := os.WriteFile(filepath.Join(dir, "status"), []byte(st), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("4242", "1")
	write("4250", "9")
	write("4251", "")
	write("x", "3")
	m, err := threadIDs(proc, 4242)
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 2 || m[1] != 4242 || m[9] != 4250 {
		t.Errorf("thread ids %v, want map[1:4242 9:4250]", m)
	}
	if _, err := threadIDs(proc, 1); err == nil {
		t.Error("no error for a pid without tasks")
	}
}

// TestThreadIDsSelf: in our own namespace every thread maps to itself.
func TestThreadIDsSelf(t *testing.T) {
	m, err := ThreadIDs(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if len(m) == 0 {
		t.Fatal("no threads")
	}
	for ns, host := range m {
		if ns != host {
			t.Errorf("thread %d maps to %d in our own namespace", ns, host)
		}
	}
}
