package vmcode

import (
	"fmt"
	"sync"

	"github.com/djx-bpf/djx-bpf/hotspot/targetmem"
	"github.com/djx-bpf/djx-bpf/hotspot/vmstructs"
)

// Cache bounds, in bytes held.
const (
	// MethodCacheBytes bounds the methods kept (names and line tables):
	// about 20k methods of a few hundred bytes each.
	MethodCacheBytes = 8 << 20
	// BlobCacheBytes bounds the nmethods' debug information kept.
	BlobCacheBytes = 32 << 20
)

// Stats counts a Symbolizer's work.
type Stats struct {
	Reads, Bytes             int // ReadAt calls and bytes asked for
	MethodHits, MethodMisses int
	BlobHits, BlobMisses     int // debug information of nmethods
	NamesCut                 int // names cut to jvmsym.MaxName bytes
}

// Symbolizer turns code addresses and methods of one HotSpot JVM into
// Java frames, reading the JVM's memory. It is safe for concurrent use;
// its queries run one at a time.
type Symbolizer struct {
	mu      sync.Mutex
	mem     Mem
	l       *layout
	bias    uint64 // added to static addresses: a table read in another run of the same libjvm
	heaps   []Heap
	names   map[uint64]string
	classes map[uint64]*class // by ConstantPool*
	// classBytes is what classes holds (class.bytes).
	classBytes int
	methods    *lru[uint64, *Method]
	blobs      *lru[uint64, *debugInfo]
	stats      Stats
}

// New returns a symbolizer for the JVM whose vmStructs are t and whose
// memory is mem. It fails with ErrUnsupported when t lacks an entry it
// needs.
func New(t *vmstructs.Table, mem Mem) (*Symbolizer, error) {
	l, err := layoutOf(t)
	if err != nil {
		return nil, err
	}
	return newSymbolizer(l, mem), nil
}

func newSymbolizer(l *layout, mem Mem) *Symbolizer {
	return &Symbolizer{
		mem: mem, l: l,
		names:   make(map[uint64]string),
		classes: make(map[uint64]*class),
		methods: newLRU[uint64](MethodCacheBytes, (*Method).bytes),
		blobs:   newLRU[uint64](BlobCacheBytes, func(d *debugInfo) int { return d.bytes }),
	}
}

// Open returns a symbolizer for the HotSpot JVM pid (vmstructs.Open), its
// memory read through targetmem.
func Open(pid int) (*Symbolizer, error) {
	t, err := vmstructs.Open(pid)
	if err != nil {
		return nil, err
	}
	s, err := New(t, targetmem.Open(pid))
	if err != nil {
		return nil, fmt.Errorf("pid %d: %w", pid, err)
	}
	return s, nil
}

// query runs f with a fresh reader, under the lock, and counts its reads.
func (s *Symbolizer) query(f func(r *reader) error) error {
	r := newReader(s.mem)
	err := f(r)
	s.stats.Reads += r.reads
	s.stats.Bytes += r.bytes
	return err
}

// Stats returns the work done so far.
func (s *Symbolizer) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Flush drops the caches: methods of unloaded classes, whose memory may
// be reused, are then read again.
func (s *Symbolizer) Flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.methods.clear()
	s.blobs.clear()
	clear(s.names)
	clear(s.classes)
	s.classBytes = 0
	s.heaps = nil
}

// Heaps returns the code cache's heaps, for an unwinder that needs their
// ranges and segment maps.
func (s *Symbolizer) Heaps() ([]Heap, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var hs []Heap
	err := s.query(func(r *reader) error {
		if s.heaps == nil {
			h, err := s.readHeaps(r)
			if err != nil {
				return err
			}
			s.heaps = h
		}
		hs = append(hs, s.heaps...)
		return nil
	})
	return hs, err
}

// Blob returns the code blob holding pc. ErrNotCode means pc is in none.
func (s *Symbolizer) Blob(pc uint64) (Blob, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var hb header
	err := s.query(func(r *reader) (err error) {
		hb, err = s.readBlob(r, pc)
		return err
	})
	return hb.blob, err
}

// Frames returns the Java frames at pc, innermost first: for an nmethod,
// its inlining chain at the PcDesc for pc (the first at or after it, so a
// return address resolves exactly), each with its line. The interpreter
// and stubs have no frames of their own: their Blob says what they are.
func (s *Symbolizer) Frames(pc uint64) ([]Frame, Blob, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Frame
	var hb header
	err := s.query(func(r *reader) (err error) {
		if hb, err = s.readBlob(r, pc); err != nil || hb.blob.Kind != KindNMethod {
			return err
		}
		out, err = s.nmethodFrames(r, &hb, pc)
		return err
	})
	if err != nil {
		return nil, hb.blob, fmt.Errorf("frames at %#x: %w", pc, err)
	}
	return out, hb.blob, nil
}

// nmethodFrames resolves pc in the nmethod hb, through the caches: the
// debug information by blob start (valid while the header is the same
// compilation), the frames by pc.
func (s *Symbolizer) nmethodFrames(r *reader, hb *header, pc uint64) ([]Frame, error) {
	b := hb.blob
	d, ok := s.blobs.get(b.Start)
	if ok && d.blob.CompileID == b.CompileID && d.blob.Method == b.Method && d.blob.End == b.End && d.blob.CodeBegin == b.CodeBegin {
		s.stats.BlobHits++
	} else {
		s.stats.BlobMisses++
		var err error
		if d, err = s.readDebugInfo(r, hb); err != nil {
			return nil, fmt.Errorf("nmethod %d at %#x: %w", b.CompileID, b.Start, err)
		}
		s.blobs.put(b.Start, d)
	}
	off := int32(pc - b.Start)
	if fs, ok := d.frames[off]; ok {
		return fs, nil
	}
	raw, err := s.rawFrames(d, pc)
	if err != nil {
		return nil, fmt.Errorf("nmethod %d at %#x: %w", b.CompileID, b.Start, err)
	}
	out := make([]Frame, 0, len(raw))
	for _, rf := range raw {
		m, err := s.method(r, uint64(rf[0]))
		if err != nil {
			return nil, err
		}
		out = append(out, m.frame(int(rf[1])))
	}
	// The frames' names count: they outlive their methods in the
	// method cache.
	n := 64
	for i := range out {
		n += out[i].bytes()
	}
	if len(d.frames) < maxPCFrames && d.framesBytes+n <= maxBlobFrameBytes {
		d.frames[off] = out
		d.framesBytes += n
		s.blobs.grow(b.Start, n)
	}
	return out, nil
}

// method returns the method at addr, cached.
func (s *Symbolizer) method(r *reader, addr uint64) (*Method, error) {
	if m, ok := s.methods.get(addr); ok {
		s.stats.MethodHits++
		return m, nil
	}
	s.stats.MethodMisses++
	m, err := s.readMethod(r, addr)
	if err != nil {
		return nil, err
	}
	s.methods.put(addr, m)
	return m, nil
}

// Method returns the method at the Method* addr.
func (s *Symbolizer) Method(addr uint64) (Method, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var m *Method
	err := s.query(func(r *reader) (err error) {
		m, err = s.method(r, addr)
		return err
	})
	if err != nil {
		return Method{}, err
	}
	return *m, nil
}

// Frame returns the frame of the method at addr at bci.
func (s *Symbolizer) Frame(addr uint64, bci int) (Frame, error) {
	m, err := s.Method(addr)
	if err != nil {
		return Frame{}, err
	}
	return m.frame(bci), nil
}

// InterpretedFrame returns the frame of an interpreter frame, from its
// method and its bcp: the bci is bcp's offset in the method's bytecodes,
// which follow its ConstMethod.
func (s *Symbolizer) InterpretedFrame(method, bcp uint64) (Frame, error) {
	m, err := s.Method(method)
	if err != nil {
		return Frame{}, err
	}
	if bcp < m.CodeBase || bcp-m.CodeBase >= uint64(max(m.CodeSize, 1)) {
		return Frame{}, malformed("bcp %#x outside %s.%s's bytecodes %#x+%d", bcp, m.Class, m.Name, m.CodeBase, m.CodeSize)
	}
	return m.frame(int(bcp - m.CodeBase)), nil
}
