package main

import (
	"os"
	"strings"
	"testing"
)

// Flags that do not fit --continuous are refused before anything starts,
// saying what to do.
func TestContinuousFlagsChecked(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--window", "5s"}, "--window needs --continuous"},
		{[]string{"--otlp-endpoint", "http://x:4318"}, "--otlp-endpoint needs --continuous"},
		{[]string{"--continuous", "--duration", "5s"}, "--duration does not apply to --continuous"},
		{[]string{"--continuous", "--format", "json"}, "--format does not apply"},
		{[]string{"--continuous", "--window", "10ms"}, "bad --window 10ms"},
		{[]string{"--continuous", "--queue", "0"}, "bad --queue 0"},
		{[]string{"--continuous", "--otlp-endpoint", "127.0.0.1:4318"}, "give a URL such as http://127.0.0.1:4318"},
	} {
		code, stderr := runScanArgs(t, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("scan %q: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
}

// runScanArgs runs cmdScan with args, capturing what it writes to stderr.
func runScanArgs(t *testing.T, args ...string) (int, string) {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	saved := os.Stderr
	os.Stderr = f
	code := cmdScan(args)
	os.Stderr = saved
	b, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	return code, string(b)
}
