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

// sawCollections notes collection count n: when it moved on since the
// queued entries were found, they are to be checked before their visit.
// It says whether it did.
func (w *walker) sawCollections(n uint32, ok bool) bool {
	if !ok || !w.checkSlots || n == w.queueGC {
		return false
	}
	w.queueGC = n
	w.q.markStale()
	w.qh.markStale()
	return true
}

// popBatch takes the next batch from the queues, hot objects first, and
// drops the entries found before a collection that moved them.
func (w *walker) popBatch() {
	sh, sq := w.qh.staleHead(), w.q.staleHead()
	w.batch = w.qh.pop(w.batch[:0], w.cfg.Batch)
	w.bslots = w.qhs.pop(w.bslots[:0], w.cfg.Batch)
	nh := len(w.batch)
	w.batch = w.q.pop(w.batch, w.cfg.Batch)
	w.bslots = w.qs.pop(w.bslots, w.cfg.Batch)
	if sh > 0 || sq > 0 {
		w.checkMoved(0, min(sh, nh), nh, nh+min(sq, len(w.batch)-nh))
	}
	w.unsorted = append(w.unsorted[:0], w.batch...)
}

// moved marks entries dropped from a batch.
const moved = ^uint64(0)

// checkMoved checks the batch's entries in [lo1, hi1) and [lo2, hi2)
// against their slots, and drops those a collection moved.
func (w *walker) checkMoved(lo1, hi1, lo2, hi2 int) {
	w.slotSpan = w.slotSpan[:0]
	idx := make([]int, 0, hi1-lo1+hi2-lo2)
	for _, r := range [][2]int{{lo1, hi1}, {lo2, hi2}} {
		for i := r[0]; i < r[1]; i++ {
			if w.bslots[i] != 0 {
				w.slotSpan = append(w.slotSpan, Span{Addr: w.bslots[i], Len: int(w.l.OopSize)})
				idx = append(idx, i)
			}
		}
	}
	if len(idx) == 0 {
		return
	}
	ok := w.readSlots()
	for j, i := range idx {
		if !ok[j] || w.slotHolds(j, w.batch[i]) {
			continue
		}
		w.batch[i] = moved
		w.stats.Stale++
	}
	k := 0
	for i, ent := range w.batch {
		if ent != moved {
			w.batch[k], w.bslots[k] = ent, w.bslots[i]
			k++
		}
	}
	w.batch, w.bslots = w.batch[:k], w.bslots[:k]
}

// checkMovedAgain checks entries of the batch (sorted, or the objects
// it skipped) after a collection overlapped its read, and returns them
// without those it moved.
func (w *walker) checkMovedAgain(ents []uint64) []uint64 {
	slotOf := make(map[uint64]uint64, len(w.unsorted))
	for i, ent := range w.unsorted {
		slotOf[ent] = w.bslots[i]
	}
	w.slotSpan = w.slotSpan[:0]
	idx := make([]int, 0, len(ents))
	for i, ent := range ents {
		if s := slotOf[ent]; s != 0 {
			w.slotSpan = append(w.slotSpan, Span{Addr: s, Len: int(w.l.OopSize)})
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return ents
	}
	ok := w.readSlots()
	for j, i := range idx {
		if ok[j] && !w.slotHolds(j, ents[i]) {
			ents[i] = moved
			w.stats.Stale++
		}
	}
	return dropMoved(ents)
}

func dropMoved(ents []uint64) []uint64 {
	k := 0
	for _, ent := range ents {
		if ent != moved {
			ents[k] = ent
			k++
		}
	}
	return ents[:k]
}

// readSlots reads w.slotSpan's slots into w.slotBuf from the JVM as it
// is now; ok[j] says slot j was read (one that was not is left to the
// visit, which reads its object as before).
func (w *walker) readSlots() []bool {
	n := len(w.slotSpan) * int(w.l.OopSize)
	if cap(w.slotBuf) < n {
		w.slotBuf = make([]byte, n)
	}
	w.slotBuf = w.slotBuf[:n]
	if cap(w.slotOK) < len(w.slotSpan) {
		w.slotOK = make([]int, len(w.slotSpan))
	}
	w.slotOK = w.slotOK[:len(w.slotSpan)]
	w.r.readSpans(w.slotBuf, w.slotSpan, w.slotOK)
	ok := make([]bool, len(w.slotSpan))
	for j, v := range w.slotOK {
		ok[j] = v == int(w.l.OopSize)
	}
	return ok
}

// slotHolds says whether slot j read by readSlots still refers to the
// object of entry ent.
func (w *walker) slotHolds(j int, ent uint64) bool {
	v := w.slot(w.slotBuf[j*int(w.l.OopSize):])
	return v != 0 && w.ref(v) == w.lo+ent>>edgeBits<<3
}
