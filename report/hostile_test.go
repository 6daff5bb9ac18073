package report

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// evil is what a target can name a class, method, thread or region, or
// write in its VM name: a retitle of root's terminal (OSC 0 ... BEL), a
// screen clear (CSI 2J), a C1 CSI, a right-to-left override and a byte
// that is no UTF-8.
const evil = "x\x1b]0;title\x07\x1b[2J\u009b1m\u202eesrever\xff"

// escapedEvil is evil as the renderers print it.
const escapedEvil = `x\x1b]0;title\x07\x1b[2J\u009b1m\u202eesrever\xff`

func hostileReport() *Report {
	r := &Report{
		PID: 7, JVM: evil, Mode: "attach" + evil, Event: "page-faults" + evil,
		Objects: []Object{{
			Type: "T" + evil, Site: "S" + evil, AllocPath: []string{"alloc" + evil}, Origin: OriginCensus,
			Holder: []string{"H" + evil}, Objects: 1, Bytes: 64, Samples: 10,
			Accesses: []Access{{Path: []string{"m" + evil, "n\nnote: fake line"}, Samples: 10}},
			Fields:   []FieldShare{{Field: "f" + evil, Samples: 10}},
			NUMA:     &NUMAMetrics{Home: map[int]uint64{0: 1}},
		}},
		DataTypes: []DataType{{Type: "D" + evil, Field: "g" + evil, Samples: 5,
			Accesses: []Access{{Path: []string{"p" + evil}, Samples: 5}}}},
		Remainder: []Access{{Where: "mapped file /tmp/" + evil, DataType: "R" + evil, Path: []string{"q" + evil}, Samples: 3}},
		Stats: Stats{
			SampleStats: SampleStats{Samples: 20, WithAddress: 20, InHeap: 15, Attributed: 10},
			NamingStats: NamingStats{HeapKnown: true},
			StackStats:  StackStats{StackSignals: 1, Stacks: 1, StackErrors: map[string]uint64{"e" + evil: 1}},
		},
		Notes: []string{"agent error: " + evil},
	}
	r.Finish()
	return r
}

// assertTerminalSafe fails if out holds anything a terminal would act on
// other than newlines, or invalid UTF-8.
func assertTerminalSafe(t *testing.T, what, out, escaped string) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Errorf("%s: invalid UTF-8 reaches the terminal", what)
	}
	for i, r := range out {
		if (r < 0x20 && r != '\n') || r == 0x7f || (r >= 0x80 && r <= 0x9f) ||
			(r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) || r == 0x200e || r == 0x200f || r == 0x061c {
			t.Fatalf("%s: %U at byte %d reaches the terminal:\n%s", what, r, i, out)
		}
	}
	if !strings.Contains(out, escaped) {
		t.Errorf("%s: the escaped name %s is not shown:\n%s", what, escaped, out)
	}
}

// A report's strings come from the target or a crafted file: none may
// reach root's terminal as a control sequence, in any part of the table.
func TestHostileStringsTable(t *testing.T) {
	r := hostileReport()
	var b bytes.Buffer
	if err := WriteTable(&b, r, TableOptions{Top: 10, AccessTop: 5}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	assertTerminalSafe(t, "table", out, escapedEvil)
	for _, want := range []string{"T" + escapedEvil, "S" + escapedEvil, "H" + escapedEvil, "f" + escapedEvil,
		"D" + escapedEvil, "p" + escapedEvil, "note: agent error: " + escapedEvil, "e" + escapedEvil, `n\x0anote: fake line`} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\nnote: fake line") {
		t.Errorf("a frame's newline forged a line:\n%s", out)
	}

	b.Reset()
	if err := WriteScanTable(&b, &Scan{Event: evil, JVMs: []*Report{r}, Skipped: []SkippedJVM{{PID: 9, Main: evil, Reason: evil}}, Notes: []string{evil}}, TableOptions{Top: 10, AccessTop: 3}); err != nil {
		t.Fatal(err)
	}
	assertTerminalSafe(t, "scan table", b.String(), escapedEvil)

	b.Reset()
	if err := WriteCollapsed(&b, r, TableOptions{}); err != nil {
		t.Fatal(err)
	}
	// Collapsed stacks turn ";" into ":" before escaping.
	assertTerminalSafe(t, "collapsed", b.String(), strings.ReplaceAll(escapedEvil, ";", ":"))
}

// JSON escapes by itself and stays as it was: the strings read back are
// the target's, byte for byte (invalid UTF-8 aside, which JSON replaces).
func TestHostileStringsJSONUnchanged(t *testing.T) {
	r := hostileReport()
	var b bytes.Buffer
	if err := WriteJSON(&b, r, 0); err != nil {
		t.Fatal(err)
	}
	c := *r
	want, err := json.MarshalIndent(&c, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if got := bytes.TrimSuffix(b.Bytes(), []byte("\n")); !bytes.Equal(got, want) {
		t.Errorf("JSON changed:\n%s\nwant\n%s", got, want)
	}
	var back Report
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back.Objects[0].Type != strings.ToValidUTF8("T"+evil, "\uFFFD") {
		t.Errorf("JSON type %q", back.Objects[0].Type)
	}
}
