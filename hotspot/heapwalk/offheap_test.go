package heapwalk

import (
	"context"
	"slices"
	"testing"
)

// TestOffHeapOwners: the direct buffers a walk meets are off-heap owners
// by their address and capacity, named by their own chain; slices (att
// set), heap buffers and ranges that are empty or in the heap are not.
func TestOffHeapOwners(t *testing.T) {
	for _, v := range variants {
		t.Run(v.String(), func(t *testing.T) {
			s := newSynthV(t, v)
			// Buffer's address (long) and capacity (int) after the
			// header, then DirectByteBuffer's att and MappedByteBuffer's fd.
			addrOff, capOff := uint32(16), uint32(24)
			att, fd := uint32(32), uint32(32+s.oop)
			size := (uint64(fd) + s.oop + 7) &^ 7
			buffer := s.class("java/nio/Buffer", 0, 32, nil, 0)
			byteBuf := s.class("java/nio/ByteBuffer", buffer, 32, nil, 0)
			mapped := s.class("java/nio/MappedByteBuffer", byteBuf, size, []uint32{fd}, 0)
			direct := s.class("java/nio/DirectByteBuffer", mapped, size, []uint32{att, fd}, 0)
			directR := s.class("java/nio/DirectByteBufferR", direct, size, []uint32{att, fd}, 0)
			heapBuf := s.class("java/nio/HeapByteBuffer", byteBuf, size, []uint32{att, fd}, 0)
			fdK := s.class("java/io/FileDescriptor", 0, 24, nil, 0)
			app := s.class("App", 0, 16, nil, 7)
			l := s.finish()

			buf := func(k, addr uint64, capacity uint32) uint64 {
				b := s.obj(k)
				s.put64(b+uint64(addrOff), addr)
				s.m.put32(b+uint64(capOff), capacity)
				return b
			}
			const native = 0x7f00_0000_0000
			parent := buf(direct, native, 64<<20)
			slice := buf(direct, native+4096, 4096)
			s.ref(slice, att, parent)
			file := buf(directR, native+1<<30, 1<<20)
			s.ref(file, fd, s.obj(fdK))
			inHeap := buf(direct, heapLo+4096, 4096)
			empty := buf(direct, native+2<<30, 0)
			wraps := buf(direct, ^uint64(0)-100, 4096)
			heapB := buf(heapBuf, 16, 1<<20)
			// The slice is reached first: its parent is charged, by the
			// parent's own chain (App's static 1, through att).
			for i, b := range []uint64{slice, parent, file, inHeap, empty, wraps, heapB} {
				s.setStatic(app, i, b)
			}
			offs := map[string]uint32{"address": addrOff, "capacity": capOff, "att": att, "fd": fd}
			cfg := Config{FieldOffset: func(k uint64, name string) (uint32, bool) {
				if k != direct && k != directR && k != heapBuf {
					return 0, false
				}
				o, ok := offs[name]
				return o, ok
			}}
			res, err := Walk(context.Background(), l, s.m, cfg)
			if err != nil {
				t.Fatal(err)
			}
			oh := res.OffHeap
			if len(oh.Owners) != 2 || oh.Views != 1 || oh.Invalid != 3 {
				t.Fatalf("owners %+v, views %d, invalid %d: want 2, 1, 3", oh.Owners, oh.Views, oh.Invalid)
			}
			byAddr := map[uint64]OffHeapOwner{}
			for _, o := range oh.Owners {
				byAddr[o.Addr] = o
			}
			p, f := byAddr[native], byAddr[native+1<<30]
			if p.Size != 64<<20 || p.Class != "java.nio.DirectByteBuffer" || p.Mapped {
				t.Errorf("parent %+v", p)
			}
			if f.Size != 1<<20 || f.Class != "java.nio.DirectByteBufferR" || !f.Mapped {
				t.Errorf("mapped %+v", f)
			}
			// The parent is named by the chain the slice leads to; the
			// file by its static.
			if got, want := res.ChainString(f.Chain), "App+"+itoa(uint64(s.staticOff(2)))+" (static)"; got != want {
				t.Errorf("mapped buffer's chain %q, want %q", got, want)
			}
			if got := res.ChainString(p.Chain); got != "App+"+itoa(uint64(s.staticOff(0)))+" (static) -> java.nio.DirectByteBuffer+"+itoa(uint64(att)) &&
				got != "App+"+itoa(uint64(s.staticOff(1)))+" (static)" {
				t.Errorf("parent's chain %q", got)
			}

			// The cap holds.
			cfg.MaxOwners = 1
			res, err = Walk(context.Background(), l, s.m, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.OffHeap.Owners) != 1 || res.OffHeap.Capped != 1 {
				t.Errorf("capped at 1: %d owners, %d capped", len(res.OffHeap.Owners), res.OffHeap.Capped)
			}
			// Without field offsets, no owners.
			res, err = Walk(context.Background(), l, s.m, Config{})
			if err != nil || len(res.OffHeap.Owners) != 0 {
				t.Errorf("no FieldOffset: %d owners, %v", len(res.OffHeap.Owners), err)
			}
		})
	}
}

// TestOffHeapSegments: FFM native segments (JDK 22+) own [min,
// min+length), a mapped segment (a subclass, known by its superclass) maps
// a file; a slice, and a segment made over a direct buffer, lie within
// another owner and are views, as are equal ranges but the first found.
// Heap segments, and ranges that are empty, wrap or are in the heap are
// not owners.
func TestOffHeapSegments(t *testing.T) {
	for _, v := range variants {
		t.Run(v.String(), func(t *testing.T) {
			s := newSynthV(t, v)
			// AbstractMemorySegmentImpl's length (long) and scope, then
			// NativeMemorySegmentImpl's min (long), then
			// MappedMemorySegmentImpl's unmapper.
			lenOff, scope, minOff := uint32(16), uint32(24), uint32(32)
			unmapper := uint32(40)
			nativeSize, mappedSize := uint64(40), (uint64(unmapper)+s.oop+7)&^7
			abstract := s.class("jdk/internal/foreign/AbstractMemorySegmentImpl", 0, 32, []uint32{scope}, 0)
			native := s.class("jdk/internal/foreign/NativeMemorySegmentImpl", abstract, nativeSize, []uint32{scope}, 0)
			mapped := s.class("jdk/internal/foreign/MappedMemorySegmentImpl", native, mappedSize, []uint32{scope, unmapper}, 0)
			heapSeg := s.class("jdk/internal/foreign/HeapMemorySegmentImpl$OfLong", abstract, nativeSize, []uint32{scope}, 0)
			// A direct buffer, as in TestOffHeapOwners.
			addrOff, capOff, att, fd := uint32(16), uint32(24), uint32(32), uint32(32+s.oop)
			bufSize := (uint64(fd) + s.oop + 7) &^ 7
			buffer := s.class("java/nio/Buffer", 0, 32, nil, 0)
			byteBuf := s.class("java/nio/ByteBuffer", buffer, 32, nil, 0)
			mbb := s.class("java/nio/MappedByteBuffer", byteBuf, bufSize, []uint32{fd}, 0)
			direct := s.class("java/nio/DirectByteBuffer", mbb, bufSize, []uint32{att, fd}, 0)
			app := s.class("App", 0, 16, nil, 12)
			l := s.finish()

			seg := func(k, addr, length uint64) uint64 {
				o := s.obj(k)
				s.put64(o+uint64(minOff), addr)
				s.put64(o+uint64(lenOff), length)
				return o
			}
			const base = 0x7f00_0000_0000
			slice := seg(native, base+4096, 4096)
			parent := seg(native, base, 64<<20)
			file := seg(mapped, base+1<<30, 1<<20)
			buf := s.obj(direct)
			s.put64(buf+uint64(addrOff), base+2<<30)
			s.m.put32(buf+uint64(capOff), 1<<20)
			ofBuffer := seg(native, base+2<<30+8192, 8192) // MemorySegment.ofBuffer of a slice of buf
			// Overlapping, neither within the other: both own.
			left := seg(native, base+3<<30, 8192)
			right := seg(native, base+3<<30+4096, 8192)
			null := seg(native, 0, 0)
			everything := seg(native, minOwnerAddr, 1<<63-1)
			inHeap := seg(native, heapLo+4096, 4096)
			onHeap := seg(heapSeg, 0, 1<<20)
			for i, o := range []uint64{slice, parent, file, buf, ofBuffer, left, right, null, everything, inHeap, onHeap} {
				s.setStatic(app, i, o)
			}
			offs := map[uint64]map[string]uint32{
				native:  {"length": lenOff, "min": minOff},
				mapped:  {"length": lenOff, "min": minOff},
				heapSeg: {"length": lenOff},
				direct:  {"address": addrOff, "capacity": capOff, "att": att, "fd": fd},
			}
			cfg := Config{FieldOffset: func(k uint64, name string) (uint32, bool) {
				o, ok := offs[k][name]
				return o, ok
			}}
			res, err := Walk(context.Background(), l, s.m, cfg)
			if err != nil {
				t.Fatal(err)
			}
			oh := res.OffHeap
			byAddr := map[uint64]OffHeapOwner{}
			for _, o := range oh.Owners {
				byAddr[o.Addr] = o
			}
			if len(oh.Owners) != 5 || len(byAddr) != 5 || oh.Views != 2 || oh.Invalid != 3 {
				t.Fatalf("owners %+v, views %d, invalid %d: want 5, 2, 3", oh.Owners, oh.Views, oh.Invalid)
			}
			p, f, b := byAddr[base], byAddr[base+1<<30], byAddr[base+2<<30]
			if p.Size != 64<<20 || p.Class != "jdk.internal.foreign.NativeMemorySegmentImpl" || p.Klass != native || p.Mapped {
				t.Errorf("parent %+v", p)
			}
			if got, want := res.ChainString(p.Chain), "App+"+itoa(uint64(s.staticOff(1)))+" (static)"; got != want {
				t.Errorf("parent's chain %q, want %q", got, want)
			}
			if f.Size != 1<<20 || f.Class != "jdk.internal.foreign.MappedMemorySegmentImpl" || !f.Mapped {
				t.Errorf("mapped segment %+v", f)
			}
			if b.Size != 1<<20 || b.Class != "java.nio.DirectByteBuffer" {
				t.Errorf("buffer %+v", b)
			}
			if byAddr[base+3<<30].Size != 8192 || byAddr[base+3<<30+4096].Size != 8192 {
				t.Errorf("overlapping segments %+v", oh.Owners)
			}
		})
	}
}

// TestOffHeapDropViews: an owner within another is a view whatever the
// order found; of equal ranges the first found stays; the others keep
// their order.
func TestOffHeapDropViews(t *testing.T) {
	o := func(addr, size uint64, class string) OffHeapOwner {
		return OffHeapOwner{Addr: addr, Size: size, Class: class}
	}
	oh := OffHeap{Views: 1, Owners: []OffHeapOwner{
		o(0x10100, 0x100, "slice"),
		o(0x20000, 0x1000, "buffer"),
		o(0x10000, 0x10000, "segment"),
		o(0x20000, 0x1000, "ofBuffer"),
		o(0x10000, 0x100, "head"),   // same start, shorter
		o(0x1ff00, 0x100, "tail"),   // same end
		o(0x30000, 0x1000, "left"),  // overlaps right, neither within
		o(0x30800, 0x1000, "right"), //
	}}
	oh.dropViews()
	var got []string
	for _, x := range oh.Owners {
		got = append(got, x.Class)
	}
	if want := []string{"buffer", "segment", "left", "right"}; !slices.Equal(got, want) || oh.Views != 5 {
		t.Errorf("owners %v, views %d; want %v, 5", got, oh.Views, want)
	}
	// Equal ranges the other way round: the first found stays.
	oh = OffHeap{Owners: []OffHeapOwner{o(0x20000, 0x1000, "ofBuffer"), o(0x20000, 0x1000, "buffer")}}
	if oh.dropViews(); len(oh.Owners) != 1 || oh.Owners[0].Class != "ofBuffer" || oh.Views != 1 {
		t.Errorf("equal ranges: %+v, views %d", oh.Owners, oh.Views)
	}
}
