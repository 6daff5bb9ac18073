// Package profiler runs an object-centric profile of one JVM: it loads the
// agent (dynamic attach or -agentpath), samples with BPF, and joins samples
// with the agent's allocation stream into a report.
package profiler

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/djx-bpf/djx-bpf/agent"
	"github.com/djx-bpf/djx-bpf/attach"
	"github.com/djx-bpf/djx-bpf/channel"
	"github.com/djx-bpf/djx-bpf/heap"
	"github.com/djx-bpf/djx-bpf/jvmsym"
	"github.com/djx-bpf/djx-bpf/loader"
	"github.com/djx-bpf/djx-bpf/pmu"
	"github.com/djx-bpf/djx-bpf/report"
)

// ErrSamplerBusy means another JVMTI environment holds the JVM's heap
// sampler, which HotSpot grants to one environment at a time.
var ErrSamplerBusy = errors.New("the JVM's heap sampler is held by another agent (is another djx-bpf profile of this JVM running?); wait for it to finish and try again")

// agentSamplerBusy is Agent_OnAttach's result for ErrSamplerBusy
// (DJX_RC_SAMPLER_BUSY in agent/src/djx.h).
const agentSamplerBusy = 98

// Defaults.
const (
	DefaultMinSize = 1024
	// DefaultFreq is decode's rate, pmu.DecodeFreq (documented there).
	DefaultFreq = pmu.DecodeFreq
	// DefaultAllocBudget bounds the agent's cost on allocation-heavy code,
	// where a recorded allocation costs its thread 3-40 µs (the measured
	// trade-off: docs/benchmarks.md, "The allocation budget").
	DefaultAllocBudget = 500
	// DefaultRelocation: see docs/design.md for the measured trade-off. The
	// memmove uprobe traps on every copy of every thread, not only in GC
	// pauses: `make bench` measured H2 and Xalan 1.9-2.6x slower with it,
	// 1.4-1.5x with rescan.
	DefaultRelocation = RelocRescan
	// DefaultCensusBudget bounds each stop-the-world pause of the census
	// at attach (docs/census.md has the pauses per heap).
	DefaultCensusBudget = 500 * time.Millisecond
	// DefaultRecensus is the least time between two censuses of large
	// objects after GCs, which run only while the allocation budget keeps
	// the heap sampler from catching objects of min size.
	DefaultRecensus = time.Second
)

// Census modes (--census).
const (
	// CensusAuto: a census with holder chains at attach, degraded to one
	// without holders, then to none, when a pause would pass the budget.
	CensusAuto = "auto"
	// CensusOn: the full census whatever its pauses.
	CensusOn = "on"
	// CensusObjects: a census without holder chains.
	CensusObjects = "objects"
	// CensusOff: no census; only objects allocated after the attach are
	// tracked.
	CensusOff = "off"
)

// DefaultInterval is the heap sampling interval used for a min size: a
// quarter of it, so an object of exactly min size is caught with probability
// 1-e^-4 ≈ 98% and twice that size with 99.97%.
func DefaultInterval(minSize uint64) uint64 {
	if minSize < 64 {
		return 16
	}
	return minSize / 4
}

// Options configure a profile.
type Options struct {
	Event    string        // auto | decode | page-faults
	Duration time.Duration // 0: until ctx ends or the target exits
	MinSize  uint64        // objects smaller than this are not tracked
	Interval uint64        // heap sampling interval in bytes; 0: DefaultInterval(MinSize)
	Freq     int           // decode sampling frequency per CPU, Hz
	// HWFreq, when set, samples a hardware event in frequency mode (the
	// kernel adjusts the period to about HWFreq samples per second).
	HWFreq int
	Period uint64 // page-faults: every Period-th fault; hardware: every Period-th event (0: the event's default)
	// AllocBudget caps the JVM's sampled-allocation callbacks per second:
	// above it the agent raises the heap sampling interval. 0: no cap.
	AllocBudget uint64
	// Relocation is how GC moves are followed: RelocUprobe, RelocRescan or
	// RelocOff.
	Relocation string
	// StackSignal is the signal that asks sampled threads for their Java
	// stacks (access paths): DefaultStackSignal when 0; negative: no stacks.
	StackSignal int
	// StackInterval is the least time between two stacks of one thread;
	// samples in between borrow their callers from the thread's last
	// stack. DefaultStackInterval when 0.
	StackInterval time.Duration
	// AgentTimeout bounds the wait for the agent to connect.
	AgentTimeout time.Duration
	// RunAs is the user Launch runs the application as; nil: djx-bpf's own.
	RunAs *RunAs
	// Notify, when set, receives progress notes meant for the user.
	Notify func(string)
	// NUMA looks up the node of every sampled page (move_pages) and of the
	// sampling CPU, for a per-object remote-access share.
	NUMA bool
	// Progress, when set, is called about once a second while profiling.
	Progress func(Progress)
	// Control, when set, switches sampling off (false) and on (true) while
	// profiling, as perf record's --control does: the perf events and the
	// JVM's allocation sampling stop; objects already tracked are still
	// followed. Switched, when set, is called after each command.
	Control  <-chan bool
	Switched func(on bool, err error)
	// Census is what an attached profile tracks of the objects that
	// already exist: CensusAuto (default), CensusOn, CensusObjects or
	// CensusOff. CensusBudget bounds each census pause (auto and objects;
	// DefaultCensusBudget when 0). Recensus is the least time between
	// censuses of large objects after GCs (DefaultRecensus when 0,
	// negative: none).
	Census       string
	CensusBudget time.Duration
	Recensus     time.Duration
}

// Progress is a live view of a profile in progress.
type Progress struct {
	Elapsed   time.Duration
	Remaining time.Duration // 0 without a duration
	Samples   uint64        // samples of the target so far
	Rate      float64       // samples per second over the last interval
	Objects   int           // tracked live objects
	Dropped   uint64        // samples lost to a full ring buffer
}

func (o *Options) fill() {
	if o.MinSize == 0 {
		o.MinSize = DefaultMinSize
	}
	if o.Interval == 0 {
		o.Interval = DefaultInterval(o.MinSize)
	}
	if o.Freq == 0 {
		o.Freq = DefaultFreq
	}
	if o.Relocation == "" {
		o.Relocation = DefaultRelocation
	}
	if o.StackSignal == 0 {
		o.StackSignal = DefaultStackSignal
	}
	if o.StackInterval == 0 {
		o.StackInterval = DefaultStackInterval
	}
	if o.AgentTimeout == 0 {
		o.AgentTimeout = 15 * time.Second
	}
	if o.Census == "" {
		o.Census = CensusAuto
	}
	if o.CensusBudget == 0 {
		o.CensusBudget = DefaultCensusBudget
	}
	if o.Recensus == 0 {
		o.Recensus = DefaultRecensus
	}
}

// CheckCensus says whether mode is a --census mode.
func CheckCensus(mode string) error {
	switch mode {
	case "", CensusAuto, CensusOn, CensusObjects, CensusOff:
		return nil
	}
	return fmt.Errorf("unknown census mode %q: use auto, on, objects or off", mode)
}

func (o *Options) note(format string, args ...any) {
	if o.Notify != nil {
		o.Notify(fmt.Sprintf(format, args...))
	}
}

func (o *Options) agentOptions(sock string) string {
	return "sock=" + sock + ",interval=" + strconv.FormatUint(o.Interval, 10) + ",minsize=" + strconv.FormatUint(o.MinSize, 10) +
		",budget=" + strconv.FormatUint(o.AllocBudget, 10) + reconcileOpt(o.Relocation) + stacksOpt(o.StackSignal) + o.censusOpt()
}

// censusOpt: the census runs when the loader sends agent.CommandCensus
// (attached sessions only); the census after GCs in every mode.
func (o *Options) censusOpt() string {
	lvl := map[string]string{CensusAuto: "2", CensusOn: "2", CensusObjects: "1"}[o.Census]
	if lvl == "" {
		return ""
	}
	budget := max(1, o.CensusBudget.Microseconds())
	if o.Census == CensusOn {
		budget = 0
	}
	opt := ",census=" + lvl + ",census_budget=" + strconv.FormatInt(budget, 10)
	if o.Recensus > 0 {
		opt += ",recensus=" + strconv.FormatInt(o.Recensus.Milliseconds(), 10)
	}
	return opt
}

// stacksOpt installs the agent's stack handler on sig.
func stacksOpt(sig int) string {
	if sig <= 0 {
		return ""
	}
	return ",stacks=" + strconv.Itoa(sig)
}

// reconcileOpt asks the agent to rescan tracked objects after each GC: the
// rescan strategy itself, and the check of the uprobe strategy.
func reconcileOpt(strategy string) string {
	if strategy == RelocOff {
		return ""
	}
	return ",reconcile=1"
}

// session is one profile in progress.
type session struct {
	opts    Options
	mode    string
	pid     int
	src     source
	notes   []string
	sampler *loader.Sampler
	ch      *channel.Channel
	conn    *net.UnixConn
	j       *jvm
	target  *attach.Target
	start   time.Time
	// cost0 holds the BPF run time and djx-bpf's CPU time at the start.
	cost0 costMark
	// stacksAsked: the BPF program was told to signal the JVM for stacks.
	stacksAsked bool
	// noJavaFailed: marking a non-Java thread in BPF failed once (noted).
	noJavaFailed bool
	// shared is set when the sampler serves several JVMs (scan): samples
	// come from the dispatcher, and the sampler is not this session's to
	// stop or close.
	shared *dispatcher
	feed   <-chan sampleBatch
	// heapPre is the heap read before the session ran (OpenJ9: from a
	// javacore); nil: loadHeap asks HotSpot's GC.heap_info.
	heapPre *heap.Info
	sw      switcher // Options.Control
}

// noteExit records that the target ended before the profile did.
func (s *session) noteExit() {
	s.addNote("target pid %d exited after %.1fs; reporting what was collected", s.pid, time.Since(s.start).Seconds())
}

func (s *session) addNote(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.notes = append(s.notes, msg)
	s.opts.note("%s", msg)
}

func newSession(opts Options, mode string) (*session, error) {
	opts.fill()
	m, merr := pmu.Live()
	if merr != nil {
		m = nil // decode and page-faults still work
	}
	src, why, err := chooseSource(opts.Event, m)
	if err != nil {
		return nil, err
	}
	s := &session{opts: opts, mode: mode, src: src}
	if why != "" {
		s.opts.note("%s", why)
	}
	if err := loader.Preflight(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *session) openSampler() error {
	cfg, err := s.src.loaderConfig(&s.opts)
	if err != nil {
		return err
	}
	smp, err := loader.Open(cfg)
	if err != nil {
		return err
	}
	s.sampler = smp
	return nil
}

func (s *session) close() {
	if s.conn != nil {
		s.conn.Close()
	}
	if s.shared != nil {
		// Also after a failed attach: the shared filter must not keep
		// sampling a JVM nobody profiles.
		if s.pid != 0 {
			s.sampler.RemovePID(s.pid)
		}
		s.shared.remove(s.pid)
	} else if s.sampler != nil {
		s.sampler.Close()
	}
	if s.ch != nil {
		s.ch.Close()
	}
}

// Attach profiles the running JVM pid.
func Attach(ctx context.Context, pid int, opts Options) (*report.Report, error) {
	s, err := newSession(opts, "attach")
	if err != nil {
		return nil, err
	}
	defer s.close()
	if err := s.openSampler(); err != nil {
		return nil, err
	}
	return s.attach(ctx, pid)
}

// attach loads the agent into pid and profiles it with the session's
// sampler.
func (s *session) attach(ctx context.Context, pid int) (_ *report.Report, err error) {
	s.pid = pid
	if s.target, err = attach.Inspect(pid); err != nil {
		if errors.Is(err, attach.ErrUnsupportedVM) {
			return s.attachOpenJ9(ctx, pid)
		}
		return nil, err
	}
	if s.shared != nil {
		s.feed = s.shared.add(pid)
	}
	if s.ch, err = channel.Create(channel.Spec{Root: s.target.Root, UID: s.target.UID, GID: s.target.GID, Library: agent.Library()}); err != nil {
		return nil, fmt.Errorf("prepare agent channel for pid %d: %w", pid, err)
	}
	if err := s.sampler.AddPID(pid); err != nil {
		return nil, err
	}
	accepted := make(chan acceptResult, 1)
	actx, cancel := context.WithTimeout(ctx, s.opts.AgentTimeout)
	defer cancel()
	go func() {
		c, err := s.ch.Accept(actx, pid)
		accepted <- acceptResult{c, err}
	}()
	s.opts.note("attaching to pid %d", pid)
	if err := s.target.LoadAgent(actx, s.ch.LibraryPath(), true, s.opts.agentOptions(s.ch.SocketPath())); err != nil {
		cancel()
		if r := <-accepted; r.conn != nil {
			r.conn.Close() // the agent connected, then its Agent_OnAttach failed
		}
		var ae *attach.AgentError
		if errors.As(err, &ae) && ae.Attached && ae.ReturnCode == agentSamplerBusy {
			return nil, fmt.Errorf("load agent into pid %d: %w", pid, ErrSamplerBusy)
		}
		return nil, fmt.Errorf("load agent into pid %d: %w", pid, err)
	}
	r := <-accepted
	if r.err != nil {
		return nil, fmt.Errorf("agent of pid %d did not connect: %w", pid, r.err)
	}
	s.conn = r.conn
	exited := watchExit(pid)
	return s.run(ctx, exited)
}

type acceptResult struct {
	conn *net.UnixConn
	err  error
}

// Launch starts argv (a java command line) with the agent on -agentpath and
// profiles it until it exits, ctx ends or the duration passes. The returned
// wait function waits for the JVM to exit and gives its exit code.
func Launch(ctx context.Context, argv []string, opts Options, stdin io.Reader, stdout, stderr io.Writer) (*report.Report, func() (int, error), error) {
	if len(argv) == 0 {
		return nil, nil, errors.New("launch: no command given after --")
	}
	s, err := newSession(opts, "launch")
	if err != nil {
		return nil, nil, err
	}
	defer s.close()
	if err := s.openSampler(); err != nil {
		return nil, nil, err
	}
	uid, gid := s.opts.RunAs.owner()
	if s.ch, err = channel.Create(channel.Spec{Root: "/", UID: uid, GID: gid, Library: agent.Library()}); err != nil {
		return nil, nil, fmt.Errorf("prepare agent channel: %w", err)
	}
	args := append([]string{argv[0], "-agentpath:" + s.ch.LibraryPath() + "=" + s.opts.agentOptions(s.ch.SocketPath())}, argv[1:]...)
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return nil, nil, fmt.Errorf("launch %s: %w", argv[0], err)
	}
	cmd := &exec.Cmd{Path: path, Args: args, Stdin: stdin, Stdout: stdout, Stderr: stderr}
	s.opts.RunAs.apply(cmd)
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("launch %s: %w", argv[0], err)
	}
	s.pid = cmd.Process.Pid
	waitDone := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(waitDone) }()
	wait := func() (int, error) {
		<-waitDone
		if cmd.ProcessState == nil {
			return -1, waitErr
		}
		var ee *exec.ExitError
		if waitErr != nil && !errors.As(waitErr, &ee) {
			return -1, waitErr
		}
		return cmd.ProcessState.ExitCode(), nil
	}
	if err := s.sampler.AddPID(s.pid); err != nil {
		return nil, wait, err
	}
	actx, cancel := context.WithTimeout(ctx, s.opts.AgentTimeout)
	defer cancel()
	accepted := make(chan acceptResult, 1)
	go func() {
		c, err := s.ch.Accept(actx, s.pid)
		accepted <- acceptResult{c, err}
	}()
	select {
	case r := <-accepted:
		if r.err != nil {
			return nil, wait, fmt.Errorf("agent of launched pid %d did not connect: %w", s.pid, r.err)
		}
		s.conn = r.conn
	case <-waitDone:
		cancel()
		<-accepted
		return nil, wait, fmt.Errorf("launched JVM (pid %d) exited before its agent connected", s.pid)
	}
	// The attach listener serves jcmd (heap ranges) once the VM is up.
	if t, err := attach.Inspect(s.pid); err == nil {
		s.target = t
	}
	rep, err := s.run(ctx, waitDone)
	return rep, wait, err
}

// watchExit returns a channel closed when pid exits.
func watchExit(pid int) <-chan struct{} {
	done := make(chan struct{})
	fd, err := unix.PidfdOpen(pid, 0)
	go func() {
		defer close(done)
		if err != nil {
			for unix.Kill(pid, 0) == nil {
				time.Sleep(200 * time.Millisecond)
			}
			return
		}
		defer unix.Close(fd)
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			n, err := unix.Poll(fds, -1)
			if n > 0 || (err != nil && err != unix.EINTR) {
				return
			}
		}
	}()
	return done
}

// run joins the streams until the profile ends, then drains and reports.
func (s *session) run(ctx context.Context, exited <-chan struct{}) (*report.Report, error) {
	s.start = time.Now()
	s.cost0 = s.costNow()
	s.j = newJVM(s.pid)
	s.j.sampleStream = true
	s.j.native = jvmsym.NewNative(s.pid)
	if s.target != nil && s.target.NSPID != s.pid {
		// The agent's thread ids are its namespace's; BPF's are ours.
		s.j.hostTID = newNSThreads(s.pid).host
	}
	s.j.weightStruct = s.src.event != nil && s.src.event.Structured()
	if s.opts.NUMA {
		n, err := newNUMA()
		if err != nil {
			s.addNote("no NUMA placement: %v", err)
		} else {
			s.j.numa = n
		}
	}
	s.loadPerfMap()
	s.loadHeap(ctx)
	s.untagHumongous()
	s.askCensus()
	rel := s.startRelocation()
	var relocC <-chan relocMsg
	if rel != nil {
		relocC = rel.msgs
	}
	s.opts.note("profiling pid %d with event %s", s.pid, s.src.name)

	// Batches go back to the reader once applied: a sample is ~300 bytes,
	// and allocating per batch made the loader's GC its biggest cost.
	free := make(chan []loader.Sample, 64)
	samples := s.feed
	if samples == nil {
		own := make(chan sampleBatch, 64)
		go func() {
			defer close(own)
			var buf []loader.Sample
			for {
				if buf == nil {
					select {
					case buf = <-free:
					default:
						buf = make([]loader.Sample, 0, 64)
					}
				}
				b, complete, err := s.sampler.ReadBatch(buf)
				if len(b) > 0 || complete != 0 {
					own <- sampleBatch{b, complete}
					if len(b) > 0 {
						buf = nil // the loop owns it until it comes back
					}
				}
				if err != nil {
					return // closed, or flushed at the end
				}
			}
		}()
		samples = own
	}
	loopSamples := samples
	// Few: each decoded batch of the agent may hold tens of MiB.
	batches := make(chan *agent.Batch, 8)
	agentDone := make(chan error, 1)
	go func() {
		rd := agent.NewReader(s.conn)
		for {
			b, err := rd.Next()
			if err != nil {
				if errors.Is(err, io.EOF) {
					err = nil
				}
				agentDone <- err
				close(batches)
				return
			}
			batches <- b
		}
	}()
	var timer <-chan time.Time
	if s.opts.Duration > 0 {
		t := time.NewTimer(s.opts.Duration)
		defer t.Stop()
		timer = t.C
	}
	agentOpen := true
	var agentErr error
	var tick <-chan time.Time
	if s.opts.Progress != nil {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		tick = t.C
	}
	lastN, lastT := uint64(0), s.start
	control := s.opts.Control
loop:
	for {
		select {
		case now := <-tick:
			p := Progress{Elapsed: now.Sub(s.start), Samples: s.j.stats.Samples, Objects: len(s.j.objs) - len(s.j.free)}
			if s.opts.Duration > 0 {
				p.Remaining = max(0, s.opts.Duration-p.Elapsed)
			}
			if dt := now.Sub(lastT).Seconds(); dt > 0 {
				p.Rate = float64(p.Samples-lastN) / dt
			}
			lastN, lastT = p.Samples, now
			if c, err := s.sampler.Counters(); err == nil {
				p.Dropped = c.Dropped
			}
			s.opts.Progress(p)
		case b, ok := <-loopSamples:
			if !ok {
				loopSamples = nil // the shared sampler closed: the scan is ending
				continue
			}
			for i := range b.samples {
				s.j.onSample(&b.samples[i], s.src.kind)
			}
			s.j.samplesComplete(b.complete)
			if cap(b.samples) > 0 && s.shared == nil {
				select {
				case free <- b.samples:
				default:
				}
			}
		case on, ok := <-control:
			if !ok {
				control = nil
				continue
			}
			err := s.setSampling(on)
			if s.opts.Switched != nil {
				s.opts.Switched(on, err)
			}
		case m := <-relocC:
			s.j.applyReloc(m)
		case b, ok := <-batches:
			if !ok {
				batches = nil
				continue
			}
			s.j.onBatch(b)
			s.askStacks()
		case agentErr = <-agentDone:
			agentOpen = false
			if agentErr != nil {
				s.addNote("agent stream failed: %v", agentErr)
			}
			// The agent says goodbye at VM death: tell that apart from a
			// lost connection.
			if exited == nil {
				break loop // exit already noted
			}
			select {
			case <-exited:
				s.noteExit()
			case <-time.After(2 * time.Second):
				if agentErr == nil {
					s.addNote("agent of pid %d disconnected after %.1fs; reporting what was collected", s.pid, time.Since(s.start).Seconds())
				}
			}
			break loop
		case <-exited:
			s.noteExit()
			exited = nil
			// Let the agent's final batch (VM death) arrive.
			timer = time.After(2 * time.Second)
		case <-timer:
			break loop
		case <-ctx.Done():
			break loop
		}
	}
	elapsed := time.Since(s.start)

	// Stop sampling, then drain what the ring buffers still hold.
	if rel != nil {
		c, err := rel.stop(s.j)
		if err != nil {
			s.addNote("relocation tracker: %v", err)
		}
		s.j.stats.RelocHits = c.Hits
		s.j.stats.RelocHitsInGC = c.HitsInGC
		s.j.stats.RelocDropped = c.Dropped
	}
	if s.shared != nil {
		// Other JVMs go on sampling: stop this one's samples and take
		// what the dispatcher still holds for it.
		s.sampler.SetStackSignal(s.pid, 0)
		s.sampler.RemovePID(s.pid)
		s.shared.closeAfter(s.pid, 100*time.Millisecond)
	} else {
		s.sampler.Disable()
		s.sampler.Flush()
	}
	for b := range samples {
		for i := range b.samples {
			s.j.onSample(&b.samples[i], s.src.kind)
		}
	}
	// Ask the agent for its last batch and detach it.
	if agentOpen {
		s.conn.Write([]byte{agent.CommandQuit})
		deadline := time.After(3 * time.Second)
	wait:
		for {
			select {
			case b, ok := <-batches:
				if !ok {
					batches = nil
					continue
				}
				s.j.onBatch(b)
			case <-agentDone:
				agentOpen = false
				break wait
			case <-deadline:
				s.addNote("agent did not finish its last batch within 3s")
				break wait
			}
		}
	}
	if batches != nil && !agentOpen {
		for b := range batches {
			s.j.onBatch(b)
		}
	}
	s.j.drain(true)
	return s.finish(elapsed), nil
}

// threadOf reports whether tid (host namespace) is a thread of process pid.
func threadOf(pid int, tid uint32) bool {
	_, err := os.Lstat("/proc/" + strconv.Itoa(pid) + "/task/" + strconv.FormatUint(uint64(tid), 10))
	return err == nil
}

// askStacks tells the BPF program to signal the JVM's sampled threads once
// the agent says its handler is installed (never before: the signal's
// default action would kill the JVM).
func (s *session) askStacks() {
	sig := s.j.agentStackSig
	if s.stacksAsked || sig == 0 {
		return
	}
	s.stacksAsked = true
	// The target's agent says which signal its handler is on: only the
	// one asked for is sent (another's default action may kill the JVM).
	if sig != s.opts.StackSignal {
		s.addNote("no access stacks: the agent installed its handler on signal %d, not the %d asked for", sig, s.opts.StackSignal)
		return
	}
	if err := s.sampler.SetStackSignal(s.pid, sig); err != nil {
		s.addNote("no access stacks: %v", err)
		return
	}
	s.j.stacksFrom = loader.Now()
	s.j.stackSig = sig
	s.j.noJava = func(tid uint32) {
		// The map is shared by every target of a scan and keyed by tid:
		// the agent names tids of its own process only.
		if !threadOf(s.pid, tid) {
			return
		}
		if err := s.sampler.NoJavaThread(tid); err != nil && !s.noJavaFailed {
			s.noJavaFailed = true
			s.addNote("non-Java threads keep getting stack signals: %v", err)
		}
	}
}

// loadPerfMap reads /tmp/perf-PID.map when the JVM writes one (e.g.
// -XX:+DumpPerfMapAtExit, perf-map-agent): it names code the agent has not
// described, such as JIT code compiled before the attach.
func (s *session) loadPerfMap() {
	ns := s.pid
	if s.target != nil {
		ns = s.target.NSPID
	}
	if pm, err := jvmsym.LoadPerfMap(s.pid, ns); err == nil {
		s.j.perfMap = pm
	}
}

// loadHeap reads the heap's reserved ranges through the attach listener
// (jcmd GC.heap_info) so that samples can be classified as in the heap.
// Done before the first sample is processed, so every sample is classified.
func (s *session) loadHeap(ctx context.Context) {
	if s.heapPre != nil {
		s.j.heap, s.j.heapKnown = *s.heapPre, len(s.heapPre.Ranges) > 0
		return
	}
	if s.target == nil {
		s.addNote("heap range unknown (no attach listener); in_heap is not counted")
		return
	}
	hctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	out, err := s.target.Jcmd(hctx, "GC.heap_info")
	if err != nil {
		s.addNote("heap range unknown (GC.heap_info: %v); in_heap is not counted", err)
		return
	}
	info, err := heap.ParseHeapInfo(out)
	if err == nil {
		s.j.heap = info // the collector's name, even without ranges
	}
	switch {
	case err != nil:
		s.addNote("heap range unknown (GC.heap_info: %v); in_heap is not counted", err)
	case len(info.Ranges) == 0:
		s.addNote("heap range unknown for %s; in_heap is not counted", info.GC)
	default:
		s.j.heapKnown = true
	}
}

// untagHumongous has the agent track G1's humongous objects (half a region
// and more) without JVMTI tags: a tag keeps a dead humongous array from
// being reclaimed at the next young GC, which grew Xalan's heap by half.
// G1 never moves them, so the agent checks their headers after GCs instead.
func (s *session) untagHumongous() {
	if s.conn == nil || s.j.heap.GC != "G1" || s.j.heap.RegionSize == 0 {
		return
	}
	if _, err := s.conn.Write(agent.CommandUntag(s.j.heap.RegionSize / 2)); err != nil {
		s.addNote("humongous objects stay tagged: %v", err)
	}
}

// askCensus has the agent of an attached JVM track the objects that exist
// already. In launch mode there are none worth a pause.
func (s *session) askCensus() {
	if s.conn == nil || s.mode != "attach" || s.opts.Census == CensusOff {
		return
	}
	if _, err := s.conn.Write([]byte{agent.CommandCensus}); err != nil {
		s.addNote("no census: %v", err)
	}
}

func (s *session) finish(elapsed time.Duration) *report.Report {
	st := s.j.stats
	if c, err := s.sampler.Counters(); err == nil && s.shared == nil {
		st.Dropped = c.Dropped
		st.KernelSkipped = c.Kernel
		st.StackSignals = c.Signaled
		st.StackSignalFailed = c.SignalFailed
		st.StackSignalSkip = c.SignalSkipped
		st.StackSignalNoJava = c.SignalNonJava
	}
	st.HeapKnown = s.j.heapKnown
	if st.InHeap > st.Attributed {
		st.HeapUntracked = st.InHeap - st.Attributed
	}
	if st.GCs == 0 {
		st.GCs = s.j.agentGCs // no relocation stream: the agent's count
	}
	a := s.j.lastAgt
	st.AllocCallbacks = a.Callbacks
	st.AllocsBelowMin = a.BelowMinSize
	st.AgentDropped = a.Dropped
	st.StacksDropped = a.StacksDropped
	st.HumongousUntagged = a.Untagged
	st.HumongousFreed = a.UntaggedFreed
	s.cost(&st, a)
	s.j.censusStats(&st, func(format string, args ...any) { s.notes = append(s.notes, fmt.Sprintf(format, args...)) })
	if st.Dropped > 0 {
		s.notes = append(s.notes, fmt.Sprintf("%d samples were dropped because the ring buffer was full; lower --freq", st.Dropped))
	}
	if st.AgentDropped > 0 {
		s.notes = append(s.notes, fmt.Sprintf("the agent dropped %d records (buffer full); raise --min-size or --alloc-interval", st.AgentDropped))
	}
	s.notes = append(s.notes, s.j.agentNotes()...)
	if st.Late*100 > st.Samples {
		s.notes = append(s.notes, fmt.Sprintf("%d samples reached the join up to %.0f ms after newer heap changes and were judged against them; the machine may be overloaded (lower --freq)", st.Late, st.LateMaxMs))
	}
	r := &report.Report{
		PID: s.pid, JVM: s.j.vmName, Mode: s.mode, Event: s.src.name,
		DurationSec:   elapsed.Seconds(),
		DisabledSec:   s.sw.offTime(s.start.Add(elapsed)).Seconds(),
		AllocInterval: s.j.interval, MinSize: s.opts.MinSize,
		Objects: s.j.report(), Stats: st, Notes: s.notes,
		Remainder: s.j.accesses(s.j.remainder),
	}
	if s.opts.StackSignal > 0 && s.j.agentStackSig == 0 && s.j.connected {
		r.Notes = append(r.Notes, "the agent installed no stack handler (see its error records); access paths name only the sampled code")
	}
	if r.AllocInterval == 0 {
		r.AllocInterval = s.opts.Interval
	}
	if s.j.raisedAt != 0 {
		r.AllocInterval = s.j.initial
		r.AllocIntervalMax = s.j.interval
		at := 0.0
		if s.j.raisedAt > s.j.helloTime {
			at = float64(s.j.raisedAt-s.j.helloTime) / 1e9
		}
		r.Notes = append(r.Notes, fmt.Sprintf("allocation-heavy program: the agent raised the heap sampling interval from %s to %s (first after %.1fs) to keep sampled allocations under %d/s; objects near min size are tracked less often and the est columns correct for it (--alloc-budget)",
			report.Bytes(s.j.initial), report.Bytes(s.j.interval), at, s.opts.AllocBudget))
	}
	r.Finish()
	return r
}
