package join

import "github.com/djx-bpf/djx-bpf/report"

// attribute charges sample p and its access path to the tracked object
// holding its address, or to the code-centric remainder; either way to its
// data type when it is in the heap, or else to its memory region.
func (j *JVM) attribute(p *pending) {
	fr := p.path // a second judgement keeps the first one's path
	if !p.retried {
		fr = j.capPath(j.accessPath(p))
		j.pathBuf = fr
	}
	if p.addr != 0 && !p.held { // held: no object held it at its time
		if o, ok := j.idx.Lookup(p.addr); ok {
			obj := j.objs[o.ID]
			s := j.sites[obj.site]
			typ, field := j.trackedType(s.typeSig, p.addr-o.Start)
			j.chargeSite(s, p, fr, float64(obj.weight), typ, field)
			return
		}
	}
	where, dtype := report.WhereNoAddress, ""
	switch {
	case p.addr == 0:
	case j.chargeOffHeap(p, fr):
		return
	case !j.heapKnown && j.regions != nil:
		// No heap ranges (ZGC, OpenJ9 without a javacore): the maps may
		// still say where the address is, the heap included.
		where = j.regions.Name(p.addr, p.tid, p.rsp).Name
	case !j.heapKnown:
		where = report.WhereHeapUnknown
	case j.heap.Contains(p.addr):
		if j.retryable(p) {
			j.retry(p, fr)
			return
		}
		if j.holdable(p) {
			j.hold(p, fr)
			return
		}
		where = report.WhereUntracked
		if p.probe != nil {
			j.retype(p)
		}
		typ, field, ok := j.untrackedType(p)
		if j.chargeStructure(p, fr, typ, field, ok) {
			return
		}
		if ok {
			dtype = j.countType(typ, field, j.chargeOf(p), fr).name
			switch p.typedBy {
			case typedByAllocation:
				j.stats.TypedByAllocation++
			case typedByEnclosing:
				j.stats.TypedByEnclosing++
			}
		} else {
			j.stats.TypeUnknown++
		}
	case j.regions != nil:
		where = j.regions.Name(p.addr, p.tid, p.rsp).Name
	default:
		where = report.WhereOutside
	}
	a := j.addAccess(j.remainder, where, dtype, fr)
	if p.memOK {
		a.mem = j.addMem(a.mem, p)
	}
}

// chargeSite charges sample p, with access path fr, to site s, weighted
// w for the estimate, and to the data type (typ, field) it touched.
func (j *JVM) chargeSite(s *site, p *pending, fr []pathFrame, w float64, typ, field string) {
	c := j.chargeOf(p)
	s.samples++
	s.estSamples += w
	j.stats.Attributed++
	if s.accesses == nil {
		s.accesses = make(accessSet)
	}
	a := j.addAccess(s.accesses, "", "", fr)
	j.charge(c, &s.mem, &s.numa)
	j.charge(c, &a.mem, &a.numa)
	if len(s.typeSig) > 0 && s.typeSig[0] != '[' && field != "" {
		if s.fields == nil {
			s.fields = make(map[string]uint64)
		}
		s.fields[field]++
	}
	j.countType(typ, field, c, fr)
}
