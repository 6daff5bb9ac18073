package pprofile

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/djx-bpf/djx-bpf/report"
	"github.com/djx-bpf/djx-bpf/safety/safefs"
	"github.com/google/pprof/profile"
)

// Read decodes a profile written by Write (gzipped or not): one report per
// pid, in the order they were written. A file of unknown origin may be a
// bomb: it is read and decompressed up to MaxBytes, and its messages are
// counted (see checkMessages) before it is parsed; Decode bounds the frames
// its locations expand to.
func Read(r io.Reader) ([]*report.Report, error) {
	data, err := readCapped(r)
	if err != nil {
		return nil, err
	}
	p, err := profile.ParseData(data)
	if err != nil {
		return nil, fmt.Errorf("not a valid pprof profile (truncated or corrupt?): %w", clippedError{err})
	}
	return Decode(p)
}

// decoded is one report being rebuilt. Its keys are frame ids (see
// frameTable.keyOf), so that a key costs 4 bytes a frame however long the
// frame's name.
type decoded struct {
	rep     *report.Report
	objects map[string]int   // object frame + allocation path → index in rep.Objects
	paths   []map[string]int // per object: path → index in Accesses
	rest    map[string]int   // remainder: where + data type + path → index
}

// frameTable interns the frames of a profile, and counts what it expands
// against the limits of bomb.go.
type frameTable struct {
	ids    map[string]uint32
	names  []string
	locs   map[*profile.Location][]uint32 // a location's frames, innermost first
	frames int                            // frames expanded, of samples and metadata
	bytes  int                            // bytes of frame names built
	key    []byte
}

func newFrameTable() *frameTable {
	return &frameTable{ids: make(map[string]uint32), locs: make(map[*profile.Location][]uint32)}
}

func (t *frameTable) id(frame string) uint32 {
	if i, ok := t.ids[frame]; ok {
		return i
	}
	i := uint32(len(t.names))
	t.ids[frame] = i
	t.names = append(t.names, frame)
	return i
}

// count adds n frames to those expanded.
func (t *frameTable) count(n int) error {
	if t.frames += n; t.frames > maxFrames {
		return fmt.Errorf("corrupt profile: more than %d frames once locations are expanded: %w", maxFrames, safefs.ErrTooLarge)
	}
	return nil
}

// loc returns the frames of a location, innermost (inlined) first.
func (t *frameTable) loc(l *profile.Location) ([]uint32, error) {
	if ids, ok := t.locs[l]; ok {
		return ids, nil
	}
	if len(l.Line) > maxStackFrames {
		return nil, fmt.Errorf("corrupt profile: a location of %d lines, more than %d frames: %w", len(l.Line), maxStackFrames, safefs.ErrTooLarge)
	}
	if len(l.Line) == 0 {
		ids := []uint32{t.id(fmt.Sprintf("0x%x", l.Address))}
		t.locs[l] = ids
		return ids, nil
	}
	ids := make([]uint32, len(l.Line))
	for i, ln := range l.Line {
		name := "[unknown]"
		if ln.Function != nil {
			name = ln.Function.Name
		}
		if ln.Line > 0 { // a new string; the name alone is the string table's
			if t.bytes += len(name); t.bytes > maxFrameBytes {
				return nil, fmt.Errorf("corrupt profile: frame names of more than %d bytes: %w", maxFrameBytes, safefs.ErrTooLarge)
			}
		}
		ids[i] = t.id(JoinFrame(name, ln.Line))
	}
	t.locs[l] = ids
	return ids, nil
}

// keyOf builds the key of ids in t.key (reused: convert it to a string to
// keep it).
func (t *frameTable) keyOf(ids ...uint32) []byte {
	t.key = t.key[:0]
	for _, id := range ids {
		t.key = binary.LittleEndian.AppendUint32(t.key, id)
	}
	return t.key
}

// strings names ids.
func (t *frameTable) strings(ids []uint32) []string {
	if len(ids) == 0 {
		return nil
	}
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = t.names[id]
	}
	return out
}

// Decode rebuilds the reports of a profile written by Encode: the metadata
// from its comments, the access paths and the remainder from its samples.
// Reports of one pid (as in a profile merged by pprof itself) are merged.
func Decode(p *profile.Profile) ([]*report.Report, error) {
	group, byPID, err := readMeta(p)
	if err != nil {
		return nil, err
	}
	if err := checkSampleTypes(p); err != nil {
		return nil, err
	}
	ft := newFrameTable()
	ds := make([]*decoded, len(group))
	var reps []*report.Report
	for i, g := range group {
		if ds[i], err = newDecoded(ft, g); err != nil {
			return nil, err
		}
		reps = append(reps, ds[i].rep)
	}
	var stack []uint32
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
		if stack, err = ft.expand(s, stack[:0]); err != nil {
			return nil, err
		}
		if err := ds[i].addSample(ft, s, kind, stack, uint64(n)); err != nil {
			return nil, err
		}
	}
	for _, d := range ds {
		if err := d.finish(); err != nil {
			return nil, err
		}
	}
	return reps, nil
}

// readMeta reads the reports of p's metadata comments, grouped by pid in
// the order the pids first appear; byPID gives a pid's group.
func readMeta(p *profile.Profile) (group [][]*report.Report, byPID map[int64]int, err error) {
	byPID = make(map[int64]int)
	for _, c := range p.Comments {
		js, ok := strings.CutPrefix(c, CommentPrefix)
		if !ok {
			continue
		}
		var m meta
		if err := json.Unmarshal([]byte(js), &m); err != nil {
			return nil, nil, fmt.Errorf("corrupt djx-bpf metadata: %w", clippedError{err})
		}
		switch {
		case m.Version > Version:
			return nil, nil, fmt.Errorf("written by a newer djx-bpf (format version %d, this one reads %d)", m.Version, Version)
		case m.Version < 1:
			return nil, nil, fmt.Errorf("corrupt djx-bpf metadata: format version %d", m.Version)
		case m.Report == nil:
			return nil, nil, fmt.Errorf("corrupt djx-bpf metadata: no report")
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
		return nil, nil, fmt.Errorf("%w: no %q comment (a pprof from another tool?)", ErrForeign, strings.TrimSuffix(CommentPrefix, ":"))
	}
	return group, byPID, nil
}

// newDecoded starts the report of one pid from the reports of its
// metadata, merged, without their access paths and remainder, which the
// samples give back.
func newDecoded(ft *frameTable, g []*report.Report) (*decoded, error) {
	r := g[0]
	if len(g) > 1 {
		r = report.Merge(g...)
		r.PID = g[0].PID
	}
	d := &decoded{rep: r, objects: make(map[string]int, len(r.Objects)), paths: make([]map[string]int, len(r.Objects)), rest: make(map[string]int)}
	for k := range r.Objects {
		o := &r.Objects[k]
		o.Accesses = nil
		lin := o.Lineage()
		if err := ft.count(1 + len(lin)); err != nil {
			return nil, err
		}
		ids := []uint32{ft.id(report.ObjectFrame(o))}
		for _, f := range lin {
			ids = append(ids, ft.id(f))
		}
		d.objects[string(ft.keyOf(ids...))] = k
	}
	r.Remainder = nil
	return d, nil
}

// expand appends the frames of s's locations to stack, capped at
// maxStackFrames, and counts them.
func (t *frameTable) expand(s *profile.Sample, stack []uint32) ([]uint32, error) {
	for _, l := range s.Location {
		f, err := t.loc(l)
		if err != nil {
			return nil, err
		}
		if len(stack)+len(f) > maxStackFrames {
			return nil, fmt.Errorf("corrupt sample: more than %d frames once its locations are expanded: %w", maxStackFrames, safefs.ErrTooLarge)
		}
		stack = append(stack, f...)
	}
	if err := t.count(len(stack)); err != nil {
		return nil, err
	}
	return stack, nil
}

// addSample adds n samples of kind on stack, the frames of s: to the
// remainder, or to the object whose frames end the stack.
func (d *decoded) addSample(ft *frameTable, s *profile.Sample, kind string, stack []uint32, n uint64) error {
	if kind == KindRemainder {
		a := report.Access{Where: label(s, "where"), DataType: label(s, LabelDataType)}
		if root := report.RemainderRoot(&a); len(stack) == 0 || ft.names[stack[len(stack)-1]] != root {
			return fmt.Errorf("corrupt sample: remainder sample does not end in %q", clip(root))
		}
		d.addRemainder(ft, a.Where, a.DataType, stack[:len(stack)-1], n, s)
		return nil
	}
	at := slices.IndexFunc(stack, func(f uint32) bool { return strings.HasPrefix(ft.names[f], "[object] ") })
	if at < 0 {
		return fmt.Errorf("corrupt sample: access sample without an object frame")
	}
	k, ok := d.objects[string(ft.keyOf(stack[at:]...))]
	if !ok {
		return fmt.Errorf("corrupt sample: object %s (allocated at %s) is not in the metadata of pid %d", clip(ft.names[stack[at]]), clipJoin(ft.strings(stack[at+1:]), " <- "), d.rep.PID)
	}
	d.addAccess(ft, k, stack[:at], n, s)
	return nil
}

// finish refuses an object whose access paths hold more samples than it
// has, and finishes the report.
func (d *decoded) finish() error {
	for k := range d.rep.Objects {
		o := &d.rep.Objects[k]
		var sum uint64
		for _, a := range o.Accesses {
			sum += a.Samples
		}
		if sum > o.Samples {
			return fmt.Errorf("corrupt profile: access paths of %s hold %d samples, the object %d", clip(report.ObjectFrame(o)), sum, o.Samples)
		}
	}
	d.rep.Finish()
	return nil
}

func (d *decoded) addAccess(ft *frameTable, obj int, path []uint32, n uint64, s *profile.Sample) {
	o := &d.rep.Objects[obj]
	if d.paths[obj] == nil {
		d.paths[obj] = make(map[string]int)
	}
	key := ft.keyOf(path...)
	if i, ok := d.paths[obj][string(key)]; ok {
		o.Accesses[i].Samples += n
		addMetrics(&o.Accesses[i], s)
		return
	}
	d.paths[obj][string(key)] = len(o.Accesses)
	o.Accesses = append(o.Accesses, report.Access{Path: ft.strings(path), Samples: n})
	addMetrics(&o.Accesses[len(o.Accesses)-1], s)
}

func (d *decoded) addRemainder(ft *frameTable, where, dataType string, path []uint32, n uint64, s *profile.Sample) {
	key := binary.LittleEndian.AppendUint32(ft.keyOf(path...), ft.id(where))
	key = binary.LittleEndian.AppendUint32(key, ft.id(dataType))
	ft.key = key
	if i, ok := d.rest[string(key)]; ok {
		d.rep.Remainder[i].Samples += n
		addMetrics(&d.rep.Remainder[i], s)
		return
	}
	d.rest[string(key)] = len(d.rep.Remainder)
	d.rep.Remainder = append(d.rep.Remainder, report.Access{Where: where, DataType: dataType, Path: ft.strings(path), Samples: n})
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
	for _, t := range p.SampleType[:min(len(p.SampleType), len(SampleTypes)+1)] {
		got = append(got, clip(t.Type)+"/"+clip(t.Unit))
	}
	for _, t := range SampleTypes {
		want = append(want, t.Type+"/"+t.Unit)
	}
	return fmt.Errorf("corrupt profile: sample types %s, want %s", clipJoin(got, ","), strings.Join(want, ","))
}
