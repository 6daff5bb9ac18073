// Package event maps --event to the sample source the loader opens:
// decode (a software timer and instruction decoding), page faults, or a
// PMU event that samples data addresses; and the loader's configuration
// for it.
package event

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/djx-bpf/djx-bpf/loader"
	"github.com/djx-bpf/djx-bpf/naming/numa"
	"github.com/djx-bpf/djx-bpf/sources/pmu"
)

// Source is the chosen sample source: the loader's kind, and for hardware
// events the event to open and what its samples measure.
type Source struct {
	Kind  loader.Source
	Event *pmu.Event // nil but for hardware events
	Name  string     // what the report calls it
}

// AutoLine is the short form of the note on the source auto picked: the
// reason, a long line about this machine's PMUs, comes with -v or from
// `djx-bpf events`.
func AutoLine(name string) string {
	if name == pmu.NameDecode {
		return "event auto: decode (no hardware address sampling here; -v says why)"
	}
	return "event auto: " + name + " (hardware address sampling)"
}

// Choose maps --event to a sample source; for auto it also says what it
// picked and why. m describes the machine's PMUs (nil: not detected, only
// decode and page-faults work).
func Choose(event string, m *pmu.Machine) (Source, string, error) {
	switch event {
	case pmu.NameDecode:
		return Source{Kind: loader.Decode, Name: pmu.NameDecode}, "", nil
	case pmu.NamePageFaults:
		return Source{Kind: loader.PageFaults, Name: pmu.NamePageFaults}, "", nil
	}
	if m == nil {
		return Source{}, "", fmt.Errorf("event %q: this machine's PMUs could not be read; use --event decode or page-faults", event)
	}
	if event == "" || event == pmu.NameAuto {
		ev, why := m.Auto()
		src, err := fromEvent(ev)
		if err != nil {
			return Source{Kind: loader.Decode, Name: pmu.NameDecode}, fmt.Sprintf("event auto: %s is not usable (%v); using decode (software timer + instruction decoding)", ev.Name, err), nil
		}
		return src, why, nil
	}
	ev, err := m.Resolve(event)
	if err != nil {
		return Source{}, "", err
	}
	src, err := fromEvent(ev)
	if err != nil {
		return Source{}, "", fmt.Errorf("event %q: %w", event, err)
	}
	return src, "", nil
}

// errAUX and errLeader name what the BPF sampling path cannot consume yet.
var (
	errAUX    = errors.New("its records arrive through the perf AUX buffer (ARM SPE), which djx-bpf does not read yet; use decode")
	errLeader = errors.New("it needs a group leader event (mem-loads-aux on Sapphire Rapids and hybrid cores), which djx-bpf does not open yet; use MEM_LOAD_RETIRED.L1_MISS or L3_MISS")
)

func fromEvent(ev pmu.Event) (Source, error) {
	switch {
	case ev.AUX:
		return Source{}, errAUX
	case ev.Leader != nil:
		return Source{}, errLeader
	case ev.Attr.Type == unix.PERF_TYPE_SOFTWARE && ev.Attr.Config == unix.PERF_COUNT_SW_CPU_CLOCK:
		return Source{Kind: loader.Decode, Name: pmu.NameDecode}, nil
	case ev.Attr.Type == unix.PERF_TYPE_SOFTWARE && ev.Attr.Config == unix.PERF_COUNT_SW_PAGE_FAULTS:
		return Source{Kind: loader.PageFaults, Name: pmu.NamePageFaults}, nil
	}
	e := ev
	return Source{Kind: loader.Hardware, Event: &e, Name: ev.Name}, nil
}

// Rates are how often a session samples, and how often it reads.
type Rates struct {
	Freq     int           // decode sampling frequency per CPU, Hz
	HWFreq   int           // hardware: samples per second in frequency mode (0: by period)
	Period   uint64        // page-faults: every Period-th fault; hardware: every Period-th event (0: the event's default)
	StackGap time.Duration // the least time between two stacks of one thread
	Poll     time.Duration // how often the ring buffer is looked at (0: loader.PollInterval)
}

// Config is the sampler configuration for src at rates r.
func (src Source) Config(r Rates) (loader.Config, error) {
	cfg := loader.Config{Source: src.Kind, Freq: r.Freq, Period: max(r.Period, 1), StackGap: r.StackGap, Poll: r.Poll}
	if src.Event == nil {
		return cfg, nil
	}
	ev := *src.Event
	switch {
	case r.Period > 0:
		ev = ev.WithPeriod(r.Period)
	case r.HWFreq > 0:
		e, err := ev.WithFreq(uint64(r.HWFreq))
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
