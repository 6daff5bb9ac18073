package join

import (
	"strings"

	"github.com/djx-bpf/djx-bpf/objindex"

	"github.com/djx-bpf/djx-bpf/report"
	"github.com/djx-bpf/djx-bpf/sources/agentwire"
)

// censusState holds the holder chains of the censuses and their runs.
type censusState struct {
	censusPaths map[uint32]agentwire.CensusPath
	censusHold  uint64 // a census started then and has not ended: the join waits
	censuses    []censusRun
}

// maxHolderHops bounds a holder chain read from the agent, which a corrupt
// stream could make cyclic or endless.
const maxHolderHops = 64

// maxCensusPaths bounds the holder chains kept per JVM.
const maxCensusPaths = 1 << 22

// onCensusRec applies a census's framing records: the join waits from a
// census's start until its end, so that samples meet its objects.
func (j *JVM) onCensusRec(r agentwire.Record) {
	switch r := r.(type) {
	case *agentwire.CensusStart:
		j.censusHold = r.Time
	case *agentwire.CensusPath:
		// admit (caps.go) bounds their number and bytes.
		if j.censusPaths == nil {
			j.censusPaths = make(map[uint32]agentwire.CensusPath)
		}
		if old, ok := j.censusPaths[r.ID]; ok {
			j.censusPathBytes -= censusPathBytes(&old)
		}
		j.censusPaths[r.ID] = *r
		j.censusPathBytes += censusPathBytes(r)
	case *agentwire.CensusEnd:
		wall := uint64(0)
		if j.censusHold != 0 && r.Time > j.censusHold {
			wall = r.Time - j.censusHold
		}
		j.censusHold = 0
		j.censuses = append(j.censuses, censusRun{*r, wall})
	}
}

// censusPathBytes estimates what a hop of a holder chain holds.
func censusPathBytes(p *agentwire.CensusPath) int { return 64 + len(p.Hop) }

// censusRun is one census: its end record and how long it took.
type censusRun struct {
	agentwire.CensusEnd
	wallNanos uint64
}

// onCensus tracks an object the census found, unless it is tracked already
// (an allocation sampled since the attach, or a census after a GC finding
// one the sampler caught).
func (j *JVM) onCensus(c *agentwire.Census) (objindex.ID, bool) {
	if isFiller(c.TypeSig) {
		j.stats.CensusFillers++
		return 0, false
	}
	addr := j.canonical(c.Addr) // ZGC: objects are tracked at one view
	if o, ok := j.idx.Lookup(addr); ok && j.objs[o.ID].start == addr {
		j.stats.CensusDuplicates++
		return 0, false
	}
	si := j.censusSite(c)
	if !j.roomForObject(si) {
		return 0, false // past a per-JVM cap (caps.go)
	}
	id := j.track(si, c.Addr, c.Size, c.Tag, 1)
	j.stats.CensusObjects++
	j.stats.CensusBytes += c.Size
	return id, true
}

// isFiller says sig is one of the classes HotSpot (JDK 21+) formats dead
// heap space as, for G1 and the heap walk to step over: never program data.
func isFiller(sig string) bool {
	return sig == "[Ljdk/internal/vm/FillerElement;" || sig == "Ljdk/internal/vm/FillerObject;"
}

func (j *JVM) censusSite(c *agentwire.Census) int32 {
	k := append(j.keyBuf[:0], "census\x00"...)
	k = append(k, c.TypeSig...)
	k = append(k, 0, byte(c.Kind), byte(c.Path), byte(c.Path>>8), byte(c.Path>>16), byte(c.Path>>24))
	return j.internSite(k, 0, func() *site { return &site{typeSig: c.TypeSig, census: c.Kind, holder: c.Path} })
}

// holderChain is the holder chain id, GC root first; nil when unknown.
func (j *JVM) holderChain(id uint32) []string {
	var rev []string
	for n := 0; id != 0 && n < maxHolderHops; n++ {
		p, ok := j.censusPaths[id]
		if !ok {
			break
		}
		rev = append(rev, p.Hop)
		if p.Parent >= id {
			break // parents come first: a later id is a corrupt stream
		}
		id = p.Parent
	}
	for a, b := 0, len(rev)-1; a < b; a, b = a+1, b-1 {
		rev[a], rev[b] = rev[b], rev[a]
	}
	return rev
}

// censusSiteName is what the table shows where an allocation site would be.
func censusSiteName(kind agentwire.CensusKind) string {
	if kind == agentwire.CensusAfterGC {
		return "[missed by the heap sampler]"
	}
	return "[allocated before attach]"
}

// CensusStats adds what the censuses found and cost to st, and notes what
// a user should know about them.
func (j *JVM) CensusStats(st *report.Stats, note func(string, ...any)) {
	for _, c := range j.censuses {
		st.CensusPauseMs += float64(c.HeapWalkNanos+c.HolderWalkNanos) / 1e6
		st.CensusPauseMaxMs = max(st.CensusPauseMaxMs, float64(c.PauseMaxNanos)/1e6)
		if c.Kind == agentwire.CensusAfterGC {
			st.Recensuses++
			continue
		}
		st.CensusHeapObjects = c.HeapObjects
		st.CensusPasses = c.HeapWalkPasses
		st.CensusHeapBytes = c.HeapBytes
		st.CensusHolderMs = float64(c.HolderWalkNanos) / 1e6
		st.CensusMs = float64(c.wallNanos) / 1e6
		st.CensusUnreachable = c.Unreachable
		st.CensusHolders = censusHolderState(c.Status)
		st.CensusPartial = c.Status&agentwire.CensusPartial != 0
		switch {
		case c.Status&agentwire.CensusOverBudget != 0:
			note("no census: the heap walk passed the pause budget (--census-budget) after %d objects; objects allocated before the attach are not tracked (raise --census-budget, or --census on)", c.HeapObjects)
		case c.Status&agentwire.CensusPartial != 0:
			note("census partial, without holders: the heap walk passed the pause budget (--census-budget) before the heap's end; the %d objects it reached are tracked, those past it are not (raise --census-budget, or --census on)", c.Objects)
		case c.Status&agentwire.CensusCancelled != 0:
			note("census cancelled: objects allocated before the attach are not tracked")
		case c.Status&agentwire.CensusFailed != 0:
			note("census failed (%s): objects allocated before the attach are not tracked", strings.TrimSpace(c.Note))
		case c.Status&agentwire.CensusHoldersSkipped != 0:
			note("census without holders: the holder walk over %d objects would take several times the pause budget; raise --census-budget, or --census on", c.HeapObjects)
		case c.Status&agentwire.CensusHoldersPartial != 0:
			note("census holders partial: the holder walk passed the pause budget; objects it had not reached have no holder")
		case c.Status&agentwire.CensusHoldersFailed != 0:
			note("census without holders: the JVM refused the holder walk")
		}
	}
	j.walkStats(st, note)
	if st.Recensuses > 0 {
		note("%d censuses after GCs found %d large objects the budget-limited heap sampler missed", st.Recensuses, j.recensusObjects())
	}
}

func (j *JVM) recensusObjects() uint64 {
	var n uint64
	for _, c := range j.censuses {
		if c.Kind == agentwire.CensusAfterGC {
			n += c.Objects
		}
	}
	return n
}

func censusHolderState(s agentwire.CensusStatus) string {
	switch {
	case s&(agentwire.CensusOverBudget|agentwire.CensusCancelled|agentwire.CensusFailed) != 0:
		return "none"
	case s&agentwire.CensusHolders != 0:
		return "all"
	case s&agentwire.CensusHoldersPartial != 0:
		return "partial"
	case s&agentwire.CensusHoldersSkipped != 0:
		return "skipped"
	}
	return "off"
}
