package pmu

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func fixture(t *testing.T, name string) *Machine {
	t.Helper()
	m, err := Detect(filepath.Join("testdata", "machines", name))
	if err != nil {
		t.Fatal(err)
	}
	m.Privileged = true // fixtures describe the machine, not the caller
	return m
}

func entryMap(es []Entry) map[string]Entry {
	out := map[string]Entry{}
	for _, e := range es {
		out[e.Name] = e
	}
	return out
}

func TestDetectThisVM(t *testing.T) {
	m := fixture(t, "kvm-amd-epyc-this-vm")
	if m.CPU.Vendor != VendorAMD || !m.CPU.Hypervisor || m.CPU.IBS || m.CPU.Family != 25 {
		t.Errorf("cpu = %+v", m.CPU)
	}
	if got := strings.Join(m.PMUNames(), ","); got != "breakpoint,msr,software,tracepoint,uprobe" {
		t.Errorf("pmus = %s", got)
	}
	if f := m.PMUs["msr"].Formats["event"]; f.String() != "config:0-63" || f.Bits() != 64 {
		t.Errorf("msr event format = %v", f)
	}
	if !m.ParanoidKnown || m.KernelMajor != 6 || m.KernelMinor != 18 {
		t.Errorf("paranoid %v/%d kernel %d.%d", m.ParanoidKnown, m.Paranoid, m.KernelMajor, m.KernelMinor)
	}
}

func TestDetectARM(t *testing.T) {
	m := fixture(t, "arm-neoverse-n1")
	if m.CPU.Vendor != VendorARM || m.CPU.Part != 0xd0c {
		t.Errorf("cpu = %+v", m.CPU)
	}
	if f := m.PMUs["arm_spe_0"].Formats["min_latency"]; f.Config != 2 || f.String() != "config2:0-11" {
		t.Errorf("min_latency = %v", f)
	}
}

func TestParseFormat(t *testing.T) {
	f, err := ParseFormat("event", "config:0-7,32-35")
	if err != nil {
		t.Fatal(err)
	}
	var w configWords
	// AMD extended event 0x1c0: low byte at bits 0-7, high nibble at 32-35.
	if err := w.place(f, 0x1c0); err != nil {
		t.Fatal(err)
	}
	if w[0] != 0x1_0000_00c0 {
		t.Errorf("placed %#x", w[0])
	}
	if extract(f, w[0]) != 0x1c0 {
		t.Errorf("extract %#x", extract(f, w[0]))
	}
	if err := w.place(f, 0x1000); !errors.Is(err, ErrSyntax) {
		t.Errorf("12-bit field took 0x1000: %v", err)
	}
	for _, bad := range []string{"config", "config9:1", "config:8-3", "config:0-64", "config:x"} {
		if _, err := ParseFormat("x", bad); err == nil {
			t.Errorf("ParseFormat(%q) accepted", bad)
		}
	}
}

// want: catalog name → available, or the substring its reason must hold.
var catalogCases = []struct {
	fixture string
	want    map[string]string
	auto    string
	autoWhy string
}{
	{"kvm-amd-epyc-this-vm", map[string]string{
		NameMemLoads:   "needs an Intel CPU with PEBS; this CPU is AuthenticAMD (AMD EPYC), and there is no cpu PMU in /sys/bus/event_source/devices: virtualized without PMU passthrough",
		NameL3Miss:     "needs an Intel CPU",
		NameIBSOp:      "no ibs_op PMU in /sys/bus/event_source/devices: virtualized without IBS passthrough",
		NameSPE:        "needs an arm64 CPU with SPE",
		NameDecode:     "",
		NamePageFaults: "",
	}, NameDecode, "no hardware address sampling: no ibs_op PMU"},
	{"intel-skylake-sp", map[string]string{
		NameMemLoads: "", NameL1Miss: "", NameL2Miss: "", NameL3Miss: "", NameSTLBMiss: "",
		NameIBSOp: "needs an AMD CPU", NameSPE: "needs an arm64 CPU", NameDecode: "",
	}, NameMemLoads, "Intel PEBS load latency"},
	{"intel-alderlake-hybrid", map[string]string{NameMemLoads: "", NameL1Miss: ""}, NameMemLoads, "on PMU cpu_core"},
	{"intel-icelake-kvm-guest", map[string]string{
		NameMemLoads: "has no PEBS (caps/max_precise=0): virtualized",
		NameL1Miss:   "max_precise=0",
	}, NameDecode, "caps/max_precise=0"},
	{"amd-zen4-genoa", map[string]string{NameMemLoads: "needs an Intel CPU with PEBS; this CPU is AuthenticAMD (AMD EPYC 9654", NameIBSOp: ""}, NameIBSOp, "AMD IBS op"},
	{"amd-zen3-milan-6.1", map[string]string{NameIBSOp: ""}, NameIBSOp, "ibs_op"},
	{"arm-neoverse-n1", map[string]string{NameSPE: "", NameMemLoads: "needs an Intel CPU", NameIBSOp: "needs an AMD CPU"}, NameSPE, "AUX buffer"},
}

func TestCatalogFixtures(t *testing.T) {
	for _, c := range catalogCases {
		t.Run(c.fixture, func(t *testing.T) {
			m := fixture(t, c.fixture)
			got := entryMap(m.Catalog())
			if len(got) != len(catalogOrder) {
				t.Fatalf("catalog has %d entries", len(got))
			}
			for name, want := range c.want {
				e := got[name]
				if want == "" && !e.Available {
					t.Errorf("%s unavailable: %s", name, e.Reason)
				}
				if want != "" && (e.Available || !strings.Contains(e.Reason, want)) {
					t.Errorf("%s: available=%v reason %q, want %q", name, e.Available, e.Reason, want)
				}
				if e.Available && e.Event.Attr.Size != 128 {
					t.Errorf("%s: attr size %d", name, e.Event.Attr.Size)
				}
				if e.Available && e.Event.Attr.Sample_type&unix.PERF_SAMPLE_ADDR == 0 {
					t.Errorf("%s: no PERF_SAMPLE_ADDR", name)
				}
			}
			ev, why := m.Auto()
			if ev.Name != c.auto || !strings.Contains(why, c.autoWhy) || strings.Contains(why, "\n") {
				t.Errorf("auto = %s, %q; want %s, %q", ev.Name, why, c.auto, c.autoWhy)
			}
		})
	}
}

func TestCatalogPackageLevel(t *testing.T) {
	es := entryMap(Catalog(filepath.Join("testdata", "machines", "kvm-amd-epyc-this-vm")))
	if !es[NameDecode].Available {
		t.Error("decode unavailable")
	}
	es = entryMap(Catalog("testdata/does-not-exist"))
	if !es[NameDecode].Available || es[NameIBSOp].Available || !strings.Contains(es[NameIBSOp].Reason, "list perf event sources") {
		t.Errorf("missing root: %+v", es[NameIBSOp])
	}
}

func TestHybridLeaderAndNotes(t *testing.T) {
	m := fixture(t, "intel-alderlake-hybrid")
	e := entryMap(m.Catalog())[NameMemLoads]
	if e.Event.PMU != "cpu_core" || e.Event.CPUs != "0-15" || e.Event.Leader == nil {
		t.Fatalf("event = %+v", e.Event)
	}
	if e.Event.Leader.Config != 0x8203 || e.Event.Leader.Sample_type != 0 {
		t.Errorf("leader = %s", DescribeAttr(e.Event.Leader))
	}
	if !strings.Contains(e.Note, "E-cores (cpu_atom) are not sampled") || !strings.Contains(e.Note, "mem-loads-aux") {
		t.Errorf("note = %q", e.Note)
	}
}

func TestIBSFiltering(t *testing.T) {
	new := entryMap(fixture(t, "amd-zen4-genoa").Catalog())[NameIBSOp].Event
	if new.Attr.Ext2 != 1 || new.Attr.Bits != unix.PerfBitDisabled|unix.PerfBitExcludeKernel {
		t.Errorf("zen4/6.14 ibs_op: %s", DescribeAttr(&new.Attr))
	}
	old := entryMap(fixture(t, "amd-zen3-milan-6.1").Catalog())[NameIBSOp]
	if old.Event.Attr.Ext2 != 0 || old.Event.Attr.Bits != unix.PerfBitDisabled || !strings.Contains(old.Note, "cannot exclude the kernel") {
		t.Errorf("zen3/6.1 ibs_op: %s note %q", DescribeAttr(&old.Event.Attr), old.Note)
	}
	if _, err := fixture(t, "amd-zen3-milan-6.1").Resolve("ibs_op//u"); err == nil || !strings.Contains(err.Error(), "swfilt") {
		t.Errorf("ibs_op//u on 6.1: %v", err)
	}
}

func TestParanoid(t *testing.T) {
	m := fixture(t, "intel-skylake-sp")
	m.Privileged = false // paranoid is 2 in the fixture
	e := entryMap(m.Catalog())[NameMemLoads]
	if e.Available || !strings.Contains(e.Reason, "sysctl kernel.perf_event_paranoid=0") || !strings.Contains(e.Reason, "CAP_PERFMON") {
		t.Errorf("reason = %q", e.Reason)
	}
	_, err := m.Resolve("cpu/event=0xd1,umask=0x08/pp")
	if !errors.Is(err, ErrPermission) {
		t.Errorf("resolve: %v", err)
	}
	m.Paranoid = 0
	if _, err := m.Resolve(NameMemLoads); err != nil {
		t.Errorf("paranoid 0: %v", err)
	}
}

type fakeProber struct {
	fail  map[string]error
	calls []Event
}

func (f *fakeProber) Probe(ev Event) error {
	f.calls = append(f.calls, ev)
	return f.fail[ev.Name]
}

func TestProberDowngrades(t *testing.T) {
	m := fixture(t, "intel-skylake-sp")
	p := &fakeProber{fail: map[string]error{NameMemLoads: unix.EOPNOTSUPP, "cpu/event=0xd1,umask=0x08/pp": unix.EACCES}}
	m.Prober = p
	e := entryMap(m.Catalog())[NameMemLoads]
	if e.Available || !strings.Contains(e.Reason, "cannot sample") {
		t.Errorf("mem-loads: %+v", e)
	}
	ev, why := m.Auto()
	if ev.Name != NameDecode || !strings.Contains(why, "operation not supported") {
		t.Errorf("auto after probe failure: %s %q", ev.Name, why)
	}
	_, err := m.Resolve("cpu/event=0xd1,umask=0x08/pp")
	if !errors.Is(err, ErrPermission) || !strings.Contains(err.Error(), "sysctl kernel.perf_event_paranoid=0") {
		t.Errorf("raw probe EACCES: %v", err)
	}
	if _, err := m.Resolve(NameMemLoads); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "available: MEM_LOAD_RETIRED.L1_MISS") {
		t.Errorf("resolve mem-loads: %v", err)
	}
}

func TestResolveRaw(t *testing.T) {
	cases := []struct {
		fixture, in    string
		typ            uint32
		config, c1, c2 uint64
		precise        int
		kind           Kind
		excludeKernel  bool
		weight, aux    bool
	}{
		{"intel-skylake-sp", "cpu/event=0xd1,umask=0x08/pp", 4, 0x08d1, 0, 0, 2, KindPEBS, true, false, false},
		{"intel-skylake-sp", "cpu/mem-loads,ldlat=50/P", 4, 0x01cd, 50, 0, 3, KindPEBS, true, true, false},
		{"intel-skylake-sp", "cpu/event=0xd0,umask=0x11/ppp", 4, 0x11d0, 0, 0, 3, KindPEBS, true, false, false},
		{"intel-skylake-sp", "cpu/config=0x1cd,config1=0x3/p", 4, 0x1cd, 3, 0, 1, KindPEBS, true, true, false},
		{"intel-skylake-sp", "r01d1:pp", 4, 0x1d1, 0, 0, 2, KindPEBS, true, false, false},
		{"intel-skylake-sp", "r01d1", 4, 0x1d1, 0, 0, 0, KindRaw, true, false, false},
		{"intel-skylake-sp", "cpu/event=0x3c/k", 4, 0x3c, 0, 0, 0, KindRaw, false, false, false},
		{"intel-alderlake-hybrid", "cpu_core/event=0xd1,umask=0x20/pp", 4, 0x20d1, 0, 0, 2, KindPEBS, true, false, false},
		{"amd-zen4-genoa", "ibs_op//", 11, 0, 0, 1, 0, KindIBS, true, true, false},
		{"amd-zen4-genoa", "ibs_op/cnt_ctl=1,l3missonly=1/", 11, 1<<19 | 1<<16, 0, 1, 0, KindIBS, true, true, false},
		{"amd-zen3-milan-6.1", "ibs_op//", 9, 0, 0, 0, 0, KindIBS, false, true, false},
		{"arm-neoverse-n1", "arm_spe_0/load_filter=1,min_latency=32/", 9, 1 << 33, 0, 32, 0, KindSPE, true, true, true},
		{"kvm-amd-epyc-this-vm", "software/config=9/", 1, 9, 0, 0, 0, KindSoftware, true, false, false},
	}
	for _, c := range cases {
		ev, err := fixture(t, c.fixture).Resolve(c.in)
		if err != nil {
			t.Errorf("%s %s: %v", c.fixture, c.in, err)
			continue
		}
		a := ev.Attr
		if a.Type != c.typ || a.Config != c.config || a.Ext1 != c.c1 || a.Ext2 != c.c2 || ev.PreciseIP() != c.precise ||
			ev.Kind != c.kind || (a.Bits&unix.PerfBitExcludeKernel != 0) != c.excludeKernel || ev.Measures.Weight != c.weight || ev.AUX != c.aux {
			t.Errorf("%s %s: %s kind %s measures %+v aux %v", c.fixture, c.in, DescribeAttr(&a), ev.Kind, ev.Measures, ev.AUX)
		}
	}
}

func TestResolveErrors(t *testing.T) {
	cases := []struct {
		fixture, in string
		is          error
		want        string
	}{
		{"intel-skylake-sp", "cpu/umsk=0x8/", ErrSyntax, `unknown term "umsk" for PMU cpu (known: any, cmask, edge, event, frontend, in_tx, in_tx_cp, inv, ldlat, offcore_rsp, pc, umask, config, config1, config2, period; events: cycles-ct, mem-loads, mem-stores)`},
		{"intel-skylake-sp", "cpu/event=0x1d1/", ErrSyntax, `value 0x1d1 of term "event" does not fit config:0-7 (8 bits)`},
		{"intel-skylake-sp", "cpu/event=zz/", ErrSyntax, `term "event": value "zz" is not a number`},
		{"intel-skylake-sp", "cpu/event=0xd1", ErrSyntax, "missing closing '/'"},
		{"intel-skylake-sp", "cpu/event=0xd1/pppp", ErrSyntax, "precise level 4 above 3"},
		{"intel-skylake-sp", "cpu/event=0xd1/G", ErrSyntax, `unsupported modifier 'G'`},
		{"intel-skylake-sp", "cpu/=3/", ErrSyntax, "empty term name"},
		{"kvm-amd-epyc-this-vm", "cpu/event=0xd1,umask=0x08/pp", ErrUnavailable, `no PMU "cpu" in /sys/bus/event_source/devices (this machine has: breakpoint, msr, software, tracepoint, uprobe): virtualized without PMU passthrough`},
		{"kvm-amd-epyc-this-vm", "ibs_op//", ErrUnavailable, `no PMU "ibs_op"`},
		{"kvm-amd-epyc-this-vm", "r01d1", ErrUnavailable, "raw event needs the CPU's PMU (cpu)"},
		{"kvm-amd-epyc-this-vm", "mem-loads", ErrUnavailable, "; available: decode, page-faults"},
		{"kvm-amd-epyc-this-vm", "MEM_LOAD_RETIRED.L3_MISS", ErrUnavailable, "needs an Intel CPU"},
		{"kvm-amd-epyc-this-vm", "ibs_op", ErrUnavailable, "virtualized without IBS passthrough"},
		{"kvm-amd-epyc-this-vm", "cache-misses", ErrUnknownEvent, `unknown event "cache-misses": known events: auto, mem-loads,`},
		{"kvm-amd-epyc-this-vm", "cache-misses", ErrUnknownEvent, "(available here: decode, page-faults)"},
		{"arm-neoverse-n1", "arm_spe_0/ts_enable=1/", nil, ""},
		{"arm-neoverse-n1", "arm_spe_0/inv_event_filter=1/", ErrSyntax, `unknown term "inv_event_filter"`},
	}
	for _, c := range cases {
		_, err := fixture(t, c.fixture).Resolve(c.in)
		if c.is == nil {
			if err != nil {
				t.Errorf("%s: %v", c.in, err)
			}
			continue
		}
		if !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %s:\n got  %v\n want %v containing %q", c.fixture, c.in, err, c.is, c.want)
		}
	}
}

func TestResolveNames(t *testing.T) {
	m := fixture(t, "intel-skylake-sp")
	for in, want := range map[string]string{"": NameMemLoads, "auto": NameMemLoads, "mem_load_retired.l3_miss": NameL3Miss, "DECODE": NameDecode, "page-faults": NamePageFaults} {
		ev, err := m.Resolve(in)
		if err != nil || ev.Name != want {
			t.Errorf("%q → %s, %v; want %s", in, ev.Name, err, want)
		}
	}
	ev, err := fixture(t, "arm-neoverse-n1").Resolve("arm_spe_0")
	if err != nil || ev.Name != NameSPE {
		t.Errorf("arm_spe_0 → %s %v", ev.Name, err)
	}
}

func TestSampling(t *testing.T) {
	m := fixture(t, "arm-neoverse-n1")
	spe := entryMap(m.Catalog())[NameSPE].Event
	if _, err := spe.WithFreq(1000); !errors.Is(err, ErrFreq) {
		t.Errorf("spe freq: %v", err)
	}
	if spe.Attr.Sample != 4096 || spe.WithPeriod(8192).Attr.Sample != 8192 {
		t.Errorf("spe period %d", spe.Attr.Sample)
	}
	dec := entryMap(m.Catalog())[NameDecode].Event
	d, err := dec.WithFreq(1000)
	if err != nil || d.Attr.Sample != 1000000 || d.Attr.Bits&unix.PerfBitFreq != 0 {
		t.Errorf("decode 1 kHz: %s %v", DescribeAttr(&d.Attr), err)
	}
	pebs := entryMap(fixture(t, "intel-skylake-sp").Catalog())[NameL1Miss].Event
	p, err := pebs.WithFreq(4000)
	if err != nil || p.Attr.Sample != 4000 || p.Attr.Bits&unix.PerfBitFreq == 0 {
		t.Errorf("pebs freq: %s %v", DescribeAttr(&p.Attr), err)
	}
	if p.WithPeriod(5).Attr.Bits&unix.PerfBitFreq != 0 {
		t.Error("WithPeriod kept freq")
	}
	if _, err := pebs.WithFreq(0); err == nil {
		t.Error("zero freq accepted")
	}
}
