package heap

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the parser's output")

// render is the golden form of an Info.
func render(i Info) string {
	var b strings.Builder
	fmt.Fprintf(&b, "gc %s partial %v\n", i.GC, i.Partial)
	if i.RegionSize != 0 {
		fmt.Fprintf(&b, "region size %d\n", i.RegionSize)
	}
	for _, r := range i.Ranges {
		fmt.Fprintf(&b, "range %#016x %#016x %s\n", r.Start, r.End, r.Name)
	}
	for _, r := range i.Spaces {
		fmt.Fprintf(&b, "space %#016x %#016x %s\n", r.Start, r.End, r.Name)
	}
	return b.String()
}

// TestGolden parses every fixture made by testdata/gen.sh.
func TestGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no fixtures in testdata; run testdata/gen.sh")
	}
	wantGC := map[string]string{
		"g1": "G1", "parallel": "Parallel", "serial": "Serial",
		"z": "Z", "shenandoah": "Shenandoah", "epsilon": "Epsilon",
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			text, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			info, err := ParseHeapInfo(string(text))
			if err != nil {
				t.Fatal(err)
			}
			_, gc, _ := strings.Cut(strings.TrimSuffix(filepath.Base(f), ".txt"), "-")
			if info.GC != wantGC[gc] {
				t.Errorf("GC = %q, want %q", info.GC, wantGC[gc])
			}
			if (info.GC == "Z") != (len(info.Ranges) == 0) {
				t.Errorf("%s: %d ranges", info.GC, len(info.Ranges))
			}
			if info.Text != string(text) {
				t.Error("Text does not hold the input")
			}
			got := render(info)
			golden := strings.TrimSuffix(f, ".txt") + ".golden"
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
				t.Errorf("parse mismatch\ngot:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

func TestG1Contains(t *testing.T) {
	// java 17 with default sizing on a 16 GB machine, as jcmd prints it.
	text := "4242:\n garbage-first heap   total 397312K, used 5330K [0x0000000687400000, 0x0000000800000000)\n" +
		"  region size 4096K, 1 young (4096K), 0 survivors (0K)\n" +
		" Metaspace       used 78K, committed 320K, reserved 1114112K\n"
	info, err := ParseHeapInfo(text)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		addr uint64
		want bool
	}{
		{0x687400000, true},
		{0x7ffffffff, true},
		{0x800000000, false},
		{0x6873fffff, false},
		{0, false},
	} {
		if got := info.Contains(c.addr); got != c.want {
			t.Errorf("Contains(%#x) = %v, want %v", c.addr, got, c.want)
		}
	}
}

func TestParallelRangesAreReserved(t *testing.T) {
	text, err := os.ReadFile("testdata/jdk17-parallel.txt")
	if err != nil {
		t.Fatal(err)
	}
	info, err := ParseHeapInfo(string(text))
	if err != nil {
		t.Fatal(err)
	}
	// The young generation's reserved end, not its committed end, bounds it.
	young := info.Ranges[0]
	if young.Name != "PSYoungGen" || young.End != 0x100000000 {
		t.Errorf("young = %+v", young)
	}
	if !info.Contains(0xfff00000) {
		t.Error("reserved but uncommitted young address not contained")
	}
}

func TestErrors(t *testing.T) {
	for _, text := range []string{
		"",
		"4242:\n",
		"Unknown collector heap\n",
		" garbage-first heap   total 1K, used 1K\n", // G1 without a range
		" garbage-first heap   total 1K, used 1K [0x2000, 0x1000)\n",
		" garbage-first heap   total 1K, used 1K [0x1000, 0x2000)\n  region size 0K, 5 young (5120K)\n",
		" garbage-first heap   total 1K, used 1K [0x1000, 0x2000)\n  region size lots, 5 young (5120K)\n",
		" PSYoungGen total 1K [0x1000, 0x2000, 0x3000)\n def new generation total 1K [0x3000, 0x4000, 0x5000)\n",
	} {
		if info, err := ParseHeapInfo(text); err == nil {
			t.Errorf("ParseHeapInfo(%q) = %+v, want error", text, info)
		}
	}
	_, err := ParseHeapInfo("Unknown collector heap\n")
	if !errors.Is(err, ErrUnknownFormat) {
		t.Errorf("err = %v, want ErrUnknownFormat", err)
	}
}
