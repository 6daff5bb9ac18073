package heap

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzParseJavacore: a javacore is written by the (OpenJ9) target.
func FuzzParseJavacore(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/openj9/*.txt")
	for _, p := range seeds {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(string(data))
		}
	}
	f.Fuzz(func(t *testing.T, text string) {
		ParseJavacore(text)
		ParseJavacoreHeap(text)
	})
}

// FuzzParseVMInfo: VM.info, GC.heap_info and the oops lines are replies
// of the target's attach listener.
func FuzzParseVMInfo(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*.txt")
	more, _ := filepath.Glob("testdata/hotspot/*.coops")
	for _, p := range append(seeds, more...) {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(string(data))
		}
	}
	f.Fuzz(func(t *testing.T, text string) {
		ParseVMInfo(text)
		ParseHeapInfo(text)
		ParseCompressedOops(text)
	})
}
