package profiler

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/djx-bpf/djx-bpf/hotspot/walkplan"
	"github.com/djx-bpf/djx-bpf/join"
	"github.com/djx-bpf/djx-bpf/report"
	"github.com/djx-bpf/djx-bpf/sources/dispatch"
	"github.com/djx-bpf/djx-bpf/target/discover"
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
	sr, err := newScanRun(so)
	if err != nil {
		return nil, err
	}
	base := sr.base
	defer base.sampler.Close()
	cost0 := base.costNow()

	sctx, cancel := ctx, context.CancelFunc(func() {})
	if base.opts.Duration > 0 {
		sctx, cancel = context.WithTimeout(ctx, base.opts.Duration)
	}
	defer cancel()
	start := time.Now()
	sr.watch(sctx)
	sr.drain()
	sr.finish(time.Since(start), cost0)
	return sr.sc, nil
}

// newScanRun opens the shared sampler of a scan.
func newScanRun(so ScanOptions) (*scanRun, error) {
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
	base.walkGate = walkplan.NewGate(runtime.NumCPU(), walkplan.Slice)
	if err := base.openSampler(); err != nil {
		return nil, err
	}
	return &scanRun{so: &so, base: base, d: dispatch.New(base.sampler), results: make(chan scanResult),
		known: make(map[int]bool), gate: newScanGate(so.MaxJVMs, so.MaxPerUser), sc: &report.Scan{Event: base.src.Name}}, nil
}

// scanRun is a scan in progress: the JVMs seen, the sessions running and
// what they reported.
type scanRun struct {
	so      *ScanOptions
	base    *session // the shared sampler and settings
	d       *dispatch.Dispatcher
	sc      *report.Scan
	results chan scanResult
	known   map[int]bool // JVMs seen, started or not
	finder  discover.Finder
	gate    *scanGate
	wg      sync.WaitGroup // the sessions running
	// live is set in a continuous scan (live.go): its windows are cut on
	// request and the sessions that end are kept for the next cut.
	live *liveState
}

// watch looks for JVMs every so.Every and starts their sessions, until
// ctx ends; it collects the sessions that end meanwhile.
func (sr *scanRun) watch(ctx context.Context) {
	sr.look(ctx)
	tick := time.NewTicker(sr.so.Every)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			sr.look(ctx)
		case r := <-sr.results:
			sr.collect(r)
		case reply := <-sr.live.requests():
			reply <- sr.cut()
		case <-ctx.Done():
			return
		}
	}
}

// look starts a session for each JVM found that admit lets in.
func (sr *scanRun) look(ctx context.Context) {
	jvms, err := sr.finder.Find()
	if err != nil {
		sr.sc.Notes = append(sr.sc.Notes, err.Error())
		return
	}
	forgetGone(sr.known, jvms)
	for _, j := range sr.so.admit(jvms, sr.known, sr.gate, sr.sc) {
		sr.wg.Add(1)
		m := sr.live.join(j)
		go func() {
			defer sr.wg.Done()
			r, err := sr.base.member(ctx, sr.d, j.PID, m.cutsOf())
			m.end()
			sr.results <- scanResult{j, r, err}
		}()
	}
}

// collect takes the report, or the reason it has none, of a session that
// ended.
func (sr *scanRun) collect(r scanResult) {
	sr.gate.release(r.jvm.UID)
	if sr.live != nil {
		sr.live.ended(r)
		if r.err == nil {
			return // its last window is in the next cut
		}
	}
	if r.err != nil {
		sr.sc.Skipped = append(sr.sc.Skipped, report.SkippedJVM{PID: r.jvm.PID, Main: r.jvm.Main, Reason: r.err.Error()})
		return
	}
	sr.sc.JVMs = append(sr.sc.JVMs, r.rep)
}

// drain collects the sessions still running once the scan has ended. A
// session stuck on its target (stopped, or hostile) must not hold the
// scan: the others are reported without it.
func (sr *scanRun) drain() {
	go func() { sr.wg.Wait(); close(sr.results) }()
	drainBy := time.NewTimer(scanDrain)
	defer drainBy.Stop()
	for {
		select {
		case r, ok := <-sr.results:
			if !ok {
				return
			}
			sr.collect(r)
		case <-drainBy.C:
			sr.sc.Notes = append(sr.sc.Notes, fmt.Sprintf("some JVM sessions did not end within %v of the scan's end; they are left out", scanDrain))
			return
		}
	}
}

// finish adds the scan's duration, the shared sampler's counters and
// costs, and the notes on them.
func (sr *scanRun) finish(elapsed time.Duration, cost0 costMark) {
	sc := sr.sc
	sc.DurationSec = elapsed.Seconds()
	sc.Stats.Profiled = len(sc.JVMs)
	if c, err := sr.base.sampler.Counters(); err == nil {
		sc.Stats.Dropped = c.Dropped
		sc.Stats.StackSignals = c.Signaled
	}
	sc.Stats.Lost = sr.d.Lost()
	sc.Stats.CostBPFMs, sc.Stats.CostDjxCPUMs = sr.base.costNow().since(cost0)
	if sc.Stats.Dropped > 0 {
		sc.Notes = append(sc.Notes, fmt.Sprintf("%d samples were dropped because the ring buffer was full; lower --freq", sc.Stats.Dropped))
	}
	if sr.gate.unlisted > 0 {
		sc.Notes = append(sc.Notes, fmt.Sprintf("%d more JVMs were skipped past the caps (--max-jvms, --max-jvms-per-user) and are not listed", sr.gate.unlisted))
	}
	if sc.Stats.Discovered == 0 {
		sc.Notes = append(sc.Notes, "no JVM found to profile")
	}
	sc.Finish()
}

// forgetGone drops from known the JVMs no longer found: a scan that runs
// for days must not remember every pid it saw, and a reused pid is a new
// JVM.
func forgetGone(known map[int]bool, jvms []discover.JVM) {
	if len(known) == 0 {
		return
	}
	found := make(map[int]bool, len(jvms))
	for _, j := range jvms {
		found[j.PID] = true
	}
	for pid := range known {
		// A JVM that discover missed once but still runs may have a
		// session: forgetting it would start a second one.
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); !found[pid] && errors.Is(err, fs.ErrNotExist) {
			delete(known, pid)
		}
	}
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
func (base *session) member(ctx context.Context, d *dispatch.Dispatcher, pid int, cuts <-chan cutReq) (*report.Report, error) {
	opts := base.opts
	opts.Duration = 0 // the scan's context bounds it
	if base.opts.Notify != nil {
		notify := base.opts.Notify
		opts.Notify = func(msg string) { notify(fmt.Sprintf("pid %d: %s", pid, msg)) }
	}
	s := &session{opts: opts, mode: "attach", src: base.src, sampler: base.sampler, shared: d, budget: base.budget, clk: base.clk, cuts: cuts,
		walkGate: base.walkGate}
	defer s.close()
	return s.attach(ctx, pid)
}
