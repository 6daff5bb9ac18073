package jvmsym

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTypeName(t *testing.T) {
	for sig, want := range map[string]string{
		"[[D":                      "double[][]",
		"[J":                       "long[]",
		"I":                        "int",
		"Ljava/util/HashMap$Node;": "java.util.HashMap$Node",
		"[Ljava/lang/String;":      "java.lang.String[]",
		"java/lang/String":         "java.lang.String",
		"[":                        "[",
		"[Q":                       "[Q",
		"L;":                       "L;",
		"":                         "",
	} {
		if got := TypeName(sig); got != want {
			t.Errorf("TypeName(%q) = %q, want %q", sig, got, want)
		}
	}
}

func TestResolve(t *testing.T) {
	tab := NewTable()
	tab.Add(0x10, Method{ClassSig: "Ljava/util/HashMap;", Name: "getNode", Lines: []LineEntry{{10, 571}, {0, 570}, {25, 580}}})
	for _, c := range []struct {
		bci  int64
		want string
	}{{0, "java.util.HashMap.getNode:570"}, {9, "java.util.HashMap.getNode:570"}, {10, "java.util.HashMap.getNode:571"}, {99, "java.util.HashMap.getNode:580"}, {-1, "java.util.HashMap.getNode"}} {
		if got := tab.Resolve(0x10, c.bci).String(); got != c.want {
			t.Errorf("Resolve(bci %d) = %q, want %q", c.bci, got, c.want)
		}
	}
	if got := tab.Resolve(0x99, 3).String(); got != "[unknown].0x99" {
		t.Errorf("unknown method = %q", got)
	}
}

var update = flag.Bool("update", false, "rewrite golden files in testdata")

// golden compares got with testdata/name, or rewrites the file with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the output (run go test -update to accept it):\n--- got\n%s--- want\n%s", path, got, want)
	}
}

// TestMethodSignature formats every descriptor of testdata/signatures.txt.
func TestMethodSignature(t *testing.T) {
	in, err := os.ReadFile(filepath.Join("testdata", "signatures.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	for sig := range strings.Lines(string(in)) {
		sig = strings.TrimSuffix(sig, "\n")
		if sig == "" || strings.HasPrefix(sig, "#") {
			continue
		}
		params, ret, ok := MethodSignature(sig)
		if !ok {
			if params != nil || ret != "" {
				t.Errorf("MethodSignature(%q) failed but returned %q, %q", sig, params, ret)
			}
			fmt.Fprintf(&out, "%s\tmalformed\n", sig)
			continue
		}
		fmt.Fprintf(&out, "%s\t%s (%s)\n", sig, ret, strings.Join(params, ", "))
	}
	golden(t, "signatures.golden", out.Bytes())

	for _, sig := range []string{"", "(", ")", "()", "(V)V", "()[V", "()VV", "I"} {
		if _, _, ok := MethodSignature(sig); ok {
			t.Errorf("MethodSignature(%q) ok, want malformed", sig)
		}
	}
}

func TestResolvePlaceholders(t *testing.T) {
	tb := NewTable()
	tb.Add(5, Method{})
	if got := tb.Resolve(5, 3).String(); got != "[unloaded].0x5" {
		t.Errorf("stale method: %q", got)
	}
	if got := tb.Resolve(6, 3).String(); got != "[unknown].0x6" {
		t.Errorf("unknown method: %q", got)
	}
}
