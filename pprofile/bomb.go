package pprofile

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/djx-bpf/djx-bpf/safefs"
)

// MaxBytes caps a profile, compressed and decompressed (djx-bpf's own are a
// few MiB), and maxMessages the messages (samples, locations, functions,
// strings, ...) at its top level: each costs a few hundred bytes parsed
// however few bytes it takes in the file.
const (
	MaxBytes    = 64 << 20
	maxMessages = 1 << 20
)

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
// more than maxMessages fields. Malformed input is left to the parser.
func checkMessages(data []byte) error {
	n := 0
	for len(data) > 0 {
		key, k := binary.Uvarint(data)
		if k <= 0 {
			return nil
		}
		data = data[k:]
		switch key & 7 {
		case 0:
			_, k = binary.Uvarint(data)
			if k <= 0 {
				return nil
			}
			data = data[k:]
		case 1:
			data = data[min(8, len(data)):]
		case 2:
			l, k := binary.Uvarint(data)
			if k <= 0 || l > uint64(len(data)-k) {
				return nil
			}
			data = data[k+int(l):]
		case 5:
			data = data[min(4, len(data)):]
		default:
			return nil
		}
		if n++; n > maxMessages {
			return fmt.Errorf("read profile: more than %d messages: %w", maxMessages, safefs.ErrTooLarge)
		}
	}
	return nil
}
