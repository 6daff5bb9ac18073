package join

import (
	"github.com/djx-bpf/djx-bpf/objindex"
	"github.com/djx-bpf/djx-bpf/sources/agentwire"
)

// gcState follows the GC's moves: the relocation stream's batches, or the
// agent's rescans after each GC.
type gcState struct {
	curGC       *gcBatch      // GC in progress (relocation tracking)
	reloc       bool          // a relocation stream feeds this JVM
	relocWM     uint64        // relocation stream complete up to here (when no GC is in progress)
	agentGCs    uint64        // GC pauses the agent saw (GarbageCollectionFinish)
	rescan      bool          // moves come from the agent's rescans (MovesRescan)
	noReconcile bool          // the collector's addresses cannot be rescanned
	lastGCEnd   uint64        // latest GarbageCollectionFinish
	rescanWait  uint64        // a GC ended here and its rescan has not arrived
	reconciling bool          // onReconcile is putting moved objects back
	reconciled  []objindex.ID // onReconcile's buffer
}

// gcBatch holds the copies of one GC, applied at its end as one batch.
type gcBatch struct {
	begin, end uint64
	moves      []objindex.Move
}

// OnGCBegin, OnCopy and OnGCEnd feed the relocation stream: the copies of
// one GC are applied together at its end, in time order with allocations
// and samples.
func (j *JVM) OnGCBegin(t uint64) {
	j.reloc = true
	if j.curGC == nil {
		j.curGC = &gcBatch{begin: t}
	}
}

func (j *JVM) OnCopy(src, dst, n uint64) {
	if j.curGC != nil {
		j.curGC.moves = append(j.curGC.moves, objindex.Move{Src: src, Dst: dst, Len: n})
	}
}

func (j *JVM) OnGCEnd(t uint64) {
	if j.curGC == nil {
		return
	}
	j.curGC.end = t
	j.gcQ = append(j.gcQ, j.curGC)
	j.curGC = nil
	j.stats.GCs++
	j.Drain(false)
}

// RelocComplete says the relocation stream holds every event up to t.
func (j *JVM) RelocComplete(t uint64) {
	if t > j.relocWM {
		j.relocWM = t
		j.Drain(false)
	}
}

func (j *JVM) applyGC(g *gcBatch) {
	st := j.idx.ApplyMoves(g.moves)
	j.stats.Relocations += uint64(st.Moved)
	j.stats.CopiesUnmatched += uint64(st.Unmatched)
}

// onReconcile checks the agent's view of where tracked objects are after a
// GC against ours: agreement verifies the moves we applied; disagreement is
// a move we missed, and the agent's address wins. The moved objects are
// all lifted out before any is put back: under sliding compaction one's new
// place is another's old one.
func (j *JVM) onReconcile(objs []agentwire.TagAddr) {
	if j.noReconcile {
		return
	}
	moved := j.reconciled[:0]
	for _, ta := range objs {
		id, ok := j.tags[ta.Tag]
		if !ok {
			continue
		}
		ta.Addr = j.canonical(ta.Addr)
		o := &j.objs[id]
		indexed := j.indexed(id)
		if indexed && o.start == ta.Addr {
			j.stats.MovesVerified++
			continue
		}
		j.stats.MovesMissed++
		if indexed {
			j.idx.Remove(o.start)
		}
		o.start = ta.Addr
		moved = append(moved, id)
	}
	// The agent sent a FREE for every object that died before it sent
	// this, so a tracked object an arriving one covers has moved as well,
	// and a later record of the same rescan puts it back.
	j.reconciling = true
	for _, id := range moved {
		j.idx.Insert(j.objs[id].start, j.objs[id].size, id)
	}
	j.reconciling = false
	j.reconciled = moved
	j.rejoin(moved)
}

// agentPlaces says the agent's rescans are how the join learns of moves,
// and report every tagged object's moves and deaths: an object overlapped
// by another that arrives in our view has moved unseen (its rescan was
// skipped, or is a cycle late), and waits out of the index for the rescan
// that places it or the FREE. Under uprobes an overlapped object stays
// dead, and moves_missed counts only those the rescans find indexed.
func (j *JVM) agentPlaces() bool {
	return j.rescan && !j.noReconcile
}

// indexed reports whether object id is in the index at its start.
func (j *JVM) indexed(id objindex.ID) bool {
	o, ok := j.idx.Lookup(j.objs[id].start)
	return ok && o.ID == id && o.Start == j.objs[id].start
}
