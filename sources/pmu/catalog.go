package pmu

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Event names accepted by --event besides raw event strings. This is their
// one home: the loader names its software sources and the profiler matches
// --event with these.
const (
	NameAuto       = "auto"
	NameMemLoads   = "mem-loads"
	NameL1Miss     = "MEM_LOAD_RETIRED.L1_MISS"
	NameL2Miss     = "MEM_LOAD_RETIRED.L2_MISS"
	NameL3Miss     = "MEM_LOAD_RETIRED.L3_MISS"
	NameSTLBMiss   = "MEM_INST_RETIRED.STLB_MISS_LOADS"
	NameIBSOp      = "ibs_op"
	NameSPE        = "arm_spe"
	NameDecode     = "decode"
	NamePageFaults = "page-faults"
)

// Defaults of the sample sources.
const (
	// DefaultLoadLatency is the ldlat / min_latency threshold in cycles:
	// perf mem's default, which drops L1 hits so samples go to misses.
	DefaultLoadLatency = 30
	// DecodeFreq is decode's cpu-clock rate per CPU in Hz, the default of
	// --freq: ~15k samples per busy core in 30 s; each costs the sampled
	// thread an interrupt (docs/benchmarks.md, "The defaults").
	DecodeFreq = 499
)

// Entry is one line of the catalog.
type Entry struct {
	Name        string
	Kind        Kind
	Description string
	Available   bool
	// Reason says why the entry is unavailable, with the fix when the user
	// can apply one.
	Reason string
	// Note is a caveat that holds even when available.
	Note string
	// Event is the exact attr this entry would be opened with; its Attr is
	// zero when the machine lacks what is needed to encode it (no PMU).
	Event Event
}

// Catalog detects the machine below root and lists every source, without
// live probing; see Live for the running machine with probing.
func Catalog(root string) []Entry {
	m, err := Detect(root)
	if err != nil {
		m = &Machine{Root: root, PMUs: map[string]*PMU{}, Privileged: true}
		entries := m.Catalog()
		for i := range entries {
			if entries[i].Kind != KindSoftware {
				entries[i].Available = false
				entries[i].Reason = err.Error()
			}
		}
		return entries
	}
	return m.Catalog()
}

// Live detects the running machine and probes entries with perf_event_open.
func Live() (*Machine, error) {
	m, err := Detect("/")
	if err != nil {
		return nil, err
	}
	m.Prober = LiveProber{}
	return m, nil
}

// Resolve maps --event NAME to an event on the running machine.
func Resolve(name string) (Event, error) {
	m, err := Live()
	if err != nil {
		return Event{}, err
	}
	return m.Resolve(name)
}

// Auto picks the best source of the running machine and says why.
func Auto() (Event, string) {
	m, err := Live()
	if err != nil {
		m = &Machine{PMUs: map[string]*PMU{}, Privileged: true}
		ev, _ := m.build(NameDecode)
		return ev.Event, "event auto: decode (software cpu-clock timer + instruction decoding): " + err.Error()
	}
	return m.Auto()
}

var catalogOrder = []string{NameMemLoads, NameL1Miss, NameL2Miss, NameL3Miss, NameSTLBMiss, NameIBSOp, NameSPE, NameDecode, NamePageFaults}

// Catalog lists every source with its availability on m.
func (m *Machine) Catalog() []Entry {
	out := make([]Entry, 0, len(catalogOrder))
	for _, name := range catalogOrder {
		e, _ := m.build(name)
		m.check(&e)
		out = append(out, e)
	}
	return out
}

// check applies the privilege rule and the live probe to an entry that
// static detection found available.
func (m *Machine) check(e *Entry) {
	if !e.Available {
		return
	}
	if err := m.privilegeError(); err != nil {
		e.Available, e.Reason = false, err.Error()
		return
	}
	if e.Event.AUX {
		// An AUX-only PMU cannot be probed meaningfully without an AUX ring.
		return
	}
	if m.Prober != nil {
		if err := m.Prober.Probe(e.Event); err != nil {
			e.Available, e.Reason = false, m.explain(e.Event, err).Error()
		}
	}
}

// ErrPermission is wrapped when perf_event_paranoid or a missing
// capability forbids the per-CPU events the profiler opens.
var ErrPermission = errors.New("not permitted to open per-CPU perf events")

func (m *Machine) privilegeError() error {
	// The profiler opens pid=-1 per-CPU events; perf_event_paranoid >= 1
	// reserves those to CAP_PERFMON (Documentation/admin-guide/perf-security.rst).
	if m.Privileged || !m.ParanoidKnown || m.Paranoid <= 0 {
		return nil
	}
	return fmt.Errorf("%w: kernel.perf_event_paranoid=%d allows CPU-wide events only with CAP_PERFMON: run as root, grant the capability (setcap cap_perfmon,cap_bpf+ep djx-bpf), or lower it with: sysctl kernel.perf_event_paranoid=0", ErrPermission, m.Paranoid)
}

// explain adds the likely cause and fix to a perf_event_open failure.
func (m *Machine) explain(ev Event, err error) error {
	var hint string
	switch {
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		p := "unknown"
		if m.ParanoidKnown {
			p = strconv.Itoa(m.Paranoid)
		}
		return fmt.Errorf("%w: %w (perf_event_paranoid=%s): run as root or with CAP_PERFMON, or: sysctl kernel.perf_event_paranoid=0", ErrPermission, err, p)
	case errors.Is(err, unix.ENOENT):
		hint = fmt.Sprintf("the kernel has no PMU of type %d for this event", ev.Attr.Type)
	case errors.Is(err, unix.EOPNOTSUPP):
		hint = "the PMU cannot sample with this attr here"
		if m.CPU.Hypervisor {
			hint += " (virtualized: the hypervisor does not pass this PMU feature through)"
		}
	case errors.Is(err, unix.EINVAL):
		hint = "the kernel rejected the attr (a field, precise level or sample type this CPU or kernel does not support)"
	case errors.Is(err, unix.ENODEV):
		hint = "the PMU does not cover the probed CPU"
	case errors.Is(err, unix.EBUSY):
		hint = "the PMU is in use by another exclusive user"
	default:
		return err
	}
	return fmt.Errorf("%w: %s", err, hint)
}

// Auto picks hardware address sampling (PEBS load latency, then IBS op,
// then SPE) when available, else decode, and returns a one-line reason.
func (m *Machine) Auto() (Event, string) {
	entries := map[string]Entry{}
	for _, e := range m.Catalog() {
		entries[e.Name] = e
	}
	for _, name := range []string{NameMemLoads, NameIBSOp, NameSPE} {
		if e := entries[name]; e.Available {
			why := fmt.Sprintf("event auto: %s (%s on PMU %s): precise data addresses with latency and data source", name, e.Description, e.Event.PMU)
			if e.Event.AUX {
				why += "; records arrive through the AUX buffer"
			}
			return e.Event, why
		}
	}
	var why string
	switch m.CPU.Vendor {
	case VendorIntel:
		why = entries[NameMemLoads].Reason
	case VendorAMD:
		why = entries[NameIBSOp].Reason
	case VendorARM:
		why = entries[NameSPE].Reason
	default:
		why = fmt.Sprintf("unrecognized CPU vendor %q", m.CPU.Vendor)
	}
	return entries[NameDecode].Event, "event auto: decode (software cpu-clock timer + instruction decoding): no hardware address sampling: " + why
}

// ErrUnknownEvent and ErrUnavailable are wrapped by Resolve errors.
var (
	ErrUnknownEvent = errors.New("unknown event")
	ErrUnavailable  = errors.New("event not available on this machine")
)

// Resolve maps an --event value to an event: auto, a catalog name (case
// insensitive), a raw event in perf syntax (pmu/term=value,.../modifiers)
// or rNNNN (hex config for the CPU's raw PMU).
func (m *Machine) Resolve(name string) (Event, error) {
	name = strings.TrimSpace(name)
	if name == "" || name == NameAuto {
		ev, _ := m.Auto()
		return ev, nil
	}
	for _, n := range catalogOrder {
		if strings.EqualFold(n, name) || n == NameSPE && strings.HasPrefix(name, "arm_spe_") && !strings.Contains(name, "/") {
			e, _ := m.build(n)
			m.check(&e)
			if !e.Available {
				return Event{}, fmt.Errorf("%w: %s: %s; available: %s", ErrUnavailable, n, e.Reason, strings.Join(m.available(), ", "))
			}
			return e.Event, nil
		}
	}
	var ev Event
	var err error
	switch {
	case strings.Contains(name, "/"):
		ev, err = m.parsePMUEvent(name)
	case rawRE.MatchString(name):
		ev, err = m.parseRaw(name)
	default:
		return Event{}, fmt.Errorf("%w %q: known events: %s, %s (available here: %s), or a raw event such as cpu/event=0xd1,umask=0x08/pp, ibs_op//, arm_spe_0/load_filter=1/, r01d1",
			ErrUnknownEvent, name, NameAuto, strings.Join(catalogOrder, ", "), strings.Join(m.available(), ", "))
	}
	if err != nil {
		return Event{}, fmt.Errorf("event %q: %w", name, err)
	}
	if err := m.privilegeError(); err != nil {
		return Event{}, fmt.Errorf("event %q: %w", name, err)
	}
	if m.Prober != nil && !ev.AUX {
		if err := m.Prober.Probe(ev); err != nil {
			return Event{}, fmt.Errorf("event %q: %w; available: %s", name, m.explain(ev, err), strings.Join(m.available(), ", "))
		}
	}
	return ev, nil
}

func (m *Machine) available() []string {
	var out []string
	for _, e := range m.Catalog() {
		if e.Available {
			out = append(out, e.Name)
		}
	}
	return out
}

func (m *Machine) parsePMUEvent(s string) (Event, error) {
	pmuName, rest, _ := strings.Cut(s, "/")
	terms, mods, ok := strings.Cut(rest, "/")
	if !ok {
		return Event{}, fmt.Errorf("%w: missing closing '/' (form: pmu/term=value,.../modifiers)", ErrSyntax)
	}
	mods = strings.TrimPrefix(mods, ":")
	p := m.PMUs[pmuName]
	if p == nil {
		return Event{}, fmt.Errorf("%w: no PMU %q in /sys/bus/event_source/devices (this machine has: %s)%s", ErrUnavailable, pmuName, strings.Join(m.PMUNames(), ", "), m.noPMUWhy(pmuName))
	}
	ts, err := parseTerms(terms)
	if err != nil {
		return Event{}, err
	}
	w, period, err := encodeTerms(p, ts)
	if err != nil {
		return Event{}, err
	}
	ev := m.rawEvent(s, p, w)
	if period != 0 {
		ev.Attr.Sample = period
	}
	if err := m.applyMods(&ev, p, mods); err != nil {
		return Event{}, err
	}
	return ev, nil
}

func (m *Machine) parseRaw(s string) (Event, error) {
	sub := rawRE.FindStringSubmatch(s)
	cfg, err := strconv.ParseUint(sub[1], 16, 64)
	if err != nil {
		return Event{}, fmt.Errorf("%w: raw config %q: %w", ErrSyntax, sub[1], err)
	}
	p := m.corePMU()
	if p == nil {
		return Event{}, fmt.Errorf("%w: raw event needs the CPU's PMU (cpu), which is missing from /sys/bus/event_source/devices%s", ErrUnavailable, m.virtWhy())
	}
	ev := m.rawEvent(s, p, configWords{cfg})
	if err := m.applyMods(&ev, p, sub[2]); err != nil {
		return Event{}, err
	}
	return ev, nil
}

// rawEvent builds an event for pmu p with the per-PMU sampling defaults.
func (m *Machine) rawEvent(name string, p *PMU, w configWords) Event {
	ev := Event{Name: name, PMU: p.Name, Kind: KindRaw, CPUs: p.CPUs, FreqAllowed: true, PeriodUnit: "events"}
	ev.Attr = newAttr(p.Type, 0)
	w.apply(&ev.Attr)
	ev.Attr.Sample = 10007
	ev.Measures.Addr = true
	switch {
	case p.Name == "ibs_op":
		ev.Kind = KindIBS
		m.ibsDefaults(&ev, p)
	case strings.HasPrefix(p.Name, "arm_spe_"):
		ev.Kind = KindSPE
		m.speDefaults(&ev, p)
	case p.Name == "software":
		ev.Kind = KindSoftware
	}
	return ev
}

func (m *Machine) applyMods(ev *Event, p *PMU, mods string) error {
	maxp := 3
	if v, err := strconv.Atoi(p.Caps["max_precise"]); err == nil {
		maxp = v
	}
	if ev.Kind == KindIBS && strings.ContainsAny(mods, "uk") && ev.Attr.Bits&unix.PerfBitExcludeKernel == 0 {
		return fmt.Errorf("%w: ibs_op cannot filter user/kernel here (no swfilt format: Linux before 6.14); drop the u/k modifier", ErrSyntax)
	}
	if err := applyModifiers(&ev.Attr, mods, maxp); err != nil {
		return err
	}
	if ev.PreciseIP() > 0 && ev.Kind == KindRaw && m.isCorePMU(ev.PMU) {
		// A precise event on the core PMU is PEBS: the record carries the
		// data address and data source; the weight (latency) is filled
		// only by the load-latency facility, i.e. when ldlat is set.
		ev.Kind = KindPEBS
		ev.Attr.Sample_type = sampleMem
		ev.Measures = Measures{Addr: true, DataSrc: true}
		if f, ok := p.Formats["ldlat"]; ok && f.Config == 1 && extract(f, ev.Attr.Ext1) != 0 {
			ev.Measures.Weight = true
		}
	}
	return nil
}

func (m *Machine) isCorePMU(name string) bool { return name == "cpu" || name == "cpu_core" }

// corePMU returns the PMU of the big cores: cpu_core on hybrid parts, else cpu.
func (m *Machine) corePMU() *PMU {
	if p := m.PMUs["cpu_core"]; p != nil {
		return p
	}
	return m.PMUs["cpu"]
}

func (m *Machine) spePMU() *PMU {
	for _, n := range m.PMUNames() {
		if strings.HasPrefix(n, "arm_spe_") {
			return m.PMUs[n]
		}
	}
	return nil
}

// virtWhy explains a missing hardware PMU by virtualization, if so.
func (m *Machine) virtWhy() string {
	if m.CPU.Hypervisor {
		return ": virtualized without PMU passthrough (cpuinfo has the hypervisor flag)"
	}
	return ""
}

func (m *Machine) noPMUWhy(name string) string {
	switch {
	case name == "cpu" || name == "cpu_core" || name == "ibs_op" || strings.HasPrefix(name, "arm_spe"):
		return m.virtWhy()
	}
	return ""
}

// build returns the entry for a catalog name with its static availability.
func (m *Machine) build(name string) (Entry, error) {
	switch name {
	case NameDecode:
		a := newAttr(unix.PERF_TYPE_SOFTWARE, unix.PERF_COUNT_SW_CPU_CLOCK)
		a.Sample = uint64(1e9) / DecodeFreq
		return Entry{Name: name, Kind: KindSoftware, Available: true,
			Description: "software cpu-clock timer; the data address is decoded from the sampled instruction and registers",
			Event:       Event{Name: name, PMU: "software", Kind: KindSoftware, Attr: a, Measures: Measures{Addr: true}, PeriodUnit: "ns", FreqAllowed: true}}, nil
	case NamePageFaults:
		a := newAttr(unix.PERF_TYPE_SOFTWARE, unix.PERF_COUNT_SW_PAGE_FAULTS)
		a.Sample = 1
		return Entry{Name: name, Kind: KindSoftware, Available: true,
			Description: "software page-fault event; the address is the exact faulting byte (first touch of memory)",
			Event:       Event{Name: name, PMU: "software", Kind: KindSoftware, Attr: a, Measures: Measures{Addr: true}, PeriodUnit: "events", FreqAllowed: true}}, nil
	case NameMemLoads:
		return m.buildMemLoads(), nil
	case NameL1Miss:
		return m.buildPrecise(name, 0xd1, 0x08, 200003, "retired loads that missed L1D (PEBS, precise data address)"), nil
	case NameL2Miss:
		return m.buildPrecise(name, 0xd1, 0x10, 100021, "retired loads that missed L2 (PEBS, precise data address)"), nil
	case NameL3Miss:
		return m.buildPrecise(name, 0xd1, 0x20, 50021, "retired loads that missed L3 (PEBS, precise data address)"), nil
	case NameSTLBMiss:
		return m.buildPrecise(name, 0xd0, 0x11, 100003, "retired loads that missed the second-level TLB (PEBS, precise data address)"), nil
	case NameIBSOp:
		return m.buildIBS(), nil
	case NameSPE:
		return m.buildSPE(), nil
	}
	return Entry{}, fmt.Errorf("%w %q", ErrUnknownEvent, name)
}

// intelPMU returns the core PMU for Intel entries or the reason there is none.
func (m *Machine) intelPMU() (*PMU, string) {
	p := m.corePMU()
	switch {
	case m.CPU.Vendor != VendorIntel && p == nil:
		return nil, fmt.Sprintf("needs an Intel CPU with PEBS; this CPU is %s%s, and there is no cpu PMU in /sys/bus/event_source/devices%s", vendorName(m.CPU.Vendor), modelSuffix(m.CPU), m.virtWhy())
	case m.CPU.Vendor != VendorIntel:
		return nil, fmt.Sprintf("needs an Intel CPU with PEBS; this CPU is %s%s", vendorName(m.CPU.Vendor), modelSuffix(m.CPU))
	case p == nil:
		return nil, "no cpu PMU in /sys/bus/event_source/devices" + m.virtWhy()
	}
	if v, ok := p.Caps["max_precise"]; ok && v == "0" {
		why := fmt.Sprintf("the %s PMU has no PEBS (caps/max_precise=0)", p.Name)
		if m.CPU.Hypervisor {
			why += ": virtualized, the hypervisor exposes the counters but not PEBS"
		}
		return nil, why
	}
	for _, f := range []string{"event", "umask"} {
		if _, ok := p.Formats[f]; !ok {
			return nil, fmt.Sprintf("the %s PMU has no %q format field", p.Name, f)
		}
	}
	if !m.kernelAtLeast(5, 12) {
		return nil, fmt.Sprintf("kernel %s is older than 5.12 and lacks PERF_SAMPLE_WEIGHT_STRUCT", m.Kernel)
	}
	return p, ""
}

func vendorName(v Vendor) string {
	if v == "" {
		return "of an unrecognized vendor"
	}
	return string(v)
}

func modelSuffix(c CPUInfo) string {
	if c.ModelName == "" {
		return ""
	}
	return " (" + c.ModelName + ")"
}

func (m *Machine) hybridNote(p *PMU) string {
	if p.Name == "cpu_core" && m.PMUs["cpu_atom"] != nil {
		return "hybrid CPU: samples only the P-cores (cpu_core CPUs " + p.CPUs + "); threads on E-cores (cpu_atom) are not sampled"
	}
	return ""
}

func (m *Machine) buildMemLoads() Entry {
	e := Entry{Name: NameMemLoads, Kind: KindPEBS,
		Description: fmt.Sprintf("Intel PEBS load latency: loads slower than %d cycles, with data address, latency and data source", DefaultLoadLatency)}
	p, why := m.intelPMU()
	if p == nil {
		e.Reason = why
		return e
	}
	if _, ok := p.Events["mem-loads"]; !ok {
		e.Reason = fmt.Sprintf("the %s PMU has no mem-loads event (no PEBS load latency on this model or kernel)", p.Name)
		return e
	}
	if _, ok := p.Formats["ldlat"]; !ok {
		e.Reason = fmt.Sprintf("the %s PMU has no ldlat format field", p.Name)
		return e
	}
	// mem-loads from sysfs (event=0xcd,umask=0x1,ldlat=3), threshold raised.
	w, _, err := encodeTerms(p, []term{{name: "mem-loads"}, {name: "ldlat", value: DefaultLoadLatency, set: true}})
	if err != nil {
		e.Reason = err.Error()
		return e
	}
	ev := m.pebsEvent(NameMemLoads, p, w, 10007)
	ev.Measures.Weight = true
	if aux, ok := p.Events["mem-loads-aux"]; ok {
		ts, err := parseTerms(aux)
		if err == nil {
			var lw configWords
			if lw, _, err = encodeTerms(p, ts); err == nil {
				// Counting-only group leader; the member carries the samples.
				l := newAttr(p.Type, 0)
				lw.apply(&l)
				l.Sample_type = 0
				setPrecise(&l, ev.PreciseIP())
				ev.Leader = &l
			}
		}
		if err != nil {
			e.Reason = fmt.Sprintf("mem-loads-aux: %v", err)
			return e
		}
		e.Note = "opened as a group led by mem-loads-aux (event=0x03,umask=0x82), as this PMU requires"
	}
	if n := m.hybridNote(p); n != "" {
		e.Note = strings.TrimPrefix(e.Note+"; "+n, "; ")
	}
	e.Event, e.Available = ev, true
	return e
}

func (m *Machine) buildPrecise(name string, event, umask, period uint64, desc string) Entry {
	e := Entry{Name: name, Kind: KindPEBS, Description: desc}
	p, why := m.intelPMU()
	if p == nil {
		e.Reason = why
		return e
	}
	var w configWords
	if err := w.place(p.Formats["event"], event); err != nil {
		e.Reason = err.Error()
		return e
	}
	if err := w.place(p.Formats["umask"], umask); err != nil {
		e.Reason = err.Error()
		return e
	}
	e.Event = m.pebsEvent(name, p, w, period)
	e.Note = m.hybridNote(p)
	e.Available = true
	return e
}

// pebsEvent: precise_ip=2 asks for zero skid and makes the kernel use
// PEBS, whose record holds the data linear address; 2 rather than 3
// because 3 is only honoured on some models and counters. It is capped by
// caps/max_precise when the kernel publishes it.
func (m *Machine) pebsEvent(name string, p *PMU, w configWords, period uint64) Event {
	a := newAttr(p.Type, 0)
	w.apply(&a)
	a.Sample = period
	a.Sample_type = sampleMem
	precise := 2
	if v, err := strconv.Atoi(p.Caps["max_precise"]); err == nil && v < precise {
		precise = v
	}
	setPrecise(&a, precise)
	return Event{Name: name, PMU: p.Name, Kind: KindPEBS, Attr: a, CPUs: p.CPUs, FreqAllowed: true, PeriodUnit: "events",
		Measures: Measures{Addr: true, DataSrc: true}}
}

func (m *Machine) buildIBS() Entry {
	e := Entry{Name: NameIBSOp, Kind: KindIBS,
		Description: "AMD IBS op: tagged micro-ops with data address, cache-miss latency and data source"}
	p := m.PMUs["ibs_op"]
	if p == nil {
		switch {
		case m.CPU.Vendor != VendorAMD:
			e.Reason = fmt.Sprintf("needs an AMD CPU with IBS; this CPU is %s%s", vendorName(m.CPU.Vendor), modelSuffix(m.CPU))
		case !m.CPU.IBS && m.CPU.Hypervisor:
			e.Reason = "no ibs_op PMU in /sys/bus/event_source/devices: virtualized without IBS passthrough (cpuinfo has the hypervisor flag and lacks the ibs flag)"
		case !m.CPU.IBS:
			e.Reason = "no ibs_op PMU in /sys/bus/event_source/devices and cpuinfo lacks the ibs flag"
		default:
			e.Reason = "no ibs_op PMU in /sys/bus/event_source/devices although the CPU has ibs (kernel built without CONFIG_PERF_EVENTS_AMD?)"
		}
		return e
	}
	if !m.kernelAtLeast(6, 1) {
		e.Reason = fmt.Sprintf("kernel %s is older than 6.1: ibs_op samples carry no data address or data source there", m.Kernel)
		return e
	}
	var w configWords
	// cnt_ctl=1 counts dispatched ops instead of cycles, so each op has
	// the same chance to be tagged: samples are proportional to executed
	// ops, not biased toward ops that follow long stalls.
	if f, ok := p.Formats["cnt_ctl"]; ok {
		_ = w.place(f, 1)
	} else {
		e.Note = "IBS counts cycles here (no cnt_ctl format: op counting unsupported)"
	}
	ev := m.rawEvent(NameIBSOp, p, w)
	ev.Attr.Sample = 100000 // ops; IBS ignores the low 4 bits of the period
	ev.PeriodUnit = "ops"
	if w[0] == 0 {
		ev.PeriodUnit = "cycles"
	}
	if ev.Attr.Bits&unix.PerfBitExcludeKernel == 0 {
		e.Note = strings.TrimPrefix(e.Note+"; IBS cannot exclude the kernel before Linux 6.14 (no swfilt): kernel samples are dropped by the BPF program", "; ")
	}
	e.Event, e.Available = ev, true
	return e
}

// ibsDefaults: IBS has PERF_PMU_CAP_NO_EXCLUDE, so any exclude_* flag is
// rejected, unless the swfilt format (Linux 6.14+) enables software
// filtering of kernel samples.
func (m *Machine) ibsDefaults(ev *Event, p *PMU) {
	ev.Attr.Sample_type = sampleMem
	ev.Measures = Measures{Addr: true, Weight: true, DataSrc: true}
	if f, ok := p.Formats["swfilt"]; ok {
		var w configWords
		w[0], w[1], w[2] = ev.Attr.Config, ev.Attr.Ext1, ev.Attr.Ext2
		_ = w.place(f, 1)
		w.apply(&ev.Attr)
		ev.Attr.Bits = unix.PerfBitDisabled | unix.PerfBitExcludeKernel
		return
	}
	ev.Attr.Bits = unix.PerfBitDisabled
}

// speDefaults: SPE filters by exception level itself (exclude_kernel is
// honoured), rejects exclude_idle and frequency mode, and writes records
// to the AUX buffer.
func (m *Machine) speDefaults(ev *Event, p *PMU) {
	ev.Attr.Sample_type = sampleMem
	ev.Attr.Bits = unix.PerfBitDisabled | unix.PerfBitExcludeKernel
	ev.Measures = Measures{Addr: true, Weight: true, DataSrc: true}
	ev.AUX = true
	ev.FreqAllowed = false
	ev.PeriodUnit = "ops"
	ev.Attr.Sample = 4096
	if v, err := strconv.ParseUint(p.Caps["min_interval"], 10, 64); err == nil && v > ev.Attr.Sample {
		ev.Attr.Sample = v
	}
}

func (m *Machine) buildSPE() Entry {
	e := Entry{Name: NameSPE, Kind: KindSPE,
		Description: fmt.Sprintf("ARM SPE: sampled loads slower than %d cycles with virtual and physical data address, latency and data source", DefaultLoadLatency)}
	p := m.spePMU()
	if p == nil {
		if m.CPU.Vendor != VendorARM {
			e.Reason = fmt.Sprintf("needs an arm64 CPU with SPE; this CPU is %s%s", vendorName(m.CPU.Vendor), modelSuffix(m.CPU))
		} else {
			e.Reason = "no arm_spe_* PMU in /sys/bus/event_source/devices (no SPE on this core, or not described by firmware/virtualized)"
		}
		return e
	}
	var w configWords
	terms := []struct {
		name string
		v    uint64
	}{{"ts_enable", 1}, {"pa_enable", 1}, {"load_filter", 1}, {"min_latency", DefaultLoadLatency}}
	for _, t := range terms {
		f, ok := p.Formats[t.name]
		if !ok {
			e.Reason = fmt.Sprintf("the %s PMU has no %q format field", p.Name, t.name)
			return e
		}
		if err := w.place(f, t.v); err != nil {
			e.Reason = err.Error()
			return e
		}
	}
	ev := m.rawEvent(NameSPE, p, w)
	e.Event, e.Available = ev, true
	e.Note = "records are written to the AUX buffer, not delivered as samples to the BPF program; pa_enable needs CAP_PERFMON"
	return e
}

// SortedEventNames is for help texts: every catalog name.
func SortedEventNames() []string {
	out := append([]string(nil), catalogOrder...)
	sort.Strings(out)
	return out
}
