package join

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/djx-bpf/djx-bpf/sources/agentwire"
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

	// Byte budgets: the counts above do not bound what a record's strings
	// and lists hold (the Reader cuts each, see agentwire.MaxString). Each is
	// far above a real JVM's: a large one's methods take tens of MiB.
	maxQueuedBytes     = 1 << 30
	maxMethodBytes     = 256 << 20
	maxClassBytes      = 256 << 20
	maxCodeBytes       = 1 << 30
	maxSiteBytes       = 256 << 20
	maxCensusPathBytes = 512 << 20
	maxStackBytes      = 256 << 20 // stacks waiting for their samples
)

// stackBytes estimates what a waiting stack holds.
func stackBytes(st *agentwire.Stack) int { return 64 + 16*len(st.Frames) }

// budgetState is what the tables that have a byte budget hold, where the
// table itself does not say (the method table does).
type budgetState struct {
	// budget, when set, is shared with the other JVMs of a scan; published
	// is what this join last added to it.
	budget          *Budget
	published       int64
	siteBytes       int
	censusPathBytes int
	classBytes      int
	classSizes      map[uint64]int // by Klass*: a class described again replaces its layout
	codeBytes       int
	codeSizes       map[uint64]int // by start: what CODE_UNLOAD gives back
	stackBytes      int            // of the stacks waiting in stackStore.stacks
}

// queuedBytes estimates what a queued record holds: the record, its
// strings and lists, and its queue slot.
func queuedBytes(r agentwire.Record) int {
	switch r := r.(type) {
	case *agentwire.Alloc:
		return 128 + len(r.TypeSig) + 16*len(r.Frames)
	case *rawAlloc:
		return 160 + len(r.rec.TypeSig) + 4*len(r.ids) // the names are interned
	case *agentwire.Census:
		return 128 + len(r.TypeSig)
	case *agentwire.Reconcile:
		return 64 + 16*len(r.Objects)
	}
	return 64
}

// queueFull says why the time-ordered queue takes no more records, or "";
// bytes says it is the byte budget.
func (j *JVM) queueFull() (why string, bytes bool) {
	switch {
	case j.queuedLen() >= maxQueued:
		return fmt.Sprintf("records past %d queued", maxQueued), false
	case j.queuedSize >= maxQueuedBytes:
		return fmt.Sprintf("records past %d MiB queued", maxQueuedBytes>>20), true
	}
	return "", false
}

// codeBytes estimates what a CODE or STUB record costs the code table.
func codeBytes(r agentwire.Record) int {
	switch r := r.(type) {
	case *agentwire.Code:
		n := 96 + 32*len(r.PCs)
		for _, p := range r.PCs {
			n += 16 * len(p.Frames)
		}
		return n
	case *agentwire.Stub:
		return 96 + len(r.Name)
	}
	return 0
}

// classBytes estimates what a CLASS record costs the class table.
func classBytes(c *agentwire.Class) int {
	n := 128 + 2*len(c.Sig)
	for _, fs := range [][]agentwire.Field{c.Fields, c.Statics} {
		for _, f := range fs {
			n += 48 + len(f.Name) + len(f.Sig)
		}
	}
	return n
}

// admitObject says why an ALLOC or CENSUS at addr, stamped t, is dropped,
// or ""; bytes says a byte budget dropped it.
func (j *JVM) admitObject(t, addr uint64, ahead func(uint64) bool) (why string, bytes bool) {
	switch {
	case ahead(t):
		return "allocations stamped in the future", false
	case j.heapKnown && !j.heap.Contains(addr):
		// Addresses outside the heap are bogus, and spread ones cost the
		// index a chunk each.
		return "allocations outside the heap", false
	}
	if why, bytes := j.queueFull(); why != "" {
		return why, bytes
	}
	c := addr >> 30
	if _, ok := j.chunks[c]; !ok {
		if len(j.chunks) >= maxChunks {
			return fmt.Sprintf("allocations spread over more than %d GiB ranges", maxChunks), false
		}
		if j.chunks == nil {
			j.chunks = make(map[uint64]struct{})
		}
		j.chunks[c] = struct{}{}
	}
	return "", false
}

// admit reports whether record r of a batch with watermark wm is kept,
// counting it in capDrops otherwise. It keeps the byte counts of the
// tables that do not keep their own.
func (j *JVM) admit(r agentwire.Record, wm uint64) bool {
	ahead := func(t uint64) bool {
		ref := max(j.watermark, wm)
		return ref != 0 && t > ref+maxAhead
	}
	why, bytes := "", false
	switch r := r.(type) {
	case *agentwire.Alloc:
		why, bytes = j.admitObject(r.Time, r.Addr, ahead)
	case *agentwire.AllocRaw:
		why, bytes = j.admitObject(r.Time, r.Addr, ahead)
	case *agentwire.Census:
		why, bytes = j.admitObject(r.Time, r.Addr, ahead)
	case *agentwire.Interval, *agentwire.Free, *agentwire.Reconcile:
		if ahead(timeOf(r)) {
			why = "records stamped in the future"
		} else {
			why, bytes = j.queueFull()
		}
	case *agentwire.Method:
		if j.syms.Len() >= maxMethods {
			why = fmt.Sprintf("methods past %d", maxMethods)
		} else if j.syms.Bytes() >= maxMethodBytes {
			why, bytes = fmt.Sprintf("methods past %d MiB", maxMethodBytes>>20), true
		}
	case *agentwire.Class:
		if j.types != nil { // else not kept
			why, bytes = j.admitClass(r)
		}
	case *agentwire.Code, *agentwire.Stub:
		why, bytes = j.admitCode(r)
	case *agentwire.CodeUnload:
		j.codeBytes -= j.codeSizes[r.Start]
		delete(j.codeSizes, r.Start)
	case *agentwire.CensusPath:
		if len(j.censusPaths) >= maxCensusPaths {
			why = fmt.Sprintf("holder chain hops past %d", maxCensusPaths)
		} else if j.censusPathBytes >= maxCensusPathBytes {
			why, bytes = fmt.Sprintf("holder chain hops past %d MiB", maxCensusPathBytes>>20), true
		}
	case *agentwire.Stack:
		why, bytes = j.admitStack(r, ahead)
	}
	if why == "" && grows(r) {
		why, bytes = j.overShared()
	}
	if why == "" {
		return true
	}
	if bytes {
		j.dropBytes(why)
	} else {
		j.drop(why)
	}
	return false
}

// admitClass says why a CLASS is dropped, or "" after counting its bytes;
// bytes says a byte budget dropped it.
func (j *JVM) admitClass(r *agentwire.Class) (why string, bytes bool) {
	if max(j.types.Len(), len(j.classSizes)) >= maxClasses {
		return fmt.Sprintf("classes past %d", maxClasses), false
	}
	if j.classBytes >= maxClassBytes {
		return fmt.Sprintf("classes past %d MiB", maxClassBytes>>20), true
	}
	resize(&j.classSizes, &j.classBytes, r.Klass, classBytes(r))
	return "", false
}

// admitCode says why a CODE or STUB is dropped, or "" after counting its
// bytes; bytes says a byte budget dropped it.
func (j *JVM) admitCode(r agentwire.Record) (why string, bytes bool) {
	if max(j.code.Len(), len(j.codeSizes)) >= maxCodeBlobs {
		return fmt.Sprintf("code blobs past %d", maxCodeBlobs), false
	}
	if j.codeBytes >= maxCodeBytes {
		return fmt.Sprintf("code blobs past %d MiB", maxCodeBytes>>20), true
	}
	resize(&j.codeSizes, &j.codeBytes, codeStart(r), codeBytes(r))
	return "", false
}

// resize sets the size of sizes' entry key to n, keeping total their sum;
// an entry described again replaces the one before.
func resize(sizes *map[uint64]int, total *int, key uint64, n int) {
	if *sizes == nil {
		*sizes = make(map[uint64]int)
	}
	*total += n - (*sizes)[key]
	(*sizes)[key] = n
}

// admitStack says why a STACK is dropped, or ""; bytes says a byte budget
// dropped it.
func (j *JVM) admitStack(r *agentwire.Stack, ahead func(uint64) bool) (why string, bytes bool) {
	switch q := j.stacks[r.TID]; {
	case ahead(r.Time):
		// Never claimed nor pruned: it would sit to the end.
		return "stacks stamped in the future", false
	case q == nil && len(j.stacks) >= maxStackThreads:
		return fmt.Sprintf("stacks of threads past %d", maxStackThreads), false
	case q != nil && len(q.q)-q.head >= maxStackQueue:
		return fmt.Sprintf("stacks past %d waiting on one thread", maxStackQueue), false
	case j.stackBytes >= maxStackBytes:
		return fmt.Sprintf("stacks past %d MiB waiting", maxStackBytes>>20), true
	}
	return "", false
}

// grows says whether admitting r makes the join keep more of the stream.
func grows(r agentwire.Record) bool {
	switch r.(type) {
	case *agentwire.CodeUnload, *agentwire.Stack, *agentwire.Stats, *agentwire.Bye, *agentwire.Hello:
		return false
	}
	return true
}

// timeOf is the time of a record admit checks against the watermark.
func timeOf(r agentwire.Record) uint64 {
	switch r := r.(type) {
	case *agentwire.Interval:
		return r.Time
	case *agentwire.Free:
		return r.Time
	case *agentwire.Reconcile:
		return r.Time
	}
	return 0
}

// codeStart is where a CODE or STUB record's code starts.
func codeStart(r agentwire.Record) uint64 {
	if c, ok := r.(*agentwire.Code); ok {
		return c.Start
	}
	return r.(*agentwire.Stub).Start
}

// Site indexes internSite returns when it makes no new site.
const (
	sitePastCount = -1 // past maxSites
	sitePastBytes = -2 // past maxSiteBytes
)

// roomForObject reports whether an allocation at site si (negative: a new
// site past a cap) may be tracked, counting the drop otherwise. Checked
// when the allocation applies, not when it arrives: the queue holds many.
func (j *JVM) roomForObject(si int32) bool {
	switch {
	case si == sitePastBytes:
		j.dropBytes(fmt.Sprintf("allocations past %d MiB of sites", maxSiteBytes>>20))
	case si < 0:
		j.drop(fmt.Sprintf("allocations past %d sites", maxSites))
	case len(j.objs)-len(j.free) >= maxObjects:
		j.drop(fmt.Sprintf("allocations past %d tracked objects", maxObjects))
	default:
		return true
	}
	return false
}

// drop counts a record dropped past a count cap, dropBytes one past a
// byte budget, by reason.
func (j *JVM) drop(why string) {
	j.stats.RecordsDroppedCount++
	j.countDrop(why)
}

func (j *JVM) dropBytes(why string) {
	j.stats.RecordsDroppedBytes++
	j.countDrop(why)
}

func (j *JVM) countDrop(why string) {
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
	if j.bpfStacks != nil {
		if st := j.bpfStacks.Stats(); st.Failed > st.Gone {
			notes = append(notes, fmt.Sprintf("%d frames of stacks unwound in BPF could not be named from the JVM's memory (their paths end there); the last: %v",
				st.Failed-st.Gone, j.bpfStacks.LastError()))
		}
	}
	if j.bpfCode != nil {
		if st := j.bpfCode.Stats(); st.Errors > 0 {
			notes = append(notes, fmt.Sprintf("%d of %d lookups of JIT code in the JVM's memory failed (leaves, allocation scans); the last: %v",
				st.Errors, st.Lookups, j.bpfCode.LastError()))
		}
	}
	return notes
}
