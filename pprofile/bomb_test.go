package pprofile

import (
	"bytes"
	"compress/gzip"
	"errors"
	"runtime"
	"testing"

	"github.com/djx-bpf/djx-bpf/safefs"
)

// TestReadBombs: `report` reads files of unknown origin. A 1 MB gzip once
// took it to 2.6 GiB; bombs must be refused with little memory.
func TestReadBombs(t *testing.T) {
	gz := func(data []byte, repeat int) []byte {
		var b bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
		for i := 0; i < repeat; i++ {
			zw.Write(data)
		}
		zw.Close()
		return b.Bytes()
	}
	// Empty samples: field 2, length 0. Two bytes each in the file, a
	// profile.Sample each once parsed.
	samples := bytes.Repeat([]byte{0x12, 0x00}, 1<<20)
	cases := []struct {
		name string
		data []byte
	}{
		{"gzip of zeros", gz(make([]byte, 1<<20), 1<<7)}, // 128 MiB
		{"gzip of empty samples", gz(samples, 8)},        // 8M samples in 16 MiB
		{"raw empty samples", bytes.Repeat(samples, 2)},  // 2M samples
	}
	for _, tc := range cases {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, err := Read(bytes.NewReader(tc.data))
		runtime.ReadMemStats(&after)
		if !errors.Is(err, safefs.ErrTooLarge) {
			t.Errorf("%s (%d bytes): %v, want ErrTooLarge", tc.name, len(tc.data), err)
		}
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 4*MaxBytes {
			t.Errorf("%s: allocated %d MiB", tc.name, grew>>20)
		}
	}
}
