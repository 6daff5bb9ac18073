package join

import "slices"

// Stores by the VM into heap memory that no tracked object holds yet. The
// VM zeroes a large array (libc's memset, outside the TLAB) and a GC
// copies an object to its new place before the agent's allocation record
// or the rescan that moves it says so: judged at their time, those samples
// find nothing. Like first-touch page faults, they are judged once more
// after the grace, against the objects known by then. Stores from JIT
// code are not: they initialise the program's small objects, which stay
// untracked, and a second judgement would only hold them back.

// retries holds the samples waiting for their second judgement, in time
// order.
type retries struct {
	retryQ []pending
	retryH int
}

// retryable says whether sample p, in the heap and in no tracked object,
// waits for a second judgement.
func (j *JVM) retryable(p *pending) bool {
	if p.retried || !p.store || len(j.retryQ)-j.retryH >= maxPending || j.pendingSize >= maxPendingBytes {
		return false
	}
	return !j.codeMap.Contains(p.ip)
}

// retry queues p, whose access path is fr, to be judged again after the
// grace. Samples reach it in time order, so the queue stays in time order.
func (j *JVM) retry(p *pending, fr []pathFrame) {
	q := *p
	q.retried, q.path = true, slices.Clone(fr)
	q.time += j.faultGrace
	j.pendingSize += pendingBytes(&q)
	j.retryQ = append(j.retryQ, q)
	j.stats.Rejudged++
}
