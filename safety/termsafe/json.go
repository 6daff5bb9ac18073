package termsafe

import (
	"io"
	"unicode/utf8"
)

// JSONWriter makes JSON (or a page whose only text from a target is JSON)
// safe to print: encoding/json escapes the C0 controls but writes DEL, the
// C1 controls and the bidirectional-text controls as they are. Those only
// stand inside strings there, so JSONWriter writes them as \u escapes,
// which decode to the same strings. A character split across Writes is
// carried to the next one.
type JSONWriter struct {
	w     io.Writer
	carry []byte // the start of a character the last Write cut
}

// NewJSONWriter returns a JSONWriter writing to w.
func NewJSONWriter(w io.Writer) *JSONWriter { return &JSONWriter{w: w} }

// Write writes p with DEL, C1 and bidirectional controls \u-escaped; it
// reports len(p) on success.
func (w *JSONWriter) Write(p []byte) (int, error) {
	in := p
	if len(w.carry) > 0 {
		in = append(w.carry, p...)
		w.carry = nil
	}
	// Keep an incomplete character at the end for the next Write.
	if cut := incompleteTail(in); cut > 0 {
		w.carry = append([]byte(nil), in[len(in)-cut:]...)
		in = in[:len(in)-cut]
	}
	if jsonSafe(in) {
		if _, err := w.w.Write(in); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	out := make([]byte, 0, len(in)+16)
	for i := 0; i < len(in); {
		r, n := utf8.DecodeRune(in[i:])
		if r == 0x7f || special(r) {
			const digits = "0123456789abcdef"
			out = append(out, '\\', 'u', digits[r>>12&0xf], digits[r>>8&0xf], digits[r>>4&0xf], digits[r&0xf])
		} else {
			out = append(out, in[i:i+n]...)
		}
		i += n
	}
	if _, err := w.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes a character still cut at the end, as it is.
func (w *JSONWriter) Flush() error {
	if len(w.carry) == 0 {
		return nil
	}
	_, err := w.w.Write(w.carry)
	w.carry = nil
	return err
}

// jsonSafe reports whether p has no DEL and no byte of a multi-byte
// character, which is the common case.
func jsonSafe(p []byte) bool {
	for _, c := range p {
		if c >= 0x7f {
			return false
		}
	}
	return true
}

// incompleteTail is the length of a UTF-8 character cut at p's end: its
// lead byte and fewer continuation bytes than it announces; 0 otherwise.
func incompleteTail(p []byte) int {
	for k := 1; k <= 3 && k <= len(p); k++ {
		c := p[len(p)-k]
		if c&0xc0 == 0x80 {
			continue // a continuation byte: look further back
		}
		need := 0
		switch {
		case c&0xe0 == 0xc0:
			need = 2
		case c&0xf0 == 0xe0:
			need = 3
		case c&0xf8 == 0xf0:
			need = 4
		}
		if need > k {
			return k
		}
		return 0
	}
	return 0
}
