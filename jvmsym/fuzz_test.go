package jvmsym

import (
	"bytes"
	"os"
	"testing"
)

// FuzzParsePerfMap: /tmp/perf-PID.map is the target's to write.
func FuzzParsePerfMap(f *testing.F) {
	if data, err := os.ReadFile("testdata/perf-1234.map"); err == nil {
		f.Add(data)
	}
	f.Add([]byte("ffffffffffffffff 1 x\n0 ffffffffffffffff y\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if pm, err := ParsePerfMap(bytes.NewReader(data)); err == nil {
			pm.Lookup(0x1000)
		}
	})
}
