package heapwalk

// What the samples hit comes first. The caller gives the addresses its
// samples hit (Config.Hot); objects found on those heap pages go to a
// queue of their own that the walk empties first, and past the queue's
// cap they take the place of objects found elsewhere. So a walk cut
// short, by its caps or its context, has named what the samples hit
// before the rest.

// hotPages is a bit per heap page the samples hit.
type hotPages struct {
	lo   uint64
	bits []uint64
}

// maxHotSpan bounds the heap span the pages cover (a bit per 4 KiB: 2
// MiB of bits).
const maxHotSpan = 64 << 30

func newHotPages(lo, hi uint64, addrs []uint64) *hotPages {
	if len(addrs) == 0 || hi <= lo || hi-lo > maxHotSpan {
		return nil
	}
	h := &hotPages{lo: lo, bits: make([]uint64, ((hi-lo)>>pageShift+63)/64)}
	n := 0
	for _, a := range addrs {
		if a < lo || a >= hi {
			continue
		}
		p := (a - lo) >> pageShift
		h.bits[p/64] |= 1 << (p % 64)
		n++
	}
	if n == 0 {
		return nil
	}
	return h
}

func (h *hotPages) has(a uint64) bool {
	if h == nil || a < h.lo {
		return false
	}
	p := (a - h.lo) >> pageShift
	return p/64 < uint64(len(h.bits)) && h.bits[p/64]&(1<<(p%64)) != 0
}

// admit counts a newly found object and picks its queue: nil when a
// cap keeps it out. An object on a hot page may go past MaxObjects by
// an eighth, and past MaxQueue in place of the latest other object.
func (w *walker) admit(a uint64) *queue {
	w.found++
	hot := w.hot.has(a)
	if hot {
		w.stats.Hot++
	}
	if w.found > w.cfg.MaxObjects && (!hot || w.found > w.cfg.MaxObjects+w.cfg.MaxObjects/8) {
		w.stats.ObjectsCapped++
		return nil
	}
	if w.q.len()+w.qh.len() >= w.cfg.MaxQueue {
		w.stats.QueueDropped++
		if !hot || !w.q.dropLast() {
			return nil
		}
		w.qs.dropLast()
	}
	if hot {
		return &w.qh
	}
	return &w.q
}
