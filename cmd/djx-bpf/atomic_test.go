package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// -o replaces a regular file atomically, keeps it on a failed write, and
// writes the null device in place: renaming over /dev/null once turned it
// into a regular file for the whole machine.
func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "r.txt")
	put := func(s string) func(io.Writer) error {
		return func(w io.Writer) error { _, err := io.WriteString(w, s); return err }
	}
	if err := writeFileAtomic(path, put("one")); err != nil {
		t.Fatal(err)
	}
	if err := writeFileAtomic(path, func(w io.Writer) error { io.WriteString(w, "half"); return errors.New("boom") }); err == nil {
		t.Fatal("failed write reported success")
	}
	if b, _ := os.ReadFile(path); string(b) != "one" {
		t.Errorf("a failed write changed the file: %q", b)
	}
	if err := writeFileAtomic(path, put("two")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "two" {
		t.Errorf("own file not replaced: %q", b)
	}
	if err := writeFileAtomic(os.DevNull, put("x")); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(os.DevNull); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		t.Fatalf("%s is no longer a character device: %v %v", os.DevNull, fi.Mode(), err)
	}
}
