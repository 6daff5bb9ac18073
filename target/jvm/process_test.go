package jvm

import (
	"os"
	"testing"
)

// TestThreadOf: the no-Java map of a scan is shared by its targets; one
// target's agent must not mark another process's threads.
func TestThreadOf(t *testing.T) {
	if !threadOf(os.Getpid(), uint32(os.Getpid())) {
		t.Error("our main thread is not ours")
	}
	if threadOf(os.Getpid(), 1) {
		t.Error("pid 1 is a thread of ours")
	}
}
