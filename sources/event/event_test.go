package event

import (
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/djx-bpf/djx-bpf/loader"
	"github.com/djx-bpf/djx-bpf/sources/pmu"
)

func machine(t *testing.T, name string) *pmu.Machine {
	t.Helper()
	m, err := pmu.Detect("../pmu/testdata/machines/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// --event on captured machines: auto prefers hardware address sampling
// where the BPF path can read it, and falls back to decode, saying why.
func TestChooseSource(t *testing.T) {
	for _, c := range []struct {
		machine, event string
		kind           loader.Source
		name, why, err string
	}{
		{"intel-skylake-sp", "auto", loader.Hardware, "mem-loads", "event auto: mem-loads", ""},
		{"intel-skylake-sp", "cpu/event=0xd1,umask=0x20/pp", loader.Hardware, "cpu/event=0xd1,umask=0x20/pp", "", ""},
		{"intel-skylake-sp", "decode", loader.Decode, "decode", "", ""},
		{"amd-zen4-genoa", "auto", loader.Hardware, "ibs_op", "ibs_op", ""},
		{"arm-neoverse-n1", "auto", loader.Decode, "decode", "AUX buffer", ""},
		{"arm-neoverse-n1", "arm_spe", "", "", "", "AUX buffer"},
		{"kvm-amd-epyc-this-vm", "auto", loader.Decode, "decode", "no hardware address sampling", ""},
		{"kvm-amd-epyc-this-vm", "page-faults", loader.PageFaults, "page-faults", "", ""},
		{"kvm-amd-epyc-this-vm", "MEM_LOAD_RETIRED.L3_MISS", "", "", "", "available: decode, page-faults"},
		{"kvm-amd-epyc-this-vm", "cpu/event=0xd1,umsk=0x08/", "", "", "", `no PMU "cpu"`},
	} {
		src, why, err := Choose(c.event, machine(t, c.machine))
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s %s: error %v, want one containing %q", c.machine, c.event, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s %s: %v", c.machine, c.event, err)
			continue
		}
		if src.Kind != c.kind || src.Name != c.name || !strings.Contains(why, c.why) {
			t.Errorf("%s %s: got %s %q (%q), want %s %q (%q)", c.machine, c.event, src.Kind, src.Name, why, c.kind, c.name, c.why)
		}
		if src.Kind == loader.Hardware && (src.Event == nil || src.Event.Attr.Sample_type&(1<<3) == 0) {
			t.Errorf("%s %s: hardware event without PERF_SAMPLE_ADDR: %+v", c.machine, c.event, src.Event)
		}
	}
}

// --period overrides the catalog's period; CPUs follow the PMU's mask.
func TestHardwareLoaderConfig(t *testing.T) {
	src, _, err := Choose("MEM_LOAD_RETIRED.L1_MISS", machine(t, "intel-alderlake-hybrid"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := src.Config(Rates{Period: 5003})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Source != loader.Hardware || cfg.Attr.Sample != 5003 || len(cfg.CPUs) == 0 {
		t.Fatalf("config %+v attr %+v", cfg, cfg.Attr)
	}
}

func TestHardwareFreqMode(t *testing.T) {
	src, _, err := Choose("mem-loads", machine(t, "intel-skylake-sp"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := src.Config(Rates{HWFreq: 4000})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Attr.Sample != 4000 || cfg.Attr.Bits&unix.PerfBitFreq == 0 {
		t.Fatalf("attr %+v: want frequency mode at 4000 Hz", cfg.Attr)
	}
}
