package join

// attribute charges sample p and its access path to the tracked object
// holding its address, or to the code-centric remainder.
func (j *JVM) attribute(p *pending) {
	fr := j.accessPath(p)
	if p.addr != 0 {
		if o, ok := j.idx.Lookup(p.addr); ok {
			obj := j.objs[o.ID]
			s := j.sites[obj.site]
			s.samples++
			s.estSamples += float64(obj.weight)
			j.stats.Attributed++
			if s.accesses == nil {
				s.accesses = make(accessSet)
			}
			j.pathKeyBuf = pathKey(j.pathKeyBuf, "", fr)
			a := s.accesses.add(j.pathKeyBuf, "", fr)
			if p.memOK {
				s.mem = j.addMem(s.mem, p)
				a.mem = j.addMem(a.mem, p)
			}
			if j.numa != nil {
				node, from := j.numa.place(j.pid, p)
				s.numa = count(s.numa, node, from)
				a.numa = count(a.numa, node, from)
			}
			return
		}
	}
	where := "no data address"
	switch {
	case p.addr == 0:
	case !j.heapKnown:
		where = "heap range unknown"
	case j.heap.Contains(p.addr):
		where = "heap (untracked object)"
	default:
		where = "outside the heap"
	}
	j.pathKeyBuf = pathKey(j.pathKeyBuf, where, fr)
	a := j.remainder.add(j.pathKeyBuf, where, fr)
	if p.memOK {
		a.mem = j.addMem(a.mem, p)
	}
}
