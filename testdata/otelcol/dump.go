package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"sync"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/xexporter"
	"go.opentelemetry.io/collector/pdata/pprofile"
)

var dumpType = component.MustNewType("dump")

// dumpConfig names the file the profiles are appended to.
type dumpConfig struct {
	Path string `mapstructure:"path"`
	// Top is how many samples of each profile are written, largest first.
	Top int `mapstructure:"top"`
}

func newDumpFactory() xexporter.Factory {
	return xexporter.NewFactory(dumpType, func() component.Config { return &dumpConfig{Top: 20} },
		xexporter.WithProfiles(createDump, component.StabilityLevelDevelopment))
}

func createDump(_ context.Context, _ exporter.Settings, cfg component.Config) (xexporter.Profiles, error) {
	c := cfg.(*dumpConfig)
	if c.Path == "" {
		return nil, fmt.Errorf("dump exporter: path is required")
	}
	return &dump{cfg: c}, nil
}

// dump writes one JSON line per profile received.
type dump struct {
	cfg *dumpConfig
	mu  sync.Mutex
	f   *os.File
}

func (d *dump) Start(context.Context, component.Host) error {
	f, err := os.OpenFile(d.cfg.Path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("dump exporter: %w", err)
	}
	d.f = f
	return nil
}

func (d *dump) Shutdown(context.Context) error {
	if d.f == nil {
		return nil
	}
	return d.f.Close()
}

func (d *dump) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

// Line is what the exporter writes of one profile.
type Line struct {
	Resource   map[string]any `json:"resource"`
	Scope      string         `json:"scope"`
	SampleType string         `json:"sample_type"`
	Unit       string         `json:"unit"`
	TimeNanos  int64          `json:"time_nanos"`
	DurNanos   uint64         `json:"duration_nanos"`
	Attributes map[string]any `json:"attributes"`
	Samples    int            `json:"samples"`
	Total      int64          `json:"total"`
	Top        []Sample       `json:"top"`
}

// Sample is one of a profile's largest samples: its stack, leaf first,
// its value and attributes.
type Sample struct {
	Stack      []string       `json:"stack"`
	Value      int64          `json:"value"`
	Attributes map[string]any `json:"attributes"`
}

func (d *dump) ConsumeProfiles(_ context.Context, pd pprofile.Profiles) error {
	dict := pd.Dictionary()
	str := func(i int32) string {
		if i < 0 || int(i) >= dict.StringTable().Len() {
			return ""
		}
		return dict.StringTable().At(int(i))
	}
	var lines []Line
	for _, rp := range pd.ResourceProfiles().All() {
		res := rp.Resource().Attributes().AsRaw()
		for _, sp := range rp.ScopeProfiles().All() {
			for _, p := range sp.Profiles().All() {
				l := Line{Resource: res, Scope: sp.Scope().Name(), SampleType: str(p.SampleType().TypeStrindex()), Unit: str(p.SampleType().UnitStrindex()),
					TimeNanos: int64(p.Time()), DurNanos: p.DurationNano(), Samples: p.Samples().Len()}
				if m, err := pprofile.FromAttributeIndices(dict.AttributeTable(), p, dict); err == nil {
					l.Attributes = m.AsRaw()
				}
				for _, s := range p.Samples().All() {
					l.Top = append(l.Top, sampleOf(dict, s, str))
				}
				for _, s := range l.Top {
					l.Total += s.Value
				}
				sort.SliceStable(l.Top, func(a, b int) bool { return l.Top[a].Value > l.Top[b].Value })
				if len(l.Top) > d.cfg.Top {
					l.Top = l.Top[:d.cfg.Top]
				}
				lines = append(lines, l)
			}
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	enc := json.NewEncoder(d.f)
	for _, l := range lines {
		if err := enc.Encode(l); err != nil {
			return fmt.Errorf("dump exporter: %w", err)
		}
	}
	return nil
}

func sampleOf(dict pprofile.ProfilesDictionary, s pprofile.Sample, str func(int32) string) Sample {
	out := Sample{}
	for _, v := range s.Values().All() {
		out.Value += v
	}
	if m, err := pprofile.FromAttributeIndices(dict.AttributeTable(), s, dict); err == nil {
		out.Attributes = m.AsRaw()
	}
	st := s.StackIndex()
	if st < 0 || int(st) >= dict.StackTable().Len() {
		return out
	}
	for _, li := range dict.StackTable().At(int(st)).LocationIndices().All() {
		if li < 0 || int(li) >= dict.LocationTable().Len() {
			continue
		}
		for _, ln := range dict.LocationTable().At(int(li)).Lines().All() {
			fi := ln.FunctionIndex()
			if fi < 0 || int(fi) >= dict.FunctionTable().Len() {
				continue
			}
			out.Stack = append(out.Stack, str(dict.FunctionTable().At(int(fi)).NameStrindex()))
		}
	}
	return out
}
