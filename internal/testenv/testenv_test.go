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

// A test offered Temurin 25 notes it in JDKLogEnv's file once it ran; a
// skipped one does not, and without Temurin 25 nothing is noted.
func TestJDKsNotesJDK25(t *testing.T) {
	home17, home25 := t.TempDir(), t.TempDir()
	for _, f := range []string{home17 + "/bin/javac", home25 + "/bin/java"} {
		if err := os.MkdirAll(f[:strings.LastIndex(f, "/")], 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	log := t.TempDir() + "/jdks.log"
	t.Setenv("JAVA_HOME", home17)
	t.Setenv(JDKLogEnv, log)
	saved := JDK25
	defer func() { JDK25 = saved }()
	JDK25.Home = home25
	t.Run("ran", func(t *testing.T) {
		if js := JDKs(t); len(js) != 2 || js[1].Home != home25 {
			t.Errorf("JDKs = %v, want JDK 17 and Temurin 25", js)
		}
	})
	t.Run("skipped", func(t *testing.T) {
		JDKs(t)
		t.Skip("a skip after JDKs")
	})
	JDK25.Home = t.TempDir() // no Temurin 25
	t.Run("without", func(t *testing.T) {
		if js := JDKs(t); len(js) != 1 {
			t.Errorf("JDKs = %v without Temurin 25, want JDK 17 alone", js)
		}
	})
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if want := "internal/testenv TestJDKsNotesJDK25/ran jdk25\n"; string(b) != want {
		t.Errorf("the log holds %q, want %q", b, want)
	}
}
