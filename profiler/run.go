package profiler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/djx-bpf/djx-bpf/hotspot/heap"
	"github.com/djx-bpf/djx-bpf/join"
	"github.com/djx-bpf/djx-bpf/jvmsym"
	"github.com/djx-bpf/djx-bpf/report"
	"github.com/djx-bpf/djx-bpf/sources/agentconn"
	"github.com/djx-bpf/djx-bpf/sources/agentwire"
	"github.com/djx-bpf/djx-bpf/sources/dispatch"
	"github.com/djx-bpf/djx-bpf/sources/reloc/follow"
	"github.com/djx-bpf/djx-bpf/target/jvm"
)

// run profiles the connected JVM until the profile ends, then drains its
// streams into the join and reports.
func (s *session) run(ctx context.Context, exited <-chan struct{}) (*report.Report, error) {
	s.start = s.clk.Now()
	s.cost0 = s.costNow()
	rel := s.prepare(ctx)
	st := s.startStreams(rel)
	s.opts.note("profiling pid %d with event %s", s.pid, s.src.Name)
	s.loop(ctx, exited, st)
	elapsed := s.clk.Now().Sub(s.windowFrom())
	s.walk.Finish()
	s.stopSampling(st, rel)
	s.detachAgent(st)
	s.j.Drain(true)
	return s.finish(elapsed), nil
}

// prepare reads what the join needs before the first record (the perf
// map, the heap's ranges, how moves are followed), tells the agent what to
// do from the start, and builds the join.
func (s *session) prepare(ctx context.Context) *follow.Stream {
	cfg := join.Config{PID: s.pid, Native: s.proc.Native(), WeightStruct: s.src.Event != nil && s.src.Event.Structured(),
		CodeMem: s.proc.CodeMem(), Budget: s.budget}
	if s.vm.NSPID() != s.pid {
		// The agent's thread ids are its namespace's; BPF's are ours.
		cfg.HostTID = s.proc.HostTID()
	}
	if s.opts.NUMA {
		n, err := join.NewNUMA()
		if err != nil {
			s.addNote("no NUMA placement: %v", err)
		} else {
			cfg.NUMA = n
		}
	}
	cfg.PerfMap = s.loadPerfMap()
	s.loadHeap(ctx)
	s.untagHumongous()
	s.prepareCensus()
	s.planLaunchWalk()
	rel, moves := follow.Start(follow.Config{Strategy: s.opts.Relocation, PID: s.pid, Heap: s.heap, HeapKnown: s.heapKnown,
		MinSize: s.opts.MinSize, Mono: s.clk.Mono, Tell: s.opts.note, Note: s.addNote})
	cfg.Heap, cfg.HeapKnown, cfg.Moves = s.heap, s.heapKnown, moves
	if s.zl != nil {
		cfg.Canonical = s.zl.Canonical
	}
	cfg.Regions = s.loadRegions(ctx)
	s.j = join.New(cfg)
	s.setHeap(0, 0)
	return rel
}

// streams are the channels run reads the JVM's streams from.
type streams struct {
	samples <-chan dispatch.Batch
	reloc   <-chan follow.Msg // nil without a relocation stream
	agent   *agentconn.Stream
}

// How many batches a stream's reader may hand the loop ahead of it. Few
// of the agent's: each decoded batch may hold tens of MiB.
const (
	sampleDepth = 64
	agentDepth  = 8
)

// startStreams starts the readers of the sampler (unless a scan's
// dispatcher reads it) and of the agent's connection.
func (s *session) startStreams(rel *follow.Stream) *streams {
	sd, ad := sampleDepth, agentDepth
	if s.lockstep {
		sd, ad = 0, 0
	}
	st := &streams{samples: s.feed}
	if s.shared != nil {
		s.reader = s.shared
	} else {
		s.reader, st.samples = dispatch.NewSolo(s.sampler, sd)
	}
	if rel != nil {
		st.reloc = rel.Msgs()
	}
	st.agent = agentconn.Read(s.conn, ad)
	return st
}

// loop feeds the streams to the join until the duration passes, ctx ends,
// the target exits or its agent's stream ends.
func (s *session) loop(ctx context.Context, exited <-chan struct{}, st *streams) {
	var timer <-chan time.Time
	if s.opts.Duration > 0 {
		t := time.NewTimer(s.opts.Duration)
		defer t.Stop()
		timer = t.C
	}
	var tick <-chan time.Time
	if s.opts.Progress != nil {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		tick = t.C
	}
	pm := progressMeter{t: s.start}
	samples, control := st.samples, s.opts.Control
	for {
		select {
		case now := <-tick:
			s.opts.Progress(pm.next(s, now))
		case b, ok := <-samples:
			if !ok {
				samples = nil // the shared sampler closed: the scan is ending
				continue
			}
			s.onSamples(b)
			s.j.SamplesComplete(b.Complete)
		case on, ok := <-control:
			if !ok {
				control = nil
				continue
			}
			err := s.setSampling(on)
			if s.opts.Switched != nil {
				s.opts.Switched(on, err)
			}
		case m := <-st.reloc:
			follow.Apply(s.j, m)
		case b, ok := <-st.agent.Batches:
			if !ok {
				st.agent.Batches = nil
				continue
			}
			s.j.OnBatch(b)
			s.walk.OnBatch(b)
			s.askStacks()
			if vt := s.stacks.Use(s.pid, s.proc, s.j, s.sampler, s.command, s.addNote); vt != nil {
				s.vmThreads = vt
			}
			s.useTypes()
		case <-s.walk.Ready():
			s.walk.Start()
		case hw := <-s.walk.Done():
			s.walk.OnWalk(hw)
		case <-s.walk.Check():
			s.checkWalk()
		case <-s.walk.RootsWanted():
			s.walk.RefreshRoots()
		case req := <-s.cuts:
			req.Reply <- s.cutWindow()
		case err := <-st.agent.Done:
			st.agent.Open = false
			s.agentEnded(err, exited)
			return
		case <-exited:
			s.noteExit()
			exited = nil
			// Let the agent's final batch (VM death) arrive.
			timer = time.After(2 * time.Second)
		case <-timer:
			return
		case <-ctx.Done():
			return
		}
	}
}

// agentEnded notes why the agent's stream ended: the agent says goodbye
// at VM death, which is told apart from a lost connection. exited is nil
// when the exit has been noted already.
func (s *session) agentEnded(err error, exited <-chan struct{}) {
	if err != nil {
		s.addNote("agent stream failed: %v", err)
	}
	if exited == nil {
		return
	}
	select {
	case <-exited:
		s.noteExit()
	case <-time.After(2 * time.Second):
		if err == nil {
			s.addNote("agent of pid %d disconnected after %.1fs; reporting what was collected", s.pid, s.clk.Now().Sub(s.start).Seconds())
		}
	}
}

// onSamples hands a batch of samples to the join, and the batch back to
// its reader.
func (s *session) onSamples(b dispatch.Batch) {
	for i := range b.Samples {
		if s.vmThreads != nil {
			s.vmThreads.See(&b.Samples[i])
		}
		s.j.OnSample(&b.Samples[i], s.src.Kind)
	}
	s.reader.Recycle(b.Samples)
	s.applyHeaderMasks()
}

// applyHeaderMasks hands the join's header masks to the sampling program.
// A refused one (the program's map is full) only keeps reading every
// header at its instruction.
func (s *session) applyHeaderMasks() {
	for _, m := range s.j.HeaderMasks() {
		if m.Drop {
			_ = s.sampler.DropHeaderMask(m.Key)
		} else {
			_ = s.sampler.SetHeaderMask(m.Key, m.Mask)
		}
	}
}

// progressMeter computes the live view's sample rate between two ticks.
type progressMeter struct {
	n uint64
	t time.Time
}

func (pm *progressMeter) next(s *session, now time.Time) Progress {
	p := Progress{Elapsed: now.Sub(s.start), Samples: s.j.Samples(), Objects: s.j.LiveObjects()}
	if s.opts.Duration > 0 {
		p.Remaining = max(0, s.opts.Duration-p.Elapsed)
	}
	if dt := now.Sub(pm.t).Seconds(); dt > 0 {
		p.Rate = float64(p.Samples-pm.n) / dt
	}
	pm.n, pm.t = p.Samples, now
	if c, err := s.sampler.Counters(); err == nil {
		p.Dropped = c.Dropped
	}
	return p
}

// stopSampling stops the samplers and hands the join what their ring
// buffers still hold.
func (s *session) stopSampling(st *streams, rel *follow.Stream) {
	if rel != nil {
		c, err := rel.Stop(s.j)
		if err != nil {
			s.addNote("relocation tracker: %v", err)
		}
		s.relocC = c
	}
	if s.shared != nil {
		// Other JVMs go on sampling: stop this one's samples and take
		// what the dispatcher still holds for it.
		s.sampler.SetStackSignal(s.pid, 0)
		s.sampler.RemovePID(s.pid)
		s.shared.CloseAfter(s.pid, 100*time.Millisecond)
	} else {
		s.sampler.Disable()
		s.sampler.Flush()
	}
	for b := range st.samples {
		s.onSamples(b)
	}
}

// detachAgent asks the agent for its last batch, which detaches it, and
// hands the join what its stream still holds.
func (s *session) detachAgent(st *streams) {
	if st.agent.Detach(s.conn, s.j.OnBatch) {
		s.addNote("agent did not finish its last batch within 3s")
	}
}

// askStacks tells the BPF program to signal the JVM's sampled threads once
// the agent says its handler is installed (never before: the signal's
// default action would kill the JVM).
func (s *session) askStacks() {
	sig := s.j.AgentStackSignal()
	if s.stacksAsked || sig == 0 {
		return
	}
	s.stacksAsked = true
	// The target's agent says which signal its handler is on: only the
	// one asked for is sent (another's default action may kill the JVM).
	if sig != s.stacks.Signal {
		s.addNote("no access stacks: the agent installed its handler on signal %d, not the %d asked for", sig, s.stacks.Signal)
		return
	}
	if err := s.sampler.SetStackSignal(s.pid, sig); err != nil {
		s.addNote("no access stacks: %v", err)
		return
	}
	s.j.StacksAsked(sig, s.clk.Mono(), func(tid uint32) {
		// The agent names tids of its own process only: a hostile one
		// naming another's is kept to its own process by the map's key.
		if !s.proc.HasThread(tid) {
			return
		}
		if err := s.sampler.NoJavaThread(s.pid, tid); err != nil && !s.noJavaFailed {
			s.noJavaFailed = true
			s.addNote("non-Java threads keep getting stack signals: %v", err)
		}
	})
}

// loadPerfMap reads /tmp/perf-PID.map when the JVM writes one (e.g.
// -XX:+DumpPerfMapAtExit, perf-map-agent): it names code the agent has not
// described, such as JIT code compiled before the attach.
func (s *session) loadPerfMap() *jvmsym.PerfMap {
	pm, err := s.proc.PerfMap(s.vm.NSPID())
	if err != nil {
		return nil
	}
	if st := pm.Stats(); st.Dropped > 0 || st.Truncated || st.NamesCut > 0 {
		s.addNote("perf map of the JVM cut to its caps: kept %d lines, dropped %d past the line cap, file cut short %v, %d names cut to 1 KiB",
			st.Entries, st.Dropped, st.Truncated, st.NamesCut)
	}
	return pm
}

// loadHeap reads the heap's reserved ranges (HotSpot: jcmd GC.heap_info)
// so that samples can be classified as in the heap. Done before the first
// sample is processed, so every sample is classified.
func (s *session) loadHeap(ctx context.Context) {
	info, err := s.vm.Heap(ctx)
	if errors.Is(err, jvm.ErrNoRanges) && s.zLayout() != nil {
		// ZGC prints no addresses: its layout knows its views.
		for _, v := range s.zl.Views() {
			info.Ranges = append(info.Ranges, heap.Range{Start: v.Start, End: v.End, Name: "ZGC view"})
		}
		err = nil
	}
	s.heap = info // the collector's name, even without ranges
	switch {
	case errors.Is(err, jvm.ErrNoRanges):
		s.addNote("heap range unknown for %s; in_heap is not counted", info.GC)
	case err != nil:
		s.addNote("heap range unknown (%v); in_heap is not counted", err)
	default:
		s.heapKnown = len(info.Ranges) > 0
	}
}

// untagHumongous has the agent track G1's humongous objects (half a region
// and more) without JVMTI tags: a tag keeps a dead humongous array from
// being reclaimed at the next young GC, which grew Xalan's heap by half.
// G1 never moves them, so the agent checks their headers after GCs instead.
func (s *session) untagHumongous() {
	if s.conn == nil || s.heap.GC != "G1" || s.heap.RegionSize == 0 {
		return
	}
	if _, err := s.conn.Write(agentwire.CommandUntag(s.heap.RegionSize / 2)); err != nil {
		s.addNote("humongous objects stay tagged: %v", err)
	}
}

// askCensus has the agent of an attached JVM track the objects that exist
// already. In launch mode there are none worth a pause.
func (s *session) askCensus() {
	if s.conn == nil || s.mode != "attach" || s.opts.Census == CensusOff {
		return
	}
	if _, err := s.conn.Write([]byte{agentwire.CommandCensus}); err != nil {
		s.addNote("no census: %v", err)
	}
}

// finish builds the report from the join and the sampler's counters.
func (s *session) finish(elapsed time.Duration) *report.Report {
	st := s.j.Stats()
	if c, err := s.sampler.Counters(); err == nil && s.shared == nil {
		st.Dropped = c.Dropped
		st.KernelSkipped = c.Kernel
		st.StackSignals = c.Signaled
		st.StackSignalFailed = c.SignalFailed
		st.StackSignalSkip = c.SignalSkipped
		st.StackSignalNoJava = c.SignalNonJava
	}
	st.RelocHits = s.relocC.Hits
	st.RelocHitsInGC = s.relocC.HitsInGC
	st.RelocDropped = s.relocC.Dropped
	s.cost(&st, s.j.AgentStats())
	s.j.CensusStats(&st, func(format string, args ...any) { s.notes = append(s.notes, fmt.Sprintf(format, args...)) })
	if b := float64(s.opts.CensusBudget.Milliseconds()); s.opts.Census != CensusOn && b > 0 && st.CensusPauseMaxMs > 1.1*b {
		s.notes = append(s.notes, fmt.Sprintf("the census paused the JVM %.0f ms at once, %.0f%% past --census-budget %v: HotSpot steps over the rest of the heap after a walk asks to stop",
			st.CensusPauseMaxMs, 100*(st.CensusPauseMaxMs/b-1), s.opts.CensusBudget))
	}
	if st.Dropped > 0 {
		s.notes = append(s.notes, fmt.Sprintf("%d samples were dropped because the ring buffer was full; lower --freq", st.Dropped))
	}
	if st.AgentDropped > 0 {
		s.notes = append(s.notes, fmt.Sprintf("the agent dropped %d records (buffer full); raise --min-size or --alloc-interval", st.AgentDropped))
	}
	s.notes = append(s.notes, s.j.AgentNotes()...)
	if st.Late*100 > st.Samples {
		s.notes = append(s.notes, fmt.Sprintf("%d samples reached the join up to %.0f ms after newer heap changes and were judged against them; the machine may be overloaded (lower --freq)", st.Late, st.LateMaxMs))
	}
	initial, interval, raised, raisedAfter := s.j.AllocInterval()
	r := &report.Report{
		PID: s.pid, JVM: s.j.VMName(), Mode: s.mode, Event: s.src.Name,
		DurationSec:   elapsed.Seconds(),
		DisabledSec:   s.sw.offTime(s.start.Add(elapsed)).Seconds(),
		AllocInterval: interval, MinSize: s.opts.MinSize,
		Objects: s.j.Report(), Stats: st, Notes: s.notes,
		Remainder: s.j.Remainder(), DataTypes: s.j.DataTypes(),
	}
	if s.stacks.Signal > 0 && s.j.AgentStackSignal() == 0 && s.j.Connected() {
		r.Notes = append(r.Notes, "the agent installed no stack handler (see its error records); access paths name only the sampled code")
	}
	if r.AllocInterval == 0 {
		r.AllocInterval = s.opts.Interval
	}
	if raised {
		r.AllocInterval = initial
		r.AllocIntervalMax = interval
		r.Notes = append(r.Notes, fmt.Sprintf("allocation-heavy program: the agent raised the heap sampling interval from %s to %s (first after %.1fs) to keep sampled allocations under %d/s; objects near min size are tracked less often and the est columns correct for it (--alloc-budget)",
			report.Bytes(initial), report.Bytes(interval), raisedAfter, s.opts.AllocBudget))
	}
	r.Finish()
	return r
}
