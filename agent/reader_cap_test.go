package agent

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// TestReaderRefusesHugeBatch: the agent's batches are at most 4 MiB; a
// 64 MiB one (which decoded to 448 MiB) is refused before it is read.
func TestReaderRefusesHugeBatch(t *testing.T) {
	var hdr [HeaderLen]byte
	binary.LittleEndian.PutUint32(hdr[0:], Magic)
	binary.LittleEndian.PutUint16(hdr[4:], Version)
	binary.LittleEndian.PutUint32(hdr[8:], 64<<20)
	binary.LittleEndian.PutUint32(hdr[12:], 1)
	_, err := NewReader(bytes.NewReader(hdr[:])).Next()
	var fe *FormatError
	if !errors.As(err, &fe) {
		t.Fatalf("64 MiB batch: %v, want a FormatError before reading it", err)
	}
}
