package profiler

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/djx-bpf/djx-bpf/discover"
	"github.com/djx-bpf/djx-bpf/report"
)

// ScanOptions configure a scan of the host's JVMs.
type ScanOptions struct {
	Options // per-JVM settings; Duration bounds the whole scan
	// PIDs limits the scan to these JVMs; empty: every JVM found.
	PIDs    []int
	Exclude []int
	// Match keeps only JVMs whose command line matches.
	Match *regexp.Regexp
	// Every is how often to look for JVMs that started (default 2s).
	Every time.Duration
}

func (o *ScanOptions) wanted(j discover.JVM) bool {
	if len(o.PIDs) > 0 && !slices.Contains(o.PIDs, j.PID) {
		return false
	}
	if slices.Contains(o.Exclude, j.PID) {
		return false
	}
	return o.Match == nil || o.Match.MatchString(j.Cmdline)
}

// minAge is how long a JVM must have run before a scan attaches to it:
// HotSpot refuses JVMTI environments to agents attached during its
// startup ("JVMTI 11 not available").
const minAge = 2 * time.Second

type scanResult struct {
	jvm discover.JVM
	rep *report.Report
	err error
}

// scanDrain bounds the wait for the JVM sessions once a scan ends.
var scanDrain = 10 * time.Second

// Scan profiles every JVM on the host (or those ScanOptions select) at once:
// one set of per-CPU perf events whose BPF filter holds every profiled
// JVM, an agent in each. JVMs that start during the scan are attached
// when found; JVMs that refuse are listed with the reason; JVMs that exit
// are reported with what was collected.
func Scan(ctx context.Context, so ScanOptions) (*report.Scan, error) {
	if so.Every <= 0 {
		so.Every = 2 * time.Second
	}
	base, err := newSession(so.Options, "attach")
	if err != nil {
		return nil, err
	}
	if err := base.openSampler(); err != nil {
		return nil, err
	}
	defer base.sampler.Close()
	d := newDispatcher(base.sampler)
	cost0 := base.costNow()

	sctx, cancel := ctx, context.CancelFunc(func() {})
	if base.opts.Duration > 0 {
		sctx, cancel = context.WithTimeout(ctx, base.opts.Duration)
	}
	defer cancel()
	start := time.Now()
	sc := &report.Scan{Event: base.src.name}
	results := make(chan scanResult)
	known := make(map[int]bool)
	var wg sync.WaitGroup
	look := func() {
		jvms, err := discover.Find()
		if err != nil {
			sc.Notes = append(sc.Notes, err.Error())
			return
		}
		for _, j := range jvms {
			if known[j.PID] || !so.wanted(j) {
				continue
			}
			if j.Age > 0 && j.Age < minAge {
				continue // still starting: next look
			}
			known[j.PID] = true
			sc.Stats.Discovered++
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := base.member(sctx, d, j.PID)
				results <- scanResult{j, r, err}
			}()
		}
	}
	collect := func(r scanResult) {
		if r.err != nil {
			sc.Skipped = append(sc.Skipped, report.SkippedJVM{PID: r.jvm.PID, Main: r.jvm.Main, Reason: r.err.Error()})
			return
		}
		sc.JVMs = append(sc.JVMs, r.rep)
	}
	look()
	tick := time.NewTicker(so.Every)
	defer tick.Stop()
loop:
	for {
		select {
		case <-tick.C:
			look()
		case r := <-results:
			collect(r)
		case <-sctx.Done():
			break loop
		}
	}
	go func() { wg.Wait(); close(results) }()
	// A session stuck on its target (stopped, or hostile) must not hold
	// the scan: the others are reported without it.
	drainBy := time.NewTimer(scanDrain)
	defer drainBy.Stop()
drain:
	for {
		select {
		case r, ok := <-results:
			if !ok {
				break drain
			}
			collect(r)
		case <-drainBy.C:
			sc.Notes = append(sc.Notes, fmt.Sprintf("some JVM sessions did not end within %v of the scan's end; they are left out", scanDrain))
			break drain
		}
	}
	sc.DurationSec = time.Since(start).Seconds()
	sc.Stats.Profiled = len(sc.JVMs)
	if c, err := base.sampler.Counters(); err == nil {
		sc.Stats.Dropped = c.Dropped
		sc.Stats.StackSignals = c.Signaled
	}
	sc.Stats.Lost = d.lostSamples()
	sc.Stats.CostBPFMs, sc.Stats.CostDjxCPUMs = base.costNow().since(cost0)
	if sc.Stats.Dropped > 0 {
		sc.Notes = append(sc.Notes, fmt.Sprintf("%d samples were dropped because the ring buffer was full; lower --freq", sc.Stats.Dropped))
	}
	if sc.Stats.Discovered == 0 {
		sc.Notes = append(sc.Notes, "no JVM found to profile")
	}
	sc.Finish()
	return sc, nil
}

// member profiles one JVM of a scan with the shared sampler until ctx
// ends or the JVM exits.
func (base *session) member(ctx context.Context, d *dispatcher, pid int) (*report.Report, error) {
	opts := base.opts
	opts.Duration = 0 // the scan's context bounds it
	if base.opts.Notify != nil {
		notify := base.opts.Notify
		opts.Notify = func(msg string) { notify(fmt.Sprintf("pid %d: %s", pid, msg)) }
	}
	s := &session{opts: opts, mode: "attach", src: base.src, sampler: base.sampler, shared: d}
	defer s.close()
	return s.attach(ctx, pid)
}
