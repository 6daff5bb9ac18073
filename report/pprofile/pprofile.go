// Package pprofile stores djx-bpf reports as pprof profiles and reads them
// back.
//
// A profile holds one report per JVM (pid). Its samples are the
// object-centric tree as pprof tools see it; each sample's stack, leaf
// first, is
//
//	access path (innermost frame first)
//	[object] TYPE @ SITE                 (report.ObjectFrame)
//	allocation path (innermost frame first)
//
// so that a flame graph's root is the allocation path's outermost frame and
// cost is grouped by object first. A census object's allocation path is
// unknown: its holder chain stands there instead, last hop first, under
// "[held by]" (report.HolderFrame, the root). Samples in no tracked object end in
// "[not in a tracked object: WHERE]" (report.RemainderFrame) instead of an
// object and its allocation path, or, when their data type is known, in
// "[type] java.util.TreeMap$Entry.left" (report.TypeFrame).
//
// Every sample has the six values of SampleTypes. Access samples carry
// samples and est_samples; each object also gets one allocation sample
// (stack: object frame, allocation path) with the four alloc values, so that
// allocation counts are neither repeated on every access path nor charged
// to one of them, and objects that no sample hit still appear in the
// alloc_* views. pprof values are integers: est_samples of an object is
// split over its paths in proportion to their samples (largest remainder,
// so the parts add up to the rounded estimate); est_alloc_* are rounded.
//
// Labels: pid (numeric), type, site and event on object samples, where on
// remainder samples, data_type on every sample whose data type is known
// (an object's: its type; a remainder sample's: its Access.DataType, so
// that pprof -tagfocus=data_type=... selects both), and kind: "access" (a
// sample on an access path of an object), "object" (samples of an object
// with no access path), "alloc" (allocation counts) or "remainder".
//
// What pprof cannot hold — statistics, notes, mode, JVM, the exact
// (floating-point) estimates, objects with no samples — is kept in one
// profile comment per report: the prefix CommentPrefix and compact JSON
// {"version":N,"report":REPORT} where REPORT is the report's JSON without
// the objects' access paths and without the remainder (the data types are
// kept whole: their samples overlap the objects' and the remainder's, so
// they are no samples of the profile). Decode takes those
// from the comment and the access paths from the samples, so that a report
// written and read back prints the same table.
package pprofile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/djx-bpf/djx-bpf/report"
	"github.com/google/pprof/profile"
)

// CommentPrefix starts the profile comment that holds a report's metadata.
const CommentPrefix = "#djx-bpf:report-json:"

// Version is the newest version of the encoding this package writes and
// reads. Version 2 adds remainder samples rooted in a "[type] ..." frame,
// which readers of version 1 refuse; a report without them is written as
// version 1, so that older djx-bpf still read it.
const Version = 2

// Sample value indices, in the order of SampleTypes.
const (
	ValSamples = iota
	ValEstSamples
	ValAllocObjects
	ValAllocBytes
	ValEstAllocObjects
	ValEstAllocBytes
	// ValLatency is the summed load latency of the access samples, where
	// the source measures it (PEBS, IBS); 0 otherwise.
	ValLatency
	numValues
)

// SampleTypes are the profile's value types; the default is samples.
var SampleTypes = [numValues]struct{ Type, Unit string }{
	{"samples", "count"},
	{"est_samples", "count"},
	{"alloc_objects", "count"},
	{"alloc_bytes", "bytes"},
	{"est_alloc_objects", "count"},
	{"est_alloc_bytes", "bytes"},
	{"latency", "cycles"},
}

// Kinds of samples, in the "kind" label.
const (
	KindAccess    = "access"
	KindObject    = "object"
	KindAlloc     = "alloc"
	KindRemainder = "remainder"
)

// LabelDataType is the label of a sample's data type: an object's type, or
// a remainder sample's Access.DataType ("java.util.TreeMap$Entry.left").
const LabelDataType = "data_type"

// ErrForeign is returned (wrapped) for a valid pprof profile that djx-bpf
// did not write.
var ErrForeign = errors.New("not a djx-bpf profile")

// Options are what a profile holds besides reports.
type Options struct {
	// Time is when profiling started; zero leaves it unset.
	Time time.Time
}

// meta is the JSON of a report's comment.
type meta struct {
	Version int            `json:"version"`
	Report  *report.Report `json:"report"`
}

// Write encodes reports, one per pid, as a gzipped pprof profile.
func Write(w io.Writer, opt Options, reps ...*report.Report) error {
	p, err := Encode(opt, reps...)
	if err != nil {
		return err
	}
	if err := p.Write(w); err != nil {
		return fmt.Errorf("write pprof profile: %w", err)
	}
	return nil
}

// Encode builds the pprof profile of reports, one per pid (report.MergeByPID
// makes them so). DurationNanos is the sum of their durations, as Merge
// adds them up.
func Encode(opt Options, reps ...*report.Report) (*profile.Profile, error) {
	p := &profile.Profile{
		DefaultSampleType: SampleTypes[ValSamples].Type,
		PeriodType:        &profile.ValueType{Type: SampleTypes[ValSamples].Type, Unit: SampleTypes[ValSamples].Unit},
		Period:            1,
	}
	for _, t := range SampleTypes {
		p.SampleType = append(p.SampleType, &profile.ValueType{Type: t.Type, Unit: t.Unit})
	}
	if !opt.Time.IsZero() {
		p.TimeNanos = opt.Time.UnixNano()
	}
	// One mapping, symbolized: pprof names it in its legend and does not
	// look for a binary to symbolize.
	m := &profile.Mapping{ID: 1, File: "djx-bpf", HasFunctions: true, HasFilenames: true, HasLineNumbers: true}
	p.Mapping = []*profile.Mapping{m}
	e := &encoder{p: p, mapping: m, locs: make(map[string]*profile.Location), funcs: make(map[string]*profile.Function)}
	seen := make(map[int]bool)
	var dur float64
	for _, r := range reps {
		if seen[r.PID] {
			return nil, fmt.Errorf("encode pprof: two reports of pid %d: merge them first", r.PID)
		}
		seen[r.PID] = true
		c, err := comment(r)
		if err != nil {
			return nil, err
		}
		p.Comments = append(p.Comments, c)
		e.report(r)
		dur += r.DurationSec
	}
	p.DurationNanos = int64(math.Round(dur * 1e9))
	return p, nil
}

// comment encodes r without its access paths and remainder.
func comment(r *report.Report) (string, error) {
	c := *r
	c.Remainder = nil
	c.Objects = make([]report.Object, len(r.Objects))
	for i, o := range r.Objects {
		o.Accesses = nil
		c.Objects[i] = o
	}
	if r.Objects == nil {
		c.Objects = nil
	}
	var b bytes.Buffer
	b.WriteString(CommentPrefix)
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	v := 1
	for i := range r.Remainder {
		if r.Remainder[i].DataType != "" {
			v = Version
			break
		}
	}
	if err := enc.Encode(meta{Version: v, Report: &c}); err != nil {
		return "", fmt.Errorf("encode pprof: report of pid %d: %w", r.PID, err)
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

type encoder struct {
	p       *profile.Profile
	mapping *profile.Mapping
	locs    map[string]*profile.Location // by frame
	funcs   map[string]*profile.Function // by name
}

// report adds r's samples.
func (e *encoder) report(r *report.Report) {
	pid := map[string][]int64{"pid": {int64(r.PID)}}
	for i := range r.Objects {
		o := &r.Objects[i]
		lin := o.Lineage()
		tail := make([]*profile.Location, 0, 1+len(lin))
		tail = append(tail, e.loc(report.ObjectFrame(o)))
		tail = e.appendLocs(tail, lin)
		labels := func(kind string) map[string][]string {
			return map[string][]string{"type": {o.Type}, "site": {o.Site}, "event": {r.Event}, "kind": {kind}, LabelDataType: {o.Type}}
		}
		weights := make([]uint64, len(o.Accesses)+1)
		var onPaths uint64
		for k, a := range o.Accesses {
			weights[k] = a.Samples
			onPaths += a.Samples
		}
		if onPaths < o.Samples {
			weights[len(o.Accesses)] = o.Samples - onPaths
		}
		est := spread(o.EstSamples, weights)
		if len(o.Accesses) > 0 {
			access := labels(KindAccess)
			for k, a := range o.Accesses {
				stack := make([]*profile.Location, 0, len(a.Path)+len(tail))
				stack = e.appendLocs(stack, a.Path)
				stack = append(stack, tail...)
				e.add(stack, access, metricLabels(pid, a.Mem, a.NUMA), ValSamples, clamp(a.Samples), ValEstSamples, est[k], ValLatency, latency(a.Mem))
			}
		}
		if n := weights[len(o.Accesses)]; n > 0 || est[len(o.Accesses)] > 0 {
			e.add(tail, labels(KindObject), pid, ValSamples, clamp(n), ValEstSamples, est[len(o.Accesses)])
		}
		if o.Objects > 0 || o.Bytes > 0 || o.EstObjects > 0 || o.EstBytes > 0 {
			e.add(tail, labels(KindAlloc), pid,
				ValAllocObjects, clamp(o.Objects), ValAllocBytes, clamp(o.Bytes),
				ValEstAllocObjects, round(o.EstObjects), ValEstAllocBytes, round(o.EstBytes))
		}
	}
	for _, a := range r.Remainder {
		stack := make([]*profile.Location, 0, len(a.Path)+1)
		stack = e.appendLocs(stack, a.Path)
		stack = append(stack, e.loc(report.RemainderRoot(&a)))
		labels := map[string][]string{"where": {a.Where}, "event": {r.Event}, "kind": {KindRemainder}}
		if a.DataType != "" {
			labels[LabelDataType] = []string{a.DataType}
		}
		e.add(stack, labels, metricLabels(pid, a.Mem, a.NUMA), ValSamples, clamp(a.Samples), ValLatency, latency(a.Mem))
	}
}

func latency(m *report.MemMetrics) int64 {
	if m == nil {
		return 0
	}
	return clamp(m.Latency)
}

// Numeric labels that carry an access path's memory metrics and NUMA
// placement, so that a profile read back shows the same table.
const (
	numMemSamples = "mem_samples"
	numTLBMisses  = "tlb_misses"
	numHitM       = "hitm"
	numRemoteMem  = "remote_mem"
	numLevel      = "level:" // + level name
	numHome       = "numa_home:"
	numFrom       = "numa_from:"
	numRemote     = "numa_remote"
	numUnknown    = "numa_unknown"
)

// metricLabels adds the labels of mem and numa to pid's (shared: copied
// only when there is something to add).
func metricLabels(pid map[string][]int64, mem *report.MemMetrics, numa *report.NUMAMetrics) map[string][]int64 {
	if mem == nil && numa == nil {
		return pid
	}
	out := maps.Clone(pid)
	if mem != nil {
		out[numMemSamples] = []int64{clamp(mem.Samples)}
		out[numTLBMisses] = []int64{clamp(mem.TLBMisses)}
		out[numHitM] = []int64{clamp(mem.HitM)}
		out[numRemoteMem] = []int64{clamp(mem.Remote)}
		for l, n := range mem.Levels {
			out[numLevel+l] = []int64{clamp(n)}
		}
	}
	if numa != nil {
		out[numRemote] = []int64{clamp(numa.Remote)}
		out[numUnknown] = []int64{clamp(numa.Unknown)}
		for n, v := range numa.Home {
			out[numHome+strconv.Itoa(n)] = []int64{clamp(v)}
		}
		for n, v := range numa.From {
			out[numFrom+strconv.Itoa(n)] = []int64{clamp(v)}
		}
	}
	return out
}

// add appends a sample; iv holds pairs of value index and value.
func (e *encoder) add(stack []*profile.Location, labels map[string][]string, num map[string][]int64, iv ...int64) {
	v := make([]int64, numValues)
	for i := 0; i+1 < len(iv); i += 2 {
		v[iv[i]] = iv[i+1]
	}
	e.p.Sample = append(e.p.Sample, &profile.Sample{Location: stack, Value: v, Label: labels, NumLabel: num})
}

// appendLocs appends the locations of frames.
func (e *encoder) appendLocs(dst []*profile.Location, frames []string) []*profile.Location {
	for _, f := range frames {
		dst = append(dst, e.loc(f))
	}
	return dst
}

// loc returns the location of one frame: a function (the frame without its
// line) and the line.
func (e *encoder) loc(frame string) *profile.Location {
	if l, ok := e.locs[frame]; ok {
		return l
	}
	name, line := SplitFrame(frame)
	fn, ok := e.funcs[name]
	if !ok {
		// No SystemName: pprof would take Name for a C++ name to simplify
		// and cut "(untracked object)" out of a remainder frame.
		fn = &profile.Function{ID: uint64(len(e.p.Function) + 1), Name: name, Filename: sourceFile(name)}
		e.funcs[name] = fn
		e.p.Function = append(e.p.Function, fn)
	}
	l := &profile.Location{ID: uint64(len(e.p.Location) + 1), Mapping: e.mapping, Line: []profile.Line{{Function: fn, Line: line}}}
	e.locs[frame] = l
	e.p.Location = append(e.p.Location, l)
	return l
}

// SplitFrame splits a frame "pkg.Class.method:12" into its function
// "pkg.Class.method" and line 12. Frames without a line ("libjvm.so`Func",
// "[stack lost]") are functions with line 0, as are synthetic frames
// ("[object] long[] @ HotArrays.allocHot:12"), which name the line in their
// function. JoinFrame inverts it.
func SplitFrame(frame string) (string, int64) {
	i := strings.LastIndexByte(frame, ':')
	if i <= 0 || frame[0] == '[' || i == len(frame)-1 || len(frame)-i-1 > 9 || frame[i+1] == '0' {
		return frame, 0
	}
	for _, c := range frame[i+1:] {
		if c < '0' || c > '9' {
			return frame, 0
		}
	}
	n, _ := strconv.ParseInt(frame[i+1:], 10, 64)
	return frame[:i], n
}

// JoinFrame is the frame of function name at line (0: none).
func JoinFrame(name string, line int64) string {
	if line > 0 {
		return name + ":" + strconv.FormatInt(line, 10)
	}
	return name
}

// sourceFile guesses a function's file for pprof's listings: the Java
// source of its outermost class ("java.lang.Thread.run" →
// "java/lang/Thread.java"), the library of a native frame
// ("libjvm.so`SpinPause" → "libjvm.so"), or "" for placeholders.
func sourceFile(name string) string {
	if strings.HasPrefix(name, "[") {
		return ""
	}
	if i := strings.IndexAny(name, "`+"); i >= 0 {
		return name[:i]
	}
	if strings.ContainsAny(name, " ()") {
		return ""
	}
	dot := strings.LastIndexByte(name, '.')
	if dot <= 0 {
		return ""
	}
	cls := name[:dot]
	if i := strings.IndexAny(cls, "$/"); i >= 0 {
		cls = cls[:i]
	}
	if cls == "" || strings.HasSuffix(cls, ".") {
		return ""
	}
	return strings.ReplaceAll(cls, ".", "/") + ".java"
}

// spread splits round(total) over weights in proportion to them, by
// largest remainder, so that the parts add up (up to float precision for
// totals beyond 2^53); with no weight it all goes to the last part.
func spread(total float64, weights []uint64) []int64 {
	out := make([]int64, len(weights))
	want := round(total)
	var sum float64
	for _, w := range weights {
		sum += float64(w)
	}
	if want == 0 || len(weights) == 0 {
		return out
	}
	if sum == 0 {
		out[len(out)-1] = want
		return out
	}
	type rem struct {
		i int
		f float64
	}
	rems := make([]rem, 0, len(weights))
	var got int64
	for i, w := range weights {
		x := float64(want) * float64(w) / sum
		fl := math.Floor(x)
		out[i] = round(fl)
		got += out[i]
		if w > 0 {
			rems = append(rems, rem{i, x - fl})
		}
	}
	sort.SliceStable(rems, func(a, b int) bool { return rems[a].f > rems[b].f })
	for k := 0; k < len(rems) && got < want; k++ {
		if out[rems[k].i] < math.MaxInt64 {
			out[rems[k].i]++
			got++
		}
	}
	return out
}

// round is x rounded to an int64, 0 for NaN and negative values.
func round(x float64) int64 {
	switch {
	case !(x > 0):
		return 0
	case x >= math.MaxInt64:
		return math.MaxInt64
	}
	return int64(math.Round(x))
}

func clamp(n uint64) int64 {
	if n > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(n)
}
