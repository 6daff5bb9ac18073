package testenv

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"
)

// AgentCopies counts the copies of the agent library pid maps: distinct
// files (device and inode) named libdjxagent.so, and how many of them were
// deleted.
func AgentCopies(t testing.TB, pid int) (copies, deleted int) {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 6 || !strings.Contains(strings.Join(fs[5:], " "), "libdjxagent.so") {
			continue
		}
		if id := fs[3] + " " + fs[4]; !seen[id] {
			seen[id] = true
			if strings.HasSuffix(sc.Text(), "(deleted)") {
				deleted++
			}
		}
	}
	return len(seen), deleted
}
