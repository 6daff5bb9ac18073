package profiler

import (
	"errors"
	"os"
	"sync/atomic"
	"time"

	"github.com/djx-bpf/djx-bpf/join"
	"github.com/djx-bpf/djx-bpf/sources/reloc"
)

// Relocation strategies (--relocation).
const (
	// RelocUprobe follows GC copies with uprobes on the memcpy/memmove
	// calls of the collectors' copy functions in libjvm (libc's memmove
	// when libjvm has no symbols) and applies each GC's copies at its end
	// (USDT gc__begin/gc__end).
	RelocUprobe = "uprobe"
	// RelocRescan has the agent read every tracked object's weak
	// reference after each GC and moves the moved ones: no cost inside
	// the pause, O(tracked) after it; the join waits for the rescan.
	RelocRescan = "rescan"
	// RelocOff tracks no moves: samples on moved objects are lost.
	RelocOff = "off"
)

// relocMsg is one relocation event, or (wm) the promise that every event up
// to that time has been delivered.
type relocMsg struct {
	ev reloc.Event
	wm uint64
}

// relocation is the running relocation tracker of a session.
type relocation struct {
	src      relocSource
	pid      int
	mono     func() uint64 // the streams' clock
	msgs     chan relocMsg
	stopping atomic.Bool
}

// startRelocation attaches the chosen strategy to the session's JVM and
// says how the join learns of moves; nil when no relocation stream runs.
func (s *session) startRelocation() (*relocation, join.Moves) {
	if s.opts.Relocation == RelocOff {
		s.addNote("relocation tracking off: samples on objects the GC moved are lost")
		return nil, join.MovesOff
	}
	switch s.heap.GC {
	case "Serial", "Parallel", "G1", "":
	case "OpenJ9":
		// OpenJ9 copies objects with its own routines, not libc memmove;
		// the agent's rescans (JVMTI tags) work on any VM.
		s.opts.note("relocation: OpenJ9 does not copy through libc memmove; rescanning the tracked objects after each GC")
		return nil, join.MovesRescan
	case "Z", "Shenandoah":
		// Their copies run concurrently, outside memmove; but the agent's
		// GC events come at their pauses, and a rescan then reads where
		// each tracked object's weak reference points (ZGC: decoded).
		s.addNote("relocation: %s moves objects concurrently; the tracked objects are rescanned after each of its pauses, so a move is seen up to a cycle late", gcName(s.heap.GC))
		return nil, join.MovesRescan
	case "Epsilon":
		s.addNote("relocation: Epsilon never moves objects; nothing to track")
		return nil, join.MovesNoRescan
	default:
		s.addNote("relocation tracking off: %s moves objects concurrently with the application, outside pauses and memmove, so neither uprobes nor rescans can follow them; samples on moved objects are lost", gcName(s.heap.GC))
		return nil, join.MovesNoRescan
	}
	switch s.opts.Relocation {
	case RelocRescan:
		s.opts.note("relocation: rescan of the tracked objects after each GC")
		return nil, join.MovesRescan
	case RelocUprobe:
	default:
		s.addNote("unknown relocation strategy %q; tracking off", s.opts.Relocation)
		return nil, join.MovesNoRescan
	}
	if !s.heapKnown {
		s.addNote("relocation: uprobes need the heap ranges; falling back to rescan after each GC")
		return nil, join.MovesRescan
	}
	tr, err := reloc.Open(reloc.Config{MinLen: s.opts.MinSize})
	if err != nil {
		s.addNote("relocation tracking off: %v", err)
		return nil, join.MovesOff
	}
	ranges := make([]reloc.Range, len(s.heap.Ranges))
	for i, r := range s.heap.Ranges {
		ranges[i] = reloc.Range{Start: r.Start, End: r.End}
	}
	info, err := tr.AddJVM(s.pid, ranges)
	if err == nil && (info.CopyErr != nil || info.GCErr != nil) {
		err = errors.Join(info.CopyErr, info.GCErr)
	}
	if err != nil {
		tr.Close()
		s.addNote("relocation: uprobes unavailable (%v); falling back to rescan after each GC", err)
		return nil, join.MovesRescan
	}
	s.opts.note("relocation: uprobes on %s, %d gc__begin and %d gc__end sites",
		info.CopyProbes(), len(info.GCBegin), len(info.GCEnd))
	if info.SitesErr != nil {
		s.addNote("relocation: %v; catching copies in libc's memmove instead, which traps on every copy of every thread", info.SitesErr)
	}
	r := &relocation{src: tr, pid: s.pid, mono: s.clk.Mono, msgs: make(chan relocMsg, 4096)}
	go r.read()
	return r, join.MovesUprobe
}

// read forwards events; when the ring buffer has stayed empty for a short
// while, everything produced before the wait began has been delivered.
func (r *relocation) read() {
	defer close(r.msgs)
	var ev reloc.Event
	for {
		start := r.mono()
		r.src.SetDeadline(time.Now().Add(20 * time.Millisecond))
		err := r.src.Read(&ev)
		switch {
		case err == nil:
			r.msgs <- relocMsg{ev: ev}
		case errors.Is(err, os.ErrDeadlineExceeded):
			if r.stopping.Load() {
				return // detached and drained
			}
			r.msgs <- relocMsg{wm: start}
		default:
			return // closed
		}
	}
}

// applyReloc feeds one message to the JVM's join.
func applyReloc(j *join.JVM, m relocMsg) {
	if m.wm != 0 {
		j.RelocComplete(m.wm)
		return
	}
	switch m.ev.Kind {
	case reloc.GCBegin:
		j.OnGCBegin(m.ev.Time)
	case reloc.Copy:
		j.OnCopy(m.ev.Src, m.ev.Dst, m.ev.Len)
	case reloc.GCEnd:
		j.OnGCEnd(m.ev.Time)
	}
}

// stop detaches the uprobes (the JVM's GC runs at full speed again), hands
// the events still in the ring buffer to the join, and releases the tracker.
func (r *relocation) stop(j *join.JVM) (reloc.Counters, error) {
	derr := r.src.RemoveJVM(r.pid)
	c, cerr := r.src.Counters()
	r.stopping.Store(true)
	for m := range r.msgs {
		applyReloc(j, m)
	}
	j.OnGCEnd(r.mono()) // the profile may have ended inside a GC
	return c, errors.Join(derr, cerr, r.src.Close())
}

// gcName is the collector's usual name.
func gcName(gc string) string {
	if gc == "Z" {
		return "ZGC"
	}
	return gc
}
