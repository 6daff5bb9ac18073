package profiler

import (
	"time"

	"github.com/djx-bpf/djx-bpf/report"
	"github.com/djx-bpf/djx-bpf/sources/agentwire"
)

// costMark is what a profile's cost is measured from: the sampling
// program's run time and djx-bpf's own CPU time.
type costMark struct {
	bpfRun time.Duration
	bpfOK  bool
	cpu    time.Duration
}

// costNow reads the marks. With a sampler shared by several JVMs (scan),
// neither can be charged to one of them.
func (s *session) costNow() costMark {
	var m costMark
	if s.shared != nil {
		return m
	}
	if s.sampler != nil {
		m.bpfRun, m.bpfOK = s.sampler.RunTime()
	}
	m.cpu = s.clk.CPU()
	return m
}

// cost fills the report's measured costs: the agent's time inside the JVM
// (its last STATS), against the JVM's CPU time over the session, and the
// BPF program's and djx-bpf's CPU time since the session began.
func (s *session) cost(st *report.Stats, a agentwire.Stats) {
	ms := func(ns uint64) float64 { return float64(ns) / 1e6 }
	st.CostJVMCPUMs = ms(a.ProcessCPUNanos)
	st.CostAllocMs = ms(a.AllocNanos)
	st.CostStackMs = ms(a.StackNanos)
	st.CostCodeMs = ms(a.CodeNanos)
	st.CostWriterMs = ms(a.WriterCPUNanos)
	if s.shared != nil {
		st.CostShared = true
		return
	}
	st.CostBPFMs, st.CostDjxCPUMs = s.costNow().since(s.cost0)
}

// since is the BPF program's and djx-bpf's CPU time from m0 to m, in ms;
// the BPF figure is 0 when either mark lacks it.
func (m costMark) since(m0 costMark) (bpfMs, djxMs float64) {
	if m.bpfOK && m0.bpfOK {
		bpfMs = float64(m.bpfRun-m0.bpfRun) / 1e6
	}
	return bpfMs, float64(m.cpu-m0.cpu) / 1e6
}
