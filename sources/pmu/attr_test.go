package pmu

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

var update = flag.Bool("update", false, "rewrite testdata/attr golden files")

// TestAttrLayout checks x/sys's PerfEventAttr against the offsets of
// struct perf_event_attr in include/uapi/linux/perf_event.h (counted from
// the header: u32 type, u32 size, u64 config, u64 sample_period, ...).
func TestAttrLayout(t *testing.T) {
	var a unix.PerfEventAttr
	offsets := []struct {
		name string
		got  uintptr
		want uintptr
	}{
		{"type", unsafe.Offsetof(a.Type), 0},
		{"size", unsafe.Offsetof(a.Size), 4},
		{"config", unsafe.Offsetof(a.Config), 8},
		{"sample_period", unsafe.Offsetof(a.Sample), 16},
		{"sample_type", unsafe.Offsetof(a.Sample_type), 24},
		{"read_format", unsafe.Offsetof(a.Read_format), 32},
		{"flags", unsafe.Offsetof(a.Bits), 40},
		{"wakeup_events", unsafe.Offsetof(a.Wakeup), 48},
		{"bp_type", unsafe.Offsetof(a.Bp_type), 52},
		{"config1", unsafe.Offsetof(a.Ext1), 56},
		{"config2", unsafe.Offsetof(a.Ext2), 64},
		{"branch_sample_type", unsafe.Offsetof(a.Branch_sample_type), 72},
		{"sample_regs_user", unsafe.Offsetof(a.Sample_regs_user), 80},
		{"sample_stack_user", unsafe.Offsetof(a.Sample_stack_user), 88},
		{"clockid", unsafe.Offsetof(a.Clockid), 92},
		{"sample_regs_intr", unsafe.Offsetof(a.Sample_regs_intr), 96},
		{"aux_watermark", unsafe.Offsetof(a.Aux_watermark), 104},
		{"sample_max_stack", unsafe.Offsetof(a.Sample_max_stack), 108},
		{"aux_sample_size", unsafe.Offsetof(a.Aux_sample_size), 112},
		{"sig_data", unsafe.Offsetof(a.Sig_data), 120},
	}
	for _, o := range offsets {
		if o.got != o.want {
			t.Errorf("%s at %d, header says %d", o.name, o.got, o.want)
		}
	}
	if attrSize != 128 {
		t.Errorf("sizeof = %d, want 128 (PERF_ATTR_SIZE_VER7)", attrSize)
	}
	// The flags word: disabled..watermark are bits 0-14, precise_ip 15-16.
	if unix.PerfBitPreciseIPBit1 != 1<<15 || unix.PerfBitPreciseIPBit2 != 1<<16 || unix.PerfBitWatermark != 1<<14 || unix.PerfBitMmapData != 1<<17 {
		t.Error("x/sys flag bits disagree with the header")
	}
	setPrecise(&a, 2)
	if a.Bits != unix.PerfBitPreciseIPBit2 || PreciseIP(&a) != 2 {
		t.Errorf("precise_ip=2 → %#x", a.Bits)
	}
	// MarshalAttr equals the in-memory bytes on this (little-endian) host.
	a = unix.PerfEventAttr{Type: 4, Size: 128, Config: 0x1cd, Sample: 10007, Sample_type: sampleMem, Bits: baseBits, Ext1: 30, Ext2: 7, Sig_data: 9}
	mem := unsafe.Slice((*byte)(unsafe.Pointer(&a)), unsafe.Sizeof(a))
	if !bytes.Equal(MarshalAttr(&a), mem) {
		t.Error("MarshalAttr differs from memory layout")
	}
}

// TestMemLoadsBytes spells out by hand the bytes that matter for Intel
// mem-loads on cpu (type 4), independent of the golden files.
func TestMemLoadsBytes(t *testing.T) {
	e := entryMap(fixture(t, "intel-skylake-sp").Catalog())[NameMemLoads].Event
	b := MarshalAttr(&e.Attr)
	want := map[int][]byte{
		0:  {0x04, 0, 0, 0},                      // type = 4 (the cpu PMU; PERF_TYPE_RAW)
		4:  {0x80, 0, 0, 0},                      // size = 128
		8:  {0xcd, 0x01, 0, 0, 0, 0, 0, 0},       // config: event 0xcd @0-7, umask 0x01 @8-15
		16: {0x17, 0x27, 0, 0, 0, 0, 0, 0},       // sample_period = 10007 = 0x2717
		24: {0x08, 0x80, 0x00, 0x01, 0, 0, 0, 0}, // sample_type ADDR 1<<3 | DATA_SRC 1<<15 | WEIGHT_STRUCT 1<<24
		40: {0x61, 0x00, 0x01, 0, 0, 0, 0, 0},    // flags: disabled 0, exclude_kernel 5, exclude_hv 6, precise_ip=2 → bit 16
		56: {30, 0, 0, 0, 0, 0, 0, 0},            // config1: ldlat = 30 cycles @0-15
	}
	for off, w := range want {
		if !bytes.Equal(b[off:off+len(w)], w) {
			t.Errorf("bytes at %d = % x, want % x", off, b[off:off+len(w)], w)
		}
	}
}

func hexdump(b []byte) string {
	var s strings.Builder
	for i := 0; i < len(b); i += 16 {
		fmt.Fprintf(&s, "%04x  % x  % x\n", i, b[i:i+8], b[i+8:i+16])
	}
	return s.String()
}

func golden(ev Event) string {
	var s strings.Builder
	fmt.Fprintf(&s, "# %s on PMU %s (kind %s)\n%s\n%s", ev.Name, ev.PMU, ev.Kind, DescribeAttr(&ev.Attr), hexdump(MarshalAttr(&ev.Attr)))
	if ev.Leader != nil {
		fmt.Fprintf(&s, "# group leader\n%s\n%s", DescribeAttr(ev.Leader), hexdump(MarshalAttr(ev.Leader)))
	}
	return s.String()
}

// TestAttrGolden compares every catalog entry of every fixture, and some
// raw strings, with testdata/attr/*.golden; testdata/attr/README.txt
// explains each field value. Refresh with go test ./pmu -run Golden -update.
func TestAttrGolden(t *testing.T) {
	type item struct{ fixture, name string }
	var items []item
	for _, c := range catalogCases {
		for _, e := range fixture(t, c.fixture).Catalog() {
			if e.Available {
				items = append(items, item{c.fixture, e.Name})
			}
		}
	}
	items = append(items,
		item{"intel-skylake-sp", "cpu/event=0xd1,umask=0x08/pp"},
		item{"intel-skylake-sp", "r01d1:pp"},
		item{"amd-zen4-genoa", "ibs_op//"},
		item{"arm-neoverse-n1", "arm_spe_0/load_filter=1,min_latency=32/"},
	)
	seen := map[string]bool{}
	for _, it := range items {
		ev, err := fixture(t, it.fixture).Resolve(it.name)
		if err != nil {
			t.Errorf("%s %s: %v", it.fixture, it.name, err)
			continue
		}
		file := filepath.Join("testdata", "attr", it.fixture+"__"+sanitize(it.name)+".golden")
		seen[filepath.Base(file)] = true
		got := golden(ev)
		if *update {
			if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(file)
		if err != nil {
			t.Errorf("%v (run with -update)", err)
			continue
		}
		if got != string(want) {
			t.Errorf("%s differs:\n got:\n%s\n want:\n%s", file, got, want)
		}
	}
	ents, _ := os.ReadDir(filepath.Join("testdata", "attr"))
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".golden") && !seen[e.Name()] {
			t.Errorf("stale golden file %s", e.Name())
		}
	}
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-', r == '_':
			return r
		}
		return '_'
	}, s)
}
