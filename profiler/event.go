package profiler

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/djx-bpf/djx-bpf/loader"
	"github.com/djx-bpf/djx-bpf/naming/numa"
	"github.com/djx-bpf/djx-bpf/sources/pmu"
)

// source is the chosen sample source: the loader's kind, and for hardware
// events the event to open and what its samples measure.
type source struct {
	kind  loader.Source
	event *pmu.Event
	name  string // what the report calls it
}

// chooseSource maps --event to a sample source; for auto it also says what
// it picked and why. m describes the machine's PMUs (nil: not detected,
// only decode and page-faults work).
// autoLine is the short form of the note on the source auto picked: the
// reason, a long line about this machine's PMUs, comes with -v or from
// `djx-bpf events`.
func autoLine(name string) string {
	if name == pmu.NameDecode {
		return "event auto: decode (no hardware address sampling here; -v says why)"
	}
	return "event auto: " + name + " (hardware address sampling)"
}

func chooseSource(event string, m *pmu.Machine) (source, string, error) {
	switch event {
	case pmu.NameDecode:
		return source{kind: loader.Decode, name: pmu.NameDecode}, "", nil
	case pmu.NamePageFaults:
		return source{kind: loader.PageFaults, name: pmu.NamePageFaults}, "", nil
	}
	if m == nil {
		return source{}, "", fmt.Errorf("event %q: this machine's PMUs could not be read; use --event decode or page-faults", event)
	}
	if event == "" || event == pmu.NameAuto {
		ev, why := m.Auto()
		src, err := fromEvent(ev)
		if err != nil {
			return source{kind: loader.Decode, name: pmu.NameDecode}, fmt.Sprintf("event auto: %s is not usable (%v); using decode (software timer + instruction decoding)", ev.Name, err), nil
		}
		return src, why, nil
	}
	ev, err := m.Resolve(event)
	if err != nil {
		return source{}, "", err
	}
	src, err := fromEvent(ev)
	if err != nil {
		return source{}, "", fmt.Errorf("event %q: %w", event, err)
	}
	return src, "", nil
}

// errAUX and errLeader name what the BPF sampling path cannot consume yet.
var (
	errAUX    = errors.New("its records arrive through the perf AUX buffer (ARM SPE), which djx-bpf does not read yet; use decode")
	errLeader = errors.New("it needs a group leader event (mem-loads-aux on Sapphire Rapids and hybrid cores), which djx-bpf does not open yet; use MEM_LOAD_RETIRED.L1_MISS or L3_MISS")
)

func fromEvent(ev pmu.Event) (source, error) {
	switch {
	case ev.AUX:
		return source{}, errAUX
	case ev.Leader != nil:
		return source{}, errLeader
	case ev.Attr.Type == unix.PERF_TYPE_SOFTWARE && ev.Attr.Config == unix.PERF_COUNT_SW_CPU_CLOCK:
		return source{kind: loader.Decode, name: pmu.NameDecode}, nil
	case ev.Attr.Type == unix.PERF_TYPE_SOFTWARE && ev.Attr.Config == unix.PERF_COUNT_SW_PAGE_FAULTS:
		return source{kind: loader.PageFaults, name: pmu.NamePageFaults}, nil
	}
	e := ev
	return source{kind: loader.Hardware, event: &e, name: ev.Name}, nil
}

// loaderConfig is the sampler configuration for src.
func (src source) loaderConfig(o *Options) (loader.Config, error) {
	cfg := loader.Config{Source: src.kind, Freq: o.Freq, Period: max(o.Period, 1), StackGap: o.StackInterval, Poll: o.Poll}
	if src.event == nil {
		return cfg, nil
	}
	ev := *src.event
	switch {
	case o.Period > 0:
		ev = ev.WithPeriod(o.Period)
	case o.HWFreq > 0:
		e, err := ev.WithFreq(uint64(o.HWFreq))
		if err != nil {
			return cfg, fmt.Errorf("event %s: --freq: %w; give --period instead", ev.Name, err)
		}
		ev = e
	}
	cfg.Attr = &ev.Attr
	if ev.CPUs != "" {
		cpus, err := numa.ParseCPUList(ev.CPUs)
		if err != nil {
			return cfg, fmt.Errorf("event %s: cpus of PMU %s: %w", ev.Name, ev.PMU, err)
		}
		cfg.CPUs = cpus
	}
	return cfg, nil
}
