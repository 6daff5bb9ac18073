package join

import (
	"strings"

	"github.com/djx-bpf/djx-bpf/jvmsym"
	"github.com/djx-bpf/djx-bpf/sources/agentwire"
)

// agentState is what the agent said of itself and of what its stream lost.
type agentState struct {
	connected bool
	helloTime uint64
	vmName    string
	interval  uint64 // heap sampling interval now in force
	initial   uint64 // ... when the agent started
	raisedAt  uint64 // when the agent first raised it to stay within budget
	lastAgt   agentwire.Stats
	capDrops  map[string]uint64 // records dropped by the caps of caps.go, by reason
	agentErrs []string          // the first ERROR records' texts
	budgetState
}

// OnBatch applies one batch of the agent's stream.
func (j *JVM) OnBatch(b *agentwire.Batch) {
	j.stats.StringsTruncated += uint64(b.StringsCut)
	j.stats.ListsTruncated += uint64(b.ListsCut)
	for _, r := range b.Records {
		if !j.admit(r, b.Watermark) {
			continue // past a per-JVM cap (caps.go)
		}
		switch r := r.(type) {
		case *agentwire.Hello:
			j.connected = true
			j.helloTime = r.Monotonic
			j.interval, j.initial = r.Interval, r.Interval
			j.vmName = strings.TrimSpace(r.VMName + " " + r.VMVersion)
			j.agentStackSig = int(r.StackSignal)
		case *agentwire.Method:
			lines := make([]jvmsym.LineEntry, len(r.Lines))
			for i, l := range r.Lines {
				lines[i] = jvmsym.LineEntry{Start: l.Start, Line: l.Line}
			}
			j.syms.Add(r.ID, jvmsym.Method{ClassSig: r.ClassSig, Name: r.Name, Sig: r.Sig, SourceFile: r.SourceFile, Lines: lines})
		case *agentwire.Alloc:
			j.queueTimed(r.Time, r)
		case *agentwire.AllocRaw:
			// Named now, while the JVM still holds the code.
			j.queueTimed(r.Time, j.nameRawAlloc(r))
		case *agentwire.Interval:
			j.queueTimed(r.Time, r)
		case *agentwire.Free:
			// Stamped at the GC the object died in.
			j.queueTimed(r.Time, r)
		case *agentwire.Reconcile:
			t := r.Time
			if j.rescan && j.lastGCEnd != 0 && j.lastGCEnd <= t {
				// The addresses hold from the GC's end on: judge the
				// samples taken since then by them.
				t = j.lastGCEnd
				j.rescanWait = 0
			}
			j.queueTimed(t, r)
		case *agentwire.GCFinish:
			j.agentGCs++
			j.lastGCEnd = r.Time
			if j.rescan {
				j.rescanWait = r.Time
			}
		case *agentwire.Stack:
			j.onStack(r)
		case *agentwire.Code, *agentwire.CodeUnload, *agentwire.Stub:
			j.onCode(r)
		case *agentwire.CensusStart, *agentwire.CensusPath, *agentwire.CensusEnd:
			j.onCensusRec(r)
		case *agentwire.Census:
			// Stamped when its address became valid, which may precede
			// records already queued.
			j.queueTimed(r.Time, r)
		case *agentwire.TypesInfo:
			j.onTypesInfo(r)
		case *agentwire.Class:
			j.onClass(r)
		case *agentwire.Stats:
			j.lastAgt = *r
		case *agentwire.ErrorRec:
			j.stats.AgentErrors++
			j.keepError(r.Message)
		}
	}
	if b.Watermark > j.watermark {
		j.watermark = b.Watermark
	}
	j.Drain(false)
}

// applyTimed applies one time-ordered agent record.
func (j *JVM) applyTimed(r agentwire.Record) {
	switch r := r.(type) {
	case *agentwire.Alloc:
		j.onAlloc(r)
	case *rawAlloc:
		j.onRawAlloc(r)
	case *agentwire.Interval:
		if j.raisedAt == 0 {
			j.raisedAt = r.Time
		}
		j.interval = r.Interval
	case *agentwire.Free:
		j.onFree(r.Tag)
	case *agentwire.Reconcile:
		j.onReconcile(r.Objects)
	case *agentwire.Census:
		j.onCensus(r)
	}
}
