// Package follow picks how one JVM's GC moves reach its join (the
// --relocation strategy, as far as its collector allows) and, with
// uprobes, runs the relocation tracker's stream of copies into it.
package follow

import (
	"errors"
	"os"
	"sync/atomic"
	"time"

	"github.com/djx-bpf/djx-bpf/hotspot/heap"
	"github.com/djx-bpf/djx-bpf/join"
	"github.com/djx-bpf/djx-bpf/sources/reloc"
)

// Relocation strategies (--relocation).
const (
	// Uprobe follows GC copies with uprobes on the memcpy/memmove
	// calls of the collectors' copy functions in libjvm (libc's memmove
	// when libjvm has no symbols) and applies each GC's copies at its end
	// (USDT gc__begin/gc__end).
	Uprobe = "uprobe"
	// Rescan has the agent read every tracked object's weak
	// reference after each GC and moves the moved ones: no cost inside
	// the pause, O(tracked) after it; the join waits for the rescan.
	Rescan = "rescan"
	// Off tracks no moves: samples on moved objects are lost.
	Off = "off"
)

// Source is the stream of GC moves of a relocation tracker that follows
// the JVM.
type Source interface {
	// Read blocks for the next event, until the deadline
	// (os.ErrDeadlineExceeded) or Close.
	Read(ev *reloc.Event) error
	SetDeadline(t time.Time)
	Counters() (reloc.Counters, error)
	// RemoveJVM detaches the probes from the JVM: its GC runs at full
	// speed again, and the events already caught can still be read.
	RemoveJVM(pid int) error
	Close() error
}

var _ Source = (*reloc.Tracker)(nil)

// Msg is one relocation event, or (wm) the promise that every event up to
// that time has been delivered.
type Msg struct {
	ev reloc.Event
	wm uint64
}

// Stream is the running relocation tracker of a JVM.
type Stream struct {
	src      Source
	pid      int
	mono     func() uint64 // the streams' clock
	msgs     chan Msg
	stopping atomic.Bool
}

// Config is the JVM whose moves are followed, and how.
type Config struct {
	Strategy  string // Uprobe, Rescan or Off
	PID       int
	Heap      heap.Info // the collector, and its ranges when HeapKnown
	HeapKnown bool
	MinSize   uint64        // copies shorter than this are not followed
	Mono      func() uint64 // the streams' clock
	// Tell tells the user; Note also keeps the note in the report.
	Tell, Note func(format string, args ...any)
}

// Start attaches the chosen strategy to the JVM and says how the join
// learns of moves; nil when no relocation stream runs.
func Start(c Config) (*Stream, join.Moves) {
	if c.Strategy == Off {
		c.Note("relocation tracking off: samples on objects the GC moved are lost")
		return nil, join.MovesOff
	}
	switch c.Heap.GC {
	case "Serial", "Parallel", "G1", "":
	case "OpenJ9":
		// OpenJ9 copies objects with its own routines, not libc memmove;
		// the agent's rescans (JVMTI tags) work on any VM.
		c.Tell("relocation: OpenJ9 does not copy through libc memmove; rescanning the tracked objects after each GC")
		return nil, join.MovesRescan
	case "Z", "Shenandoah":
		// Their copies run concurrently, outside memmove; but the agent's
		// GC events come at their pauses, and a rescan then reads where
		// each tracked object's weak reference points (ZGC: decoded).
		c.Note("relocation: %s moves objects concurrently; the tracked objects are rescanned after each of its pauses, so a move is seen up to a cycle late", gcName(c.Heap.GC))
		return nil, join.MovesRescan
	case "Epsilon":
		c.Note("relocation: Epsilon never moves objects; nothing to track")
		return nil, join.MovesNoRescan
	default:
		c.Note("relocation tracking off: %s moves objects concurrently with the application, outside pauses and memmove, so neither uprobes nor rescans can follow them; samples on moved objects are lost", gcName(c.Heap.GC))
		return nil, join.MovesNoRescan
	}
	switch c.Strategy {
	case Rescan:
		c.Tell("relocation: rescan of the tracked objects after each GC")
		return nil, join.MovesRescan
	case Uprobe:
	default:
		c.Note("unknown relocation strategy %q; tracking off", c.Strategy)
		return nil, join.MovesNoRescan
	}
	if !c.HeapKnown {
		c.Note("relocation: uprobes need the heap ranges; falling back to rescan after each GC")
		return nil, join.MovesRescan
	}
	tr, err := reloc.Open(reloc.Config{MinLen: c.MinSize})
	if err != nil {
		c.Note("relocation tracking off: %v", err)
		return nil, join.MovesOff
	}
	ranges := make([]reloc.Range, len(c.Heap.Ranges))
	for i, r := range c.Heap.Ranges {
		ranges[i] = reloc.Range{Start: r.Start, End: r.End}
	}
	info, err := tr.AddJVM(c.PID, ranges)
	if err == nil && (info.CopyErr != nil || info.GCErr != nil) {
		err = errors.Join(info.CopyErr, info.GCErr)
	}
	if err != nil {
		tr.Close()
		c.Note("relocation: uprobes unavailable (%v); falling back to rescan after each GC", err)
		return nil, join.MovesRescan
	}
	c.Tell("relocation: uprobes on %s, %d gc__begin and %d gc__end sites",
		info.CopyProbes(), len(info.GCBegin), len(info.GCEnd))
	if info.SitesErr != nil {
		c.Note("relocation: %v; catching copies in libc's memmove instead, which traps on every copy of every thread", info.SitesErr)
	}
	r := &Stream{src: tr, pid: c.PID, mono: c.Mono, msgs: make(chan Msg, 4096)}
	go r.read()
	return r, join.MovesUprobe
}

// read forwards events; when the ring buffer has stayed empty for a short
// while, everything produced before the wait began has been delivered.
func (r *Stream) read() {
	defer close(r.msgs)
	var ev reloc.Event
	for {
		start := r.mono()
		r.src.SetDeadline(time.Now().Add(20 * time.Millisecond))
		err := r.src.Read(&ev)
		switch {
		case err == nil:
			r.msgs <- Msg{ev: ev}
		case errors.Is(err, os.ErrDeadlineExceeded):
			if r.stopping.Load() {
				return // detached and drained
			}
			r.msgs <- Msg{wm: start}
		default:
			return // closed
		}
	}
}

// Msgs is the stream's events and watermarks, closed once it has stopped.
func (r *Stream) Msgs() <-chan Msg { return r.msgs }

// Apply feeds one message to the JVM's join.
func Apply(j *join.JVM, m Msg) {
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
func (r *Stream) Stop(j *join.JVM) (reloc.Counters, error) {
	derr := r.src.RemoveJVM(r.pid)
	c, cerr := r.src.Counters()
	r.stopping.Store(true)
	for m := range r.msgs {
		Apply(j, m)
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
