package vmcode

import (
	"encoding/binary"
	"errors"
	"slices"
	"testing"
)

// putUint appends v in HotSpot's UNSIGNED5 with x excluded bytes
// (UNSIGNED5::write_uint, CompressedWriteStream::write_int).
func putUint(b []byte, v uint32, x byte) []byte {
	const lgH, H, L = 6, 64, 192
	sum := v
	for i := 0; ; i++ {
		if sum < uint32(L-x) || i == 4 {
			return append(b, byte(sum)+x)
		}
		sum -= uint32(L - x)
		b = append(b, byte(L+sum%H))
		sum >>= lgH
	}
}

func putSint(b []byte, v int32, x byte) []byte {
	return putUint(b, uint32(v<<1)^uint32(v>>31), x)
}

// putLines encodes a line table as CompressedLineNumberWriteStream.
func putLines(pairs []linePair, x byte) []byte {
	var b []byte
	var bci, line int32
	for _, p := range pairs {
		db, dl := p.bci-bci, p.line-line
		if db >= 0 && db < 32 && dl >= 0 && dl < 8 && (db != 0 || dl != 0) {
			b = append(b, byte(db<<3|dl))
		} else {
			b = append(b, 0xFF)
			b = putSint(b, db, x)
			b = putSint(b, dl, x)
		}
		bci, line = p.bci, p.line
	}
	return append(b, 0)
}

func TestUnsigned5(t *testing.T) {
	for _, x := range []byte{0, 1} {
		vals := []uint32{0, 1, 190, 191, 192, 255, 256, 1000, 12345, 1 << 20, 1<<31 - 1, 1<<32 - 1}
		var b []byte
		for _, v := range vals {
			b = putUint(b, v, x)
		}
		s := stream{buf: b, x: x}
		for _, v := range vals {
			got, err := s.uint()
			if err != nil || got != v {
				t.Fatalf("x=%d: got %d, %v; want %d", x, got, err, v)
			}
		}
		if _, err := s.uint(); !errors.Is(err, ErrMalformed) {
			t.Fatalf("x=%d: read past the end: %v", x, err)
		}
		s = stream{buf: putSint(nil, -5, x), x: x}
		if v, err := s.sint(); v != -5 || err != nil {
			t.Fatalf("x=%d: signed -5 read as %d, %v", x, v, err)
		}
	}
	// JDK 20+ streams never hold a NUL byte.
	s := stream{buf: []byte{0}, x: 1}
	if _, err := s.uint(); !errors.Is(err, ErrMalformed) {
		t.Fatalf("excluded byte: %v", err)
	}
}

func TestLines(t *testing.T) {
	pairs := []linePair{{0, 10}, {4, 11}, {9, 11}, {200, 300}, {201, 12}, {1000, 5000}}
	for _, x := range []byte{0, 1} {
		got, err := decodeLines(putLines(pairs, x), x)
		if err != nil || !slices.Equal(got, pairs) {
			t.Fatalf("x=%d: %v, %v", x, got, err)
		}
	}
	for bci, want := range map[int32]int32{-1: 10, 0: 10, 3: 10, 4: 11, 100: 11, 200: 300, 201: 12, 999: 12, 5000: 5000} {
		if got := lineOf(pairs, bci); got != want {
			t.Errorf("bci %d: line %d, want %d", bci, got, want)
		}
	}
	if got := lineOf(nil, 3); got != -1 {
		t.Errorf("no table: %d", got)
	}
	// Unterminated, and truncated inside an escape.
	for _, b := range [][]byte{{0x08, 0x09}, {0xFF, 0xC0}} {
		if _, err := decodeLines(b, 0); !errors.Is(err, ErrMalformed) {
			t.Errorf("%x: %v", b, err)
		}
	}
}

func pcTable(offs ...int32) pcDescs {
	b := make([]byte, 16*len(offs))
	for i, o := range offs {
		binary.LittleEndian.PutUint32(b[16*i:], uint32(o))
		binary.LittleEndian.PutUint32(b[16*i+4:], uint32(1000+i))
	}
	return pcDescs{buf: b, stride: 16, off: 0, scope: 4}
}

func TestPcDescFind(t *testing.T) {
	p := pcTable(-1, 0, 10, 20, 20, 35)
	for off, want := range map[int32]int32{-5: 1000, 0: 1001, 1: 1002, 10: 1002, 11: 1003, 20: 1003, 21: 1005, 35: 1005} {
		if got, ok := p.find(off); !ok || got != want {
			t.Errorf("offset %d: scope %d %v, want %d", off, got, ok, want)
		}
	}
	if _, ok := p.find(36); ok {
		t.Error("past the last PcDesc: found one")
	}
	if _, ok := (pcDescs{buf: make([]byte, 40), stride: 4}).find(0); ok {
		t.Error("stride 4: found one")
	}
}

// scopesData builds scopes data holding chain (metadata index, bci)
// innermost first; it returns the innermost scope's offset.
func scopesData(chain [][2]int32, x byte) ([]byte, int32) {
	b := []byte{0xAA} // offset 0 is serialized_null
	sender := int32(0)
	for i := len(chain) - 1; i >= 0; i-- {
		off := int32(len(b))
		b = putUint(b, uint32(sender), x)
		b = putUint(b, uint32(chain[i][0]), x)
		b = putUint(b, uint32(chain[i][1]+1), x)
		b = putUint(b, 0, x) // locals, expressions, monitors: not read
		sender = off
	}
	return b, sender
}

func TestScopes(t *testing.T) {
	chain := [][2]int32{{3, 17}, {2, 5}, {1, -1}}
	for _, x := range []byte{0, 1} {
		b, off := scopesData(chain, x)
		got, err := decodeScopes(b, off, x)
		if err != nil || len(got) != 3 {
			t.Fatalf("x=%d: %v, %v", x, got, err)
		}
		for i, f := range got {
			if int32(f.metaIndex) != chain[i][0] || f.bci != chain[i][1] {
				t.Errorf("x=%d: scope %d is %+v, want %v", x, i, f, chain[i])
			}
		}
	}
	// A scope whose sender is itself loops: capped, an error.
	loop := putUint(putUint(putUint([]byte{0xAA}, 1, 0), 1, 0), 0, 0)
	if _, err := decodeScopes(loop, 1, 0); !errors.Is(err, ErrMalformed) {
		t.Fatalf("a looping chain: %v", err)
	}
	if _, err := decodeScopes([]byte{1, 2}, 7, 0); !errors.Is(err, ErrMalformed) {
		t.Fatalf("offset past the data: %v", err)
	}
}

// FuzzDecoders feeds arbitrary bytes to every decoder of the target's
// tables: each must return, without panicking, within its bounds.
func FuzzDecoders(f *testing.F) {
	b, off := scopesData([][2]int32{{3, 17}, {2, 5}, {1, -1}}, 1)
	f.Add(b, int32(off), int32(3), byte(1))
	f.Add(putLines([]linePair{{0, 10}, {300, 2}}, 0), int32(0), int32(0), byte(0))
	f.Add(pcTable(-1, 0, 10).buf, int32(1), int32(5), byte(0))
	f.Fuzz(func(t *testing.T, data []byte, offset, target int32, x byte) {
		x &= 1
		if pairs, err := decodeLines(data, x); err == nil {
			if len(pairs) > len(data) {
				t.Fatalf("%d pairs from %d bytes", len(pairs), len(data))
			}
			lineOf(pairs, target)
		}
		if fs, err := decodeScopes(data, offset, x); err == nil && len(fs) > MaxInlineDepth {
			t.Fatalf("chain of %d", len(fs))
		}
		for _, stride := range []int{8, 16, 24} {
			p := pcDescs{buf: data, stride: stride, off: 0, scope: 4}
			p.find(target)
		}
		s := stream{buf: data, pos: int(offset), x: x}
		for i := 0; i < 64; i++ {
			if _, err := s.sint(); err != nil {
				break
			}
		}
	})
}
