package profiler

import (
	"context"
	"fmt"
	"runtime"

	"github.com/djx-bpf/djx-bpf/hotspot/walkplan"
	"github.com/djx-bpf/djx-bpf/join"
	"github.com/djx-bpf/djx-bpf/profiler/scan"
	"github.com/djx-bpf/djx-bpf/report"
	"github.com/djx-bpf/djx-bpf/sources/dispatch"
)

// ScanOptions configure a scan of the host's JVMs.
type ScanOptions struct {
	Options     // per-JVM settings; Duration bounds the whole scan
	scan.Config // which JVMs, how often to look, the caps on sessions
	// Memory bounds what the JVMs' joins keep of their agents' streams
	// together, in bytes (0: DefaultScanMemory): each JVM's own budgets
	// times MaxJVMs would be more than a host has.
	Memory int64
}

// DefaultScanMemory is ScanOptions.Memory's default.
const DefaultScanMemory = 4 << 30

// Scan profiles every JVM on the host (or those ScanOptions select) at once
// (package scan): one set of per-CPU perf events whose BPF filter holds
// every profiled JVM, an agent in each.
func Scan(ctx context.Context, so ScanOptions) (*report.Scan, error) {
	h, err := newScanHost(so)
	if err != nil {
		return nil, err
	}
	return scan.Run(ctx, so.Config, h.base.opts.Duration, h), nil
}

// StartLive starts a continuous scan of the JVMs so selects; so.Duration
// is ignored (Stop ends it).
func StartLive(ctx context.Context, so ScanOptions) (*scan.Live, error) {
	so.Duration = 0
	h, err := newScanHost(so)
	if err != nil {
		return nil, err
	}
	return scan.Start(ctx, so.Config, h), nil
}

// scanHost runs a scan's sessions on its shared sampler (scan.Host).
type scanHost struct {
	base  *session // the shared sampler and settings
	d     *dispatch.Dispatcher
	cost0 costMark
}

// newScanHost opens the shared sampler of a scan.
func newScanHost(so ScanOptions) (*scanHost, error) {
	base, err := newSession(so.Options, "attach")
	if err != nil {
		return nil, err
	}
	if so.Memory <= 0 {
		so.Memory = DefaultScanMemory
	}
	base.budget = join.NewBudget(so.Memory)
	base.walkGate = walkplan.NewGate(runtime.NumCPU(), walkplan.Slice)
	if err := base.openSampler(); err != nil {
		return nil, err
	}
	return &scanHost{base: base, d: dispatch.New(base.sampler), cost0: base.costNow()}, nil
}

func (h *scanHost) Event() string { return h.base.src.Name }

func (h *scanHost) Close() { h.base.sampler.Close() }

// Shared fills in the shared sampler's counters and the scan's costs.
func (h *scanHost) Shared(st *report.ScanStats) {
	if c, err := h.base.sampler.Counters(); err == nil {
		st.Dropped = c.Dropped
		st.StackSignals = c.Signaled
	}
	st.Lost = h.d.Lost()
	st.CostBPFMs, st.CostDjxCPUMs = h.base.costNow().since(h.cost0)
}

// Profile profiles one JVM of a scan with the shared sampler until ctx
// ends or the JVM exits.
func (h *scanHost) Profile(ctx context.Context, pid int, cuts <-chan scan.CutRequest) (*report.Report, error) {
	base := h.base
	opts := base.opts
	opts.Duration = 0 // the scan's context bounds it
	if base.opts.Notify != nil {
		notify := base.opts.Notify
		opts.Notify = func(msg string) { notify(fmt.Sprintf("pid %d: %s", pid, msg)) }
	}
	s := &session{opts: opts, mode: "attach", src: base.src, sampler: base.sampler, shared: h.d, budget: base.budget, clk: base.clk, cuts: cuts,
		walkGate: base.walkGate, stacks: base.stacks}
	defer s.close()
	return s.attach(ctx, pid)
}
