package join

import (
	"cmp"
	"slices"
	"time"

	"github.com/djx-bpf/djx-bpf/objindex"
)

// Samples on objects a concurrent collector moved before the rescan that
// finds them. ZGC and Shenandoah relocate outside their pauses, and the
// rescan after a pause reads a reference slot that ZGC heals only in its
// next cycle: for up to a cycle the program reads the new copy while the
// join knows the old one. An in-heap sample that no tracked object holds
// is kept, within bounds, until a rescan moves a tracked object over its
// address, then charged to it; one kept past lateHold, or past the caps,
// is judged as it would have been at once.

// lateHold is how long a sample waits for the rescan: longer than a cycle
// of a busy collector, short enough to bound what waits.
const lateHold = uint64(5 * time.Second)

// maxLate bounds the samples waiting for a rescan.
const maxLate = 1 << 15

// lateSamples holds the samples waiting for a later rescan, in time order.
type lateSamples struct {
	lateMoves bool // the collector moves objects after the pauses the rescans follow
	lateQ     []pending
	lateH     int
	lateBuf   []lateRange // rejoin's buffer
}

// lateRange is where a rescan put a tracked object.
type lateRange struct {
	start, end uint64
	id         objindex.ID
}

// holdable says whether sample p, in the heap and in no tracked object,
// waits for a later rescan. Held samples share pendingSize with those
// waiting for the agent's records: they take at most a quarter of it, so
// that they never make those be judged early.
func (j *JVM) holdable(p *pending) bool {
	return j.lateMoves && !p.held && len(j.lateQ)-j.lateH < maxLate && j.pendingSize < maxPendingBytes/4
}

// hold keeps p, whose access path is fr, until a rescan moves an object
// over its address or lateHold passes. Samples reach it in time order.
func (j *JVM) hold(p *pending, fr []pathFrame) {
	q := *p
	q.held, q.retried, q.path = true, true, slices.Clone(fr)
	q.time += lateHold
	j.pendingSize += pendingBytes(&q)
	j.lateQ = append(j.lateQ, q)
}

// rejoin charges the waiting samples that lie in objects a rescan has just
// moved to the objects, and keeps the others waiting. A sample whose
// object start the sampling program read must name the moved object's.
func (j *JVM) rejoin(moved []objindex.ID) {
	if len(moved) == 0 || j.lateH == len(j.lateQ) {
		return
	}
	rs := j.lateBuf[:0]
	for _, id := range moved {
		if !j.indexed(id) {
			continue // overlapped by a later entry of the same rescan
		}
		o := &j.objs[id]
		rs = append(rs, lateRange{start: o.start, end: o.start + max(o.size, 1), id: id})
	}
	slices.SortFunc(rs, func(a, b lateRange) int { return cmp.Compare(a.start, b.start) })
	w := j.lateH
	for k := j.lateH; k < len(j.lateQ); k++ {
		p := j.lateQ[k]
		i, _ := slices.BinarySearchFunc(rs, p.addr, func(r lateRange, a uint64) int {
			if r.start <= a {
				return -1
			}
			return 1
		})
		if i > 0 {
			r := rs[i-1]
			if p.addr < r.end && (!p.located || p.obj == r.start) {
				obj := j.objs[r.id]
				s := j.sites[obj.site]
				typ, field := j.trackedType(s.typeSig, p.addr-obj.start)
				j.chargeSite(s, &p, p.path, float64(obj.weight), typ, field)
				j.stats.MovedLate++
				j.pendingSize -= pendingBytes(&p)
				continue
			}
		}
		j.lateQ[w] = p
		w++
	}
	clear(j.lateQ[w:])
	j.lateQ = j.lateQ[:w]
	j.lateBuf = rs[:0]
}
