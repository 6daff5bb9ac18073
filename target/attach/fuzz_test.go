package attach

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzParseReply: the attach listener's reply is the target's to write.
func FuzzParseReply(f *testing.F) {
	replies, _ := filepath.Glob("testdata/replies/*.reply")
	for _, p := range replies {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		code, out, err := parseReply(data)
		if err == nil {
			loadResult("/x.so", code, out)
		}
	})
}
