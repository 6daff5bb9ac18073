package report

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Merge adds reports up into one, as for instances of one service:
//
//   - objects with equal type, site, allocation path and holder add their counts,
//     estimates and samples, and their access paths merge (equal paths add);
//   - the remainder merges the same way (equal where, data type and path
//     add); data types of equal type and field add, with their access
//     paths; an object's fields add by name;
//   - statistics merge as each field's merge tag says (Stats): counters
//     add, maxima keep the largest, heap_known holds only if it holds in
//     every report; named counts each report's named samples, also of
//     reports from before it was counted;
//   - durations add up, as pprof merges do: the result is profile-seconds,
//     and samples per second stay those of one instance;
//   - pid is kept when all reports share it, else 0; JVM, mode and event
//     are the distinct values joined; the heap sampling interval and min
//     size are kept when equal, else the largest, with a note;
//   - notes are kept once each; merging more than one report adds a note
//     that says what was merged.
//
// One report merges into an equal copy. Merge does not change its inputs.
func Merge(reps ...*Report) *Report {
	out := &Report{}
	if len(reps) == 0 {
		return out
	}
	first := reps[0]
	out.PID = first.PID
	out.AllocInterval = first.AllocInterval
	out.MinSize = first.MinSize
	out.Stats = first.Stats
	out.Stats.StackErrors = maps.Clone(first.Stats.StackErrors)
	var (
		head      = headerMerge{first: first, samePID: true, sameSetting: true}
		objs      = objectMerge{idx: make(map[string]int)}
		remainder []Access
		dataTypes []DataType
		named     uint64
		notes     = make(map[string]bool)
	)
	for n, r := range reps {
		head.add(r)
		out.DurationSec += r.DurationSec
		out.DisabledSec += r.DisabledSec
		out.AllocInterval = max(out.AllocInterval, r.AllocInterval)
		out.AllocIntervalMax = max(out.AllocIntervalMax, r.AllocIntervalMax)
		out.MinSize = max(out.MinSize, r.MinSize)
		if n > 0 {
			out.Stats.Merge(&r.Stats)
		}
		named += r.namedSamples()
		for i := range r.Objects {
			objs.add(&r.Objects[i])
		}
		remainder = append(remainder, r.Remainder...)
		dataTypes = append(dataTypes, r.DataTypes...)
		for _, note := range r.Notes {
			if n == 0 || !notes[note] { // the first report's notes stay as they are
				notes[note] = true
				out.Notes = append(out.Notes, note)
			}
		}
	}
	head.describe(out, len(reps))
	out.Objects = objs.objects()
	if remainder != nil {
		out.Remainder = MergeAccesses(remainder, 0, out.Stats.Samples)
	}
	if dataTypes != nil {
		out.DataTypes = mergeDataTypes(dataTypes)
	}
	out.Stats.Named = named
	out.Finish()
	return out
}

// headerMerge gathers what the merged report's header and notes say of
// the reports merged: their JVMs, modes, events, pids and settings.
type headerMerge struct {
	first                *Report
	jvms, modes, events  []string
	intervals, minSizes  []uint64
	pids                 []int
	samePID, sameSetting bool
}

// add notes r's JVM, mode, event, pid and settings.
func (h *headerMerge) add(r *Report) {
	h.jvms = addDistinct(h.jvms, r.JVM)
	h.modes = addDistinct(h.modes, r.Mode)
	h.events = addDistinct(h.events, r.Event)
	if !slices.Contains(h.pids, r.PID) {
		h.pids = append(h.pids, r.PID)
	}
	if !slices.Contains(h.intervals, r.AllocInterval) {
		h.intervals = append(h.intervals, r.AllocInterval)
	}
	if !slices.Contains(h.minSizes, r.MinSize) {
		h.minSizes = append(h.minSizes, r.MinSize)
	}
	h.samePID = h.samePID && r.PID == h.first.PID
	h.sameSetting = h.sameSetting && r.AllocInterval == h.first.AllocInterval && r.MinSize == h.first.MinSize
}

// describe sets out's JVM, mode, event and pid, and after its reports'
// notes adds those that say what n reports were merged; out's duration is
// already their sum.
func (h *headerMerge) describe(out *Report, n int) {
	out.JVM = strings.Join(h.jvms, ", ")
	out.Mode = strings.Join(h.modes, "+")
	out.Event = strings.Join(h.events, "+")
	if !h.samePID {
		out.PID = 0
	}
	if n > 1 {
		out.Notes = append(out.Notes, mergedNote(n, h.pids, out.DurationSec))
		if !h.sameSetting {
			out.Notes = append(out.Notes, fmt.Sprintf("the merged profiles used different settings (heap sampling intervals %s, min sizes %s): the header shows the largest",
				sizes(h.intervals), sizes(h.minSizes)))
		}
	}
}

// objectMerge adds up objects of equal type, site, allocation path and
// holder, with their access paths and fields.
type objectMerge struct {
	out      []Object
	idx      map[string]int
	accesses [][]Access
	fields   [][]FieldShare
}

func (m *objectMerge) add(o *Object) {
	k := o.Type + "\x00" + o.Site + "\x00" + strings.Join(o.AllocPath, "\x00") + "\x01" + strings.Join(o.Holder, "\x00")
	i, ok := m.idx[k]
	if !ok {
		i = len(m.out)
		m.idx[k] = i
		c := *o
		c.Accesses = nil
		c.Fields = nil
		c.AllocPath = slices.Clone(o.AllocPath)
		c.Holder = slices.Clone(o.Holder)
		// Copies, so that merging never changes its inputs.
		c.Mem, c.NUMA = SumMem(nil, o.Mem), SumNUMA(nil, o.NUMA)
		m.out = append(m.out, c)
		m.accesses = append(m.accesses, nil)
		m.fields = append(m.fields, nil)
	} else {
		m.out[i].AddCounts(o)
	}
	m.accesses[i] = append(m.accesses[i], o.Accesses...)
	m.fields[i] = append(m.fields[i], o.Fields...)
}

// objects returns the merged objects, their access paths and fields added
// up.
func (m *objectMerge) objects() []Object {
	for i := range m.out {
		if m.accesses[i] != nil {
			m.out[i].Accesses = MergeAccesses(m.accesses[i], 0, m.out[i].Samples)
		}
		if m.fields[i] != nil {
			m.out[i].Fields = mergeFields(m.fields[i])
		}
	}
	return m.out
}

// mergedNote says what n merged reports were: of one pid or of several.
func mergedNote(n int, pids []int, durationSec float64) string {
	what := fmt.Sprintf("merged %d profiles of pid %d", n, pids[0])
	if len(pids) > 1 {
		ps := make([]string, len(pids))
		for i, p := range pids {
			ps[i] = strconv.Itoa(p)
		}
		what = fmt.Sprintf("merged %d profiles of %d JVMs (pids %s)", n, len(pids), strings.Join(ps, ", "))
	}
	return what + fmt.Sprintf("; %.1fs is their total duration", durationSec)
}

// MergeByPID merges the reports of each pid, in the order pids first
// appear.
func MergeByPID(reps []*Report) []*Report {
	var (
		order []int
		by    = make(map[int][]*Report)
	)
	for _, r := range reps {
		if _, ok := by[r.PID]; !ok {
			order = append(order, r.PID)
		}
		by[r.PID] = append(by[r.PID], r)
	}
	out := make([]*Report, len(order))
	for i, pid := range order {
		out[i] = Merge(by[pid]...)
	}
	return out
}

func addDistinct(list []string, s string) []string {
	if s == "" || slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

func sizes(ns []uint64) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = Bytes(n)
	}
	return strings.Join(s, ", ")
}
