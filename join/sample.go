package join

import (
	"fmt"
	"time"

	"github.com/djx-bpf/djx-bpf/sources/decode"
	"github.com/djx-bpf/djx-bpf/sources/sample"
)

// maxPending bounds the samples waiting for the agent's watermark; past it
// the oldest are attributed against what is known (a stalled agent must not
// make the loader grow without bound).
const maxPending = 1 << 20

// pageFaultGrace is how much later than its fault a page-fault sample is
// attributed: longer than the JVM takes to zero a large array.
const pageFaultGrace = uint64(50 * time.Millisecond)

// pending is a decoded sample waiting until the allocation stream has caught
// up with its timestamp.
type pending struct {
	time  uint64 // when to judge it (page faults: later than taken)
	addr  uint64 // 0: no data address
	stime uint64 // when it was taken
	ip    uint64
	// accessPC is where to look up the accessing instruction in the JIT pc
	// map (the first descriptor at or after it): ip for a load found by
	// look-back (it ends at ip), ip+1 for an access at ip; 0 if unknown.
	accessPC uint64
	tid      uint32
	cpu      uint32
	memOK    bool   // dataSrc and weight came with the sample (hardware)
	noStack  bool   // no stack was asked for this sample (the thread had one just before)
	dataSrc  uint64 // union perf_mem_data_src
	weight   uint64 // union perf_sample_weight
	rsp      uint64 // the thread's stack pointer (0: unknown)
	// The object a decoded heap access addressed, and its klass word, when
	// the sampling program read its header (located).
	obj, klass uint64
	located    bool
	typedBy    uint8       // typedByHeader, or how an object being initialised was named
	store      bool        // the decoded access writes memory
	retried    bool        // judged once already (retry.go)
	held       bool        // waited for a later rescan (late.go)
	path       []pathFrame // the access path of a second judgement
	probe      *allocProbe // an allocation scan to try again when judged (types.go)
	// bpf is the sample's own stack, unwound in BPF and named (--stacks
	// bpf); hasBPF says it came with one.
	bpf    bpfResult
	hasBPF bool
}

// OnSample decodes a sample and queues it for attribution.
func (j *JVM) OnSample(s *sample.Sample, src sample.Source) {
	if !j.connected || s.Time < j.helloTime {
		// No allocation is known before the agent's first record.
		j.stats.Unjoined++
		return
	}
	j.stats.Samples++
	addr := j.canonical(s.Addr)
	accessPC := s.IP() + 1 // page faults and hardware events: the access is at ip
	var p pending
	if src == sample.Decode {
		accessPC = 0
		j.regs = decode.RegsFromPtRegs(&s.Regs)
		before := s.BeforeIP()
		var at []byte
		if s.Flags&sample.FlagAtOK != 0 {
			at = s.At[:]
		}
		res := j.dec.Decode(before, at, &j.regs)
		why := j.dec.Why
		if res.Method == decode.AtIP && res.Base == 15 && res.Index == decode.NoReg && j.heap.GC == "Z" {
			// JIT code's r15 is the thread: ZGC's load barrier tests the
			// reference just loaded against the thread's bad mask, and
			// the stall is that load's.
			res = j.dec.Previous(before, &j.regs)
			why = func(before, _ []byte, r *decode.Regs) decode.Cause { return j.dec.WhyPrevious(before, r) }
		}
		if res.Method == decode.AtIP && j.heapKnown && !j.heap.Contains(j.canonical(res.Addr)) {
			// The timer lands just after the load that stalled. An access
			// at ip outside the heap (the thread, a handle, a spill slot)
			// is cache-resident; a heap load ending at ip is the stall.
			if prev := j.dec.Previous(before, &j.regs); prev.Method == decode.LookBack && j.heap.Contains(j.canonical(prev.Addr)) {
				res = prev
			}
		}
		if res.Method == decode.None {
			res = j.straight(s, before, at)
		}
		switch res.Method {
		case decode.AtIP:
			j.stats.DecodedAtIP++
			addr = res.Addr
			accessPC = s.IP() + 1
		case decode.LookBack:
			j.stats.DecodedLookBack++
			addr = res.Addr
			accessPC = s.IP()
		case decode.Base:
			// The start of what the load indexed: it names the owner.
			j.stats.DecodedBase++
			addr = res.Addr
			accessPC = s.IP()
		case decode.Straight:
			// The last load before ip in straight-line code.
			j.stats.DecodedStraight++
			addr = res.Addr
			accessPC = s.IP()
		}
		if res.Method == decode.None {
			j.countUndecoded(why(before, at, &j.regs))
		}
		addr = j.canonical(addr)
		p.store = res.Method != decode.None && res.Store
		used, named := uint32(0), true
		if res.Method != decode.None && j.heapKnown && j.heap.Contains(addr) {
			j.locate(&p, &res, s)
			p.obj = j.canonical(p.obj)
			named = p.located && p.typedBy != typedByAllocation && j.types != nil && j.types.ByKlassWord(p.klass) != nil
			used = j.usedSlots(&res, p.obj, p.typedBy == typedByEnclosing)
		}
		if j.types != nil {
			j.learnHeaders(s, used, named)
		}
	}
	if addr != 0 {
		j.stats.WithAddress++
		if j.heapKnown && j.heap.Contains(addr) {
			j.stats.InHeap++
			j.hotAddrs[j.hotNext%uint64(len(j.hotAddrs))] = addr
			j.hotNext++
		}
	}
	// Samples without an address are queued too: their access paths go to
	// the remainder.
	for j.head < len(j.queue) && (len(j.queue)-j.head >= maxPending || j.pendingSize >= maxPendingBytes) {
		if j.pendingSize >= maxPendingBytes {
			j.countCap(fmt.Sprintf("samples judged before the agent's records of their time: waiting samples past %d MiB", maxPendingBytes>>20))
		}
		j.judgeNext()
	}
	t := s.Time
	if src == sample.PageFaults {
		// A first-touch fault comes before the agent reports the allocation
		// that caused it (the JVM zeroes the memory first). The page was
		// never touched, so no other object can have owned it meanwhile:
		// judging the fault a little later is safe.
		t += j.faultGrace
	}
	if t < j.drained {
		// Judged against a heap newer than its time.
		j.stats.Late++
		j.stats.LateMaxMs = max(j.stats.LateMaxMs, float64(j.drained-t)/1e6)
	}
	p.time, p.addr, p.stime, p.ip, p.accessPC, p.tid, p.cpu = t, addr, s.Time, s.IP(), accessPC, s.TID, s.CPU
	p.memOK, p.dataSrc, p.weight, p.noStack = s.Flags&sample.FlagMemOK != 0, s.DataSrc, s.Weight, s.Flags&sample.FlagNoStack != 0
	p.rsp = s.Regs[19]
	p.bpf, p.hasBPF = j.bpfPath(s, accessPC)
	j.pendingSize += pendingBytes(&p)
	j.queue = append(j.queue, p)
}

// SamplesComplete says every sample taken before t has been fed to
// OnSample (0: nothing new known).
func (j *JVM) SamplesComplete(t uint64) {
	if t > j.sampleWM {
		j.sampleWM = t
		j.Drain(false)
	}
}

// countUndecoded counts a decode sample without an address by its cause.
func (j *JVM) countUndecoded(c decode.Cause) {
	st := &j.stats
	switch c {
	case decode.CauseNoMemory:
		st.UndecodedNoMemory++
	case decode.CauseNoBoundary:
		st.UndecodedNoBoundary++
	case decode.CauseBaseClobbered:
		st.UndecodedBaseClobbered++
	case decode.CauseIndexClobbered:
		st.UndecodedIndexClobber++
	case decode.CauseNotLoad:
		st.UndecodedNotLoad++
	case decode.CauseNoBytes:
		st.UndecodedNoBytes++
	default:
		st.UndecodedUncomputable++
	}
}
