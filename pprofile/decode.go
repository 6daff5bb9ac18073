package pprofile

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/djx-bpf/djx-bpf/report"
	"github.com/google/pprof/profile"
)

// Read decodes a profile written by Write (gzipped or not): one report per
// pid, in the order they were written. A file of unknown origin may be a
// bomb: it is read and decompressed up to MaxBytes, and its messages are
// counted (see checkMessages) before it is parsed.
func Read(r io.Reader) ([]*report.Report, error) {
	data, err := readCapped(r)
	if err != nil {
		return nil, err
	}
	p, err := profile.ParseData(data)
	if err != nil {
		return nil, fmt.Errorf("not a valid pprof profile (truncated or corrupt?): %w", err)
	}
	return Decode(p)
}

// decoded is one report being rebuilt.
type decoded struct {
	rep     *report.Report
	objects map[string]int   // objectKey → index in rep.Objects
	paths   []map[string]int // per object: path key → index in Accesses
	rest    map[string]int   // remainder: where + data type + path key → index
}

// objectKey identifies an object by its frame (type and site) and
// allocation path.
func objectKey(objFrame string, allocPath []string) string {
	return objFrame + "\x00" + strings.Join(allocPath, "\x00")
}

// Decode rebuilds the reports of a profile written by Encode: the metadata
// from its comments, the access paths and the remainder from its samples.
// Reports of one pid (as in a profile merged by pprof itself) are merged.
func Decode(p *profile.Profile) ([]*report.Report, error) {
	var (
		reps  []*report.Report
		byPID = make(map[int64]int)
		group [][]*report.Report
	)
	for _, c := range p.Comments {
		js, ok := strings.CutPrefix(c, CommentPrefix)
		if !ok {
			continue
		}
		var m meta
		if err := json.Unmarshal([]byte(js), &m); err != nil {
			return nil, fmt.Errorf("corrupt djx-bpf metadata: %w", err)
		}
		switch {
		case m.Version > Version:
			return nil, fmt.Errorf("written by a newer djx-bpf (format version %d, this one reads %d)", m.Version, Version)
		case m.Version < 1:
			return nil, fmt.Errorf("corrupt djx-bpf metadata: format version %d", m.Version)
		case m.Report == nil:
			return nil, fmt.Errorf("corrupt djx-bpf metadata: no report")
		}
		pid := int64(m.Report.PID)
		if i, ok := byPID[pid]; ok {
			group[i] = append(group[i], m.Report)
			continue
		}
		byPID[pid] = len(group)
		group = append(group, []*report.Report{m.Report})
	}
	if len(group) == 0 {
		return nil, fmt.Errorf("%w: no %q comment (a pprof from another tool?)", ErrForeign, strings.TrimSuffix(CommentPrefix, ":"))
	}
	if err := checkSampleTypes(p); err != nil {
		return nil, err
	}
	ds := make([]*decoded, len(group))
	for i, g := range group {
		r := g[0]
		if len(g) > 1 {
			r = report.Merge(g...)
			r.PID = g[0].PID
		}
		d := &decoded{rep: r, objects: make(map[string]int, len(r.Objects)), paths: make([]map[string]int, len(r.Objects)), rest: make(map[string]int)}
		for k := range r.Objects {
			o := &r.Objects[k]
			o.Accesses = nil
			d.objects[objectKey(report.ObjectFrame(o), o.Lineage())] = k
		}
		r.Remainder = nil
		ds[i] = d
		reps = append(reps, r)
	}
	frames := make(map[*profile.Location][]string)
	var stack []string
	for _, s := range p.Sample {
		kind := label(s, "kind")
		if kind != KindAccess && kind != KindRemainder {
			continue
		}
		n := s.Value[ValSamples]
		if n < 0 {
			return nil, fmt.Errorf("corrupt sample: %d samples", n)
		}
		if n == 0 {
			continue
		}
		pids := s.NumLabel["pid"]
		if len(pids) != 1 {
			return nil, fmt.Errorf("corrupt sample: %d pid labels", len(pids))
		}
		i, ok := byPID[pids[0]]
		if !ok {
			return nil, fmt.Errorf("corrupt sample: pid %d has no djx-bpf metadata", pids[0])
		}
		d := ds[i]
		stack = stack[:0]
		for _, l := range s.Location {
			f, ok := frames[l]
			if !ok {
				f = locFrames(l)
				frames[l] = f
			}
			stack = append(stack, f...)
		}
		if kind == KindRemainder {
			a := report.Access{Where: label(s, "where"), DataType: label(s, LabelDataType)}
			if root := report.RemainderRoot(&a); len(stack) == 0 || stack[len(stack)-1] != root {
				return nil, fmt.Errorf("corrupt sample: remainder sample does not end in %q", root)
			}
			d.addRemainder(a.Where, a.DataType, stack[:len(stack)-1], uint64(n), s)
			continue
		}
		at := slices.IndexFunc(stack, func(f string) bool { return strings.HasPrefix(f, "[object] ") })
		if at < 0 {
			return nil, fmt.Errorf("corrupt sample: access sample without an object frame")
		}
		k, ok := d.objects[objectKey(stack[at], stack[at+1:])]
		if !ok {
			return nil, fmt.Errorf("corrupt sample: object %s (allocated at %s) is not in the metadata of pid %d", stack[at], strings.Join(stack[at+1:], " <- "), d.rep.PID)
		}
		d.addAccess(k, stack[:at], uint64(n), s)
	}
	for _, d := range ds {
		for k := range d.rep.Objects {
			o := &d.rep.Objects[k]
			var sum uint64
			for _, a := range o.Accesses {
				sum += a.Samples
			}
			if sum > o.Samples {
				return nil, fmt.Errorf("corrupt profile: access paths of %s hold %d samples, the object %d", report.ObjectFrame(o), sum, o.Samples)
			}
		}
		d.rep.Finish()
	}
	return reps, nil
}

func (d *decoded) addAccess(obj int, path []string, n uint64, s *profile.Sample) {
	o := &d.rep.Objects[obj]
	if d.paths[obj] == nil {
		d.paths[obj] = make(map[string]int)
	}
	key := strings.Join(path, "\x00")
	if i, ok := d.paths[obj][key]; ok {
		o.Accesses[i].Samples += n
		addMetrics(&o.Accesses[i], s)
		return
	}
	d.paths[obj][key] = len(o.Accesses)
	o.Accesses = append(o.Accesses, report.Access{Path: clonePath(path), Samples: n})
	addMetrics(&o.Accesses[len(o.Accesses)-1], s)
}

func (d *decoded) addRemainder(where, dataType string, path []string, n uint64, s *profile.Sample) {
	key := where + "\x01" + dataType + "\x01" + strings.Join(path, "\x00")
	if i, ok := d.rest[key]; ok {
		d.rep.Remainder[i].Samples += n
		addMetrics(&d.rep.Remainder[i], s)
		return
	}
	d.rest[key] = len(d.rep.Remainder)
	d.rep.Remainder = append(d.rep.Remainder, report.Access{Where: where, DataType: dataType, Path: clonePath(path), Samples: n})
	addMetrics(&d.rep.Remainder[len(d.rep.Remainder)-1], s)
}

// addMetrics adds the memory metrics and NUMA placement a sample carries
// (metricLabels) to its access path. Negative values are corrupt input and
// are left out.
func addMetrics(a *report.Access, s *profile.Sample) {
	num := func(k string) uint64 {
		if v := s.NumLabel[k]; len(v) == 1 && v[0] > 0 {
			return uint64(v[0])
		}
		return 0
	}
	if _, ok := s.NumLabel[numMemSamples]; ok {
		m := &report.MemMetrics{Samples: num(numMemSamples), TLBMisses: num(numTLBMisses), HitM: num(numHitM), Remote: num(numRemoteMem)}
		if len(s.Value) > ValLatency && s.Value[ValLatency] > 0 {
			m.Latency = uint64(s.Value[ValLatency])
		}
		for k := range s.NumLabel {
			if l, ok := strings.CutPrefix(k, numLevel); ok {
				if m.Levels == nil {
					m.Levels = make(map[string]uint64)
				}
				m.Levels[l] = num(k)
			}
		}
		a.Mem = report.SumMem(a.Mem, m)
	}
	if _, ok := s.NumLabel[numRemote]; ok {
		n := &report.NUMAMetrics{Home: map[int]uint64{}, From: map[int]uint64{}, Remote: num(numRemote), Unknown: num(numUnknown)}
		for k := range s.NumLabel {
			if v, ok := strings.CutPrefix(k, numHome); ok {
				if node, err := strconv.Atoi(v); err == nil {
					n.Home[node] = num(k)
				}
			} else if v, ok := strings.CutPrefix(k, numFrom); ok {
				if node, err := strconv.Atoi(v); err == nil {
					n.From[node] = num(k)
				}
			}
		}
		a.NUMA = report.SumNUMA(a.NUMA, n)
	}
}

func clonePath(p []string) []string {
	if len(p) == 0 {
		return nil
	}
	return slices.Clone(p)
}

// locFrames names the frames of a location, innermost (inlined) first.
func locFrames(l *profile.Location) []string {
	if len(l.Line) == 0 {
		return []string{fmt.Sprintf("0x%x", l.Address)}
	}
	out := make([]string, len(l.Line))
	for i, ln := range l.Line {
		name := "[unknown]"
		if ln.Function != nil {
			name = ln.Function.Name
		}
		out[i] = JoinFrame(name, ln.Line)
	}
	return out
}

func label(s *profile.Sample, key string) string {
	if v := s.Label[key]; len(v) == 1 {
		return v[0]
	}
	return ""
}

// checkSampleTypes wants the value types Encode writes; files from before
// the latency type have its first six.
func checkSampleTypes(p *profile.Profile) error {
	ok := len(p.SampleType) == len(SampleTypes) || len(p.SampleType) == ValLatency
	for i := 0; ok && i < len(p.SampleType); i++ {
		ok = p.SampleType[i].Type == SampleTypes[i].Type && p.SampleType[i].Unit == SampleTypes[i].Unit
	}
	if ok {
		return nil
	}
	var got, want []string
	for _, t := range p.SampleType {
		got = append(got, t.Type+"/"+t.Unit)
	}
	for _, t := range SampleTypes {
		want = append(want, t.Type+"/"+t.Unit)
	}
	return fmt.Errorf("corrupt profile: sample types %s, want %s", strings.Join(got, ","), strings.Join(want, ","))
}
