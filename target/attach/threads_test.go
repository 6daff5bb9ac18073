package attach

import (
	"os"
	"testing"
)

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
