package launch

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestRunAsApply: the launched command runs with the given credentials.
func TestRunAsApply(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to change user")
	}
	cmd := exec.Command("id", "-u")
	(&RunAs{UID: 65534, GID: 65534}).apply(cmd)
	out, err := cmd.Output()
	if err != nil || strings.TrimSpace(string(out)) != "65534" {
		t.Errorf("id -u as 65534: %q, %v", out, err)
	}
	var none *RunAs
	if uid, _ := none.Owner(); uid != os.Geteuid() {
		t.Errorf("nil RunAs owner %d, want %d", uid, os.Geteuid())
	}
}
