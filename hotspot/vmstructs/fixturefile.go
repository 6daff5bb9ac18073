package vmstructs

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
)

// maxFixture caps a fixture file's decompressed size: the recorded ones
// are under 2 MiB.
const maxFixture = 64 << 20

// ReadFixture reads the table recorded in a fixture file that TestRecord
// wrote (testdata/jdk17.json.gz): a real JVM's vmStructs, so that the
// tests of packages that parse a JVM's memory with them (heapwalk) run
// without root or a JVM.
func ReadFixture(path string) (*Table, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read fixture: %w", err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("fixture %s: %w", path, err)
	}
	var rec recording
	if err := json.NewDecoder(io.LimitReader(zr, maxFixture)).Decode(&rec); err != nil {
		return nil, fmt.Errorf("fixture %s: %w", path, err)
	}
	sort.Slice(rec.Segments, func(i, j int) bool { return rec.Segments[i].Addr < rec.Segments[j].Addr })
	t, err := Read(&rec, Symbols{Lib: rec.Lib, Base: rec.Base, Addrs: rec.Symbols})
	if err != nil {
		return nil, fmt.Errorf("fixture %s: %w", path, err)
	}
	return t, nil
}

// recording is the part of a fixture file ReadFixture needs; the test's
// fixture type writes the same JSON.
type recording struct {
	Lib      string
	Base     uint64
	Symbols  map[string]uint64
	Segments []segment
}

// segment is a recorded range of the target's memory.
type segment struct {
	Addr uint64
	Data []byte
}

// ReadAt serves the recorded memory, short where the recording has a hole.
func (r *recording) ReadAt(p []byte, off int64) (int, error) { return readSegments(r.Segments, p, off) }

// readSegments serves segs, sorted by address: everything of one segment
// from off on, short (like process_vm_readv) where they have a hole.
func readSegments(segs []segment, p []byte, off int64) (int, error) {
	a := uint64(off)
	i := sort.Search(len(segs), func(i int) bool {
		s := segs[i]
		return s.Addr+uint64(len(s.Data)) > a
	})
	if i == len(segs) || segs[i].Addr > a {
		return 0, fmt.Errorf("fixture has no memory at %#x", a)
	}
	s := segs[i]
	n := copy(p, s.Data[a-s.Addr:])
	if n < len(p) {
		return n, fmt.Errorf("fixture has no memory at %#x", a+uint64(n))
	}
	return n, nil
}
