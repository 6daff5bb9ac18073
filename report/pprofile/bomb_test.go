package pprofile

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/djx-bpf/djx-bpf/report"
	"github.com/djx-bpf/djx-bpf/safety/safefs"
	"github.com/google/pprof/profile"
)

// TestReadBombs: `report` reads files of unknown origin. A 1 MB gzip once
// took it to 2.6 GiB; bombs must be refused with little memory.
func TestReadBombs(t *testing.T) {
	gz := func(data []byte, repeat int) []byte {
		var b bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
		for i := 0; i < repeat; i++ {
			zw.Write(data)
		}
		zw.Close()
		return b.Bytes()
	}
	// Empty samples: field 2, length 0. Two bytes each in the file, a
	// profile.Sample each once parsed.
	samples := bytes.Repeat([]byte{0x12, 0x00}, 1<<20)
	cases := []struct {
		name string
		data []byte
	}{
		{"gzip of zeros", gz(make([]byte, 1<<20), 1<<7)}, // 128 MiB
		{"gzip of empty samples", gz(samples, 8)},        // 8M samples in 16 MiB
		{"raw empty samples", bytes.Repeat(samples, 2)},  // 2M samples
	}
	for _, tc := range cases {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, err := Read(bytes.NewReader(tc.data))
		runtime.ReadMemStats(&after)
		if !errors.Is(err, safefs.ErrTooLarge) {
			t.Errorf("%s (%d bytes): %v, want ErrTooLarge", tc.name, len(tc.data), err)
		}
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 4*MaxBytes {
			t.Errorf("%s: allocated %d MiB", tc.name, grew>>20)
		}
	}
}

// expansionBomb is testReport's profile with one access sample rewritten:
// a location of lines lines (one function, many line numbers), repeated
// repeats times, in the access path or (inAlloc) in the allocation path
// after the object frame; copies more samples repeat it. A few KiB
// gzipped; lines×repeats×(1+copies) frames once expanded.
func expansionBomb(t testing.TB, lines, repeats, copies int, inAlloc bool) []byte {
	t.Helper()
	p, err := Encode(Options{}, testReport())
	if err != nil {
		t.Fatal(err)
	}
	var s *profile.Sample
	for _, x := range p.Sample {
		if label(x, "kind") == KindAccess {
			s = x
			break
		}
	}
	fn := &profile.Function{ID: uint64(len(p.Function) + 1), Name: "Bomb.frame"}
	p.Function = append(p.Function, fn)
	l := &profile.Location{ID: uint64(len(p.Location) + 1), Mapping: p.Mapping[0]}
	for i := range lines {
		l.Line = append(l.Line, profile.Line{Function: fn, Line: int64(i + 1)})
	}
	p.Location = append(p.Location, l)
	at := slices.IndexFunc(s.Location, func(l *profile.Location) bool {
		return strings.HasPrefix(l.Line[0].Function.Name, "[object] ")
	})
	var stack []*profile.Location
	if inAlloc {
		stack = append(stack, s.Location[:at+1]...)
	}
	for range repeats {
		stack = append(stack, l)
	}
	if !inAlloc {
		stack = append(stack, s.Location[at:]...)
	}
	s.Location = stack
	for range copies {
		p.Sample = append(p.Sample, s)
	}
	var b bytes.Buffer
	if err := p.Write(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestReadExpansionBomb: a location of many lines, named many times by a
// sample or by many samples, once expanded to millions of frames that
// were all joined into keys and into the error (a 2 KiB file took 2.5 GB
// and printed 400 MB). Refused early, with a short error and little
// memory.
func TestReadExpansionBomb(t *testing.T) {
	cases := []struct {
		name                   string
		lines, repeats, copies int
	}{
		{"sample of many locations", 1000, 4000, 0},           // refused before parsing
		{"sample of many frames", 1000, 1000, 0},              // 1M frames in one sample
		{"samples of many frames", 1000, 1, maxFrames / 1000}, // 16M+ frames in all
	}
	for _, tc := range cases {
		for _, inAlloc := range []bool{false, true} {
			data := expansionBomb(t, tc.lines, tc.repeats, tc.copies, inAlloc)
			if len(data) > 64<<10 {
				t.Fatalf("%s: bomb of %d bytes", tc.name, len(data))
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			reps, err := Read(bytes.NewReader(data))
			runtime.ReadMemStats(&after)
			// In the allocation path, the first sample may be refused as
			// naming no object of the metadata before the sizes add up.
			if err == nil || !inAlloc && !errors.Is(err, safefs.ErrTooLarge) {
				t.Errorf("%s (in allocation path: %v, %d bytes): %d reports, error %.300v; want ErrTooLarge", tc.name, inAlloc, len(data), len(reps), err)
				continue
			}
			t.Logf("%s: %v", tc.name, err)
			if len(err.Error()) > 300 {
				t.Errorf("%s: error of %d bytes", tc.name, len(err.Error()))
			}
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
				t.Errorf("%s (in allocation path: %v): allocated %d MiB", tc.name, inAlloc, grew>>20)
			}
		}
	}
}

// TestReadDeepStacks: the expansion limits leave room for djx-bpf's
// deepest stacks (an access path of 128 frames plus 64 inlined at the
// leaf, an allocation path of 64) and for locations of several lines, as
// pprof writes inlined frames.
func TestReadDeepStacks(t *testing.T) {
	r := testReport()
	o := &r.Objects[slices.IndexFunc(r.Objects, func(o report.Object) bool { return o.Site == "HotArrays.allocHot:12" })]
	for i := range 64 {
		o.AllocPath = append(o.AllocPath, fmt.Sprintf("Deep.alloc%d:%d", i, i+1))
	}
	for i := range 192 {
		o.Accesses[0].Path = append(o.Accesses[0].Path, fmt.Sprintf("Deep.access%d:%d", i, i+1))
	}
	r.Finish()
	got, err := Read(bytes.NewReader(encode(t, r)))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got[0], r) {
		t.Error("deep stacks: round trip differs")
	}

	// The same deep access path with its first 18 frames in a location of
	// 8 lines (innermost first) and one of 10.
	p, err := Encode(Options{}, r)
	if err != nil {
		t.Fatal(err)
	}
	merged := 0
	for _, s := range p.Sample {
		if label(s, "kind") != KindAccess || len(s.Location) < 192 {
			continue
		}
		merged++
		merge := func(ls []*profile.Location) *profile.Location {
			l := &profile.Location{ID: uint64(len(p.Location) + 1), Mapping: p.Mapping[0]}
			for _, x := range ls {
				l.Line = append(l.Line, x.Line...)
			}
			p.Location = append(p.Location, l)
			return l
		}
		s.Location = append([]*profile.Location{merge(s.Location[:8]), merge(s.Location[8:18])}, s.Location[18:]...)
	}
	if merged != 1 {
		t.Fatalf("%d deep samples", merged)
	}
	var b bytes.Buffer
	if err := p.Write(&b); err != nil {
		t.Fatal(err)
	}
	got, err = Read(&b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got[0], r) {
		t.Error("deep stacks in locations of several lines: round trip differs")
	}
}

// TestReadErrorsClipped: an error quotes at most a few hundred bytes of
// the profile's own text, however long its names.
func TestReadErrorsClipped(t *testing.T) {
	long := strings.Repeat("x", 1<<20)
	cases := map[string]func(p *profile.Profile){
		"sample type": func(p *profile.Profile) { p.SampleType[0].Type = long },
		"object frame": func(p *profile.Profile) {
			for _, f := range p.Function {
				if strings.HasPrefix(f.Name, "[object] ") {
					f.Name += long
				}
			}
		},
		"allocation path": func(p *profile.Profile) {
			for _, f := range p.Function {
				if strings.HasPrefix(f.Name, "HotArrays.main") {
					f.Name += long
				}
			}
		},
		"remainder root": func(p *profile.Profile) {
			for _, s := range p.Sample {
				if label(s, "kind") == KindRemainder {
					s.Label["where"] = []string{long}
				}
			}
		},
		"metadata": func(p *profile.Profile) {
			p.Comments = []string{CommentPrefix + `{"version":1,"report":{"jvm":` + strings.Repeat("9", 1<<20) + `}}`}
		},
	}
	for name, corrupt := range cases {
		p, err := Encode(Options{}, testReport())
		if err != nil {
			t.Fatal(err)
		}
		corrupt(p)
		var b bytes.Buffer
		if err := p.Write(&b); err != nil {
			t.Fatal(err)
		}
		_, err = Read(&b)
		switch {
		case err == nil:
			t.Errorf("%s: read", name)
		case len(err.Error()) > 400:
			t.Errorf("%s: error of %d bytes", name, len(err.Error()))
		default:
			t.Logf("%s: %v", name, err)
		}
	}
}
