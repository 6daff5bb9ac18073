package report

import (
	"cmp"
	"slices"
	"strings"
)

// DataType is one (type, field) of the Java heap: the samples whose address
// fell in an object of that class (or array type) and in that field, tracked
// object or not, with the code that touched it.
type DataType struct {
	// Type is the class of the accessed object ("java.util.TreeMap$Entry")
	// or its array type ("long[]").
	Type string `json:"type"`
	// Field is the field's name ("left"); "" for array elements or for an
	// access to the whole object (its header, or a field not named).
	Field   string  `json:"field"`
	Samples uint64  `json:"samples"`
	Share   float64 `json:"share"` // of in-heap samples (Stats.InHeap)
	// Accesses are the code paths of its samples, most sampled first;
	// their shares are of the data type's samples.
	Accesses []Access `json:"accesses,omitempty"`
	// Mem: hardware sources only; NUMA: with --numa.
	Mem  *MemMetrics  `json:"mem,omitempty"`
	NUMA *NUMAMetrics `json:"numa,omitempty"`
}

// Name is the data type as one string: "java.util.TreeMap$Entry.left", or
// the type alone for array elements and whole objects ("long[]"). It is
// what Access.DataType holds and what pprof's data_type label says.
func (d *DataType) Name() string { return DataTypeName(d.Type, d.Field) }

// DataTypeName joins a type and a field ("" for none) as DataType.Name does.
func DataTypeName(typ, field string) string {
	if field == "" {
		return typ
	}
	return typ + "." + field
}

// fieldText is what the table's FIELD column shows: the field, "[]" for
// array elements, "-" for a whole object.
func (d *DataType) fieldText() string {
	switch {
	case d.Field != "":
		return d.Field
	case strings.HasSuffix(d.Type, "]"):
		return "[]"
	}
	return "-"
}

// FieldShare is the part of a tracked instance object's samples that fell
// in one of its fields.
type FieldShare struct {
	Field   string  `json:"field"`
	Samples uint64  `json:"samples"`
	Share   float64 `json:"share"` // of the object's samples
}

// Where values of the remainder that name no region. Every other Where is
// the name of a memory region ("thread stack", "code cache", "metaspace",
// "mapped file /data/idx/_0.dvd", ...), which names the sample.
const (
	WhereUntracked   = "heap (untracked object)" // named when the Access has a DataType
	WhereOutside     = "outside the heap"        // reports from before regions were named
	WhereNoAddress   = "no data address"
	WhereHeapUnknown = "heap range unknown"
	WhereUnknown     = "unknown" // outside the heap, in no known region
)

// Named says whether a remainder access path names its samples: by a data
// type, or by a memory region other than "unknown".
func (a *Access) Named() bool {
	if a.DataType != "" {
		return true
	}
	switch a.Where {
	case "", WhereUntracked, WhereOutside, WhereNoAddress, WhereHeapUnknown, WhereUnknown:
		return false
	}
	return true
}

// namedSamples counts the samples with an address that something names: a
// tracked object (Stats.Attributed), a data type or a region. Stats.Named
// when set, else counted from the objects and the remainder.
func (r *Report) namedSamples() uint64 {
	if r.Stats.Named > 0 {
		return r.Stats.Named
	}
	n := r.Stats.Attributed
	for i := range r.Remainder {
		if r.Remainder[i].Named() {
			n += r.Remainder[i].Samples
		}
	}
	return n
}

// NamedShare is the share of the samples with an address that are named by
// an object, a data type or a region other than "unknown" (0 when no
// sample had an address).
func (s *Stats) NamedShare() float64 {
	if s.WithAddress == 0 {
		return 0
	}
	return float64(s.Named) / float64(s.WithAddress)
}

// finishDataTypes sets shares (of inHeap; the accesses' of their data
// type) and orders data types by samples, then type and field.
func finishDataTypes(ds []DataType, inHeap uint64) {
	for i := range ds {
		d := &ds[i]
		d.Share = 0
		if inHeap > 0 {
			d.Share = float64(d.Samples) / float64(inHeap)
		}
		finishAccesses(d.Accesses, d.Samples)
	}
	slices.SortStableFunc(ds, func(a, b DataType) int {
		if a.Samples != b.Samples {
			return cmp.Compare(b.Samples, a.Samples)
		}
		if a.Type != b.Type {
			return strings.Compare(a.Type, b.Type)
		}
		return strings.Compare(a.Field, b.Field)
	})
}

// finishFields sets shares of total and orders fields, most sampled first.
func finishFields(fs []FieldShare, total uint64) {
	for i := range fs {
		fs[i].Share = 0
		if total > 0 {
			fs[i].Share = float64(fs[i].Samples) / float64(total)
		}
	}
	slices.SortStableFunc(fs, func(a, b FieldShare) int {
		if a.Samples != b.Samples {
			return cmp.Compare(b.Samples, a.Samples)
		}
		return strings.Compare(a.Field, b.Field)
	})
}

// mergeFields adds up fields of equal name.
func mergeFields(fs []FieldShare) []FieldShare {
	var out []FieldShare
	idx := make(map[string]int)
	for _, f := range fs {
		if i, ok := idx[f.Field]; ok {
			out[i].Samples += f.Samples
			continue
		}
		idx[f.Field] = len(out)
		out = append(out, FieldShare{Field: f.Field, Samples: f.Samples})
	}
	return out
}

// mergeDataTypes adds up data types of equal type and field, their access
// paths (equal paths add), memory metrics and NUMA placement. It does not
// change its input.
func mergeDataTypes(ds []DataType) []DataType {
	var out []DataType
	var acc [][]Access
	idx := make(map[string]int)
	for _, d := range ds {
		k := d.Type + "\x00" + d.Field
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, DataType{Type: d.Type, Field: d.Field})
			acc = append(acc, nil)
		}
		o := &out[i]
		o.Samples += d.Samples
		o.Mem = SumMem(o.Mem, d.Mem)
		o.NUMA = SumNUMA(o.NUMA, d.NUMA)
		acc[i] = append(acc[i], d.Accesses...)
	}
	for i := range out {
		if acc[i] != nil {
			out[i].Accesses = MergeAccesses(acc[i], 0, out[i].Samples)
		}
	}
	return out
}
