package agentwire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestReaderRefusesHugeBatch: the agent's batches are at most 4 MiB; a
// 64 MiB one (which decoded to 448 MiB) is refused before it is read.
func TestReaderRefusesHugeBatch(t *testing.T) {
	var hdr [HeaderLen]byte
	binary.LittleEndian.PutUint32(hdr[0:], Magic)
	binary.LittleEndian.PutUint16(hdr[4:], Version)
	binary.LittleEndian.PutUint32(hdr[8:], 64<<20)
	binary.LittleEndian.PutUint32(hdr[12:], 1)
	_, err := NewReader(bytes.NewReader(hdr[:])).Next()
	var fe *FormatError
	if !errors.As(err, &fe) {
		t.Fatalf("64 MiB batch: %v, want a FormatError before reading it", err)
	}
}

// readOne decodes the single batch of recs.
func readOne(t *testing.T, recs ...Record) *Batch {
	t.Helper()
	b, err := NewReader(bytes.NewReader(encode(t, &Batch{Watermark: 1, Records: recs}))).Next()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkCut checks that s is the start of long, cut to MaxString with the
// marker.
func checkCut(t *testing.T, what, s, long string) {
	t.Helper()
	if len(s) > MaxString || !strings.HasSuffix(s, StringCut) || !strings.HasPrefix(long, strings.TrimSuffix(s, StringCut)) {
		t.Errorf("%s: kept %d bytes (%.20q...), want at most %d ending in %q", what, len(s), s, MaxString, StringCut)
	}
}

// TestReaderCutsStrings: records whose strings are 1 MiB each is kept
// at MaxString bytes a string, cut at a character's start, and the cuts
// are counted; short strings are kept whole.
func TestReaderCutsStrings(t *testing.T) {
	long := strings.Repeat("é", 512<<10) // 1 MiB, two bytes a character
	b := readOne(t,
		&Method{ID: 1, ClassSig: long, Name: long, Sig: long, SourceFile: "A.java"},
		&CensusPath{ID: 1, Hop: long},
		&Class{Klass: 1, Sig: long, Fields: []Field{{Offset: 12, Name: long, Sig: "J"}}},
		&Alloc{Time: 1, TypeSig: long},
		&Stub{Name: "Interpreter"})
	m := b.Records[0].(*Method)
	for what, s := range map[string]string{"class": m.ClassSig, "name": m.Name, "sig": m.Sig,
		"hop": b.Records[1].(*CensusPath).Hop, "class sig": b.Records[2].(*Class).Sig,
		"field": b.Records[2].(*Class).Fields[0].Name, "type": b.Records[3].(*Alloc).TypeSig} {
		checkCut(t, what, s, long)
		if !utf8.ValidString(s) {
			t.Errorf("%s: cut inside a character", what)
		}
	}
	if m.SourceFile != "A.java" || b.Records[4].(*Stub).Name != "Interpreter" {
		t.Errorf("short strings changed: %q, %q", m.SourceFile, b.Records[4].(*Stub).Name)
	}
	if b.StringsCut != 7 || b.ListsCut != 0 {
		t.Errorf("counted %d strings and %d lists cut, want 7 and 0", b.StringsCut, b.ListsCut)
	}
	// At the limit nothing is cut.
	exact := strings.Repeat("x", MaxString)
	if b := readOne(t, &Bye{Reason: exact}); b.Records[0].(*Bye).Reason != exact || b.StringsCut != 0 {
		t.Errorf("a string of MaxString bytes was cut")
	}
}

// TestReaderCutsLists: frame lists, METHOD lines and CLASS fields past the
// limits are cut, keeping their first (innermost) elements, and counted;
// the records after them still decode.
func TestReaderCutsLists(t *testing.T) {
	fr := make([]Frame, MaxFrames+100)
	for i := range fr {
		fr[i] = Frame{Method: uint64(i + 1), BCI: int64(i)}
	}
	lines := make([]LineEntry, MaxLines+1)
	fields := make([]Field, MaxFields+1)
	statics := make([]Field, MaxFields+1)
	for i := range fields {
		fields[i] = Field{Offset: uint32(i), Name: "f", Sig: "J"}
		statics[i] = Field{Offset: uint32(i), Name: "s", Sig: "J", Static: true}
	}
	b := readOne(t,
		&Alloc{Time: 1, TypeSig: "[B", Frames: fr, Tag: 9},
		&Stack{Time: 2, Status: int32(len(fr)), Frames: fr},
		&Code{Time: 3, PCs: []PCInfo{{PC: 1, Frames: fr}, {PC: 2, Frames: fr[:3]}}},
		&Method{ID: 1, Name: "m", Lines: lines},
		&Class{Klass: 1, Sig: "LA;", Fields: fields, Statics: statics},
		&Free{Time: 4, Tag: 9})
	a := b.Records[0].(*Alloc)
	if len(a.Frames) != MaxFrames || a.Frames[0] != fr[0] || a.Frames[MaxFrames-1] != fr[MaxFrames-1] || a.Tag != 9 {
		t.Errorf("ALLOC: %d frames, tag %d: want the first %d and the tag after them", len(a.Frames), a.Tag, MaxFrames)
	}
	if n := len(b.Records[1].(*Stack).Frames); n != MaxFrames {
		t.Errorf("STACK: %d frames kept", n)
	}
	if c := b.Records[2].(*Code); len(c.PCs[0].Frames) != MaxFrames || len(c.PCs[1].Frames) != 3 || c.PCs[1].PC != 2 {
		t.Errorf("CODE: PCs %+v...", c.PCs[1])
	}
	if n := len(b.Records[3].(*Method).Lines); n != MaxLines {
		t.Errorf("METHOD: %d lines kept", n)
	}
	if c := b.Records[4].(*Class); len(c.Fields) != MaxFields || c.Fields[MaxFields-1].Offset != MaxFields-1 ||
		len(c.Statics) != MaxFields || c.Statics[MaxFields-1] != statics[MaxFields-1] {
		t.Errorf("CLASS: %d fields and %d statics kept", len(c.Fields), len(c.Statics))
	}
	if f, ok := b.Records[5].(*Free); !ok || f.Tag != 9 {
		t.Errorf("record after the cut ones: %+v", b.Records[5])
	}
	if b.ListsCut != 6 || b.StringsCut != 0 {
		t.Errorf("counted %d lists and %d strings cut, want 6 and 0", b.ListsCut, b.StringsCut)
	}
}

// FuzzReaderLimits: whatever the length and bytes of a string and the
// number of frames, what the reader keeps is within its limits, is the
// start of what was sent, and the cuts are counted.
func FuzzReaderLimits(f *testing.F) {
	f.Add([]byte("é"), uint32(MaxString+1), uint16(MaxFrames+1))
	f.Add([]byte("abc"), uint32(10), uint16(3))
	f.Add([]byte{0xff, 0x80}, uint32(3*MaxString), uint16(0))
	f.Fuzz(func(t *testing.T, unit []byte, n uint32, nframes uint16) {
		if len(unit) == 0 {
			return
		}
		n %= 3 * MaxString
		s := strings.Repeat(string(unit), int(n)/len(unit)+1)[:n]
		fr := make([]Frame, int(nframes)%(2*MaxFrames))
		b := readOne(t, &Method{ID: 1, Name: s}, &Alloc{TypeSig: s, Frames: fr})
		name, typ := b.Records[0].(*Method).Name, b.Records[1].(*Alloc).TypeSig
		wantCut := 0
		if len(s) > MaxString {
			wantCut = 2
			checkCut(t, "name", name, s)
			if utf8.ValidString(s) && !utf8.ValidString(name) {
				t.Errorf("valid UTF-8 cut inside a character")
			}
		} else if name != s || typ != s {
			t.Errorf("a string of %d bytes changed", len(s))
		}
		if name != typ || b.StringsCut != wantCut {
			t.Errorf("cut %d strings, want %d", b.StringsCut, wantCut)
		}
		if got := len(b.Records[1].(*Alloc).Frames); got != min(len(fr), MaxFrames) || (b.ListsCut == 1) != (len(fr) > MaxFrames) {
			t.Errorf("%d frames sent, %d kept, %d lists cut", len(fr), got, b.ListsCut)
		}
	})
}
