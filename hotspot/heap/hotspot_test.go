package heap

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// renderGeometry is the golden form of a Geometry.
func renderGeometry(g Geometry) string {
	var b strings.Builder
	fmt.Fprintf(&b, "vm %s\n", g.VM)
	fmt.Fprintf(&b, "reserved %#016x %#016x\n", g.Reserved.Start, g.Reserved.End)
	fmt.Fprintf(&b, "mode %s base %#x shift %d derived %v\n", g.Mode, g.Base, g.Shift, g.ShiftDerived)
	if g.HasKlass {
		fmt.Fprintf(&b, "klass base %#x shift %d\n", g.KlassBase, g.KlassShift)
	}
	for _, r := range g.Regions {
		fmt.Fprintf(&b, "region %#016x %#016x %s\n", r.Start, r.End, r.Name)
	}
	fmt.Fprintf(&b, "summary %s\n", g.String())
	return b.String()
}

func checkGolden(t *testing.T, golden, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if got != string(want) {
		t.Errorf("mismatch with %s\ngot:\n%s\nwant:\n%s", golden, got, want)
	}
}

var xmxRE = regexp.MustCompile(`-Xmx(\d+)([mg])`)

// xmxBytes returns the -Xmx value in flags.
func xmxBytes(t *testing.T, flags string) uint64 {
	t.Helper()
	m := xmxRE.FindStringSubmatch(flags)
	if m == nil {
		t.Fatalf("no -Xmx in %q", flags)
	}
	n, _ := strconv.ParseUint(m[1], 10, 64)
	if m[2] == "g" {
		return n << 30
	}
	return n << 20
}

// TestVMInfoGolden parses every VM.info fixture made by
// testdata/hotspot/gen.sh and checks it against two other views of the same
// JVM: its startup log (-Xlog:gc+heap+coops) and GC.heap_info.
func TestVMInfoGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/hotspot/*.vminfo")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no fixtures in testdata/hotspot; run testdata/hotspot/gen.sh")
	}
	for _, f := range files {
		base := strings.TrimSuffix(f, ".vminfo")
		t.Run(filepath.Base(base), func(t *testing.T) {
			read := func(ext string) string {
				b, err := os.ReadFile(base + ext)
				if err != nil {
					t.Fatal(err)
				}
				return string(b)
			}
			g, err := ParseVMInfo(read(".vminfo"))
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, base+".golden", renderGeometry(g))
			if g.VM != HotSpot || g.Version == "" {
				t.Errorf("VM %v version %q", g.VM, g.Version)
			}
			flags := read(".flags")

			// The JVM's own startup log is an independent statement.
			coops, err := ParseCompressedOops(read(".coops"))
			switch {
			case errors.Is(err, ErrNoCompressedOops):
				if g.Mode != RefsFull {
					t.Errorf("no compressed oops in the startup log, but VM.info parsed to %v", g.Mode)
				}
			case err != nil:
				t.Fatal(err)
			default:
				if coops.Mode != g.Mode || coops.Base != g.Base || coops.Shift != g.Shift || coops.HeapStart != g.Reserved.Start {
					t.Errorf("startup log %+v, VM.info %v", coops, g.String())
				}
				if want := xmxBytes(t, flags); coops.HeapMB<<20 != want {
					t.Errorf("heap size %d MiB, -Xmx is %d MiB", coops.HeapMB, want>>20)
				}
			}
			if strings.Contains(flags, "ObjectAlignmentInBytes=16") && g.Shift != 4 {
				t.Errorf("16-byte alignment with shift %d", g.Shift)
			}

			// GC.heap_info's generations lie inside the reservation.
			info, err := ParseHeapInfo(read(".heapinfo"))
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range info.Ranges {
				if !g.Contains(r.Start) || !g.Contains(r.End-1) {
					t.Errorf("GC.heap_info range %s [%#x, %#x) outside %s", r.Name, r.Start, r.End, g.String())
				}
			}
			if g.Mode.Compressed() {
				for _, addr := range []uint64{g.Reserved.Start, g.Reserved.End - 1<<g.Shift} {
					ref, ok := g.Encode(addr)
					if !ok || g.Decode(ref) != addr {
						t.Errorf("heap address %#x does not round-trip (ref %#x ok %v)", addr, ref, ok)
					}
				}
			}
		})
	}
}

func TestParseCompressedOops(t *testing.T) {
	for _, tc := range []struct {
		line        string
		mode        RefMode
		start, base uint64
		mb          uint64
		shift       uint
	}{
		{"Heap address: 0x00000000fc000000, size: 64 MB, Compressed Oops mode: 32-bit", RefsUnscaled, 0xfc000000, 0, 64, 0},
		{"[0.004s][debug][gc,heap,coops] Heap address: 0x0000000700000000, size: 4096 MB, Compressed Oops mode: Zero based, Oop shift amount: 3",
			RefsZeroBased, 0x700000000, 0, 4096, 3},
		{"Heap address: 0x0000001001000000, size: 31744 MB, Compressed Oops mode: Non-zero disjoint base: 0x0000001000000000, Oop shift amount: 3",
			RefsDisjointBase, 0x1001000000, 0x1000000000, 31744, 3},
		{"Heap address: 0x0000000900200000, size: 2048 MB, Compressed Oops mode: Non-zero based: 0x0000000900000000, Oop shift amount: 3",
			RefsHeapBased, 0x900200000, 0x900000000, 2048, 3},
	} {
		c, err := ParseCompressedOops(tc.line)
		if err != nil {
			t.Errorf("%s: %v", tc.line, err)
			continue
		}
		if c.Mode != tc.mode || c.HeapStart != tc.start || c.Base != tc.base || c.HeapMB != tc.mb || c.Shift != tc.shift {
			t.Errorf("%s: got %+v", tc.line, c)
		}
	}
	for _, bad := range []string{
		"Heap address: 0x0000000080000000, size: 2048 MB, Compressed Oops mode: Sideways",
		"Heap address: 0x0000000080000000, size: 2048 MB, Compressed Oops mode: Zero based, Oop shift amount: 9",
		// Mode and base disagree.
		"Heap address: 0x0000000080000000, size: 2048 MB, Compressed Oops mode: 32-bit: 0x0000000900000000",
	} {
		if _, err := ParseCompressedOops(bad); err == nil || errors.Is(err, ErrNoCompressedOops) {
			t.Errorf("%s: err = %v, want a parse error", bad, err)
		}
	}
	if _, err := ParseCompressedOops("nothing here"); !errors.Is(err, ErrNoCompressedOops) {
		t.Errorf("err = %v, want ErrNoCompressedOops", err)
	}
}

func TestParseVMInfoErrors(t *testing.T) {
	// Claims compressed oops in the header but prints no placement line.
	text := "# Java VM: OpenJDK 64-Bit Server VM (17, mixed mode, compressed oops, g1 gc, linux-amd64)\n"
	if _, err := ParseVMInfo(text); err == nil {
		t.Error("accepted VM.info without its compressed oops line")
	}
	if _, err := ParseVMInfo("hello\n"); err == nil {
		t.Error("accepted text that says nothing about the heap")
	}
}

// The "# Java VM:" line is the target's text: kept to maxVersion bytes.
func TestVMInfoLongVersion(t *testing.T) {
	long := strings.Repeat("é", 10000)
	g, _ := ParseVMInfo("# Java VM: " + long + "\nHeap address: 0x0000000080000000, size: 2048 MB, Compressed Oops mode: 32-bit\n")
	if len(g.Version) > maxVersion+3 || !strings.HasPrefix(long, strings.TrimSuffix(g.Version, "...")) || !utf8.ValidString(g.Version) {
		t.Errorf("version of %d bytes: %d bytes kept: %q...", len(long), len(g.Version), g.Version[:min(len(g.Version), 20)])
	}
}
