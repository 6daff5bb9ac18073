package join

import (
	"time"

	"github.com/djx-bpf/djx-bpf/sources/agentwire"
)

// timeline holds what waits for the horizon, each queue in time order, and
// how far each stream is complete.
type timeline struct {
	queue []pending // decoded samples
	head  int
	// pendingSize is what queue and retryQ hold (pendingBytes).
	pendingSize int
	// Allocation-stream records that must apply in time order, by (time,
	// arrival): those that arrive in order wait in agentQ from agentH on,
	// those stamped before its tail (FREE, RECONCILE, CENSUS) in the heap
	// agentLate, so that neither costs more than O(log n).
	agentQ     []timedRec
	agentH     int
	agentLate  recHeap
	agentSeq   uint64     // arrival order of the next queued record
	queuedSize int        // estimated bytes held by agentQ and agentLate (caps.go)
	gcQ        []*gcBatch // finished GCs whose moves wait to be applied
	gcH        int

	watermark uint64 // the agent's stream is complete up to here
	drained   uint64 // the horizon drain last reached: heap state is past it
	// sampleWM: every sample taken before it has reached OnSample, when
	// sampleStream says a sampler reports it (tests feed samples directly).
	sampleWM     uint64
	sampleStream bool
	// faultGrace delays page-fault samples (pageFaultGrace; tests set 0).
	faultGrace uint64
}

// timedRec is an agent record whose effect depends on when it happened;
// seq keeps records of equal time in arrival order.
type timedRec struct {
	time uint64
	seq  uint64
	rec  agentwire.Record
}

func (a *timedRec) before(b *timedRec) bool {
	return a.time < b.time || a.time == b.time && a.seq < b.seq
}

// queueTimed queues record r, to apply at time t: in arrival order among
// records of equal time, before any of a later time.
func (j *JVM) queueTimed(t uint64, r agentwire.Record) {
	tr := timedRec{time: t, seq: j.agentSeq, rec: r}
	j.agentSeq++
	j.queuedSize += queuedBytes(r)
	if n := len(j.agentQ); n == j.agentH || j.agentQ[n-1].time <= t {
		j.agentQ = append(j.agentQ, tr)
		return
	}
	j.agentLate.push(tr)
}

// queuedLen is the number of records waiting in the time-ordered queue.
func (j *JVM) queuedLen() int { return len(j.agentQ) - j.agentH + len(j.agentLate) }

// peekTimed is the first record to apply, or nil when none waits.
func (j *JVM) peekTimed() *timedRec {
	var a, l *timedRec
	if j.agentH < len(j.agentQ) {
		a = &j.agentQ[j.agentH]
	}
	if len(j.agentLate) > 0 {
		l = &j.agentLate[0]
	}
	if a == nil || l != nil && l.before(a) {
		return l
	}
	return a
}

// popTimed removes and returns the first record to apply; one must wait.
func (j *JVM) popTimed() agentwire.Record {
	var r agentwire.Record
	if len(j.agentLate) > 0 && (j.agentH == len(j.agentQ) || j.agentLate[0].before(&j.agentQ[j.agentH])) {
		r = j.agentLate.pop().rec
	} else {
		r = j.agentQ[j.agentH].rec
		j.agentQ[j.agentH] = timedRec{}
		j.agentH++
	}
	j.queuedSize -= queuedBytes(r)
	return r
}

// recHeap is a binary min-heap of records by (time, arrival).
type recHeap []timedRec

func (h *recHeap) push(tr timedRec) {
	*h = append(*h, tr)
	q := *h
	for i := len(q) - 1; i > 0; {
		p := (i - 1) / 2
		if !q[i].before(&q[p]) {
			break
		}
		q[i], q[p] = q[p], q[i]
		i = p
	}
}

func (h *recHeap) pop() timedRec {
	q := *h
	top := q[0]
	n := len(q) - 1
	q[0] = q[n]
	q[n] = timedRec{}
	q = q[:n]
	for i := 0; ; {
		m, l, r := i, 2*i+1, 2*i+2
		if l < n && q[l].before(&q[m]) {
			m = l
		}
		if r < n && q[r].before(&q[m]) {
			m = r
		}
		if m == i {
			break
		}
		q[i], q[m] = q[m], q[i]
		i = m
	}
	*h = q
	if n == 0 && cap(q) > 4096 {
		*h = nil // let a burst's backing array go
	}
	return top
}

// rescanTimeout bounds how long samples wait for a rescan that the agent
// skipped or limited.
const rescanTimeout = uint64(500 * time.Millisecond)

// horizon is the time up to which every stream is complete.
func (j *JVM) horizon() uint64 {
	h := j.watermark
	if j.sampleStream {
		// A sample still on its way must meet the heap as it was.
		h = min(h, j.sampleWM)
	}
	if j.stackSig != 0 {
		// Stacks come a little after their samples.
		h = max(h, stackGrace) - stackGrace
	}
	if j.censusHold != 0 && j.censusHold < h {
		h = j.censusHold // samples from the census on meet its objects
	}
	if j.walkHold != 0 && j.walkHold < h {
		h = j.walkHold // and those from a heap walk's start on, its structures
	}
	if j.rescanWait != 0 {
		if j.watermark > j.rescanWait+rescanTimeout {
			j.rescanWait = 0
		} else if j.rescanWait < h {
			h = j.rescanWait // after a GC, wait for the rescan
		}
	}
	if j.reloc {
		r := j.relocWM
		if j.curGC != nil && j.curGC.begin < r {
			r = j.curGC.begin
		}
		if r < h {
			h = r
		}
	}
	return h
}

// Drain applies, in time order, the allocation records, GC batches and
// samples that every stream has caught up with (all of them when final), so
// that each sample meets the heap as it was when it was taken.
func (j *JVM) Drain(final bool) {
	h := j.horizon()
	if !final {
		j.drained = max(j.drained, h)
	}
	for {
		const none = ^uint64(0)
		ta, tg, ts := none, none, none
		if p := j.peekTimed(); p != nil {
			ta = p.time
		}
		if j.gcH < len(j.gcQ) {
			tg = j.gcQ[j.gcH].end
		}
		if j.head < len(j.queue) {
			ts = j.queue[j.head].time
		}
		tr, tl := none, none
		if j.retryH < len(j.retryQ) {
			tr = j.retryQ[j.retryH].time
		}
		if j.lateH < len(j.lateQ) {
			tl = j.lateQ[j.lateH].time
		}
		t := min(ta, tg, ts, tr, tl)
		if t == none || (!final && t > h) {
			break
		}
		switch t {
		case ta:
			j.applyTimed(j.popTimed())
		case tg:
			j.applyGC(j.gcQ[j.gcH])
			j.gcQ[j.gcH] = nil
			j.gcH++
		case tr:
			j.attributeHead(j.retryQ, &j.retryH)
		case tl:
			j.attributeHead(j.lateQ, &j.lateH)
		default:
			j.judgeNext()
		}
	}
	j.pruneStacks(h, final)
	j.queue, j.head = compact(j.queue, j.head)
	j.retryQ, j.retryH = compact(j.retryQ, j.retryH)
	j.lateQ, j.lateH = compact(j.lateQ, j.lateH)
	j.agentQ, j.agentH = compact(j.agentQ, j.agentH)
	j.gcQ, j.gcH = compact(j.gcQ, j.gcH)
}

// judgeNext attributes the first queued sample and releases its slot.
func (j *JVM) judgeNext() {
	p := &j.queue[j.head]
	j.pendingSize -= pendingBytes(p)
	j.attribute(p)
	*p = pending{}
	j.head++
}

// compact drops the consumed prefix of a queue once it dominates.
func compact[T any](q []T, head int) ([]T, int) {
	if head > 4096 && head*2 > len(q) {
		n := copy(q, q[head:])
		clear(q[n:])
		return q[:n], 0
	}
	if head == len(q) {
		return q[:0], 0
	}
	return q, head
}

// attributeHead takes the sample at q's head *h off the queue and
// attributes it.
func (j *JVM) attributeHead(q []pending, h *int) {
	p := q[*h]
	q[*h] = pending{}
	*h++
	j.pendingSize -= pendingBytes(&p)
	j.attribute(&p)
}
