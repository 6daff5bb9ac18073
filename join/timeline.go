package join

import (
	"slices"
	"sort"
	"time"

	"github.com/djx-bpf/djx-bpf/agent"
)

// timeline holds what waits for the horizon, each queue in time order, and
// how far each stream is complete.
type timeline struct {
	queue  []pending // decoded samples
	head   int
	agentQ []timedRec // allocation-stream records that must apply in time order
	agentH int
	gcQ    []*gcBatch // finished GCs whose moves wait to be applied
	gcH    int

	watermark uint64 // the agent's stream is complete up to here
	drained   uint64 // the horizon drain last reached: heap state is past it
	// sampleWM: every sample taken before it has reached OnSample, when
	// sampleStream says a sampler reports it (tests feed samples directly).
	sampleWM     uint64
	sampleStream bool
	// faultGrace delays page-fault samples (pageFaultGrace; tests set 0).
	faultGrace uint64
}

// timedRec is an agent record whose effect depends on when it happened.
type timedRec struct {
	time uint64
	rec  agent.Record
}

// insertTimed queues a record whose time may precede records already
// queued, keeping the queue in time order.
func (j *JVM) insertTimed(tr timedRec) {
	q := j.agentQ[j.agentH:]
	i := sort.Search(len(q), func(i int) bool { return q[i].time > tr.time })
	j.agentQ = slices.Insert(j.agentQ, j.agentH+i, tr)
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
		if j.agentH < len(j.agentQ) {
			ta = j.agentQ[j.agentH].time
		}
		if j.gcH < len(j.gcQ) {
			tg = j.gcQ[j.gcH].end
		}
		if j.head < len(j.queue) {
			ts = j.queue[j.head].time
		}
		t := min(ta, tg, ts)
		if t == none || (!final && t > h) {
			break
		}
		switch t {
		case ta:
			j.applyTimed(j.agentQ[j.agentH].rec)
			j.agentQ[j.agentH] = timedRec{}
			j.agentH++
		case tg:
			j.applyGC(j.gcQ[j.gcH])
			j.gcQ[j.gcH] = nil
			j.gcH++
		default:
			j.attribute(&j.queue[j.head])
			j.head++
		}
	}
	j.pruneStacks(h, final)
	j.queue, j.head = compact(j.queue, j.head)
	j.agentQ, j.agentH = compact(j.agentQ, j.agentH)
	j.gcQ, j.gcH = compact(j.gcQ, j.gcH)
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
