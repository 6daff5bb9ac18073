package heapwalk

// queue is the walk's FIFO of found objects not yet visited, in
// segments so that its memory follows its length, not its history.
type queue struct {
	segs [][]uint64
	head int // the next entry's index in segs[0]
	n    int
	free []uint64 // one spare segment
	// pushed and popped count entries ever in; those pushed before
	// staleTo were found before the last collection the walk saw.
	pushed, popped, staleTo uint64
}

// markStale says a collection ran: the entries queued so far were read
// from objects it may have moved.
func (q *queue) markStale() { q.staleTo = q.pushed }

// staleHead is how many of the next entries to pop were found before
// the last collection.
func (q *queue) staleHead() int {
	if q.staleTo <= q.popped {
		return 0
	}
	return int(min(q.staleTo-q.popped, uint64(q.n)))
}

const segLen = 1 << 16

// zero sets every queued entry to 0.
func (q *queue) zero() {
	for i, s := range q.segs {
		if i == 0 {
			s = s[q.head:]
		}
		clear(s)
	}
}

func (q *queue) len() int { return q.n }

func (q *queue) push(v uint64) {
	if len(q.segs) == 0 || len(q.segs[len(q.segs)-1]) == segLen {
		s := q.free
		q.free = nil
		if s == nil {
			s = make([]uint64, 0, segLen)
		}
		q.segs = append(q.segs, s[:0])
	}
	last := len(q.segs) - 1
	q.segs[last] = append(q.segs[last], v)
	q.n++
	q.pushed++
}

// dropLast takes back the latest entry; false when there is none.
func (q *queue) dropLast() bool {
	if q.n == 0 {
		return false
	}
	last := len(q.segs) - 1
	q.segs[last] = q.segs[last][:len(q.segs[last])-1]
	q.n--
	q.pushed--
	q.staleTo = min(q.staleTo, q.pushed)
	if len(q.segs[last]) == 0 || (last == 0 && len(q.segs[0]) == q.head) {
		q.free = q.segs[last][:0]
		q.segs = q.segs[:last]
		if last == 0 {
			q.head = 0
		}
	}
	return true
}

// pop appends up to max entries to dst, oldest first.
func (q *queue) pop(dst []uint64, max int) []uint64 {
	for len(dst) < max && q.n > 0 {
		s := q.segs[0]
		k := min(max-len(dst), len(s)-q.head)
		dst = append(dst, s[q.head:q.head+k]...)
		q.head += k
		q.n -= k
		q.popped += uint64(k)
		if q.head == len(s) && (len(s) == segLen || len(q.segs) > 1 || q.n == 0) {
			q.free = s
			q.segs[0] = nil
			q.segs = q.segs[1:]
			q.head = 0
		}
	}
	return dst
}

// sortEntries sorts queue entries by their heap offset, the bits from
// edgeBits up to edgeBits+width (offsets are distinct, so this is their
// order as numbers), least significant digit first through scratch:
// linear in the batch, where a comparison sort of each batch took a
// tenth of a walk.
func sortEntries(b, scratch []uint64, width int) {
	const digit = 11
	var count [1 << digit]int32
	src, dst := b, scratch[:len(b)]
	passes := (width + digit - 1) / digit
	for p := 0; p < passes; p++ {
		shift := uint(edgeBits + p*digit)
		clear(count[:])
		for _, v := range src {
			count[(v>>shift)&(1<<digit-1)]++
		}
		var sum int32
		for i, c := range count {
			count[i] = sum
			sum += c
		}
		for _, v := range src {
			d := (v >> shift) & (1<<digit - 1)
			dst[count[d]] = v
			count[d]++
		}
		src, dst = dst, src
	}
	if passes%2 == 1 {
		copy(b, src)
	}
}
