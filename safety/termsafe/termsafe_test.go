package termsafe

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// hostile is what a target can put in its command line or a class name to
// retitle root's terminal, clear its screen and reverse the line.
const hostile = "Main\x1b]0;pwned\x07\x1b[2J\u202egnp.exe"

func TestStringEscapesHostile(t *testing.T) {
	for in, want := range map[string]string{
		hostile:                          `Main\x1b]0;pwned\x07\x1b[2J\u202egnp.exe`,
		"a\nb\tc\rd\x7f":                 `a\x0ab\x09c\x0dd\x7f`,
		"csi\u009b31m":                   `csi\u009b31m`,
		"\u061c\u200e\u200f\u2066\u2069": `\u061c\u200e\u200f\u2066\u2069`,
		"bad\xff\xc3":                    `bad\xff\xc3`,
		"java.util.HashMap$Node[]":       "java.util.HashMap$Node[]",
		"café → …":                       "café → …",
		`C:\path`:                        `C:\path`,
		"":                               "",
	} {
		if got := String(in); got != want {
			t.Errorf("String(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestLinesKeepsNewlines(t *testing.T) {
	if got, want := Lines("one\n\ttwo\x1b[2J\n"), "one\n\ttwo\\x1b[2J\n"; got != want {
		t.Errorf("Lines = %q, want %q", got, want)
	}
}

func TestWriter(t *testing.T) {
	var b bytes.Buffer
	w := NewWriter(&b)
	n, err := fmt.Fprintf(w, "note: %s\n", hostile)
	if err != nil || n != len("note: \n")+len(hostile) {
		t.Fatalf("Fprintf: %d, %v", n, err)
	}
	if got, want := b.String(), "note: Main\\x1b]0;pwned\\x07\\x1b[2J\\u202egnp.exe\n"; got != want {
		t.Errorf("wrote %q, want %q", got, want)
	}
}

// check is what every output must satisfy: no byte a terminal acts on
// other than newline and tab, valid UTF-8, no bidi controls, and nothing
// changed in text that was safe already.
func check(t *testing.T, in, out string, lines bool) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Fatalf("%q: invalid UTF-8 out: %q", in, out)
	}
	for _, r := range out {
		if (r < 0x20 && !(lines && (r == '\n' || r == '\t'))) || r == 0x7f || special(r) {
			t.Fatalf("%q: %U left in %q", in, r, out)
		}
	}
	clean := utf8.ValidString(in) && !strings.ContainsFunc(in, func(r rune) bool {
		return (r < 0x20 && !(lines && (r == '\n' || r == '\t'))) || r == 0x7f || special(r)
	})
	if clean && out != in {
		t.Fatalf("safe %q changed to %q", in, out)
	}
}

func FuzzString(f *testing.F) {
	for _, s := range []string{hostile, "plain", "a\nb", "\xff\xfe", "\u202e", "\xe2\x80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		check(t, s, String(s), false)
		check(t, s, Lines(s), true)
		if String(String(s)) != String(s) {
			t.Fatalf("String is not idempotent on %q", s)
		}
	})
}

// JSON keeps its meaning: what the C1, DEL and bidirectional controls
// become decodes to the same string, also when a Write cuts a character.
func TestJSONWriter(t *testing.T) {
	in := map[string]string{"name": "x\x1b]0;t\x07\u009b1m\u202eevil\x7f café → …", "k\u2066": "v"}
	enc, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	for _, chunk := range []int{len(enc), 1, 2, 3, 5} {
		var b bytes.Buffer
		w := NewJSONWriter(&b)
		for i := 0; i < len(enc); i += chunk {
			if n, err := w.Write(enc[i:min(i+chunk, len(enc))]); err != nil || n != min(chunk, len(enc)-i) {
				t.Fatalf("Write: %d, %v", n, err)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		for _, r := range out {
			if r < 0x20 || r == 0x7f || special(r) {
				t.Fatalf("chunks of %d: %U reaches the terminal: %q", chunk, r, out)
			}
		}
		var back map[string]string
		if err := json.Unmarshal(b.Bytes(), &back); err != nil {
			t.Fatalf("chunks of %d: %v: %s", chunk, err, out)
		}
		if back["name"] != in["name"] || back["k\u2066"] != "v" || !strings.Contains(out, `\u009b1m\u202eevil\u007f café → …`) {
			t.Errorf("chunks of %d: %q decodes to %q", chunk, out, back)
		}
	}
}
