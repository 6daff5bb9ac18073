package join

import (
	"strconv"
	"time"

	"github.com/djx-bpf/djx-bpf/jvmsym"
	"github.com/djx-bpf/djx-bpf/naming/bpfstack"
	"github.com/djx-bpf/djx-bpf/report"
	"github.com/djx-bpf/djx-bpf/sources/agentwire"
)

// stackStore holds what names a sample's access path: the stacks waiting
// for their samples, the JIT code map, method and native symbols.
type stackStore struct {
	syms          *jvmsym.Table
	stackSig      int    // the signal BPF sends for stacks; 0: none asked
	agentStackSig int    // the signal the agent's handler is installed on
	stacksFrom    uint64 // when BPF started signalling
	stacks        map[uint32]*stackQ
	lastStacks    map[stackKey]*lastStack // per thread and code blob, for borrowStack
	lastPrune     uint64
	// code is the agent's JIT code map (CODE, CODE_UNLOAD, STUB records);
	// codeMap answers the join's questions about a pc: code itself, or
	// the code cache read from the JVM with BPF stacks.
	code    *jvmsym.CodeTable
	codeMap CodeLookup
	native  NativeSymbols
	// nativeCache names native pcs by their names' ids (0: none).
	nativeCache map[uint64]uint32
	perfMap     *jvmsym.PerfMap
	pathBuf     []pathFrame
	pathKeyBuf  []byte
	// names interns the names of the frames the join keeps (pathcaps.go);
	// nameBuf is where a frame's name is built; accessBytes is what the
	// access sets hold.
	names       *jvmsym.Names
	nameBuf     []byte
	accessBytes int
	// noJava, when set, stops BPF's stack signals to a thread the agent
	// found without a JNIEnv; noJavaTIDs are the threads handed to it.
	noJava     func(tid uint32)
	noJavaTIDs map[uint32]struct{}
	// hostTID, when set, turns the agent's thread ids into the host's
	// (a JVM in another pid namespace); false: the thread is gone.
	hostTID func(tid uint32) (uint32, bool)
	// bpfStacks names the stacks BPF unwound (--stacks bpf); nil: the
	// agent's stacks name the paths.
	bpfStacks *bpfstack.Resolver
	bpfCode   *bpfstack.CodeMap // the code map with bpfStacks
}

// borrowMaxAge bounds how old a stack may be and still lend its callers
// to a sample.
const borrowMaxAge = uint64(250 * time.Millisecond)

// stackKey is a thread and a compiled code blob (its start).
type stackKey struct {
	tid  uint32
	blob uint64
}

// lastStack is the most recent stack a thread had in one compiled code
// blob, joined to its own sample.
type lastStack struct {
	time   uint64
	method uint64 // the blob's root method
	frames []agentwire.Frame
}

// stackGrace is how long a sample waits, beyond the agent's watermark, for
// the stack its signal asked for: the handler runs when the thread next
// returns to user mode (p50 ~20 µs here) and may be cut out of the batch it
// belongs to while it runs.
const stackGrace = uint64(100 * time.Millisecond)

// maxStackDelay bounds how much later than its sample a stack may be
// stamped and still be joined to it.
const maxStackDelay = uint64(200 * time.Millisecond)

// stackPrune is how often stacks that no sample claimed are dropped.
const stackPrune = uint64(time.Second)

// pathFrame is one frame of an access path: a Java frame (method, bci)
// resolved at report time, or a frame already named (native code, stubs,
// placeholders) when name is set; id is the name's in stackStore.names
// once interned (0: not yet).
type pathFrame struct {
	method uint64
	bci    int64
	name   string
	id     uint32
}

// access counts the samples of one access path.
type access struct {
	where   string // remainder only
	dtype   string // remainder only: the data type ("java.util.TreeMap$Entry.left")
	frames  []pathFrame
	samples uint64
	mem     *report.MemMetrics
	numa    *report.NUMAMetrics
}

// accessSet holds the access paths of one object (or of the remainder),
// keyed by their frames.
type accessSet map[string]*access

// stackQ holds one thread's stacks in arrival (= time) order.
type stackQ struct {
	q    []*agentwire.Stack
	head int
}

// stackReason names an AsyncGetCallTrace failure (or the agent's own code)
// for stats and placeholder frames.
func stackReason(status int32) string {
	switch status {
	case agentwire.StackNoJavaFrame:
		return "no Java frames"
	case agentwire.StackNoClassLoad:
		return "no class-load events"
	case agentwire.StackGCActive:
		return "GC active"
	case agentwire.StackUnknownNotJava:
		return "unknown, not in Java"
	case agentwire.StackNotWalkableNot:
		return "not walkable, not in Java"
	case agentwire.StackUnknownJava:
		return "unknown, in Java"
	case agentwire.StackNotWalkableJ:
		return "not walkable, in Java"
	case agentwire.StackUnknownState:
		return "unknown thread state"
	case agentwire.StackThreadExit:
		return "thread exiting"
	case agentwire.StackDeopt:
		return "deoptimizing"
	case agentwire.StackSafepoint:
		return "at a safepoint"
	case agentwire.StackNoEnv:
		return "thread without JNIEnv"
	}
	return "AsyncGetCallTrace error " + strconv.Itoa(int(status))
}

// onStack queues a stack for the sample of its thread.
func (j *JVM) onStack(st *agentwire.Stack) {
	j.stats.Stacks++
	hostTID := true
	if j.hostTID != nil {
		if h, ok := j.hostTID(st.TID); ok {
			st.TID = h
		} else {
			hostTID = false // it stays unmatched
		}
	}
	if st.Status > 0 {
		j.stats.StacksJava++
	} else {
		if j.stats.StackErrors == nil {
			j.stats.StackErrors = make(map[string]uint64)
		}
		j.stats.StackErrors[stackReason(st.Status)]++
		if st.Status == agentwire.StackNoEnv && j.noJava != nil && hostTID {
			if _, done := j.noJavaTIDs[st.TID]; !done {
				if j.noJavaTIDs == nil {
					j.noJavaTIDs = make(map[uint32]struct{})
				}
				j.noJavaTIDs[st.TID] = struct{}{}
				j.noJava(st.TID)
			}
		}
	}
	q := j.stacks[st.TID]
	if q == nil {
		q = &stackQ{}
		j.stacks[st.TID] = q
	}
	q.q = append(q.q, st)
	j.stackBytes += stackBytes(st)
}

// popStack removes thread queue q's first stack and returns it.
func (j *JVM) popStack(q *stackQ) *agentwire.Stack {
	st := q.q[q.head]
	q.q[q.head] = nil
	q.head++
	j.stackBytes -= stackBytes(st)
	return st
}

// onCode keeps the JIT code map current.
func (j *JVM) onCode(r agentwire.Record) {
	switch r := r.(type) {
	case *agentwire.Code:
		pcs := make([]jvmsym.PCFrames, len(r.PCs))
		for i, p := range r.PCs {
			fr := make([]jvmsym.RawFrame, len(p.Frames))
			for k, f := range p.Frames {
				fr[k] = jvmsym.RawFrame{Method: f.Method, BCI: f.BCI}
			}
			pcs[i] = jvmsym.PCFrames{PC: p.PC, Frames: fr}
		}
		j.code.AddCode(r.Start, uint64(r.Size), r.Method, pcs)
		j.stats.JITCode++
	case *agentwire.CodeUnload:
		j.code.RemoveCode(r.Start)
	case *agentwire.Stub:
		j.code.AddStub(r.Start, uint64(r.Size), r.Name)
	}
}

// takeStack finds the stack that the sample (tid, t, ip) asked for: the
// thread's first stack stamped at or after t, if it was taken at the same
// pc. Earlier stacks belong to samples that never claimed them.
func (j *JVM) takeStack(tid uint32, t, ip uint64) *agentwire.Stack {
	q := j.stacks[tid]
	if q == nil {
		return nil
	}
	for q.head < len(q.q) && q.q[q.head].Time < t {
		j.popStack(q)
		j.stats.StacksUnmatched++
	}
	if q.head == len(q.q) {
		return nil
	}
	st := q.q[q.head]
	if st.Time-t > maxStackDelay {
		return nil
	}
	if st.PC != ip {
		// Another sample's stack (this one's signal was refused or lost):
		// leave it for that sample.
		j.stats.StackMismatch++
		return nil
	}
	return j.popStack(q)
}

// pruneStacks drops stacks older than h - stackPrune that no sample
// claimed, and empty queues, so that threads that stopped being sampled
// hold nothing.
func (j *JVM) pruneStacks(h uint64, final bool) {
	if !final && h < j.lastPrune+stackPrune {
		return
	}
	j.lastPrune = h
	for tid, q := range j.stacks {
		for q.head < len(q.q) && (final || q.q[q.head].Time+stackPrune < h) {
			j.popStack(q)
			j.stats.StacksUnmatched++
		}
		if q.head == len(q.q) {
			delete(j.stacks, tid)
			continue
		}
		q.q, q.head = compact(q.q, q.head)
	}
	for k, ls := range j.lastStacks {
		if ls.time+borrowMaxAge < h {
			delete(j.lastStacks, k) // too old to lend; the thread may be gone
		}
	}
}

// accessPath builds the access path of sample p into j.pathBuf: its own
// Java stack when the join finds it, else what its pc alone tells, ended by
// a placeholder that says why the stack is missing.
func (j *JVM) accessPath(p *pending) []pathFrame {
	fr := j.pathBuf[:0]
	if p.hasBPF {
		fr = j.bpfAccessPath(p, fr)
		j.pathBuf = fr
		return fr
	}
	var st *agentwire.Stack
	asked := j.stackSig != 0 && p.stime >= j.stacksFrom
	if asked && !p.noStack {
		st = j.takeStack(p.tid, p.stime, p.ip)
	}
	switch {
	case st != nil && st.Status > 0:
		j.stats.SamplesWithStack++
		j.stats.SamplesJavaStack++
		// The stack was taken at p.ip (takeStack checks it).
		if hit, inCode := j.code.Lookup(p.ip); inCode {
			j.keepStack(p, hit, st)
		} else if nf, ok := j.nativeFrame(p.ip); ok {
			// A sample in native code (libjvm's arraycopy, libc's memcpy)
			// is an access by that code on behalf of the Java frames.
			fr = append(fr, pathFrame{name: nf})
		}
		frames := st.Frames
		if jit, rest, ok := j.refineLeaf(p, frames); ok {
			for _, f := range jit {
				fr = append(fr, pathFrame{method: f.Method, bci: f.BCI})
			}
			frames = rest
			j.stats.StackLeafFromJIT++
		}
		for _, f := range frames {
			fr = append(fr, pathFrame{method: f.Method, bci: f.BCI})
		}
	case st != nil:
		j.stats.SamplesWithStack++
		fr = j.leafFrames(p, fr)
		fr = append(fr, pathFrame{name: "[no Java stack: " + stackReason(st.Status) + "]"})
	case asked && p.noStack:
		if b, ok := j.borrowStack(p, fr); ok {
			fr = b
			j.stats.SamplesStackBorrowed++
			break
		}
		fr = j.leafFrames(p, fr)
		fr = append(fr, pathFrame{name: "[stack not taken]"})
	default:
		fr = j.leafFrames(p, fr)
		switch {
		case asked:
			fr = append(fr, pathFrame{name: "[stack lost]"})
		case j.agentStackSig != 0:
			// Stacks were not asked for yet (the agent's handler came up
			// after this sample). Without stacks at all the leaf is the path.
			fr = append(fr, pathFrame{name: "[no stack requested]"})
		}
	}
	j.pathBuf = fr
	return fr
}

// keepStack remembers st, the Java stack of sample p taken in the code hit,
// as its thread's last one in that code when it is compiled Java code.
func (j *JVM) keepStack(p *pending, hit jvmsym.CodeHit, st *agentwire.Stack) {
	if hit.Stub != "" {
		return
	}
	k := stackKey{p.tid, hit.Start}
	ls := j.lastStacks[k]
	if ls == nil {
		ls = &lastStack{}
		j.lastStacks[k] = ls
	}
	ls.time, ls.method = p.stime, hit.Method
	ls.frames = append(ls.frames[:0], st.Frames...)
}

// borrowStack builds the path of p, a sample without a stack of its own
// (its thread had one less than the stack interval ago), from its
// thread's latest stack in the same compiled code, if recent: the frames
// inside that code come from the JIT pc map at p's access, the callers
// from that stack. A hot method is entered from few call sites, so its
// callers are a sample of the same distribution; a sample elsewhere keeps
// its leaf and "[stack not taken]".
func (j *JVM) borrowStack(p *pending, fr []pathFrame) ([]pathFrame, bool) {
	hit, ok := j.code.Lookup(p.ip)
	if !ok || hit.Stub != "" {
		return fr, false
	}
	ls := j.lastStacks[stackKey{p.tid, hit.Start}]
	if ls == nil || p.stime < ls.time || p.stime-ls.time > borrowMaxAge {
		return fr, false
	}
	for i, f := range ls.frames {
		if f.Method == ls.method {
			fr = j.leafFrames(p, fr)
			for _, f := range ls.frames[i+1:] {
				fr = append(fr, pathFrame{method: f.Method, bci: f.BCI})
			}
			return fr, true
		}
	}
	return fr, false
}

// refineLeaf replaces the frames AsyncGetCallTrace gave for the sampled
// compiled frame by those of the JIT pc map at the accessing instruction.
// ASGCT looks up the descriptor after pc+1, which in a C2 loop names the
// instruction after the load (often the next iteration's first line);
// the access instruction's own descriptor names its line and inlining. It
// returns the new innermost frames and the caller frames that follow.
func (j *JVM) refineLeaf(p *pending, frames []agentwire.Frame) ([]jvmsym.RawFrame, []agentwire.Frame, bool) {
	if p.accessPC == 0 || len(frames) == 0 {
		return nil, nil, false
	}
	hit, ok := j.code.Lookup(p.accessPC)
	if !ok || hit.Stub != "" || len(hit.Frames) == 0 || hit.Frames[0].BCI < 0 {
		return nil, nil, false
	}
	// The physical frame's own method ends ASGCT's virtual frames for it.
	for i, f := range frames {
		if f.Method == hit.Method {
			return hit.Frames, frames[i+1:], true
		}
	}
	return nil, nil, false
}

// leafFrames appends what the pc alone names: the (inlined) Java frames of
// compiled code at the access, a JVM stub, a native symbol, a perf-map
// entry, or a placeholder. The code comes from codeMap: the agent's
// records or, with BPF stacks, the JVM's code cache.
func (j *JVM) leafFrames(p *pending, fr []pathFrame) []pathFrame {
	ip := p.ip
	if out, ok := codeLeaf(j.codeMap, fr, ip, p.accessPC); ok {
		return out
	}
	if nf, ok := j.nativeFrame(ip); ok {
		return append(fr, pathFrame{name: nf})
	}
	if j.perfMap != nil {
		if name, ok := j.perfMap.Lookup(ip); ok {
			return append(fr, pathFrame{name: name})
		}
	}
	return append(fr, pathFrame{name: "[unknown code]"})
}

// nativeFrame names ip in a mapped ELF file, cached per ip: the process may
// be gone by report time.
func (j *JVM) nativeFrame(ip uint64) (string, bool) {
	if id, ok := j.nativeCache[ip]; ok {
		return j.names.Name(id), id != 0
	}
	var id uint32
	if j.native != nil {
		if nf, ok := j.native.Lookup(ip); ok {
			id = j.names.InternString(nf.String())
		}
	}
	if len(j.nativeCache) < 1<<20 {
		j.nativeCache[ip] = id
	}
	return j.names.Name(id), id != 0
}

// pathKey encodes where, dtype and fr, its names interned (capPath), into
// buf: a named frame by its name's id.
func pathKey(buf []byte, where, dtype string, fr []pathFrame) []byte {
	k := append(buf[:0], where...)
	k = append(k, 1)
	k = append(k, dtype...)
	for _, f := range fr {
		k = append(k, 0)
		if f.name != "" {
			k = append(k, 1, byte(f.id), byte(f.id>>8), byte(f.id>>16), byte(f.id>>24))
			continue
		}
		k = strconv.AppendUint(k, f.method, 16)
		k = append(k, ':')
		k = strconv.AppendInt(k, f.bci, 10)
	}
	return k
}
