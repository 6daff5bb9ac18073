package testenv

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestHelperNoJDK is run by TestSkipFailsUnderCI in a child process.
func TestHelperNoJDK(t *testing.T) {
	if os.Getenv("TESTENV_CHILD") == "" {
		t.Skip("run by TestSkipFailsUnderCI")
	}
	JDKs(t)
	t.Log("found a JDK")
}

// Without JDK 17 a test is skipped with the reason; under CI it fails.
func TestSkipFailsUnderCI(t *testing.T) {
	for _, ci := range []string{"", "true"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperNoJDK$", "-test.v")
		cmd.Env = append(os.Environ(), "TESTENV_CHILD=1", "JAVA_HOME="+t.TempDir(), "CI="+ci)
		out, err := cmd.CombinedOutput()
		switch {
		case ci == "" && (err != nil || !strings.Contains(string(out), "--- SKIP") || !strings.Contains(string(out), "no JDK 17")):
			t.Errorf("outside CI: %v\n%s", err, out)
		case ci == "true" && (err == nil || !strings.Contains(string(out), "--- FAIL") || !strings.Contains(string(out), "CI has root and a JDK")):
			t.Errorf("under CI: %v\n%s", err, out)
		}
	}
}

// JAVA_HOME picks JDK 17's home.
func TestJDKsFollowsJavaHome(t *testing.T) {
	if _, err := os.Stat(JDK17.Home + "/bin/javac"); err != nil {
		t.Skipf("no JDK 17 at %s", JDK17.Home)
	}
	t.Setenv("JAVA_HOME", JDK17.Home)
	if js := JDKs(t); js[0] != JDK17 {
		t.Errorf("JDKs = %v, want JDK 17 first", js)
	}
}
