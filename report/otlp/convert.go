// Package otlp exports the windows of a continuous profile as OTLP
// profiles over OTLP/HTTP (protobuf), as an OpenTelemetry Collector's OTLP
// receiver takes them.
//
// OTLP profiles are a moving specification (the Collector serves them at
// /v1development/profiles, behind a feature gate): the profiles are built
// with the Collector's own data model, go.opentelemetry.io/collector/pdata
// /pprofile, so that the wire format is exactly the one the Collector of
// the same release decodes.
//
// Each window's report is first encoded as pprof by package pprofile (so
// stacks, frames and labels are the ones `djx-bpf report` and pprof show),
// and the pprof profile is mapped to OTLP:
//
//   - one ResourceProfiles per JVM, with the resource attributes host.name,
//     process.pid, process.executable.name (the main class or jar; also
//     service.name, which backends group by), process.runtime.name and
//     process.runtime.version (the JVM), process.runtime.description;
//   - one Profile per pprof sample type with samples (OTLP profiles carry
//     one sample type each): samples/count always, est_samples, alloc_*,
//     latency when the window has them; its sample_type is the pprof
//     type and unit, and its attributes say the window (djx.window.seq,
//     djx.windows_dropped, djx.event, djx.final);
//   - pprof functions, locations (one line each) and stacks (leaf first)
//     map to the shared dictionary's tables; pprof's string labels become
//     sample attributes (type, site, kind, data_type, ...) and its numeric
//     labels int attributes with their unit (pid, mem_samples, ...).
package otlp

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"strings"
	"time"

	"github.com/google/pprof/profile"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pprofile"

	"github.com/djx-bpf/djx-bpf/profiler/continuous"
	djxpprof "github.com/djx-bpf/djx-bpf/report/pprofile"
)

// Resource attribute keys, from OpenTelemetry's semantic conventions.
const (
	AttrHost        = "host.name"
	AttrPID         = "process.pid"
	AttrMain        = "process.executable.name"
	AttrService     = "service.name"
	AttrRuntimeName = "process.runtime.name"
	AttrRuntimeVer  = "process.runtime.version"
	AttrRuntimeDesc = "process.runtime.description"
)

// Profile attribute keys of djx-bpf's own.
const (
	AttrWindowSeq      = "djx.window.seq"
	AttrWindowsDropped = "djx.windows_dropped"
	AttrEvent          = "djx.event"
	AttrFinal          = "djx.final"
)

// ScopeName names the instrumentation scope of every profile.
const ScopeName = "djx-bpf"

// Build maps a window to OTLP profiles: one resource per JVM of the window.
func Build(w *continuous.Window, host string) (pprofile.Profiles, error) {
	pd := pprofile.NewProfiles()
	b := newBuilder(pd.Dictionary())
	for i := range w.JVMs {
		jp := &w.JVMs[i]
		pp, err := djxpprof.Encode(djxpprof.Options{Time: w.Start}, jp.Report)
		if err != nil {
			return pd, fmt.Errorf("encode pid %d's window %d: %w", jp.PID, w.Seq, err)
		}
		rp := pd.ResourceProfiles().AppendEmpty()
		resourceAttrs(rp.Resource().Attributes(), host, jp)
		sp := rp.ScopeProfiles().AppendEmpty()
		sp.Scope().SetName(ScopeName)
		b.profiles(sp, pp, w, jp)
	}
	return pd, nil
}

// resourceAttrs names the JVM a resource's profiles are of.
func resourceAttrs(m pcommon.Map, host string, jp *continuous.JVMProfile) {
	m.PutStr(AttrHost, host)
	m.PutInt(AttrPID, int64(jp.PID))
	if jp.Main != "" {
		m.PutStr(AttrMain, jp.Main)
		m.PutStr(AttrService, jp.Main)
	}
	m.PutStr(AttrRuntimeName, "java")
	if jvm := jp.Report.JVM; jvm != "" {
		m.PutStr(AttrRuntimeDesc, jvm)
		m.PutStr(AttrRuntimeVer, jvmVersion(jvm))
	}
}

// jvmVersion is the version in a JVM's name, "OpenJDK 64-Bit Server VM
// 17.0.15+6-Debian-1deb12u1" → "17.0.15+6-Debian-1deb12u1": its last word
// that starts with a digit, or the whole name.
func jvmVersion(name string) string {
	f := strings.Fields(name)
	for i := len(f) - 1; i >= 0; i-- {
		if f[i][0] >= '0' && f[i][0] <= '9' {
			return f[i]
		}
	}
	return name
}

// builder fills the dictionary shared by a request's profiles, each
// string, function, location, stack and attribute once: the pdata helpers
// (SetString, ...) search the tables linearly, which is quadratic in a
// profile of thousands of frames.
type builder struct {
	dict    pprofile.ProfilesDictionary
	strs    map[string]int32
	locs    map[uint64]int32 // by pprof Location ID, within one profile
	fnKeys  map[[2]int32]int32
	locKeys map[[2]int64]int32
	stacks  map[string]int32
	attrs   map[attrKey]int32
	key     []byte // a stack's key, reused
	// Of the pprof profile's samples, by index: their stack and
	// attributes, mapped once for all its sample types.
	sampleStack []int32
	sampleAttrs [][]int32
}

type attrKey struct {
	key, str string
	num      int64
	unit     string
	isNum    bool
}

func newBuilder(dict pprofile.ProfilesDictionary) *builder {
	b := &builder{dict: dict, strs: map[string]int32{}, fnKeys: map[[2]int32]int32{}, locKeys: map[[2]int64]int32{},
		stacks: map[string]int32{}, attrs: map[attrKey]int32{}}
	// Index 0 of every table is the zero value, as the specification asks.
	b.str("")
	dict.MappingTable().AppendEmpty()
	dict.FunctionTable().AppendEmpty()
	dict.LocationTable().AppendEmpty()
	dict.StackTable().AppendEmpty()
	dict.AttributeTable().AppendEmpty()
	dict.LinkTable().AppendEmpty()
	m := dict.MappingTable().AppendEmpty()
	m.SetFilenameStrindex(b.str("djx-bpf"))
	return b
}

// mappingIndex is the one mapping, djx-bpf's (pprofile's).
const mappingIndex = 1

func (b *builder) str(s string) int32 {
	if i, ok := b.strs[s]; ok {
		return i
	}
	i := int32(b.dict.StringTable().Len())
	b.dict.StringTable().Append(s)
	b.strs[s] = i
	return i
}

func (b *builder) attr(k attrKey) int32 {
	if i, ok := b.attrs[k]; ok {
		return i
	}
	i := int32(b.dict.AttributeTable().Len())
	a := b.dict.AttributeTable().AppendEmpty()
	a.SetKeyStrindex(b.str(k.key))
	if k.isNum {
		a.Value().SetInt(k.num)
	} else {
		a.Value().SetStr(k.str)
	}
	if k.unit != "" {
		a.SetUnitStrindex(b.str(k.unit))
	}
	b.attrs[k] = i
	return i
}

// function maps a pprof function by name and file.
func (b *builder) function(f *profile.Function) int32 {
	key := [2]int32{b.str(f.Name), b.str(f.Filename)}
	if i, ok := b.fnKeys[key]; ok {
		return i
	}
	i := int32(b.dict.FunctionTable().Len())
	fn := b.dict.FunctionTable().AppendEmpty()
	fn.SetNameStrindex(key[0])
	fn.SetSystemNameStrindex(b.str(f.SystemName))
	fn.SetFilenameStrindex(key[1])
	fn.SetStartLine(f.StartLine)
	b.fnKeys[key] = i
	return i
}

// location maps a pprof location (symbolized: one line, no address).
func (b *builder) location(l *profile.Location) int32 {
	if i, ok := b.locs[l.ID]; ok {
		return i
	}
	var fi int32
	var line int64
	if len(l.Line) > 0 {
		fi, line = b.function(l.Line[0].Function), l.Line[0].Line
	}
	key := [2]int64{int64(fi), line}
	i, ok := b.locKeys[key]
	if !ok {
		i = int32(b.dict.LocationTable().Len())
		loc := b.dict.LocationTable().AppendEmpty()
		loc.SetMappingIndex(mappingIndex)
		for _, ln := range l.Line {
			ol := loc.Lines().AppendEmpty()
			ol.SetFunctionIndex(b.function(ln.Function))
			ol.SetLine(ln.Line)
		}
		b.locKeys[key] = i
	}
	b.locs[l.ID] = i
	return i
}

// stack maps a sample's locations, leaf first in both formats.
func (b *builder) stack(locs []*profile.Location) int32 {
	idx := make([]int32, len(locs))
	key := b.key[:0]
	for i, l := range locs {
		idx[i] = b.location(l)
		key = binary.LittleEndian.AppendUint32(key, uint32(idx[i]))
	}
	b.key = key
	if i, ok := b.stacks[string(key)]; ok {
		return i
	}
	i := int32(b.dict.StackTable().Len())
	b.dict.StackTable().AppendEmpty().LocationIndices().FromRaw(idx)
	b.stacks[string(key)] = i
	return i
}

// profiles adds to sp one profile per sample type of pp that has samples
// (samples always, so that every window of every JVM shows).
func (b *builder) profiles(sp pprofile.ScopeProfiles, pp *profile.Profile, w *continuous.Window, jp *continuous.JVMProfile) {
	b.locs = map[uint64]int32{} // pprof's ids are per profile
	b.sampleStack = b.sampleStack[:0]
	b.sampleAttrs = b.sampleAttrs[:0]
	var id pprofile.ProfileID
	rand.Read(id[:])
	for vi, vt := range pp.SampleType {
		if vi != djxpprof.ValSamples && !hasValue(pp, vi) {
			continue
		}
		p := sp.Profiles().AppendEmpty()
		id[15] = byte(vi) // one id per window and JVM, told apart by type
		p.SetProfileID(id)
		p.SampleType().SetTypeStrindex(b.str(vt.Type))
		p.SampleType().SetUnitStrindex(b.str(vt.Unit))
		p.PeriodType().SetTypeStrindex(b.str(pp.PeriodType.Type))
		p.PeriodType().SetUnitStrindex(b.str(pp.PeriodType.Unit))
		p.SetPeriod(pp.Period)
		p.SetTime(pcommon.NewTimestampFromTime(w.Start))
		p.SetDurationNano(uint64(max(w.End.Sub(w.Start), time.Duration(0))))
		p.AttributeIndices().Append(
			b.attr(attrKey{key: AttrWindowSeq, num: int64(w.Seq), isNum: true}),
			b.attr(attrKey{key: AttrWindowsDropped, num: int64(w.Dropped), isNum: true}),
			b.attr(attrKey{key: AttrEvent, str: jp.Report.Event}),
			b.attr(attrKey{key: AttrFinal, str: fmt.Sprint(jp.Final)}))
		for si, s := range pp.Sample {
			if s.Value[vi] != 0 {
				b.sample(p, si, s, vi)
			}
		}
	}
}

func hasValue(pp *profile.Profile, vi int) bool {
	for _, s := range pp.Sample {
		if s.Value[vi] != 0 {
			return true
		}
	}
	return false
}

// sample adds pprof sample s (the si-th) value vi to p, its labels as
// attributes.
func (b *builder) sample(p pprofile.Profile, si int, s *profile.Sample, vi int) {
	os := p.Samples().AppendEmpty()
	stack, attrs := b.mapSample(si, s)
	os.SetStackIndex(stack)
	os.Values().Append(s.Value[vi])
	os.AttributeIndices().Append(attrs...)
}

// mapSample maps pprof sample s's stack and labels, once for all the sample
// types it has values of.
func (b *builder) mapSample(si int, s *profile.Sample) (int32, []int32) {
	for len(b.sampleStack) <= si {
		b.sampleStack = append(b.sampleStack, -1)
		b.sampleAttrs = append(b.sampleAttrs, nil)
	}
	if b.sampleStack[si] >= 0 {
		return b.sampleStack[si], b.sampleAttrs[si]
	}
	stack := b.stack(s.Location)
	var attrs []int32
	for k, vs := range s.Label {
		for _, v := range vs {
			attrs = append(attrs, b.attr(attrKey{key: k, str: v}))
		}
	}
	for k, vs := range s.NumLabel {
		unit := ""
		if u := s.NumUnit[k]; len(u) > 0 {
			unit = u[0]
		}
		for _, v := range vs {
			attrs = append(attrs, b.attr(attrKey{key: k, num: v, unit: unit, isNum: true}))
		}
	}
	b.sampleStack[si], b.sampleAttrs[si] = stack, attrs
	return stack, attrs
}
