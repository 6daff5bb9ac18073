package join

import (
	"sort"

	"github.com/djx-bpf/djx-bpf/agent"
	"github.com/djx-bpf/djx-bpf/datatype"
	"github.com/djx-bpf/djx-bpf/decode"
	"github.com/djx-bpf/djx-bpf/jvmsym"
	"github.com/djx-bpf/djx-bpf/region"
	"github.com/djx-bpf/djx-bpf/report"
	"github.com/djx-bpf/djx-bpf/sample"
)

// Regions names addresses outside the heap (region.Namer).
type Regions interface {
	Name(addr uint64, tid uint32, rsp uint64) region.Region
}

// typeState names each sample's data: in the heap by data type, outside
// it by memory region.
type typeState struct {
	typesInfo *agent.TypesInfo
	geo       datatype.Geometry // how to find the object a sample addressed
	types     *datatype.Table   // nil until the agent's TYPES_INFO says OK
	rows      map[typeKey]*typeRow
	// wantClasses: a sample met a klass word the table lacks (a class
	// the agent has not described yet, such as a new array class).
	wantClasses bool
	// asked holds the klass words already asked for: one that the agent
	// cannot describe (or a stray header) would otherwise cost a walk of
	// every loaded class each second.
	asked   map[uint64]struct{}
	regions Regions
}

type typeKey struct{ typ, field string }

// typeRow is one (type, field) of the data-types table.
type typeRow struct {
	name     string // report.DataTypeName of its key
	samples  uint64
	accesses accessSet
	mem      *report.MemMetrics
	numa     *report.NUMAMetrics
}

func (j *JVM) onTypesInfo(ti *agent.TypesInfo) {
	j.typesInfo = ti
	j.geo = datatype.Geometry{NarrowKlass: ti.KlassBytes == 4, NarrowOops: ti.OopBytes == 4, OopBase: ti.OopBase, OopShift: uint(ti.OopShift)}
	if ti.OK {
		j.types = datatype.NewTable(j.geo)
	}
}

func (j *JVM) onClass(c *agent.Class) {
	if j.types == nil {
		return
	}
	fs := make([]datatype.Field, len(c.Fields))
	for i, f := range c.Fields {
		fs[i] = datatype.Field{Offset: f.Offset, Name: f.Name, Sig: f.Sig}
	}
	j.types.Add(c.Klass, c.Narrow, c.Sig, fs)
}

// TypesInfo is what the agent said of its class descriptions (nil before
// it said anything).
func (j *JVM) TypesInfo() *agent.TypesInfo { return j.typesInfo }

// WantClasses reports, once per occurrence, that samples met classes the
// agent has not described: the session then asks for them.
func (j *JVM) WantClasses() bool {
	w := j.wantClasses
	j.wantClasses = false
	return w
}

// locate finds the object a decoded heap access addressed, from the
// headers the sampling program read (see package datatype).
func (j *JVM) locate(p *pending, res *decode.Result, s *sample.Sample) {
	if s.HdrOK == 0 {
		return
	}
	obj, _, k, ok := j.geo.Object(*res, &j.regs, datatype.Headers{OK: s.HdrOK, Narrow: s.HdrNarrow, Hdr: &s.Hdr})
	if ok && res.Addr >= obj {
		p.obj, p.klass, p.located = obj, k, true
	}
}

// trackedType names the field of a tracked object of type sig at offset off.
func (j *JVM) trackedType(sig string, off uint64) (typ, field string) {
	typ = jvmsym.TypeName(sig)
	if j.types != nil {
		if l := j.types.BySig(sig); l != nil {
			return typ, j.types.FieldAt(l, off)
		}
	}
	return typ, ""
}

// maxAsked bounds the klass words remembered as asked for; past it no
// new ones are asked for, as such a heap's headers are mostly stray.
const maxAsked = 4096

// askClass asks for the class of klass word k once.
func (j *JVM) askClass(k uint64) {
	if _, ok := j.asked[k]; ok || len(j.asked) >= maxAsked {
		return
	}
	if j.asked == nil {
		j.asked = make(map[uint64]struct{})
	}
	j.asked[k] = struct{}{}
	j.wantClasses = true
}

// untrackedType names the data type of an untracked heap sample, or says
// it cannot.
func (j *JVM) untrackedType(p *pending) (typ, field string, ok bool) {
	if !p.located || j.types == nil {
		return "", "", false
	}
	l := j.types.ByKlassWord(p.klass)
	if l == nil {
		j.askClass(p.klass)
		return "", "", false
	}
	off := p.addr - p.obj
	if !j.types.Holds(l, p.klass, off) {
		return "", "", false
	}
	return l.Name, j.types.FieldAt(l, off), true
}

// countType charges a sample (c), with access path fr, to the data-types
// row of (typ, field), and returns the row.
func (j *JVM) countType(typ, field string, c charge, fr []pathFrame) *typeRow {
	if j.rows == nil {
		j.rows = make(map[typeKey]*typeRow)
	}
	k := typeKey{typ, field}
	r := j.rows[k]
	if r == nil {
		r = &typeRow{name: report.DataTypeName(typ, field), accesses: make(accessSet)}
		j.rows[k] = r
	}
	r.samples++
	j.pathKeyBuf = pathKey(j.pathKeyBuf, "", "", fr)
	a := r.accesses.add(j.pathKeyBuf, "", "", fr)
	j.charge(c, &r.mem, &r.numa)
	j.charge(c, &a.mem, &a.numa)
	return r
}

// DataTypes is the data-types table: every in-heap sample the join could
// name, by the type and field it touched.
func (j *JVM) DataTypes() []report.DataType {
	out := make([]report.DataType, 0, len(j.rows))
	for k, r := range j.rows {
		out = append(out, report.DataType{Type: k.typ, Field: k.field, Samples: r.samples,
			Accesses: j.accesses(r.accesses), Mem: report.SumMem(nil, r.mem), NUMA: report.SumNUMA(nil, r.numa)})
	}
	return out
}

// fieldShares is a tracked site's breakdown by field, most first.
func fieldShares(m map[string]uint64) []report.FieldShare {
	if len(m) == 0 {
		return nil
	}
	out := make([]report.FieldShare, 0, len(m))
	for f, n := range m {
		out = append(out, report.FieldShare{Field: f, Samples: n})
	}
	sort.Slice(out, func(a, b int) bool {
		if out[a].Samples != out[b].Samples {
			return out[a].Samples > out[b].Samples
		}
		return out[a].Field < out[b].Field
	})
	return out
}
