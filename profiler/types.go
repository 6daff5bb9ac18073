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
	if s.classes.Due(s.clk.Now(), s.j) {
		if _, err := s.conn.Write([]byte{agentwire.CommandClasses}); err != nil {
			s.addNote("classes loaded later are not named: %v", err)
		}
	}
}
