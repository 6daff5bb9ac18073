package join

import (
	"bytes"
	"io"
	"sort"

	"github.com/djx-bpf/djx-bpf/hotspot/vmlayout"
	"github.com/djx-bpf/djx-bpf/jvmsym"
	"github.com/djx-bpf/djx-bpf/naming/datatype"
	"github.com/djx-bpf/djx-bpf/naming/region"
	"github.com/djx-bpf/djx-bpf/report"
	"github.com/djx-bpf/djx-bpf/sources/agentwire"
	"github.com/djx-bpf/djx-bpf/sources/decode"
	"github.com/djx-bpf/djx-bpf/sources/sample"
)

// Regions names addresses outside the heap (region.Namer).
type Regions interface {
	Name(addr uint64, tid uint32, rsp uint64) region.Region
}

// typeState names each sample's data: in the heap by data type, outside
// it by memory region.
type typeState struct {
	typesInfo *agentwire.TypesInfo
	geo       datatype.Geometry // how to find the object a sample addressed
	types     *datatype.Table   // nil until the agent's TYPES_INFO says OK
	rows      map[typeKey]*typeRow
	// wantClasses: a sample met a klass word the table lacks (a class
	// the agent has not described yet, such as a new array class).
	wantClasses bool
	// asked holds the klass words already asked for: one that the agent
	// cannot describe (or a stray header) would otherwise cost a walk of
	// every loaded class each second.
	asked map[uint64]struct{}
	// askedFound counts the CLASS records that answered an ask.
	askedFound int
	regions    Regions
	// codeMem reads the JVM's JIT code (nil: not available); allocCache
	// remembers, by pc and register, the klass word its code stores.
	codeMem    io.ReaderAt
	allocCache map[allocKey]allocHit
	// straightCode: the compiled methods read whole for decode's
	// straight-line look-back (straight.go).
	straightCode straightCache
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

func (j *JVM) onTypesInfo(ti *agentwire.TypesInfo) {
	j.typesInfo = ti
	j.geo = datatype.Geometry{Geometry: vmlayout.Geometry{
		CompressedOops: ti.OopBytes == 4, OopBase: ti.OopBase, OopShift: uint(ti.OopShift),
		CompressedClassPointers: ti.KlassBytes == 4, KlassBase: ti.KlassBase, KlassShift: uint(ti.KlassShift),
		CompactHeaders: ti.KlassInMark != 0, KlassMarkShift: uint(ti.KlassInMark),
	}}
	if ti.OK {
		j.types = datatype.NewTable(j.geo)
	}
}

func (j *JVM) onClass(c *agentwire.Class) {
	if j.types == nil {
		return
	}
	fs := make([]datatype.Field, len(c.Fields))
	for i, f := range c.Fields {
		fs[i] = datatype.Field{Offset: f.Offset, Name: f.Name, Sig: f.Sig}
	}
	j.types.Add(c.Klass, c.Narrow, c.Sig, fs)
	w := c.Klass
	if j.geo.CompressedClassPointers {
		w = uint64(c.Narrow)
	}
	if _, ok := j.asked[w]; ok {
		j.askedFound++
	}
}

// TypesInfo is what the agent said of its class descriptions (nil before
// it said anything).
func (j *JVM) TypesInfo() *agentwire.TypesInfo { return j.typesInfo }

// WantClasses reports, once per occurrence, that samples met classes the
// agent has not described: the session then asks for them.
func (j *JVM) WantClasses() bool {
	w := j.wantClasses
	j.wantClasses = false
	return w
}

// locate finds the object a decoded heap access addressed, from the
// headers the sampling program read (see package datatype). An object
// being initialised is named by the code's own store of its klass word,
// or by another register that holds its start.
func (j *JVM) locate(p *pending, res *decode.Result, s *sample.Sample) {
	h := datatype.Headers{OK: s.HdrOK, Narrow: s.HdrNarrow, Hdr: &s.Hdr}
	obj, _, k, ok := j.geo.Object(*res, &j.regs, h)
	ok = ok && res.Addr >= obj
	if j.types != nil && (!ok || j.types.ByKlassWord(k) == nil || res.Store) {
		if pr, good := j.newProbe(res, s); good {
			if o, k, found, final := j.allocObject(&pr); found {
				p.obj, p.klass, p.located, p.typedBy = o, k, true, typedByAllocation
				return
			} else if !final {
				kept := pr // asked again when the sample is judged
				p.probe = &kept
			}
		}
	}
	if j.types != nil && (!ok || j.types.ByKlassWord(k) == nil) {
		if o, k, ok := j.types.Enclosing(res.Addr, &j.regs, h); ok {
			p.obj, p.klass, p.located, p.typedBy = o, k, true, typedByEnclosing
			return
		}
	}
	if ok {
		p.obj, p.klass, p.located = obj, k, true
	}
}

// allocProbe is what the allocation scan needs of a sample: kept with a
// pending sample whose JIT code was not known yet (its CODE record comes
// after the first samples of new code, later still on a busy host).
type allocProbe struct {
	ip, obj uint64
	base    int8
	at      [16]byte
}

// newProbe is the allocation scan's view of an access through a base
// register to the start of a (new) object.
func (j *JVM) newProbe(res *decode.Result, s *sample.Sample) (allocProbe, bool) {
	if res.Base < 0 || res.Base >= 16 || res.Index != decode.NoReg || s.Flags&sample.FlagAtOK == 0 {
		return allocProbe{}, false
	}
	obj := j.regs.GPR[res.Base]
	if res.Addr < obj || res.Addr-obj >= maxAllocOffset {
		return allocProbe{}, false
	}
	return allocProbe{ip: s.IP(), obj: obj, base: res.Base, at: s.At}, true
}

// retype names a sample that waited with a probe, now that the JIT code
// records up to its time have been applied.
func (j *JVM) retype(p *pending) {
	if o, k, found, _ := j.allocObject(p.probe); found {
		p.obj, p.klass, p.located, p.typedBy = o, k, true, typedByAllocation
	}
	p.probe = nil
}

// How a sample in an object being initialised got its type.
const (
	typedByHeader uint8 = iota
	typedByAllocation
	typedByEnclosing
)

// maxAllocOffset bounds how far into a new object an initialising store
// through its start register reaches (C2 zeroes larger bodies through
// another register, which Enclosing covers).
const maxAllocOffset = 1 << 12

// allocCodeBytes is how much JIT code past the sample's own bytes the
// allocation scan reads from the JVM.
const allocCodeBytes = 96

// maxAllocCache bounds the pcs whose allocation scan is remembered.
const maxAllocCache = 1 << 14

type allocKey struct {
	ip   uint64
	base int8
}

type allocHit struct {
	klass uint64
	ok    bool
}

// allocObject names the object at the probe's base register by the klass
// word that the code from the sampled pc stores into it, when that names
// a known class. final says the answer will not change for this sample.
func (j *JVM) allocObject(pr *allocProbe) (obj, klass uint64, found, final bool) {
	key := allocKey{pr.ip, pr.base}
	hit, seen := j.allocCache[key]
	final = true
	if !seen {
		hit, final = j.scanAlloc(pr)
		if final {
			if j.allocCache == nil || len(j.allocCache) >= maxAllocCache {
				j.allocCache = make(map[allocKey]allocHit)
			}
			j.allocCache[key] = hit
		}
	}
	if !hit.ok || j.types.ByKlassWord(hit.klass) == nil {
		return 0, 0, false, final
	}
	return pr.obj, hit.klass, true, true
}

// scanAlloc looks for the klass store in the sample's own bytes, then in
// the JIT code past them, read from the JVM: only inside a compiled
// method, and only while it still holds the bytes the sample saw. final
// says the answer holds for later samples at the pc: one that found no
// code yet (its CODE record comes after the first samples of new code)
// or code changed since the sample must be asked again.
func (j *JVM) scanAlloc(pr *allocProbe) (hit allocHit, final bool) {
	k, st := j.geo.AllocKlass(pr.at[:], pr.base)
	if st != decode.ScanShort || j.codeMap == nil || j.codeMem == nil {
		return allocHit{k, st == decode.ScanFound}, true
	}
	code, inCode := j.codeMap.Lookup(pr.ip)
	if !inCode {
		return allocHit{}, false
	}
	if code.Stub != "" {
		return allocHit{}, true
	}
	n := min(uint64(allocCodeBytes), code.Start+code.Size-pr.ip)
	if n <= uint64(len(pr.at)) {
		return allocHit{}, true
	}
	buf := make([]byte, n)
	if m, err := j.codeMem.ReadAt(buf, int64(pr.ip)); err != nil || m != len(buf) || !bytes.Equal(buf[:len(pr.at)], pr.at[:]) {
		return allocHit{}, false
	}
	k, st = j.geo.AllocKlass(buf, pr.base)
	return allocHit{k, st == decode.ScanFound}, true
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

// AskedFound is how many of the klass words asked for the agent has
// described so far.
func (j *JVM) AskedFound() int { return j.askedFound }

// askClass asks for the class of klass word k once. A narrow klass word
// is its lower half (the upper one is an array's length or a field), and
// one that cannot be a Klass* is not asked for: HotSpot aligns every
// Klass to 8 bytes, so 7 in 8 stray words decode to none.
func (j *JVM) askClass(k uint64) {
	if ti := j.typesInfo; ti != nil {
		p := k
		if ti.KlassBytes == 4 {
			k = uint64(uint32(k))
			p = ti.KlassBase + k<<ti.KlassShift
		}
		if p == 0 || p%8 != 0 {
			return
		}
	}
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
	a := j.addAccess(r.accesses, "", "", fr)
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
