package heap

import (
	"errors"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// noteExample is one example of the seed note, as its header states it.
type noteExample struct {
	header   string
	size     uint64
	hasRange bool
	lo, hi   uint64 // stated range in bytes
	shift    uint
	text     string // the 1STHEAPREGION lines under the header
}

// exampleHeaderRE reads the note's headers, e.g. "-- 512m, 0-shift",
// "-- 3G located [1G,4G], 0-shift", "— 29G, [35G,64G] 4-shift <--- ...".
var exampleHeaderRE = regexp.MustCompile(`^(?:--|—)\s*(\d+)([mG])\b[^\[]*?(?:\[(\d+)G,\s*(\d+)G\])?[,\s]*(\d)-shift`)

func noteExamples(t *testing.T) []noteExample {
	t.Helper()
	data, err := os.ReadFile("testdata/openj9/note-examples.txt")
	if err != nil {
		t.Fatal(err)
	}
	var out []noteExample
	for _, line := range strings.Split(string(data), "\n") {
		if m := exampleHeaderRE.FindStringSubmatch(line); m != nil {
			n, _ := strconv.ParseUint(m[1], 10, 64)
			ex := noteExample{header: line, size: n << 20}
			if m[2] == "G" {
				ex.size = n * GiB
			}
			if m[3] != "" {
				lo, _ := strconv.ParseUint(m[3], 10, 64)
				hi, _ := strconv.ParseUint(m[4], 10, 64)
				ex.hasRange, ex.lo, ex.hi = true, lo*GiB, hi*GiB
			}
			s, _ := strconv.ParseUint(m[5], 10, 8)
			ex.shift = uint(s)
			out = append(out, ex)
			continue
		}
		if strings.HasPrefix(line, "1STHEAPREGION") && len(out) > 0 {
			out[len(out)-1].text += line + "\n"
		}
	}
	if len(out) != 10 {
		t.Fatalf("found %d examples in the note, want 10", len(out))
	}
	return out
}

// TestNoteExamplesParse: every javacore excerpt in the note parses to the
// range and shift its header states.
func TestNoteExamplesParse(t *testing.T) {
	for _, ex := range noteExamples(t) {
		t.Run(ex.header, func(t *testing.T) {
			if strings.Count(ex.text, "\n") != 3 {
				t.Fatalf("want 3 region lines, got:\n%s", ex.text)
			}
			jc, err := ParseJavacoreHeap(ex.text)
			if err != nil {
				t.Fatal(err)
			}
			g, err := jc.Geometry()
			if err != nil {
				t.Fatal(err)
			}
			if ex.hasRange && (g.Reserved.Start != ex.lo || g.Reserved.End != ex.hi) {
				t.Errorf("range [%#x, %#x), note says [%dG, %dG]", g.Reserved.Start, g.Reserved.End, ex.lo/GiB, ex.hi/GiB)
			}
			if g.Reserved.End-g.Reserved.Start != ex.size {
				t.Errorf("range holds %d MiB, -Xmx %d MiB", (g.Reserved.End-g.Reserved.Start)>>20, ex.size>>20)
			}
			if g.Shift != ex.shift || !g.ShiftDerived || g.Base != 0 {
				t.Errorf("shift %d (derived %v) base %#x, note says shift %d", g.Shift, g.ShiftDerived, g.Base, ex.shift)
			}
			if len(g.Regions) != 3 || g.Regions[0].Name != "Generational/Tenured Region" {
				t.Errorf("regions %+v", g.Regions)
			}
			// A reference to the top of the heap decodes back to it.
			top := g.Reserved.End - 1<<g.Shift
			if ref, ok := g.Encode(top); !ok || g.Decode(ref) != top {
				t.Errorf("top of heap %#x does not round-trip", top)
			}
		})
	}
}

// TestNoteExamplesPlace: the placement model reproduces every example,
// heap size -> range -> shift.
func TestNoteExamplesPlace(t *testing.T) {
	for _, ex := range noteExamples(t) {
		t.Run(ex.header, func(t *testing.T) {
			want, err := ParseJavacore(ex.text)
			if err != nil {
				t.Fatal(err)
			}
			p, err := Place(ex.size, ZLinuxPolicy())
			if err != nil {
				t.Fatal(err)
			}
			if p.Range.Start != want.Reserved.Start || p.Range.End != want.Reserved.End || p.Shift != ex.shift {
				t.Errorf("model [%#x, %#x) shift %d; javacore [%#x, %#x), note shift %d",
					p.Range.Start, p.Range.End, p.Shift, want.Reserved.Start, want.Reserved.End, ex.shift)
			}
			g := p.Geometry()
			if err := g.Validate(); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestPlaceNoteCases covers the note's prose: its "case 1"/"case 2"
// estimated-start examples and the 28 GiB boundary of step 4.
func TestPlaceNoteCases(t *testing.T) {
	for _, tc := range []struct {
		name   string
		size   uint64
		p      Policy
		lo, hi uint64
		shift  uint
	}{
		// "estimated heap start address set to 0GB ... 5GB ... [3GB,8GB]", shift 1.
		{"case 1", 5 * GiB, Policy{Attempts: []Attempt{{Shift: 1}, {Shift: 2}}, LowestAddress: DefaultLowestAddress}, 3 * GiB, 8 * GiB, 1},
		// "estimated heap start address set to 4GB ... [11GB,16GB]", shift 2.
		{"case 2", 5 * GiB, Policy{Attempts: []Attempt{{Shift: 1, EstimatedStart: 4 * GiB}, {Shift: 2, EstimatedStart: 4 * GiB}}, LowestAddress: DefaultLowestAddress}, 11 * GiB, 16 * GiB, 2},
		// Step 4's limit: 28 GiB still gets shift 3 at [4G, 32G].
		{"28G", 28 * GiB, ZLinuxPolicy(), 4 * GiB, 32 * GiB, 3},
		// Non-Z: no shifts 1 and 2, so 5 GiB goes below 32 GiB with shift 3.
		{"non-Z 5G", 5 * GiB, DefaultPolicy(), 27 * GiB, 32 * GiB, 3},
		{"non-Z 3G", 3 * GiB, DefaultPolicy(), 1 * GiB, 4 * GiB, 0},
		// Occupied low memory pushes a 3 GiB heap off [1G, 4G] to shift 1.
		{"occupied", 3 * GiB, Policy{Attempts: ZLinuxPolicy().Attempts, LowestAddress: DefaultLowestAddress,
			Occupied: []Range{{Start: 2 * GiB, End: 2*GiB + 4096}}}, 5 * GiB, 8 * GiB, 1},
	} {
		p, err := Place(tc.size, tc.p)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if p.Range.Start != tc.lo || p.Range.End != tc.hi || p.Shift != tc.shift {
			t.Errorf("%s: [%dG, %dG) shift %d, want [%dG, %dG) shift %d", tc.name,
				p.Range.Start/GiB, p.Range.End/GiB, p.Shift, tc.lo/GiB, tc.hi/GiB, tc.shift)
		}
	}
	if _, err := Place(65*GiB, ZLinuxPolicy()); !errors.Is(err, ErrNoPlacement) {
		t.Errorf("65 GiB: err = %v, want ErrNoPlacement", err)
	}
}

func TestJavacoreSynthetic(t *testing.T) {
	// A hand-made javacore in OpenJ9's layout (no OpenJ9 runs here): an
	// amd64 JVM, whose shifts are 0, 3 and 4, with its heap top at 32 GiB.
	data, err := os.ReadFile("testdata/openj9/javacore-amd64-synthetic.txt")
	if err != nil {
		t.Fatal(err)
	}
	jc, err := ParseJavacoreHeap(string(data))
	if err != nil {
		t.Fatal(err)
	}
	if jc.Arch != "amd64" || jc.Compressed == nil || !*jc.Compressed || len(jc.Spaces) != 1 || len(jc.Args) != 3 {
		t.Errorf("header: arch %q compressed %v spaces %q args %q", jc.Arch, jc.Compressed, jc.Spaces, jc.Args)
	}
	g, err := jc.Geometry()
	if err != nil {
		t.Fatal(err)
	}
	if g.Shift != 3 || g.Reserved.Start != 0x680000000 || g.Reserved.End != 32*GiB {
		t.Errorf("got %v", g.String())
	}

	// A stated shift wins over the derived one.
	forced := strings.Replace(string(data), "-Xcompressedrefs", "-XXgc:forcedShiftingCompressionAmount=4", 1)
	g, err = ParseJavacore(forced)
	if err != nil {
		t.Fatal(err)
	}
	if g.Shift != 4 || g.ShiftDerived {
		t.Errorf("forced shift: got %v", g.String())
	}
	// -Xnocompressedrefs: full references.
	g, err = ParseJavacore(strings.Replace(string(data), "-Xcompressedrefs", "-Xnocompressedrefs", 1))
	if err != nil {
		t.Fatal(err)
	}
	if g.Mode != RefsFull {
		t.Errorf("nocompressedrefs: got %v", g.String())
	}
}

func TestJavacoreMalformed(t *testing.T) {
	const good = "1STHEAPREGION  0x000003FFA4081E10 0x00000000E0000000 0x00000000E0600000 0x0000000000600000 Generational/Tenured Region"
	for _, tc := range []struct {
		name  string
		line  string
		field string
	}{
		{"short", "1STHEAPREGION  0x000003FFA4081E10 0x00000000E0000000", "end"},
		{"no name", "1STHEAPREGION  0x000003FFA4081E10 0x00000000E0000000 0x00000000E0600000 0x0000000000600000", "name"},
		{"bad start", strings.Replace(good, "0x00000000E0000000", "0x00000000E000000G", 1), "start"},
		{"no 0x", strings.Replace(good, "0x00000000E0600000", "00000000E0600000", 1), "end"},
		{"end below start", strings.Replace(good, "0x00000000E0600000", "0x00000000D0600000", 1), "end"},
		{"size mismatch", strings.Replace(good, "0x0000000000600000", "0x0000000000700000", 1), "size"},
		{"bad id", strings.Replace(good, "0x000003FFA4081E10", "--", 1), "id"},
	} {
		text := "NULL\n1STHEAPTYPE    Object Memory\n" + good + "\n" + tc.line + "\n"
		_, err := ParseJavacoreHeap(text)
		var je *JavacoreError
		if !errors.As(err, &je) {
			t.Errorf("%s: err = %v, want *JavacoreError", tc.name, err)
			continue
		}
		if je.Line != 4 || je.Field != tc.field || je.Tag != "1STHEAPREGION" {
			t.Errorf("%s: line %d field %q (%v), want line 4 field %q", tc.name, je.Line, je.Field, err, tc.field)
		}
		if !strings.Contains(err.Error(), "javacore line 4") {
			t.Errorf("%s: message %q does not name the line", tc.name, err)
		}
	}
	if _, err := ParseJavacoreHeap("1CIVMVERSION nothing\n"); err == nil {
		t.Error("accepted a javacore without heap regions")
	}
	bad := "2CIUSERARG -XXgc:forcedShiftingCompressionAmount=7\n" + good + "\n"
	var je *JavacoreError
	if _, err := ParseJavacoreHeap(bad); !errors.As(err, &je) || je.Line != 1 {
		t.Errorf("bad forced shift: %v", err)
	}
}
