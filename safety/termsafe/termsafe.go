// Package termsafe makes text a profiled process controls safe to print on
// a terminal: control characters, bidirectional-text overrides and invalid
// UTF-8 become visible escapes (\x1b, \u202e, \xff) instead of commands to
// root's terminal. Backslashes are left alone: the escapes are for a human
// reading the output, not for decoding it back.
package termsafe

import (
	"io"
	"strings"
	"unicode/utf8"
)

// String escapes every control character of s, newlines and tabs
// included, for text that must stay on one line (a table cell, a name).
func String(s string) string { return escape(s, false) }

// Lines escapes s as String does but keeps newlines and tabs, for messages
// of several lines.
func Lines(s string) string { return escape(s, true) }

// Writer escapes what is written through it as Lines does. Each Write is
// escaped on its own, so a character split across two Writes shows as
// invalid bytes: write whole strings, as fmt.Fprintf and tablewriter do.
type Writer struct{ w io.Writer }

// NewWriter returns a Writer writing to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write writes p escaped; it reports len(p) on success, as callers such as
// fmt expect of a complete write.
func (w *Writer) Write(p []byte) (int, error) {
	if safe(p, true) {
		return w.w.Write(p)
	}
	if _, err := io.WriteString(w.w, escape(string(p), true)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// safe reports whether s is printable ASCII (plus newline and tab when
// lines), the common case that needs no copy.
func safe[T string | []byte](s T, lines bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c < 0x7f || lines && (c == '\n' || c == '\t') {
			continue
		}
		return false
	}
	return true
}

func escape(s string, lines bool) string {
	if safe(s, lines) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			hexByte(&b, s[i])
		case r < 0x20 || r == 0x7f:
			if lines && (r == '\n' || r == '\t') {
				b.WriteByte(byte(r))
			} else {
				hexByte(&b, byte(r))
			}
		case special(r):
			b.WriteString(`\u`)
			const digits = "0123456789abcdef"
			for shift := 12; shift >= 0; shift -= 4 {
				b.WriteByte(digits[r>>shift&0xf])
			}
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// special reports whether r is escaped beyond the C0 controls and DEL: a C1
// control (U+0080 to U+009F, which some terminals obey as ESC sequences) or
// a bidirectional-text control, which reorders what follows it on the line.
func special(r rune) bool {
	switch {
	case r >= 0x80 && r <= 0x9f,
		r == 0x061c,              // Arabic letter mark
		r == 0x200e, r == 0x200f, // left-to-right and right-to-left marks
		r >= 0x202a && r <= 0x202e, // embeddings and overrides
		r >= 0x2066 && r <= 0x2069: // isolates
		return true
	}
	return false
}

func hexByte(b *strings.Builder, c byte) {
	const digits = "0123456789abcdef"
	b.WriteString(`\x`)
	b.WriteByte(digits[c>>4])
	b.WriteByte(digits[c&0xf])
}
