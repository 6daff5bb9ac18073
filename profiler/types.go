package profiler

import (
	"context"
	"errors"
	"time"

	"github.com/djx-bpf/djx-bpf/join"
	"github.com/djx-bpf/djx-bpf/naming/region"
	"github.com/djx-bpf/djx-bpf/sources/agentwire"
	"github.com/djx-bpf/djx-bpf/target/jvm"
)

// classesEvery bounds how often the agent is asked for classes it has not
// described: each ask walks the JVM's loaded classes (3 ms of its writer
// thread on Xalan). An ask that found none of the klass words asked for
// (stray headers) doubles the gap, up to classesEveryMax.
const (
	classesEvery    = time.Second
	classesEveryMax = 32 * time.Second
)

// loadRegions reads the JVM's own account of its memory (VM.info) so that
// addresses outside the heap are named by region; nil when data types
// are off or the JVM cannot be asked.
func (s *session) loadRegions(ctx context.Context) join.Regions {
	if s.opts.NoDataTypes {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	out, err := s.vm.Jcmd(rctx, "VM.info")
	cancel()
	if err != nil && !errors.Is(err, jvm.ErrNoListener) {
		s.addNote("memory regions named from /proc only (VM.info: %v)", err)
	}
	n, err := s.proc.Regions(region.JVMText{VMInfo: out})
	if err != nil {
		s.addNote("memory regions are not named: %v", err)
		return nil
	}
	return n
}

// setHeap tells the sampling program where the heap is, so that each
// sample carries the headers of the objects its registers point at.
func (s *session) setHeap(base uint64, shift uint) {
	if s.opts.NoDataTypes || !s.heapKnown || len(s.heap.Ranges) == 0 {
		return
	}
	lo, hi := s.heap.Ranges[0].Start, s.heap.Ranges[0].End
	for _, r := range s.heap.Ranges[1:] {
		lo, hi = min(lo, r.Start), max(hi, r.End)
	}
	if err := s.sampler.SetHeap(s.pid, lo, hi, base, shift); err != nil {
		s.addNote("heap samples get no data type: %v", err)
	}
}

// useTypes acts on the agent's class descriptions: the compressed-oops
// encoding goes to the sampling program once known, and classes the
// samples met but the agent has not described are asked for.
func (s *session) useTypes() {
	ti := s.j.TypesInfo()
	if ti == nil || s.conn == nil {
		return
	}
	if !s.typesSet {
		s.typesSet = true
		if !ti.OK {
			s.addNote("heap samples of untracked objects get no data type: %s", ti.Reason)
			return
		}
		if ti.OopBytes == 4 {
			s.setHeap(ti.OopBase, uint(ti.OopShift))
		}
	}
	if now := s.clk.Now(); now.Sub(s.classesAsked) >= s.classesGap && s.j.WantClasses() {
		found := s.j.AskedFound()
		s.classesGap = classesGap(s.classesGap, s.classesAsked.IsZero() || found > s.classesFound)
		s.classesAsked, s.classesFound = now, found
		if _, err := s.conn.Write([]byte{agentwire.CommandClasses}); err != nil {
			s.addNote("classes loaded later are not named: %v", err)
		}
	}
}

// classesGap is the least time before the next ask for classes, after an
// ask: classesEvery when the last one answered any (or there was none),
// else twice the gap, up to classesEveryMax.
func classesGap(gap time.Duration, answered bool) time.Duration {
	if answered || gap < classesEvery {
		return classesEvery
	}
	return min(2*gap, classesEveryMax)
}
