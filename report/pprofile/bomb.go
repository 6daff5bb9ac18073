package pprofile

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/djx-bpf/djx-bpf/safety/safefs"
)

// MaxBytes caps a profile, compressed and decompressed (djx-bpf's own are a
// few MiB), and maxMessages the messages (samples, locations, functions,
// strings, ...) at its top level: each costs a few hundred bytes parsed
// however few bytes it takes in the file.
const (
	MaxBytes    = 64 << 20
	maxMessages = 1 << 20
)

// Expansion limits. A location may hold many lines (inlined frames) and a
// sample may name a location many times, so a few KiB of gzip can stand
// for billions of frames. djx-bpf's deepest stack is an access path of 128
// frames (the agent's stack slots) plus 64 inlined at the leaf, the object
// frame, and an allocation path of 64 frames or a holder chain of 48:
// maxStackFrames leaves ample room. A profile of 1M samples over 1000
// objects × 50 paths expands to under 1M frames; maxFrames is 16 times
// that, and bounds the location ids and lines parsed as well as the frames
// decoded. maxFrameBytes caps the frame names built from a function name
// and a line (the rest share the string table), maxLabels the labels.
const (
	maxStackFrames = 1024
	maxFrames      = 1 << 24
	maxFrameBytes  = MaxBytes
	maxLabels      = 1 << 23
)

// maxErrText caps what an error quotes of a profile's own text.
const maxErrText = 160

// readCapped reads r, gunzipping it if it is gzipped, up to MaxBytes each.
func readCapped(r io.Reader) ([]byte, error) {
	data, err := safefs.ReadAll(r, MaxBytes)
	if err != nil {
		return nil, fmt.Errorf("read profile: %w", err)
	}
	if len(data) >= 2 && data[0] == 0x1f && data[1] == 0x8b {
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("not a valid pprof profile (truncated or corrupt?): %w", err)
		}
		if data, err = safefs.ReadAll(zr, MaxBytes); err != nil {
			if errors.Is(err, safefs.ErrTooLarge) {
				return nil, fmt.Errorf("decompress profile: %w", err)
			}
			return nil, fmt.Errorf("not a valid pprof profile (truncated or corrupt?): decompressing profile: %w", err)
		}
	}
	if err := checkMessages(data); err != nil {
		return nil, err
	}
	return data, nil
}

// checkMessages walks the top level of a profile.proto message and refuses
// more than maxMessages fields, and within samples and locations more
// location ids, lines and labels than the expansion limits allow (see
// scan). Malformed input is left to the parser.
func checkMessages(data []byte) error {
	var c counts
	n := 0
	for len(data) > 0 {
		field, wire, body, rest, ok := nextField(data)
		if !ok {
			return nil
		}
		data = rest
		if wire == 2 {
			if err := c.message(field, body); err != nil {
				return fmt.Errorf("read profile: %w", err)
			}
		}
		if n++; n > maxMessages {
			return fmt.Errorf("read profile: more than %d messages: %w", maxMessages, safefs.ErrTooLarge)
		}
	}
	return nil
}

// counts is what checkMessages has seen inside samples and locations.
type counts struct {
	refs, lines, labels int
}

// Fields of profile.proto that checkMessages looks into.
const (
	fieldSample         = 2 // Profile.sample
	fieldLocation       = 4 // Profile.location
	fieldSampleLocation = 1 // Sample.location_id (packed or not)
	fieldSampleLabel    = 3 // Sample.label
	fieldLocationLine   = 4 // Location.line
)

// message counts the location ids and labels of a sample, or the lines of
// a location: each costs tens of bytes once parsed, and a sample of more
// location ids or a location of more lines than maxStackFrames could never
// be decoded.
func (c *counts) message(field uint64, body []byte) error {
	var refs, lines int
	for len(body) > 0 {
		f, wire, v, rest, ok := nextField(body)
		if !ok {
			return nil
		}
		body = rest
		switch {
		case field == fieldSample && f == fieldSampleLocation && wire == 0:
			refs++
		case field == fieldSample && f == fieldSampleLocation && wire == 2:
			for _, b := range v { // one varint ends at each byte below 0x80
				if b < 0x80 {
					refs++
				}
			}
		case field == fieldSample && f == fieldSampleLabel:
			c.labels++
		case field == fieldLocation && f == fieldLocationLine:
			lines++
		}
	}
	c.refs += refs
	c.lines += lines
	switch {
	case refs > maxStackFrames:
		return fmt.Errorf("a sample of %d locations, more than %d frames: %w", refs, maxStackFrames, safefs.ErrTooLarge)
	case lines > maxStackFrames:
		return fmt.Errorf("a location of %d lines, more than %d frames: %w", lines, maxStackFrames, safefs.ErrTooLarge)
	case c.refs > maxFrames:
		return fmt.Errorf("samples of more than %d locations in all: %w", maxFrames, safefs.ErrTooLarge)
	case c.lines > maxFrames:
		return fmt.Errorf("locations of more than %d lines in all: %w", maxFrames, safefs.ErrTooLarge)
	case c.labels > maxLabels:
		return fmt.Errorf("samples of more than %d labels in all: %w", maxLabels, safefs.ErrTooLarge)
	}
	return nil
}

// nextField splits the protobuf field at the start of data: its number,
// its wire type, its bytes for wire type 2, and what follows. ok is false
// for malformed input or a wire type that the profile format does not use.
func nextField(data []byte) (field, wire uint64, body, rest []byte, ok bool) {
	key, k := binary.Uvarint(data)
	if k <= 0 {
		return 0, 0, nil, nil, false
	}
	data = data[k:]
	switch key & 7 {
	case 0:
		_, k = binary.Uvarint(data)
		if k <= 0 {
			return 0, 0, nil, nil, false
		}
		data = data[k:]
	case 1:
		data = data[min(8, len(data)):]
	case 2:
		l, k := binary.Uvarint(data)
		if k <= 0 || l > uint64(len(data)-k) {
			return 0, 0, nil, nil, false
		}
		body, data = data[k:k+int(l)], data[k+int(l):]
	case 5:
		data = data[min(4, len(data)):]
	default:
		return 0, 0, nil, nil, false
	}
	return key >> 3, key & 7, body, data, true
}

// clip is s cut to maxErrText bytes, for an error that quotes a
// profile's text.
func clip(s string) string {
	if len(s) <= maxErrText {
		return s
	}
	return fmt.Sprintf("%s... (%d bytes)", strings.ToValidUTF8(s[:maxErrText], ""), len(s))
}

// clipJoin joins frames with sep, cut to maxErrText bytes without building
// more of it.
func clipJoin(frames []string, sep string) string {
	var b strings.Builder
	for i, f := range frames {
		if i > 0 {
			b.WriteString(sep)
		}
		b.WriteString(f[:min(len(f), maxErrText+1)])
		if b.Len() > maxErrText {
			return fmt.Sprintf("%s... (%d in all)", strings.ToValidUTF8(b.String()[:maxErrText], ""), len(frames))
		}
	}
	return b.String()
}

// clippedError is an error whose text quotes a profile's own text: cut
// to maxErrText, and still matched by errors.Is and errors.As.
type clippedError struct{ err error }

func (e clippedError) Error() string { return clip(e.err.Error()) }
func (e clippedError) Unwrap() error { return e.err }
