package heapwalk

// A collection between the read of a reference and the read of its
// object moves the object under the walk: G1's, Parallel's and Serial's
// young collections evacuate the young objects and the JVM allocates
// new ones in their place. Read at the old address, such a new object
// parses, and would be named by the chain of the one that moved, and so
// would all it holds (a database's rows named by a pool of Doubles).
// So an entry queued before a collection the walk saw is visited only
// if the slot its reference was read from still holds it: a collection
// that moves an object rewrites every reference to it. One whose slot
// holds another is dropped and counted (Stats.Stale): the walk's check
// against the collection count walks again when they are many.
//
// A young collection moves only young objects, and G1's mixed ones the
// old regions they evacuate, so a slot in an object left in place still
// says where its referent is. A full collection compacts the whole heap:
// the slots move with their objects, and what is at a slot's old
// address says nothing of the entry. The entries found before one are
// visited unchecked, as with no check at all, and the walk's result says
// a full collection overlapped it (GCCheck.Full).

// sawCollections notes the counts of collections n and of full ones:
// when n moved on since the queued entries were found, they are to be
// checked before their visit, unless a full collection ran, after which
// they are not checked at all. It says whether they are to be checked.
func (w *walker) sawCollections(n, full uint32, ok bool) bool {
	if !ok || !w.checkSlots || n == w.queueGC {
		return false
	}
	w.queueGC = n
	if full != w.queueFull {
		w.queueFull = full
		w.qs.zero()
		w.qhs.zero()
		clear(w.bslots)
		return false
	}
	w.q.markStale()
	w.qh.markStale()
	return true
}

// popBatch takes the next batch from the queues, hot objects first, and
// drops the entries found before a collection that moved them.
func (w *walker) popBatch() {
	sh, sq := w.qh.staleHead(), w.q.staleHead()
	w.batch = w.qh.pop(w.batch[:0], w.cfg.Batch)
	nh := len(w.batch)
	w.batch = w.q.pop(w.batch, w.cfg.Batch)
	if !w.checkSlots {
		return
	}
	w.bslots = w.qhs.pop(w.bslots[:0], w.cfg.Batch)
	w.bslots = w.qs.pop(w.bslots, w.cfg.Batch)
	if sh > 0 || sq > 0 {
		w.slotIdx = w.slotIdx[:0]
		for i := range min(sh, nh) {
			w.slotIdx = append(w.slotIdx, i)
		}
		for i := nh; i < nh+min(sq, len(w.batch)-nh); i++ {
			w.slotIdx = append(w.slotIdx, i)
		}
		if w.markMoved(w.batch, func(i int) uint64 { return w.bslots[i] }) {
			k := 0
			for i, ent := range w.batch {
				if ent != moved {
					w.batch[k], w.bslots[k] = ent, w.bslots[i]
					k++
				}
			}
			w.batch, w.bslots = w.batch[:k], w.bslots[:k]
		}
	}
	w.unsorted = append(w.unsorted[:0], w.batch...)
}

// moved marks entries dropped from a batch.
const moved = ^uint64(0)

// checkMovedAgain checks entries of the batch (sorted, or the objects
// it skipped) after a collection overlapped its read, and returns them
// without those it moved.
func (w *walker) checkMovedAgain(ents []uint64) []uint64 {
	slotOf := make(map[uint64]uint64, len(w.unsorted))
	for i, ent := range w.unsorted {
		slotOf[ent] = w.bslots[i]
	}
	w.slotIdx = w.slotIdx[:0]
	for i := range ents {
		w.slotIdx = append(w.slotIdx, i)
	}
	if !w.markMoved(ents, func(i int) uint64 { return slotOf[ents[i]] }) {
		return ents
	}
	k := 0
	for _, ent := range ents {
		if ent != moved {
			ents[k] = ent
			k++
		}
	}
	return ents[:k]
}

// markMoved reads, from the JVM as it is now, the slots (slot(i), 0 for
// a root) of the entries ents[i] for i in w.slotIdx, and marks moved
// those whose slot holds another reference; a slot it cannot read is
// left to the visit, which reads its object as before. It says whether
// it marked any.
func (w *walker) markMoved(ents []uint64, slot func(int) uint64) bool {
	w.slotSpan = w.slotSpan[:0]
	k := 0
	for _, i := range w.slotIdx {
		if s := slot(i); s != 0 {
			w.slotSpan = append(w.slotSpan, Span{Addr: s, Len: int(w.l.OopSize)})
			w.slotIdx[k] = i
			k++
		}
	}
	w.slotIdx = w.slotIdx[:k]
	if k == 0 {
		return false
	}
	size := int(w.l.OopSize)
	w.slotBuf = sized(w.slotBuf, k*size)
	w.slotOK = sized(w.slotOK, k)
	w.r.readSpans(w.slotBuf, w.slotSpan, w.slotOK)
	marked := false
	for j, i := range w.slotIdx {
		if w.slotOK[j] < size {
			continue
		}
		v := w.slot(w.slotBuf[j*size:])
		if v != 0 && w.ref(v) == w.lo+ents[i]>>edgeBits<<3 {
			continue
		}
		ents[i] = moved
		w.stats.Stale++
		marked = true
	}
	return marked
}
