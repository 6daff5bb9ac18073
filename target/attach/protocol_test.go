package attach

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestEncodeRequest(t *testing.T) {
	for _, c := range []struct {
		cmd  string
		args []string
		want string
	}{
		{"jcmd", []string{"VM.version"}, "1\x00jcmd\x00VM.version\x00\x00\x00"},
		{"load", []string{"/a/lib.so", "true", ""}, "1\x00load\x00/a/lib.so\x00true\x00\x00"},
		{"load", []string{"/a/lib.so", "true", "x=1,y"}, "1\x00load\x00/a/lib.so\x00true\x00x=1,y\x00"},
		{"properties", nil, "1\x00properties\x00\x00\x00\x00"},
	} {
		got, err := encodeRequest(c.cmd, c.args...)
		if err != nil {
			t.Fatalf("encodeRequest(%q, %q): %v", c.cmd, c.args, err)
		}
		if string(got) != c.want {
			t.Errorf("encodeRequest(%q, %q) = %q, want %q", c.cmd, c.args, got, c.want)
		}
	}
	for _, c := range []struct {
		cmd  string
		args []string
	}{
		{"", nil},
		{"averyveryverylongname", nil},
		{"load", []string{"a", "b", "c", "d"}},
		{"jcmd", []string{"a\x00b"}},
		{"jcmd", []string{strings.Repeat("x", maxArgLen+1)}},
	} {
		if _, err := encodeRequest(c.cmd, c.args...); err == nil {
			t.Errorf("encodeRequest(%q, %d args) succeeded, want error", c.cmd, len(c.args))
		}
	}
}

func TestParseReply(t *testing.T) {
	for _, c := range []struct {
		in   string
		code int
		out  string
	}{
		{"0\n", 0, ""},
		{"0\nreturn code: 0\n", 0, "return code: 0\n"},
		{"-1\nOperation bogusop not recognized!", -1, "Operation bogusop not recognized!"},
		{"0", 0, ""},
	} {
		code, out, err := parseReply([]byte(c.in))
		if err != nil || code != c.code || out != c.out {
			t.Errorf("parseReply(%q) = %d, %q, %v; want %d, %q", c.in, code, out, err, c.code, c.out)
		}
	}
	for _, in := range []string{"", "\n", "OK\n", "java.lang.Error\n0\n"} {
		if _, _, err := parseReply([]byte(in)); !errors.Is(err, ErrProtocol) {
			t.Errorf("parseReply(%q) err = %v, want ErrProtocol", in, err)
		}
	}
}

// replyCases describes the fixtures in testdata/replies, captured from real
// JVMs by TestLiveJVM with -update (see captureReply).
var replyCases = map[string]func(t *testing.T, code int, out string){
	"load-ok": func(t *testing.T, code int, out string) {
		if err := loadResult("/x/libretagent.so", code, out); err != nil {
			t.Errorf("loadResult = %v, want nil", err)
		}
	},
	"load-agent7": func(t *testing.T, code int, out string) {
		err := loadResult("/x/libretagent.so", code, out)
		var ae *AgentError
		if !errors.As(err, &ae) || !ae.Attached || ae.ReturnCode != 7 {
			t.Errorf("loadResult = %#v, want AgentError with return code 7", err)
		}
	},
	"load-missing": func(t *testing.T, code int, out string) {
		err := loadResult(missingAgent, code, out)
		var ae *AgentError
		if !errors.As(err, &ae) || ae.Attached || !strings.Contains(err.Error(), missingAgent) {
			t.Errorf("loadResult = %v, want AgentError mentioning %s", err, missingAgent)
		}
	},
	"load-disabled": func(t *testing.T, code int, out string) {
		if err := loadResult("/x/libretagent.so", code, out); !errors.Is(err, ErrRefused) {
			t.Errorf("loadResult = %v, want ErrRefused", err)
		}
	},
	"jcmd-version": func(t *testing.T, code int, out string) {
		if code != 0 || !strings.Contains(out, "VM version") {
			t.Errorf("code %d, output %q", code, out)
		}
	},
	"jcmd-unknown": func(t *testing.T, code int, out string) {
		if code == 0 || !strings.Contains(out, "Unknown diagnostic command") {
			t.Errorf("code %d, output %q", code, out)
		}
	},
}

// missingAgent is the library path used for the load-missing fixtures.
const missingAgent = "/nonexistent/djx-bpf/libmissing.so"

func TestReplyFixtures(t *testing.T) {
	files, err := filepath.Glob("testdata/replies/*.reply")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no fixtures in testdata/replies (go test -update as root)")
	}
	seen := map[string]bool{}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".reply")
		jdk, kind, _ := strings.Cut(name, "-")
		check := replyCases[kind]
		if check == nil {
			t.Errorf("%s: unknown fixture kind %q", f, kind)
			continue
		}
		seen[jdk+"/"+kind] = true
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			code, out, err := parseReply(raw)
			if err != nil {
				t.Fatal(err)
			}
			check(t, code, out)
		})
	}
	for kind := range replyCases {
		if !seen["jdk17/"+kind] {
			t.Errorf("no jdk17 fixture for %s", kind)
		}
	}
}

func TestLoadResultForms(t *testing.T) {
	for _, c := range []struct {
		code     int
		out      string
		ok       bool
		attached bool
		rc       int
	}{
		{0, "return code: 0\n", true, false, 0},
		{0, "0\n", true, false, 0}, // JDK 8
		{0, "3\n", false, true, 3}, // JDK 8
		{0, "return code: -1\n", false, true, -1},
		{-1, "return code: 0\n", false, false, 0}, // nonzero JVM code wins
		{0, "", false, false, 0},
		{0, "/a.so was not loaded.\n/a.so: cannot open shared object file\n", false, false, 0},
		{0, "Agent_OnAttach is not available in jdwp\n", false, false, 0},
	} {
		err := loadResult("/a.so", c.code, c.out)
		if c.ok {
			if err != nil {
				t.Errorf("loadResult(%d, %q) = %v, want nil", c.code, c.out, err)
			}
			continue
		}
		var ae *AgentError
		if !errors.As(err, &ae) || ae.Attached != c.attached || ae.ReturnCode != c.rc {
			t.Errorf("loadResult(%d, %q) = %#v, want AgentError attached=%v rc=%d", c.code, c.out, err, c.attached, c.rc)
		}
	}
}
