// Package scan runs a scan of the host's JVMs: it looks for them every
// so often, admits those wanted within the caps on sessions, has a Host
// (the profiler, on one shared sampler) profile each, and collects their
// reports; a continuous scan (Start) cuts their windows on request.
package scan

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/djx-bpf/djx-bpf/report"
	"github.com/djx-bpf/djx-bpf/target/discover"
)

// Config selects a scan's JVMs and caps its sessions.
type Config struct {
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
}

// Host runs a scan's sessions: one per JVM, all on the sampler it shares.
// The profiler is the one in production; the scan owns it once handed
// over, and closes it when the scan ends.
type Host interface {
	// Profile profiles the JVM pid until ctx ends or the JVM exits. In a
	// continuous scan cuts carries the requests for its windows; nil
	// otherwise.
	Profile(ctx context.Context, pid int, cuts <-chan CutRequest) (*report.Report, error)
	// Event names the shared sample source.
	Event() string
	// Shared fills in the shared sampler's counts and costs.
	Shared(st *report.ScanStats)
	// Close closes the shared sampler.
	Close()
}

// CutRequest asks a session of a continuous scan for the report of the
// window that ends now; Reply is buffered so that the session never
// waits on it.
type CutRequest struct {
	Reply chan *report.Report
}

// Default caps on a scan's sessions (Config.MaxJVMs, MaxPerUser).
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

func (o *Config) wanted(j discover.JVM) bool {
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

// Run profiles every JVM on the host (or those cfg selects) at once,
// each through h, until ctx ends or the duration (0: none) passes. JVMs
// that start during the scan are attached when found; JVMs that refuse
// are listed with the reason; JVMs that exit are reported with what was
// collected.
func Run(ctx context.Context, cfg Config, duration time.Duration, h Host) *report.Scan {
	sr := newScanRun(cfg, h)
	defer h.Close()
	sctx, cancel := ctx, context.CancelFunc(func() {})
	if duration > 0 {
		sctx, cancel = context.WithTimeout(ctx, duration)
	}
	defer cancel()
	start := time.Now()
	sr.watch(sctx)
	sr.drain()
	sr.finish(time.Since(start))
	return sr.sc
}

func newScanRun(cfg Config, h Host) *scanRun {
	if cfg.Every <= 0 {
		cfg.Every = 2 * time.Second
	}
	return &scanRun{so: &cfg, h: h, results: make(chan scanResult),
		known: make(map[int]bool), gate: newScanGate(cfg.MaxJVMs, cfg.MaxPerUser), sc: &report.Scan{Event: h.Event()}}
}

// scanRun is a scan in progress: the JVMs seen, the sessions running and
// what they reported.
type scanRun struct {
	so      *Config
	h       Host
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
			r, err := sr.h.Profile(ctx, j.PID, m.cutsOf())
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
func (sr *scanRun) finish(elapsed time.Duration) {
	sc := sr.sc
	sc.DurationSec = elapsed.Seconds()
	sc.Stats.Profiled = len(sc.JVMs)
	sr.h.Shared(&sc.Stats)
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
func (so *Config) admit(jvms []discover.JVM, known map[int]bool, gate *scanGate, sc *report.Scan) []discover.JVM {
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
