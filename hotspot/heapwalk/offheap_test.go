package heapwalk

import (
	"context"
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
