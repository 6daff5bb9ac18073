package agentwire

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// sample holds one record of each type, with fixed values.
var sample = []struct {
	name string
	rec  Record
}{
	{"hello", &Hello{ProtoVersion: 1, PID: 4242, Interval: 1024, MinSize: 1024, Monotonic: 123456789,
		VMName: "OpenJDK 64-Bit Server VM", VMVersion: "17.0.9+9-Debian-1deb12u1", Mode: "attach", StackSignal: 42}},
	{"method", &Method{ID: 0x7f00deadbeef, ClassSig: "LAllocSite;", Name: "allocBig", Sig: "()[J",
		SourceFile: "AllocSite.java", Lines: []LineEntry{{0, 40}, {5, 41}}}},
	{"alloc", &Alloc{Time: 1000, Addr: 0xffe00010, Size: 4112, TID: 77, TypeSig: "[J",
		Frames: []Frame{{0x7f00deadbeef, 3}, {0x7f00cafe0000, 17}, {0x7f00cafe0008, -1}}, Tag: 0x1122334455667788}},
	{"stats", &Stats{Callbacks: 10, BelowMinSize: 6, Dropped: 1, StackErrors: 2, AllocsSent: 3,
		Frees: 4, GCs: 5, Reconciles: 6, Reconciled: 7, ReconcileSkipped: 8, ReconcileLimited: 9, ReconcileNanos: 10,
		StackSignals: 11, StacksSent: 12, StacksDropped: 13, CodeSent: 14, CodeDropped: 15, SignalsChained: 16,
		Untagged: 17, UntaggedFreed: 18, AllocNanos: 19, StackNanos: 20, CodeNanos: 21, WriterCPUNanos: 22,
		ProcessCPUNanos: 23, Tracked: 24, TrackedLive: 25, CensusNanos: 26,
		ClassesSent: 27, ClassesDropped: 28, TypesNanos: 29, RawStacks: 30, RawFallbacks: 31}},
	{"bye", &Bye{Reason: "vmdeath"}},
	{"error", &ErrorRec{Message: "GetStackTrace failed: 15"}},
	{"interval", &Interval{Time: 123456789, Interval: 8192}},
	{"free", &Free{Time: 2000, Tag: 42}},
	{"gcstart", &GCStart{Time: 3000}},
	{"gcfinish", &GCFinish{Time: 4000}},
	{"reconcile", &Reconcile{Time: 5000, Objects: []TagAddr{{42, 0xffe00010}, {43, 0xffe40020}}}},
	{"stack", &Stack{Time: 6000, TID: 77, Status: 3, PC: 0x7f00c0de1234,
		Frames: []Frame{{0x7f00deadbeef, 12}, {0x7f00cafe0000, 17}, {0x7f00cafe0008, -3}}}},
	{"stack_noenv", &Stack{Time: 6001, TID: 78, Status: StackNoEnv, PC: 0x7f00c0de5678}},
	{"code", &Code{Time: 7000, Method: 0x7f00cafe0000, Start: 0x7f00c0de0000, Size: 0x1a0,
		PCs: []PCInfo{
			{PC: 0x7f00c0de0040, Frames: []Frame{{0x7f00cafe0000, 0}}},
			{PC: 0x7f00c0de0088, Frames: []Frame{{0x7f00deadbeef, 5}, {0x7f00cafe0000, 17}}},
		}}},
	{"codeunload", &CodeUnload{Time: 8000, Method: 0x7f00cafe0000, Start: 0x7f00c0de0000}},
	{"stub", &Stub{Time: 9000, Start: 0x7f00b0000000, Size: 0x4000, Name: "Interpreter"}},
	{"censusstart", &CensusStart{Time: 9100, Kind: CensusAttach}},
	{"censuspath", &CensusPath{ID: 7, Parent: 3, Hop: "java.util.HashMap.table"}},
	{"census", &Census{Time: 9200, Addr: 0xffe80000, Size: 262160, Tag: 44, Path: 7, Kind: CensusAttach, TypeSig: "[J"}},
	{"censusend", &CensusEnd{Time: 9300, Kind: CensusAttach, Status: CensusHolders, Objects: 1, Bytes: 262160,
		HeapObjects: 1000, HeapBytes: 1 << 20, HeapWalkNanos: 1e6, HolderWalkNanos: 5e6, EmitNanos: 2e5,
		Paths: 9, Reached: 900, Unreachable: 3, Unplaced: 0, Note: "", Strays: 1, HeapWalkPasses: 2, PauseMaxNanos: 3e6}},
	{"typesinfo", &TypesInfo{OK: true, Fields: true, OopBase: 0, OopShift: 3, OopBytes: 4,
		KlassBase: 0x7f0000000000, KlassShift: 0, KlassBytes: 4}},
	{"typesoff", &TypesInfo{Reason: "not HotSpot: libjvm exports no gHotSpotVMStructs"}},
	{"class", &Class{Time: 9400, Klass: 0x7f0000123450, Narrow: 0x123450, Sig: "Ljava/util/TreeMap$Entry;",
		Fields: []Field{{12, "color", "Z", false}, {16, "key", "Ljava/lang/Object;", false}, {20, "value", "Ljava/lang/Object;", false}}}},
	{"classarray", &Class{Time: 9401, Klass: 0x7f0000001000, Narrow: 0x1000, Sig: "[J"}},
	{"typesstatics", &TypesInfo{OK: true, Fields: true, Statics: true, OopShift: 3, OopBytes: 4, KlassBytes: 8}},
	{"typescompact", &TypesInfo{OK: true, Fields: true, Statics: true, OopShift: 3, OopBytes: 4,
		KlassBase: 0x6c000000, KlassShift: 10, KlassBytes: 4, KlassInMark: 42}},
	{"classstatics", &Class{Time: 9402, Klass: 0x7f0000002000, Narrow: 0x2000, Sig: "Ljava/lang/Boolean;",
		Fields:  []Field{{12, "value", "Z", false}},
		Statics: []Field{{112, "TRUE", "Ljava/lang/Boolean;", true}, {116, "FALSE", "Ljava/lang/Boolean;", true}}}},
	{"root", &Root{Time: 9500, Addr: 0xffe80000, Kind: RootStackLocal, Rank: 0, Reach: 2,
		Hop: `RootsSite.main:31 local #1 (thread "main")`}},
	{"rootsend", &RootsEnd{Time: 9600, Roots: 62, FollowNanos: 1.2e6, TagsNanos: 2e4, Status: RootsCapped,
		Note: "more than 2097152 roots: the pass kept the first", Refs: 84, Objects: 62, Threads: 7, Gone: 1,
		TagsMaxNanos: 1e4, EmitNanos: 6e4}},
	{"allocraw", &AllocRaw{Time: 1001, Addr: 0xffe00020, Size: 4112, TID: 77, TypeSig: "[J",
		Frames: []RawFrame{{0x7f00c0de0000 | 1, 0x7f00c0de0088, 42}, {0x7f00b0000000 | 2, 0x7f00aa000010, 0x7f00aa000123}},
		End:    1, Tag: 0x1122334455667789}},
	{"unknown", &Unknown{RecType: 99, Body: []byte{1, 2, 3}}},
}

func encode(t testing.TB, batches ...*Batch) []byte {
	t.Helper()
	var buf bytes.Buffer
	e := NewEncoder(&buf)
	for _, b := range batches {
		if err := e.WriteBatch(b); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

func readAll(r io.Reader) ([]*Batch, error) {
	rd := NewReader(r)
	var out []*Batch
	for {
		b, err := rd.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, b)
	}
}

func TestRoundTrip(t *testing.T) {
	var recs []Record
	for _, s := range sample {
		recs = append(recs, s.rec)
	}
	in := []*Batch{
		{Watermark: 1, Records: recs},
		{Watermark: 2, Records: []Record{}},
		{Watermark: 3, Records: []Record{&Alloc{TypeSig: "[B"}, &Method{}}},
	}
	got, err := readAll(bytes.NewReader(encode(t, in...)))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, in) {
		t.Errorf("round trip mismatch:\n got %#v\nwant %#v", got, in)
	}
}

// TestGolden pins the byte layout of every record type; refresh with
// `go test ./agentwire/ -run TestGolden -update` after a deliberate change.
func TestGolden(t *testing.T) {
	for _, s := range sample {
		t.Run(s.name, func(t *testing.T) {
			raw := encode(t, &Batch{Watermark: 0x0102030405060708, Records: []Record{s.rec}})
			got := hex.Dump(raw)
			path := filepath.Join("testdata", s.name+".golden")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create)", err)
			}
			if got != string(want) {
				t.Errorf("%s: encoding changed:\n got\n%s\nwant\n%s", path, got, want)
			}
			b, err := NewReader(bytes.NewReader(raw)).Next()
			if err != nil {
				t.Fatal(err)
			}
			if len(b.Records) != 1 || !reflect.DeepEqual(b.Records[0], s.rec) {
				t.Errorf("decoded %#v, want %#v", b.Records, s.rec)
			}
		})
	}
}

func TestTrailingFieldsIgnored(t *testing.T) {
	raw := encode(t, &Batch{Records: []Record{&Bye{Reason: "detach"}}})
	// Grow the BYE body by 4 bytes, as a newer agent might.
	raw = append(raw, 0xaa, 0xbb, 0xcc, 0xdd)
	binary.LittleEndian.PutUint32(raw[8:], binary.LittleEndian.Uint32(raw[8:])+4)
	binary.LittleEndian.PutUint32(raw[HeaderLen:], binary.LittleEndian.Uint32(raw[HeaderLen:])+4)
	b, err := NewReader(bytes.NewReader(raw)).Next()
	if err != nil {
		t.Fatal(err)
	}
	if bye, ok := b.Records[0].(*Bye); !ok || bye.Reason != "detach" {
		t.Errorf("got %#v", b.Records[0])
	}
}

// TestCommandUntag: 'H' and the size, little-endian.
func TestCommandUntag(t *testing.T) {
	got := CommandUntag(512 << 10)
	want := []byte{'H', 0, 0, 8, 0, 0, 0, 0, 0}
	if !bytes.Equal(got, want) {
		t.Errorf("CommandUntag(512 KiB) = %v, want %v", got, want)
	}
}

// TestOlderAgent: records from an agent that predates a trailing field
// decode with the field zero.
func TestOlderAgent(t *testing.T) {
	for _, tc := range []struct {
		rec  Record
		trim int
		want Record
	}{
		{&Alloc{Time: 1, TypeSig: "[J", Frames: []Frame{{1, 2}}, Tag: 9}, 8, &Alloc{Time: 1, TypeSig: "[J", Frames: []Frame{{1, 2}}}},
		{&Stats{Callbacks: 1, AllocsSent: 2, Frees: 3, ReconcileNanos: 4}, 28 * 8, &Stats{Callbacks: 1, AllocsSent: 2}},
		// Half a trailing field is ignored, not an error.
		{&Stats{Callbacks: 1, GCs: 3}, 27*8 - 4, &Stats{Callbacks: 1}},
		// An agent from before access stacks: no stack counters.
		{&Stats{Callbacks: 1, ReconcileNanos: 4, StackSignals: 5, SignalsChained: 6}, 21 * 8,
			&Stats{Callbacks: 1, ReconcileNanos: 4}},
		// An agent from before untagged humongous tracking: no untagged counters.
		{&Stats{Callbacks: 1, SignalsChained: 6, Untagged: 7, UntaggedFreed: 8}, 15 * 8,
			&Stats{Callbacks: 1, SignalsChained: 6}},
		{&Hello{ProtoVersion: 1, Mode: "launch", StackSignal: 42}, 4, &Hello{ProtoVersion: 1, Mode: "launch"}},
		// An agent from before statics: CLASS ends with its instance fields.
		{&Class{Sig: "LA;", Fields: []Field{{Offset: 12, Name: "a", Sig: "I"}}}, 4,
			&Class{Sig: "LA;", Fields: []Field{{Offset: 12, Name: "a", Sig: "I"}}}},
		// ROOTS_END without its trailing counters.
		{&RootsEnd{Roots: 3, Note: "n", Refs: 4, EmitNanos: 5}, 6 * 8, &RootsEnd{Roots: 3, Note: "n"}},
	} {
		raw := encode(t, &Batch{Records: []Record{tc.rec}})
		le := binary.LittleEndian
		raw = raw[:len(raw)-tc.trim]
		le.PutUint32(raw[8:], le.Uint32(raw[8:])-uint32(tc.trim))
		le.PutUint32(raw[HeaderLen:], le.Uint32(raw[HeaderLen:])-uint32(tc.trim))
		b, err := NewReader(bytes.NewReader(raw)).Next()
		if err != nil {
			t.Fatalf("%T: %v", tc.rec, err)
		}
		if !reflect.DeepEqual(b.Records[0], tc.want) {
			t.Errorf("got %#v, want %#v", b.Records[0], tc.want)
		}
	}
}

// TestReconcileCount: a corrupt object count is an error, not an allocation.
func TestReconcileCount(t *testing.T) {
	raw := encode(t, &Batch{Records: []Record{&Reconcile{Time: 1, Objects: []TagAddr{{1, 2}}}}})
	binary.LittleEndian.PutUint32(raw[HeaderLen+RecHeaderLen+8:], 1<<31)
	_, err := NewReader(bytes.NewReader(raw)).Next()
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "truncated RECONCILE") {
		t.Fatalf("error %v, want truncated RECONCILE", err)
	}
}

// TestFrameCounts: corrupt frame and PC counts in STACK and CODE are
// errors, not allocations.
func TestFrameCounts(t *testing.T) {
	le := binary.LittleEndian
	body := HeaderLen + RecHeaderLen
	for _, tc := range []struct {
		name string
		rec  Record
		off  int // of the count in the body
		want string
	}{
		{"stack frames", &Stack{Time: 1, Frames: []Frame{{1, 2}}}, 24, "truncated STACK"},
		{"code pcs", &Code{Time: 1, PCs: []PCInfo{{PC: 1, Frames: []Frame{{1, 2}}}}}, 28, "truncated CODE"},
		{"code frames", &Code{Time: 1, PCs: []PCInfo{{PC: 1, Frames: []Frame{{1, 2}}}}}, 40, "truncated CODE"},
		{"stub name", &Stub{Name: "x"}, 20, "truncated STUB"},
	} {
		for _, n := range []uint32{2, 1 << 31, math.MaxUint32} {
			raw := encode(t, &Batch{Records: []Record{tc.rec}})
			le.PutUint32(raw[body+tc.off:], n)
			_, err := NewReader(bytes.NewReader(raw)).Next()
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s = %d: error %v, want %s", tc.name, n, err, tc.want)
			}
		}
	}
	// A cut CODE_UNLOAD.
	raw := encode(t, &Batch{Records: []Record{&CodeUnload{Time: 1}}})
	raw = raw[:len(raw)-1]
	le.PutUint32(raw[8:], le.Uint32(raw[8:])-1)
	le.PutUint32(raw[HeaderLen:], le.Uint32(raw[HeaderLen:])-1)
	if _, err := NewReader(bytes.NewReader(raw)).Next(); !errors.Is(err, ErrCorrupt) {
		t.Errorf("short CODE_UNLOAD: error %v", err)
	}
}

func TestCorrupt(t *testing.T) {
	good := encode(t,
		&Batch{Watermark: 1, Records: []Record{&Stats{}}},
		&Batch{Watermark: 2, Records: []Record{&Bye{Reason: "x"}, &Alloc{TypeSig: "[J", Frames: []Frame{{1, 2}}}}},
	)
	second := len(encode(t, &Batch{Watermark: 1, Records: []Record{&Stats{}}}))
	le := binary.LittleEndian
	alloc := second + HeaderLen + RecHeaderLen + 5 // start of the ALLOC record
	tests := []struct {
		name   string
		mutate func(b []byte) []byte
		want   string
	}{
		{"magic", func(b []byte) []byte { b[second] = 'X'; return b }, "agent stream: batch 1: bad magic"},
		{"version", func(b []byte) []byte { le.PutUint16(b[second+4:], 9); return b }, "batch 1: unsupported version 9"},
		{"huge payload", func(b []byte) []byte { le.PutUint32(b[second+8:], 1<<30); return b }, "batch 1: payload of 1073741824 bytes exceeds"},
		{"too many records", func(b []byte) []byte { le.PutUint32(b[second+12:], 1<<20); return b }, "batch 1: 1048576 records cannot fit"},
		{"fewer records", func(b []byte) []byte { le.PutUint32(b[second+12:], 1); return b }, "batch 1: 70 bytes after the last of 1 records"},
		{"body overrun", func(b []byte) []byte { le.PutUint32(b[alloc:], 1000); return b }, "batch 1: record 1: ALLOC body of 1000 bytes overruns payload"},
		{"short alloc", func(b []byte) []byte {
			// Shrink the ALLOC body; keep the batch consistent.
			le.PutUint32(b[alloc:], 20)
			le.PutUint32(b[second+8:], uint32(5+RecHeaderLen+RecHeaderLen+20))
			return b[:alloc+RecHeaderLen+20]
		}, "agent stream: batch 1: record 1: truncated ALLOC"},
		{"frame count", func(b []byte) []byte { le.PutUint32(b[alloc+RecHeaderLen+28:], 1<<31); return b }, "batch 1: record 1: truncated ALLOC"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.mutate(append([]byte(nil), good...))
			got, err := readAll(bytes.NewReader(b))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if !errors.Is(err, ErrCorrupt) {
				t.Errorf("%v is not ErrCorrupt", err)
			}
			if len(got) != 1 {
				t.Errorf("got %d good batches before the error, want 1", len(got))
			}
		})
	}
}

func TestTruncated(t *testing.T) {
	raw := encode(t, &Batch{Watermark: 5, Records: []Record{sample[1].rec, sample[2].rec}})
	for n := 1; n < len(raw); n++ {
		_, err := NewReader(bytes.NewReader(raw[:n])).Next()
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("cut at %d: error %v, want unexpected EOF", n, err)
		}
	}
	if _, err := NewReader(bytes.NewReader(nil)).Next(); err != io.EOF {
		t.Fatalf("empty stream: %v, want io.EOF", err)
	}
}

// FuzzReader: any input either decodes or fails with an error, never a panic
// or a huge allocation; what decodes re-encodes to a stream that decodes to
// the same batches.
func FuzzReader(f *testing.F) {
	for _, s := range sample {
		f.Add(encode(f, &Batch{Watermark: 7, Records: []Record{s.rec}}))
	}
	var all []Record
	for _, s := range sample {
		all = append(all, s.rec)
	}
	f.Add(encode(f, &Batch{Records: all}, &Batch{Watermark: 9}))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, _ := readAll(bytes.NewReader(data))
		if len(got) == 0 {
			return
		}
		again, err := readAll(bytes.NewReader(encode(t, got...)))
		if err != nil {
			t.Fatalf("re-encoded stream does not decode: %v", err)
		}
		if !reflect.DeepEqual(normalize(again), normalize(got)) {
			t.Fatalf("re-encoding changed the batches")
		}
	})
}

// normalize maps empty slices to nil so that DeepEqual compares content.
// It zeroes the counts of what the reader cut, which a re-read of what was
// cut does not repeat.
func normalize(bs []*Batch) []*Batch {
	for _, b := range bs {
		b.StringsCut, b.ListsCut = 0, 0
		for _, r := range b.Records {
			switch r := r.(type) {
			case *Method:
				if len(r.Lines) == 0 {
					r.Lines = nil
				}
			case *Alloc:
				if len(r.Frames) == 0 {
					r.Frames = nil
				}
			case *Reconcile:
				if len(r.Objects) == 0 {
					r.Objects = nil
				}
			case *Stack:
				if len(r.Frames) == 0 {
					r.Frames = nil
				}
			case *Code:
				if len(r.PCs) == 0 {
					r.PCs = nil
				}
				for i := range r.PCs {
					if len(r.PCs[i].Frames) == 0 {
						r.PCs[i].Frames = nil
					}
				}
			case *Class:
				if len(r.Fields) == 0 {
					r.Fields = nil
				}
			case *Unknown:
				if len(r.Body) == 0 {
					r.Body = nil
				}
			}
		}
	}
	return bs
}
