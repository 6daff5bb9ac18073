package jvmsym

import "testing"

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
