package profiler

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/djx-bpf/djx-bpf/discover"
	"github.com/djx-bpf/djx-bpf/join"
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
	// MaxJVMs caps the JVMs profiled at once, and MaxPerUser those of one
	// user: 0 is DefaultMaxJVMs and DefaultMaxPerUser, negative no cap.
	// Any user can start processes that look like JVMs, and each costs a
	// session (an agent copy and channel in its /tmp, buffered batches, maps
	// reads): JVMs past a cap are skipped and listed with the reason.
	MaxJVMs, MaxPerUser int
	// Memory bounds what the JVMs' joins keep of their agents' streams
	// together, in bytes (0: DefaultScanMemory): each JVM's own budgets
	// times MaxJVMs would be more than a host has.
	Memory int64
}

// DefaultScanMemory is ScanOptions.Memory's default.
const DefaultScanMemory = 4 << 30

// Default caps on a scan's sessions (ScanOptions.MaxJVMs, MaxPerUser).
const (
	DefaultMaxJVMs    = 32
	DefaultMaxPerUser = 8
)

// scanGate admits a scan's JVMs within its caps, counting the sessions
// in progress, in total and by (host) uid.
type scanGate struct {
	max, perUser int // negative: no cap
	active       int
	byUID        map[int]int
	// listed JVMs skipped past a cap are in the scan's skipped list; the
	// unlisted rest only counted, so that the list stays small.
	listed, unlisted int
}

// maxCapSkipsListed bounds the skipped list's entries for JVMs past a cap.
const maxCapSkipsListed = 64

func newScanGate(max, perUser int) *scanGate {
	if max == 0 {
		max = DefaultMaxJVMs
	}
	if perUser == 0 {
		perUser = DefaultMaxPerUser
	}
	return &scanGate{max: max, perUser: perUser, byUID: map[int]int{}}
}

// admit takes a session for a JVM of uid, or says why there is none.
func (g *scanGate) admit(uid int) (ok bool, reason string) {
	switch {
	case g.max >= 0 && g.active >= g.max:
		return false, fmt.Sprintf("the scan already profiles %d JVMs (raise --max-jvms to profile more)", g.active)
	case g.perUser >= 0 && g.byUID[uid] >= g.perUser:
		return false, fmt.Sprintf("the scan already profiles %d JVMs of uid %d (raise --max-jvms-per-user to profile more)", g.byUID[uid], uid)
	}
	g.active++
	g.byUID[uid]++
	return true, ""
}

// release gives back the session of a JVM of uid.
func (g *scanGate) release(uid int) {
	g.active--
	if g.byUID[uid]--; g.byUID[uid] <= 0 {
		delete(g.byUID, uid)
	}
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
	if so.Memory <= 0 {
		so.Memory = DefaultScanMemory
	}
	base.budget = join.NewBudget(so.Memory)
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
	gate := newScanGate(so.MaxJVMs, so.MaxPerUser)
	var wg sync.WaitGroup
	look := func() {
		jvms, err := discover.Find()
		if err != nil {
			sc.Notes = append(sc.Notes, err.Error())
			return
		}
		for _, j := range so.admit(jvms, known, gate, sc) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := base.member(sctx, d, j.PID)
				results <- scanResult{j, r, err}
			}()
		}
	}
	collect := func(r scanResult) {
		gate.release(r.jvm.UID)
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
	if gate.unlisted > 0 {
		sc.Notes = append(sc.Notes, fmt.Sprintf("%d more JVMs were skipped past the caps (--max-jvms, --max-jvms-per-user) and are not listed", gate.unlisted))
	}
	if sc.Stats.Discovered == 0 {
		sc.Notes = append(sc.Notes, "no JVM found to profile")
	}
	sc.Finish()
	return sc, nil
}

// admit picks, among the JVMs found, those a scan starts a session for
// now: wanted, past their startup, not seen before and within the gate's
// caps. Those past a cap are listed in sc's skipped JVMs and not retried:
// a user who starts many fake JVMs must not make the scan try them all.
func (so *ScanOptions) admit(jvms []discover.JVM, known map[int]bool, gate *scanGate, sc *report.Scan) []discover.JVM {
	var start []discover.JVM
	for _, j := range jvms {
		if known[j.PID] || !so.wanted(j) {
			continue
		}
		if j.Age > 0 && j.Age < minAge {
			continue // still starting: next look
		}
		known[j.PID] = true
		sc.Stats.Discovered++
		if ok, reason := gate.admit(j.UID); !ok {
			if gate.unlisted == 0 && gate.listed < maxCapSkipsListed {
				gate.listed++
				sc.Skipped = append(sc.Skipped, report.SkippedJVM{PID: j.PID, Main: j.Main, Reason: reason})
			} else {
				gate.unlisted++
			}
			continue
		}
		start = append(start, j)
	}
	return start
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
	s := &session{opts: opts, mode: "attach", src: base.src, sampler: base.sampler, shared: d, budget: base.budget, clk: base.clk}
	defer s.close()
	return s.attach(ctx, pid)
}
