package join

import (
	"fmt"
	"strings"

	"github.com/djx-bpf/djx-bpf/jvmsym"
	"github.com/djx-bpf/djx-bpf/report"
)

// Report resolves names and builds the object table.
func (j *JVM) Report() []report.Object {
	acc := make(map[int][]accessSet) // out index → access sets of its sites
	out := make([]report.Object, 0, len(j.sites))
	byName := make(map[string]int)
	keys := newPathIDs()
	var fields []map[string]uint64 // out index → samples by field
	for _, s := range j.sites {
		path := s.names
		if path == nil {
			path = make([]string, len(s.frames))
			for i, f := range s.frames {
				path[i] = j.syms.Resolve(f.Method, f.BCI).String()
			}
		}
		siteName := "[no Java frames]"
		if len(path) > 0 {
			siteName = path[0]
		}
		origin, holder := report.OriginAllocation, []string{}
		if s.census != 0 {
			origin, siteName = report.OriginCensus, censusSiteName(s.census)
			if s.structure {
				origin = report.OriginStructure
			}
			if s.offHeap {
				origin, siteName = report.OriginOffHeap, "[off-heap]"
				if s.file != "" {
					siteName = "[off-heap: " + s.file + "]"
				}
			}
			if h := j.holderChain(s.holder); h != nil {
				holder = h
			}
		}
		typ := jvmsym.TypeName(s.typeSig)
		// Different bcis on one line name the same site, and chains that
		// read the same the same holder: merge them.
		key := keys.key(origin+"\x00"+typ+"\x00"+siteName+"\x01"+strings.Join(holder, "\x00"), path)
		o := report.Object{
			Type: typ, Site: siteName, AllocPath: path, Origin: origin, Holder: holder,
			Objects: s.objects, Bytes: s.bytes, EstObjects: s.estObjects, EstBytes: s.estBytes,
			Samples: s.samples, EstSamples: s.estSamples, OtherRoots: s.otherRoots, RetainedBytes: s.retained,
			Mem: report.SumMem(nil, s.mem), NUMA: report.SumNUMA(nil, s.numa),
		}
		if i, ok := byName[key]; ok {
			out[i].AddCounts(&o)
			acc[i] = append(acc[i], s.accesses)
			addFields(fields[i], s.fields)
			continue
		}
		acc[len(out)] = []accessSet{s.accesses}
		fields = append(fields, addFields(nil, s.fields))
		byName[key] = len(out)
		out = append(out, o)
	}
	for i, sets := range acc {
		out[i].Accesses = j.accesses(sets...)
		out[i].Fields = fieldShares(fields[i])
	}
	return out
}

// Remainder is the access paths of the samples no tracked object took.
func (j *JVM) Remainder() []report.Access { return j.accesses(j.remainder) }

// Stats are the join's counters, with what the agent's last STATS say.
func (j *JVM) Stats() report.Stats {
	st := j.stats
	st.HeapKnown = j.heapKnown
	if st.InHeap > st.Attributed {
		st.HeapUntracked = st.InHeap - st.Attributed
	}
	if st.GCs == 0 {
		st.GCs = j.agentGCs // no relocation stream: the agent's count
	}
	a := j.lastAgt
	st.AllocCallbacks = a.Callbacks
	st.AllocsBelowMin = a.BelowMinSize
	st.AgentDropped = a.Dropped
	st.StacksDropped = a.StacksDropped
	st.HumongousUntagged = a.Untagged
	st.HumongousFreed = a.UntaggedFreed
	st.AllocRawStacks = a.RawStacks
	st.AllocRawFallbacks = a.RawFallbacks
	// What the caps of other packages cut, kept there.
	caps := make(map[string]uint64, len(st.CapsCut)+2)
	for k, v := range st.CapsCut {
		caps[k] = v
	}
	var over uint64
	if j.bpfStacks != nil {
		over += j.bpfStacks.Stats().OverBudget
	}
	if j.bpfCode != nil {
		over += j.bpfCode.Stats().OverBudget
	}
	if over > 0 {
		caps["frames not named past the time budget for reading the JVM"] += over
	}
	if n := j.names.Refused(); n > 0 {
		caps[fmt.Sprintf("frame names past %d MiB", maxNameBytes>>20)] += n
	}
	st.CapsCut = nil
	if len(caps) > 0 {
		st.CapsCut = caps
	}
	return st
}

// resolve names the frames of an access path.
func (j *JVM) resolve(fr []pathFrame) []string {
	out := make([]string, len(fr))
	for i, f := range fr {
		if f.name != "" {
			out[i] = f.name
		} else {
			out[i] = j.syms.Resolve(f.method, f.bci).String()
		}
	}
	return out
}

// accesses resolves a set into report paths; paths that resolve to the same
// names (other bcis on the same lines) merge.
func (j *JVM) accesses(sets ...accessSet) []report.Access {
	var out []report.Access
	idx := make(map[string]int)
	keys := newPathIDs()
	for _, set := range sets {
		for _, a := range set {
			path := j.resolve(a.frames)
			k := keys.key(a.where+"\x01"+a.dtype, path)
			if i, ok := idx[k]; ok {
				out[i].Samples += a.samples
				out[i].Mem = report.SumMem(out[i].Mem, a.mem)
				out[i].NUMA = report.SumNUMA(out[i].NUMA, a.numa)
				continue
			}
			idx[k] = len(out)
			out = append(out, report.Access{Where: a.where, DataType: a.dtype, Path: path, Samples: a.samples, Mem: report.SumMem(nil, a.mem), NUMA: report.SumNUMA(nil, a.numa)})
		}
	}
	return out
}

// pathIDs keys paths by their names' ids, not the names joined: a path
// of long names made a key of all of them.
type pathIDs struct {
	ids map[string]uint32
	buf []byte
}

func newPathIDs() *pathIDs { return &pathIDs{ids: make(map[string]uint32)} }

// key is the key of path after prefix.
func (p *pathIDs) key(prefix string, path []string) string {
	b := append(p.buf[:0], prefix...)
	for _, n := range path {
		id, ok := p.ids[n]
		if !ok {
			id = uint32(len(p.ids) + 1)
			p.ids[n] = id
		}
		b = append(b, 0, byte(id), byte(id>>8), byte(id>>16), byte(id>>24))
	}
	p.buf = b
	return string(b)
}

// addFields adds the samples by field of src to dst (allocated when nil
// and src has any).
func addFields(dst, src map[string]uint64) map[string]uint64 {
	if len(src) == 0 {
		return dst
	}
	if dst == nil {
		dst = make(map[string]uint64, len(src))
	}
	for f, n := range src {
		dst[f] += n
	}
	return dst
}
