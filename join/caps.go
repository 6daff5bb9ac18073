package join

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/djx-bpf/djx-bpf/agent"
)

// Per-JVM caps on what an agent's stream can make the loader keep. The
// agent runs in the target, whose user controls it: a hostile or broken one
// must not make root grow without bound. Each is far above what a real
// JVM sends in a profile (a sampled heap tracks thousands of objects);
// records past a cap are dropped and counted, and the report says so.
// Variables so that tests can lower them.
var (
	maxObjects = 4 << 20 // live tracked objects
	// maxChunks caps the 1 GiB ranges holding tracked objects: the index
	// costs 384 KiB for each (objindex/radix.go), however few objects.
	maxChunks       = 1024
	maxSites        = 1 << 20 // distinct allocation sites
	maxMethods      = 4 << 20
	maxCodeBlobs    = 1 << 20
	maxClasses      = 1 << 20 // class layouts (a large JVM loads 100k)
	maxQueued       = 4 << 20 // allocation-stream records waiting for the horizon
	maxStackThreads = 1 << 16 // threads with stacks waiting for their samples
	maxStackQueue   = 1 << 16 // stacks waiting on one thread
	// maxAhead is how far past the stream's watermark a record may be
	// stamped: one further ahead would sit in the queue to the end.
	maxAhead = uint64(time.Minute)
)

// admitObject says why an ALLOC or CENSUS at addr, stamped t, is dropped,
// or "".
func (j *JVM) admitObject(t, addr uint64, ahead func(uint64) bool) string {
	switch {
	case ahead(t):
		return "allocations stamped in the future"
	case j.heapKnown && !j.heap.Contains(addr):
		// Addresses outside the heap are bogus, and spread ones cost the
		// index a chunk each.
		return "allocations outside the heap"
	case len(j.agentQ)-j.agentH >= maxQueued:
		return fmt.Sprintf("records past %d queued", maxQueued)
	}
	c := addr >> 30
	if _, ok := j.chunks[c]; !ok {
		if len(j.chunks) >= maxChunks {
			return fmt.Sprintf("allocations spread over more than %d GiB ranges", maxChunks)
		}
		if j.chunks == nil {
			j.chunks = make(map[uint64]struct{})
		}
		j.chunks[c] = struct{}{}
	}
	return ""
}

// admit reports whether record r of a batch with watermark wm is kept,
// counting it in capDrops otherwise.
func (j *JVM) admit(r agent.Record, wm uint64) bool {
	ahead := func(t uint64) bool {
		ref := max(j.watermark, wm)
		return ref != 0 && t > ref+maxAhead
	}
	why := ""
	switch r := r.(type) {
	case *agent.Alloc:
		why = j.admitObject(r.Time, r.Addr, ahead)
	case *agent.Census:
		why = j.admitObject(r.Time, r.Addr, ahead)
	case *agent.Interval:
		if ahead(r.Time) {
			why = "records stamped in the future"
		}
	case *agent.Free:
		if ahead(r.Time) {
			why = "records stamped in the future"
		} else if len(j.agentQ)-j.agentH >= maxQueued {
			why = fmt.Sprintf("records past %d queued", maxQueued)
		}
	case *agent.Reconcile:
		if ahead(r.Time) {
			why = "records stamped in the future"
		}
	case *agent.Method:
		if j.syms.Len() >= maxMethods {
			why = fmt.Sprintf("methods past %d", maxMethods)
		}
	case *agent.Class:
		if j.types != nil && j.types.Len() >= maxClasses {
			why = fmt.Sprintf("classes past %d", maxClasses)
		}
	case *agent.Code, *agent.Stub:
		if j.code != nil && j.code.Len() >= maxCodeBlobs {
			why = fmt.Sprintf("code blobs past %d", maxCodeBlobs)
		}
	case *agent.Stack:
		if q := j.stacks[r.TID]; q == nil && len(j.stacks) >= maxStackThreads {
			why = fmt.Sprintf("stacks of threads past %d", maxStackThreads)
		} else if q != nil && len(q.q)-q.head >= maxStackQueue {
			why = fmt.Sprintf("stacks past %d waiting on one thread", maxStackQueue)
		}
	}
	if why == "" {
		return true
	}
	j.drop(why)
	return false
}

// roomForObject reports whether an allocation at site si (-1: a new site
// past maxSites) may be tracked, counting the drop otherwise. Checked when
// the allocation applies, not when it arrives: the queue holds many.
func (j *JVM) roomForObject(si int32) bool {
	why := ""
	switch {
	case si < 0:
		why = fmt.Sprintf("allocations past %d sites", maxSites)
	case len(j.objs)-len(j.free) >= maxObjects:
		why = fmt.Sprintf("allocations past %d tracked objects", maxObjects)
	default:
		return true
	}
	j.drop(why)
	return false
}

func (j *JVM) drop(why string) {
	if j.capDrops == nil {
		j.capDrops = make(map[string]uint64)
	}
	j.capDrops[why]++
}

// capNote says what the caps dropped, or "" if nothing.
func (j *JVM) capNote() string {
	if len(j.capDrops) == 0 {
		return ""
	}
	var parts []string
	for why, n := range j.capDrops {
		parts = append(parts, fmt.Sprintf("%d %s", n, why))
	}
	sort.Strings(parts)
	return "the agent's stream went past the loader's per-JVM caps, so records were dropped: " + strings.Join(parts, ", ")
}

// maxErrorTexts and maxErrorLen bound the agent's ERROR texts kept for
// the report.
const (
	maxErrorTexts = 8
	maxErrorLen   = 200
)

// keepError keeps the text of one of the agent's first ERROR records,
// shortened and stripped of control characters (the target writes it).
func (j *JVM) keepError(msg string) {
	if len(j.agentErrs) >= maxErrorTexts {
		return
	}
	msg = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, msg)
	if len(msg) > maxErrorLen {
		msg = msg[:maxErrorLen] + "..."
	}
	j.agentErrs = append(j.agentErrs, msg)
}

// AgentNotes are the report's notes on what the agent's stream lost: caps
// reached, CODE records dropped, ERROR records.
func (j *JVM) AgentNotes() []string {
	var notes []string
	if n := j.capNote(); n != "" {
		notes = append(notes, n)
	}
	if d := j.lastAgt.CodeDropped; d > 0 {
		notes = append(notes, fmt.Sprintf("the agent dropped %d JIT code records (buffer full): samples in that code are named by address only", d))
	}
	if len(j.agentErrs) > 0 {
		more := ""
		if j.stats.AgentErrors > uint64(len(j.agentErrs)) {
			more = fmt.Sprintf(" (and %d more)", j.stats.AgentErrors-uint64(len(j.agentErrs)))
		}
		notes = append(notes, fmt.Sprintf("the agent reported errors%s: %s", more, strings.Join(j.agentErrs, "; ")))
	}
	return notes
}
