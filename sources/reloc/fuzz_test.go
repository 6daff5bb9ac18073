package reloc

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/djx-bpf/djx-bpf/safety/elfsafe"
)

// FuzzLibJVM: libjvm.so is the target's to write; whatever it holds, the
// readers of AddJVM stay within the caps and do not panic.
func FuzzLibJVM(f *testing.F) {
	path := filepath.Join(f.TempDir(), "libjvm.so")
	craftLibJVM(f, path, "")
	if data, err := os.ReadFile(path); err == nil {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ef, err := elfsafe.Parse(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return
		}
		gcCopySites(ef)
		gcProbes(ef)
		gotSlots(ef, copyImports)
		symbolAt(ef, 0x1100)
		firstLoadVaddr(ef)
	})
}
