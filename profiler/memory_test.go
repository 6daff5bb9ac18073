package profiler

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/djx-bpf/djx-bpf/hotspot/targetmem"
	"github.com/djx-bpf/djx-bpf/hotspot/vmcode"
	"github.com/djx-bpf/djx-bpf/hotspot/vmstructs"
	"github.com/djx-bpf/djx-bpf/safety/procfs"
	"github.com/djx-bpf/djx-bpf/sources/sample"
)

// The target's memory in a recording: every byte a session read of it
// (the heap walk, the code cache's reader, vmStructs, the join's JIT
// code), as it was the first time it was read, in memory.bin.gz. A
// replay serves a read from it, short where a byte was never read, as
// an unmapped read is. Keeping the first value makes the replay see one
// heap: a collection count read again and again stays what the first
// walk read, so a replayed walk is never overlapped by a collection.

const (
	memoryFile = "memory.bin.gz"
	stacksFile = "stacks.bin.gz"
	imagePage  = 4096
	// maxFailedKept bounds the failed reads session.json lists.
	maxFailedKept = 64
)

// image is a sparse copy of the target's memory.
type image struct {
	mu     sync.Mutex
	pages  map[uint64]*imgPage
	failed int       // reads that came back short or failed
	kept   []failure // the first maxFailedKept of them
}

type imgPage struct {
	data  [imagePage]byte
	known [imagePage / 64]uint64
}

// failure is a read of the target that came back short: n bytes of len
// at addr, and why.
type failure struct {
	Addr uint64 `json:"addr"`
	Len  int    `json:"len"`
	N    int    `json:"n"`
	Err  string `json:"err"`
}

func newImage() *image { return &image{pages: map[uint64]*imgPage{}} }

// add keeps b, read at addr, where no earlier read kept those bytes.
func (m *image) add(addr uint64, b []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for len(b) > 0 {
		base, off := addr&^(imagePage-1), int(addr%imagePage)
		p := m.pages[base]
		if p == nil {
			p = &imgPage{}
			m.pages[base] = p
		}
		n := min(len(b), imagePage-off)
		for i := range n {
			j := off + i
			if p.known[j/64]&(1<<(j%64)) == 0 {
				p.data[j] = b[i]
				p.known[j/64] |= 1 << (j % 64)
			}
		}
		b, addr = b[n:], addr+uint64(n)
	}
}

func (m *image) fail(addr uint64, n, got int, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failed++
	if len(m.kept) < maxFailedKept {
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		m.kept = append(m.kept, failure{addr, n, got, msg})
	}
}

// read copies what the image holds at addr into p, up to its first hole,
// and returns how much it copied.
func (m *image) read(p []byte, addr uint64) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	done := 0
	for done < len(p) {
		a := addr + uint64(done)
		if a < addr {
			return done // wrapped
		}
		pg := m.pages[a&^(imagePage-1)]
		if pg == nil {
			return done
		}
		for off := int(a % imagePage); off < imagePage && done < len(p); off++ {
			if pg.known[off/64]&(1<<(off%64)) == 0 {
				return done
			}
			p[done] = pg.data[off]
			done++
		}
	}
	return done
}

// segment is a run of known bytes.
type segment struct {
	addr uint64
	data []byte
}

// segments are the image's runs of known bytes, by address.
func (m *image) segments() []segment {
	m.mu.Lock()
	defer m.mu.Unlock()
	bases := make([]uint64, 0, len(m.pages))
	for b := range m.pages {
		bases = append(bases, b)
	}
	slices.Sort(bases)
	var out []segment
	for _, base := range bases {
		p := m.pages[base]
		for off := 0; off < imagePage; {
			if p.known[off/64]&(1<<(off%64)) == 0 {
				off++
				continue
			}
			end := off
			for end < imagePage && p.known[end/64]&(1<<(end%64)) != 0 {
				end++
			}
			a := base + uint64(off)
			if k := len(out) - 1; k >= 0 && out[k].addr+uint64(len(out[k].data)) == a {
				out[k].data = append(out[k].data, p.data[off:end]...)
			} else {
				out = append(out, segment{a, slices.Clone(p.data[off:end])})
			}
			off = end
		}
	}
	return out
}

// bytes is how many bytes the image holds.
func (m *image) bytes() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, p := range m.pages {
		for _, w := range p.known {
			n += bits.OnesCount64(w)
		}
	}
	return n
}

// writeImage writes the image: per segment u64 address, u32 length, the
// bytes; gzipped.
func writeImage(path string, m *image) error {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return err
	}
	for _, s := range m.segments() {
		hdr := binary.LittleEndian.AppendUint64(nil, s.addr)
		hdr = binary.LittleEndian.AppendUint32(hdr, uint32(len(s.data)))
		if _, err := zw.Write(append(hdr, s.data...)); err != nil {
			return err
		}
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

func readImage(path string) (*image, error) {
	r, err := openGzip(path)
	if err != nil {
		return nil, err
	}
	m := newImage()
	for {
		var hdr [12]byte
		if _, err := io.ReadFull(r, hdr[:]); err == io.EOF {
			return m, nil
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		data := make([]byte, binary.LittleEndian.Uint32(hdr[8:]))
		if _, err := io.ReadFull(r, data); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		m.add(binary.LittleEndian.Uint64(hdr[:]), data)
	}
}

// recTargetMem records what is read through mem into an image.
type recTargetMem struct {
	mem io.ReaderAt
	img *image
}

func (m recTargetMem) ReadAt(p []byte, off int64) (int, error) {
	n, err := m.mem.ReadAt(p, off)
	n = max(0, min(n, len(p)))
	m.img.add(uint64(off), p[:n])
	if n < len(p) {
		m.img.fail(uint64(off), len(p), n, err)
	}
	return n, err
}

func (m recTargetMem) ReadVector(dst []byte, spans []targetmem.Span) (int, error) {
	vm, ok := m.mem.(targetmem.Mem)
	if !ok {
		return 0, errors.New("the recorded memory reads no vectors")
	}
	n, err := vm.ReadVector(dst, spans)
	n = max(0, min(n, len(dst)))
	off := 0
	for _, s := range spans {
		k := min(s.Len, n-off)
		if k > 0 {
			m.img.add(s.Addr, dst[off:off+k])
		}
		if k < s.Len {
			m.img.fail(s.Addr, s.Len, max(k, 0), err)
			break
		}
		off += s.Len
	}
	return n, err
}

// imageMem serves a recorded image as the memory of process pid.
type imageMem struct {
	img *image
	pid int
}

func (m imageMem) ReadAt(p []byte, off int64) (int, error) {
	n := m.img.read(p, uint64(off))
	if n < len(p) {
		return n, targetmem.ReadError(m.pid, uint64(off)+uint64(n), nil)
	}
	return n, nil
}

func (m imageMem) ReadVector(dst []byte, spans []targetmem.Span) (int, error) {
	off := 0
	for _, s := range spans {
		n, err := m.ReadAt(dst[off:off+s.Len], int64(s.Addr))
		if err != nil {
			return off + n, err
		}
		off += s.Len
	}
	return off, nil
}

// vmSymbols are where libjvm's vmStructs symbols were: with the image,
// they read the table again (vmstructs.Read).
type vmSymbols struct {
	Lib   string            `json:"lib"`
	Base  uint64            `json:"base"`
	Addrs map[string]uint64 `json:"addrs"`
	Err   string            `json:"err,omitempty"`
}

// recordVMStructs reads pid's vmStructs as vmstructs.Open does, with
// their memory read through mem (a recorder).
func recordVMStructs(pid int, mem vmstructs.Mem) (*vmstructs.Table, vmSymbols, error) {
	syms, err := vmstructs.FindSymbols(procfs.Mount, pid)
	if err != nil {
		return nil, vmSymbols{Err: err.Error()}, err
	}
	vs := vmSymbols{Lib: syms.Lib, Base: syms.Base, Addrs: syms.Addrs}
	t, err := vmstructs.Read(mem, syms)
	if err != nil {
		err = fmt.Errorf("read vmStructs of pid %d: %w", pid, err)
		vs.Err = err.Error()
	}
	return t, vs, err
}

func (v *vmSymbols) table(mem vmstructs.Mem) (*vmstructs.Table, error) {
	if v == nil {
		return nil, errors.New("vmStructs were not recorded")
	}
	if v.Err != "" {
		return nil, errors.New(v.Err)
	}
	return vmstructs.Read(mem, vmstructs.Symbols{Lib: v.Lib, Base: v.Base, Addrs: v.Addrs})
}

// contAnswer is what the JVM's continuations read.
type contAnswer struct {
	Cont vmcode.Continuation `json:"cont"`
	Err  string              `json:"err,omitempty"`
}

// stacksChoice is where the recorded session's stacks came from as it
// started to profile.
type stacksChoice struct {
	Mode   string `json:"mode"`
	Signal int    `json:"signal"`
}

// writeStacks writes the BPF-unwound stacks of the sample batches: per
// stack u32 batch seq, u32 index in the batch, u16 end, u32 frame count,
// the frames (u64 blob, a, b); gzipped. No file when no sample has one.
func writeStacks(path string, evs []sampleEvent) error {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	any := false
	for _, e := range evs {
		for i, s := range e.samples {
			if s.Stack == nil {
				continue
			}
			any = true
			b := binary.LittleEndian.AppendUint32(nil, uint32(e.seq))
			b = binary.LittleEndian.AppendUint32(b, uint32(i))
			b = binary.LittleEndian.AppendUint16(b, s.Stack.End)
			b = binary.LittleEndian.AppendUint32(b, uint32(len(s.Stack.Frames)))
			for _, f := range s.Stack.Frames {
				b = binary.LittleEndian.AppendUint64(b, f.Blob)
				b = binary.LittleEndian.AppendUint64(b, f.A)
				b = binary.LittleEndian.AppendUint64(b, f.B)
			}
			if _, err := zw.Write(b); err != nil {
				return err
			}
		}
	}
	if !any {
		return nil
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// readStacks puts the stacks in path, if there is one, back on evs'
// samples.
func readStacks(path string, evs []sampleEvent) error {
	r, err := openGzip(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	bySeq := map[int]int{}
	for i, e := range evs {
		bySeq[e.seq] = i
	}
	for {
		var hdr [14]byte
		if _, err := io.ReadFull(r, hdr[:]); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		seq, idx := int(binary.LittleEndian.Uint32(hdr[0:])), int(binary.LittleEndian.Uint32(hdr[4:]))
		st := &sample.Stack{End: binary.LittleEndian.Uint16(hdr[8:]), Frames: make([]sample.RawFrame, binary.LittleEndian.Uint32(hdr[10:]))}
		if err := binary.Read(r, binary.LittleEndian, st.Frames); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		e, ok := bySeq[seq]
		if !ok || idx >= len(evs[e].samples) {
			return fmt.Errorf("%s: a stack of sample %d of batch %d, which the recording has not", path, idx, seq)
		}
		evs[e].samples[idx].Stack = st
	}
}

// TestImage checks the recorded memory a replay serves: the first value
// read of each byte, a read short at the first byte never read (as at an
// unmapped page), vectors that stop at the first short span, and the
// segments it is saved as.
func TestImage(t *testing.T) {
	m := newImage()
	m.add(imagePage-4, []byte{1, 2, 3, 4, 5, 6, 7, 8}) // across a page
	m.add(imagePage-2, []byte{9, 9, 9})                // read again later: the first value stays
	mem := imageMem{m, 42}
	got := make([]byte, 9)
	n, err := mem.ReadAt(got, imagePage-4)
	if n != 8 || err == nil || !bytes.Equal(got[:8], []byte{1, 2, 3, 4, 5, 6, 7, 8}) {
		t.Errorf("ReadAt = %d, %v, % x; want the 8 bytes first read, then unreadable", n, err, got[:n])
	}
	if n, err := mem.ReadAt(make([]byte, 1), 0); n != 0 || err == nil {
		t.Errorf("ReadAt of memory never read = %d, %v; want 0 and an error", n, err)
	}
	m.add(3*imagePage, []byte{0xaa, 0xbb})
	dst := make([]byte, 2+4+2)
	n, err = mem.ReadVector(dst, []targetmem.Span{{Addr: 3 * imagePage, Len: 2}, {Addr: imagePage - 2, Len: 4}, {Addr: 3 * imagePage, Len: 2}})
	if n != 8 || err != nil {
		t.Errorf("ReadVector of read spans = %d, %v; want 8, nil", n, err)
	}
	n, err = mem.ReadVector(dst, []targetmem.Span{{Addr: 3 * imagePage, Len: 2}, {Addr: imagePage + 3, Len: 4}, {Addr: 3 * imagePage, Len: 2}})
	if n != 3 || err == nil {
		t.Errorf("ReadVector into a hole = %d, %v; want the 3 bytes before it and an error", n, err)
	}
	segs := m.segments()
	if len(segs) != 2 || segs[0].addr != imagePage-4 || len(segs[0].data) != 8 || segs[1].addr != 3*imagePage || m.bytes() != 10 {
		t.Errorf("segments = %+v (%d bytes); want 8 bytes at %#x and 2 at %#x", segs, m.bytes(), imagePage-4, 3*imagePage)
	}
	path := filepath.Join(t.TempDir(), memoryFile)
	if err := writeImage(path, m); err != nil {
		t.Fatal(err)
	}
	back, err := readImage(path)
	if err != nil {
		t.Fatal(err)
	}
	if b := back.segments(); len(b) != 2 || !bytes.Equal(b[0].data, segs[0].data) || !bytes.Equal(b[1].data, segs[1].data) {
		t.Errorf("read back: %+v; want %+v", b, segs)
	}
}
