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
		jvms, modes, events  []string
		intervals, minSizes  []uint64
		pids                 []int
		objIdx               = make(map[string]int)
		accesses             [][]Access
		fields               [][]FieldShare
		remainder            []Access
		dataTypes            []DataType
		named                uint64
		notes                = make(map[string]bool)
		samePID, sameSetting = true, true
	)
	for n, r := range reps {
		jvms = addDistinct(jvms, r.JVM)
		modes = addDistinct(modes, r.Mode)
		events = addDistinct(events, r.Event)
		if !slices.Contains(pids, r.PID) {
			pids = append(pids, r.PID)
		}
		if !slices.Contains(intervals, r.AllocInterval) {
			intervals = append(intervals, r.AllocInterval)
		}
		if !slices.Contains(minSizes, r.MinSize) {
			minSizes = append(minSizes, r.MinSize)
		}
		samePID = samePID && r.PID == first.PID
		sameSetting = sameSetting && r.AllocInterval == first.AllocInterval && r.MinSize == first.MinSize
		out.DurationSec += r.DurationSec
		out.DisabledSec += r.DisabledSec
		out.AllocInterval = max(out.AllocInterval, r.AllocInterval)
		out.AllocIntervalMax = max(out.AllocIntervalMax, r.AllocIntervalMax)
		out.MinSize = max(out.MinSize, r.MinSize)
		if n > 0 {
			out.Stats.Merge(&r.Stats)
		}
		named += r.namedSamples()
		for _, o := range r.Objects {
			k := o.Type + "\x00" + o.Site + "\x00" + strings.Join(o.AllocPath, "\x00") + "\x01" + strings.Join(o.Holder, "\x00")
			i, ok := objIdx[k]
			if !ok {
				i = len(out.Objects)
				objIdx[k] = i
				c := o
				c.Accesses = nil
				c.Fields = nil
				c.AllocPath = slices.Clone(o.AllocPath)
				c.Holder = slices.Clone(o.Holder)
				// Copies, so that merging never changes its inputs.
				c.Mem, c.NUMA = SumMem(nil, o.Mem), SumNUMA(nil, o.NUMA)
				out.Objects = append(out.Objects, c)
				accesses = append(accesses, nil)
				fields = append(fields, nil)
			} else {
				out.Objects[i].AddCounts(&o)
			}
			accesses[i] = append(accesses[i], o.Accesses...)
			fields[i] = append(fields[i], o.Fields...)
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
	out.JVM = strings.Join(jvms, ", ")
	out.Mode = strings.Join(modes, "+")
	out.Event = strings.Join(events, "+")
	if !samePID {
		out.PID = 0
	}
	for i := range out.Objects {
		if accesses[i] != nil {
			out.Objects[i].Accesses = MergeAccesses(accesses[i], 0, out.Objects[i].Samples)
		}
		if fields[i] != nil {
			out.Objects[i].Fields = mergeFields(fields[i])
		}
	}
	if remainder != nil {
		out.Remainder = MergeAccesses(remainder, 0, out.Stats.Samples)
	}
	if dataTypes != nil {
		out.DataTypes = mergeDataTypes(dataTypes)
	}
	out.Stats.Named = named
	if len(reps) > 1 {
		what := fmt.Sprintf("merged %d profiles of pid %d", len(reps), first.PID)
		if !samePID {
			ps := make([]string, len(pids))
			for i, p := range pids {
				ps[i] = strconv.Itoa(p)
			}
			what = fmt.Sprintf("merged %d profiles of %d JVMs (pids %s)", len(reps), len(pids), strings.Join(ps, ", "))
		}
		out.Notes = append(out.Notes, what+fmt.Sprintf("; %.1fs is their total duration", out.DurationSec))
		if !sameSetting {
			out.Notes = append(out.Notes, fmt.Sprintf("the merged profiles used different settings (heap sampling intervals %s, min sizes %s): the header shows the largest",
				sizes(intervals), sizes(minSizes)))
		}
	}
	out.Finish()
	return out
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
