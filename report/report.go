// Package report holds the object-centric result of a profile and renders it
// as a table or JSON.
//
// The model (Report, Object, Access) and its Finish are in report.go, the
// run's counters and how each merges in stats.go, the merge of whole
// reports in merge.go, the renderers in table.go, json.go, collapsed.go and
// scan.go, and the formatting of sizes and shares in units.go.
package report

import (
	"cmp"
	"slices"
	"sort"
	"strings"
)

// Object is one allocation site and type: every tracked object allocated
// there, with the samples that hit them. For objects found by the census
// (Origin "census"), whose allocation site is unknown, it is one holder
// chain and type.
type Object struct {
	Type      string   `json:"type"`
	Site      string   `json:"site"`
	AllocPath []string `json:"alloc_path"` // innermost frame first
	// Origin is "allocation" (a sampled allocation), "census" (an object
	// that existed when the profile began, or that the heap sampler missed)
	// or "structure" (small objects that existed when the profile began,
	// by the data structure holding them), or "off-heap" (the memory
	// outside the heap a direct buffer owns; Site says "[off-heap]", or
	// for a mapped file "[off-heap: FILE]").
	Origin string `json:"origin"`
	// Holder is the reference chain from a GC root to the objects, root
	// first: "RealService.index (static)", "java.util.HashMap.table", "[]".
	// Empty when unknown.
	Holder []string `json:"holder"`
	// Objects and Bytes count the tracked (sampled) allocations.
	Objects uint64 `json:"objects"`
	Bytes   uint64 `json:"bytes"`
	// OtherRoots counts the roots besides its holder chain's own that
	// reach a heap walk's objects (at most 64); RetainedBytes is what
	// their holder chain retains: their bytes and those of the objects
	// below them no other root reaches (0: not known).
	OtherRoots    int    `json:"other_roots,omitempty"`
	RetainedBytes uint64 `json:"retained_bytes,omitempty"`
	// EstObjects and EstBytes correct for the heap sampler: each tracked
	// object of size s counts 1/p(s) with p(s) = 1 - exp(-s/interval).
	EstObjects float64 `json:"est_objects"`
	EstBytes   float64 `json:"est_bytes"`
	Samples    uint64  `json:"samples"`
	// EstSamples weights each sample by 1/p of the object it hit: the
	// estimated cost of the whole site, untracked instances included.
	EstSamples float64 `json:"est_samples"`
	Share      float64 `json:"share"` // of attributed samples
	// Accesses are the code paths whose samples hit this object, most
	// sampled first.
	Accesses []Access `json:"accesses,omitempty"`
	// Fields breaks a tracked instance object's samples down by the field
	// they fell in, most sampled first (empty for arrays, and when the
	// fields are not known).
	Fields []FieldShare `json:"fields,omitempty"`
	// Mem: hardware sources only; NUMA: with --numa.
	Mem  *MemMetrics  `json:"mem,omitempty"`
	NUMA *NUMAMetrics `json:"numa,omitempty"`
}

// AddCounts adds b's allocation and sample counts and its metrics to o
// (the merge of two reports of one site, or of sites that name the same
// type and path).
func (o *Object) AddCounts(b *Object) {
	o.Objects += b.Objects
	o.Bytes += b.Bytes
	o.OtherRoots = max(o.OtherRoots, b.OtherRoots)
	o.RetainedBytes += b.RetainedBytes
	o.EstObjects += b.EstObjects
	o.EstBytes += b.EstBytes
	o.Samples += b.Samples
	o.EstSamples += b.EstSamples
	o.Mem = SumMem(o.Mem, b.Mem)
	o.NUMA = SumNUMA(o.NUMA, b.NUMA)
}

// Access is one access path: the code that touched an object (or, in the
// remainder, memory outside tracked objects) and its samples.
type Access struct {
	// Where is set in the remainder only: "heap (untracked object)", the
	// memory region of an address outside the heap ("thread stack", "code
	// cache", "metaspace", "class space", "GC card table", "native
	// (malloc)", "mapped file /data/idx/_0.dvd", "anonymous", "unknown";
	// "outside the heap" in reports from before regions were named), "heap
	// range unknown" or "no data address".
	Where string `json:"where,omitempty"`
	// DataType is set in the remainder only: the data type of the access,
	// "java.util.TreeMap$Entry.left" or "long[]" (DataTypeName), when the
	// sample's heap object and field were named. The remainder is keyed by
	// (Where, DataType, Path).
	DataType string   `json:"data_type,omitempty"`
	Path     []string `json:"path"` // innermost frame first
	Samples  uint64   `json:"samples"`
	// Share is of the object's samples (of all samples, in the remainder).
	Share float64      `json:"share"`
	Mem   *MemMetrics  `json:"mem,omitempty"`
	NUMA  *NUMAMetrics `json:"numa,omitempty"`
}

// Report is the result of profiling one JVM.
type Report struct {
	PID         int     `json:"pid"`
	JVM         string  `json:"jvm,omitempty"`
	Mode        string  `json:"mode"`  // attach | launch
	Event       string  `json:"event"` // sample source
	DurationSec float64 `json:"duration_s"`
	// DisabledSec is the part of the duration with sampling switched off
	// (--control disable).
	DisabledSec   float64 `json:"disabled_s,omitempty"`
	AllocInterval uint64  `json:"alloc_interval"`
	// AllocIntervalMax is the interval the agent raised it to (0: never).
	AllocIntervalMax uint64   `json:"alloc_interval_max,omitempty"`
	MinSize          uint64   `json:"min_size"`
	Objects          []Object `json:"objects"`
	// DataTypes are the in-heap samples by data type and field, tracked
	// objects or not, most sampled first.
	DataTypes []DataType `json:"data_types,omitempty"`
	Stats     Stats      `json:"stats"`
	// Remainder holds the access paths of samples that hit no tracked
	// object, so that no sample is silently dropped: code-centric.
	Remainder []Access `json:"remainder,omitempty"`
	Notes     []string `json:"notes,omitempty"`
}

// Finish computes shares and orders objects, most sampled first (ties: more
// bytes first, then type and site so that output is deterministic).
func (r *Report) Finish() {
	for i := range r.Objects {
		o := &r.Objects[i]
		if o.Origin == "" {
			o.Origin = OriginAllocation // reports of djx-bpf before the census
		}
		if o.Holder == nil {
			o.Holder = []string{}
		}
		if r.Stats.Attributed > 0 {
			o.Share = float64(o.Samples) / float64(r.Stats.Attributed)
		}
		finishAccesses(o.Accesses, o.Samples)
		finishFields(o.Fields, o.Samples)
	}
	finishAccesses(r.Remainder, r.Stats.Samples)
	finishDataTypes(r.DataTypes, r.Stats.InHeap)
	r.Stats.Named = r.namedSamples()
	sort.SliceStable(r.Objects, func(i, j int) bool {
		a, b := &r.Objects[i], &r.Objects[j]
		if a.Samples != b.Samples {
			return a.Samples > b.Samples
		}
		if a.Bytes != b.Bytes {
			return a.Bytes > b.Bytes
		}
		if a.Type != b.Type {
			return a.Type < b.Type
		}
		if a.Site != b.Site {
			return a.Site < b.Site
		}
		return slices.Compare(a.Holder, b.Holder) < 0
	})
}

// HolderText is a holder chain cut to its last depth hops (0: all).
func HolderText(h []string, depth int) string {
	cut := ""
	if depth > 0 && len(h) > depth {
		h, cut = h[len(h)-depth:], "… → "
	}
	return cut + strings.Join(h, " → ")
}

// Origins of objects.
const (
	OriginAllocation = "allocation"
	OriginCensus     = "census"
	// OriginStructure: the objects of one type that one holder chain
	// reaches, found by a heap walk and counted, not tracked one by one.
	OriginStructure = "structure"
	// OriginOffHeap: memory outside the heap, charged to the Java
	// object that owns it (a direct buffer), by its holder chain.
	OriginOffHeap = "off-heap"
)

// finishAccesses sets shares of total and orders paths, most sampled first
// (ties: by where, then path, so that output is deterministic).
func finishAccesses(as []Access, total uint64) {
	for i := range as {
		if total > 0 {
			as[i].Share = float64(as[i].Samples) / float64(total)
		}
	}
	// Element by element, not joined: joining both paths in every
	// comparison was most of the report's cost on Xalan (100 of 530 ms).
	slices.SortStableFunc(as, func(a, b Access) int {
		if a.Samples != b.Samples {
			return cmp.Compare(b.Samples, a.Samples)
		}
		if a.Where != b.Where {
			return strings.Compare(a.Where, b.Where)
		}
		if a.DataType != b.DataType {
			return strings.Compare(a.DataType, b.DataType)
		}
		return slices.Compare(a.Path, b.Path)
	})
}

// MergeAccesses adds up paths that are equal after cutting them to depth
// frames (0: whole paths), of equal Where and DataType, and returns them in
// Finish's order with shares of total.
func MergeAccesses(as []Access, depth int, total uint64) []Access {
	var out []Access
	idx := make(map[string]int)
	for _, a := range as {
		p := a.Path
		if depth > 0 && len(p) > depth {
			p = p[:depth]
		}
		k := a.Where + "\x01" + a.DataType + "\x01" + strings.Join(p, "\x00")
		if i, ok := idx[k]; ok {
			out[i].Samples += a.Samples
			out[i].Mem = SumMem(out[i].Mem, a.Mem)
			out[i].NUMA = SumNUMA(out[i].NUMA, a.NUMA)
			continue
		}
		idx[k] = len(out)
		out = append(out, Access{Where: a.Where, DataType: a.DataType, Path: p, Samples: a.Samples, Mem: SumMem(nil, a.Mem), NUMA: SumNUMA(nil, a.NUMA)})
	}
	finishAccesses(out, total)
	return out
}

func (r *Report) top(n int) []Object {
	if n > 0 && n < len(r.Objects) {
		return r.Objects[:n]
	}
	return r.Objects
}

// Held says o is named by its holder chain rather than its allocation site.
func (o *Object) Held() bool {
	return (o.Origin == OriginCensus || o.Origin == OriginStructure || o.Origin == OriginOffHeap) && len(o.Holder) > 0
}
