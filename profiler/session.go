package profiler

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"time"

	"github.com/djx-bpf/djx-bpf/agent"
	"github.com/djx-bpf/djx-bpf/hotspot/heap"
	"github.com/djx-bpf/djx-bpf/hotspot/heapwalk"
	"github.com/djx-bpf/djx-bpf/hotspot/walkplan"
	"github.com/djx-bpf/djx-bpf/join"
	"github.com/djx-bpf/djx-bpf/jvmsym"
	"github.com/djx-bpf/djx-bpf/loader"
	"github.com/djx-bpf/djx-bpf/naming/bpfstack"
	"github.com/djx-bpf/djx-bpf/naming/datatype"
	"github.com/djx-bpf/djx-bpf/naming/stacks"
	"github.com/djx-bpf/djx-bpf/profiler/scan"
	"github.com/djx-bpf/djx-bpf/profiler/walk"
	"github.com/djx-bpf/djx-bpf/report"
	"github.com/djx-bpf/djx-bpf/sources/agentconn"
	"github.com/djx-bpf/djx-bpf/sources/dispatch"
	"github.com/djx-bpf/djx-bpf/sources/event"
	"github.com/djx-bpf/djx-bpf/sources/pmu"
	"github.com/djx-bpf/djx-bpf/sources/reloc"
	"github.com/djx-bpf/djx-bpf/sources/reloc/follow"
	"github.com/djx-bpf/djx-bpf/target/attach"
	"github.com/djx-bpf/djx-bpf/target/channel"
	"github.com/djx-bpf/djx-bpf/target/discover"
	"github.com/djx-bpf/djx-bpf/target/jvm"
	"github.com/djx-bpf/djx-bpf/target/launch"
	"github.com/djx-bpf/djx-bpf/target/openj9"
)

// session is one profile in progress.
type session struct {
	opts    Options
	zl      *heapwalk.Layout // ZGC's layout, which places its addresses (zgc.go); nil under other collectors
	mode    string
	budget  *join.Budget // shared by a scan's JVMs (nil: each JVM's own caps only)
	pid     int
	src     event.Source
	notes   []string
	sampler sampler
	ch      *channel.Channel
	conn    agentConn
	j       *join.JVM
	vm      jvm.VM
	proc    jvm.Process
	clk     clock
	start   time.Time
	// cost0 holds the BPF run time and djx-bpf's CPU time at the start.
	cost0 costMark
	// stacksAsked: the BPF program was told to signal the JVM for stacks.
	stacksAsked bool
	// noJavaFailed: marking a non-Java thread in BPF failed once (noted).
	noJavaFailed bool
	// stacks is where access stacks come from, as far as resolved.
	stacks stacks.Choice
	// vmThreads marks HotSpot's own threads for the BPF unwinder (nil:
	// stacks do not come from BPF).
	vmThreads *bpfstack.VMThreads
	// shared is set when the sampler serves several JVMs (scan): samples
	// come from the scan's dispatcher, and the sampler is not this
	// session's to stop or close.
	shared *dispatch.Dispatcher
	// reader is the dispatcher the session's samples come from (shared, or
	// its own), and feed its channel of them.
	reader *dispatch.Dispatcher
	feed   <-chan dispatch.Batch
	// lockstep: the loop takes each batch from its reader before the
	// reader reads the next, so that a replay's order holds.
	lockstep bool
	// libjvm keeps libjvm's symbols, read before a launched JVM starts,
	// cached until the session's lookups use them.
	libjvm *jvmsym.Preloaded
	// heap is the collector and, when heapKnown, its reserved ranges.
	heap      heap.Info
	heapKnown bool
	relocC    reloc.Counters // the relocation tracker's counters at its stop
	// typesSet: the BPF program was told the heap's encoding (agent's
	// TYPES_INFO); classes paces the asks for classes.
	typesSet bool
	classes  datatype.Asks
	sw       switcher     // Options.Control
	walk     *walk.Driver // the heap walks (nil: none)
	// walkGate shares the CPU among a scan's walks (nil: not a scan).
	walkGate *walkplan.Gate
	// cuts asks a continuous scan's session for its window's report
	// (window.go); winStart is when the current window began (zero: at
	// start). nil outside continuous scans.
	cuts     <-chan scan.CutRequest
	winStart time.Time
}

// noteExit records that the target ended before the profile did.
func (s *session) noteExit() {
	s.addNote("target pid %d exited after %.1fs; reporting what was collected", s.pid, s.clk.Now().Sub(s.start).Seconds())
}

func (s *session) addNote(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.notes = append(s.notes, msg)
	s.opts.note("%s", msg)
}

// command writes a command to the agent.
func (s *session) command(cmd []byte) error {
	_, err := s.conn.Write(cmd)
	return err
}

func newSession(opts Options, mode string) (*session, error) {
	opts.fill()
	m, merr := pmu.Live()
	if merr != nil {
		m = nil // decode and page-faults still work
	}
	src, why, err := event.Choose(opts.Event, m)
	if err != nil {
		return nil, err
	}
	s := &session{opts: opts, mode: mode, src: src, clk: sysClock{}, stacks: opts.stacksChoice()}
	switch {
	case why == "":
	case opts.Verbose || opts.Event != "" && opts.Event != pmu.NameAuto:
		s.opts.note("%s", why)
	default:
		s.opts.note("%s", event.AutoLine(src.Name))
	}
	if err := loader.Preflight(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *session) openSampler() error {
	o := &s.opts
	cfg, err := s.src.Config(event.Rates{Freq: o.Freq, HWFreq: o.HWFreq, Period: o.Period, StackGap: o.StackInterval, Poll: o.Poll})
	if err != nil {
		return err
	}
	smp, err := s.stacks.Open(cfg, s.addNote)
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
		s.shared.Remove(s.pid)
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
	if j, ok := discover.Inspect(pid); ok {
		s.stacks.ForOpenJ9(j.Kind == discover.OpenJ9, s.addNote)
	}
	if err := s.openSampler(); err != nil {
		return nil, err
	}
	return s.attach(ctx, pid)
}

// attach loads the agent into pid and profiles it with the session's
// sampler.
func (s *session) attach(ctx context.Context, pid int) (*report.Report, error) {
	s.pid = pid
	vm, err := jvm.Inspect(ctx, pid, s.opts.AgentTimeout, s.addNote)
	if err != nil {
		return nil, err
	}
	s.vm, s.proc = vm, jvm.LiveProcess(pid)
	if err := s.planCensus(); err != nil {
		return nil, err
	}
	lib, err := agent.Library()
	if err != nil {
		return nil, err
	}
	if s.ch, err = channel.Create(vm.ChannelSpec(lib)); err != nil {
		return nil, fmt.Errorf("prepare agent channel for pid %d: %w", pid, err)
	}
	exited := jvm.WatchExit(pid)
	err = s.connectAgent(ctx, pid, exited, func(actx context.Context) error {
		s.opts.note("attaching to %s", vm)
		if err := vm.LoadAgent(actx, s.ch.LibraryPath(), s.agentOptions()); err != nil {
			return fmt.Errorf("load agent into %s: %w", vm, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s.run(ctx, exited)
}

// connectAgent registers pid with the sampler, has load start the agent
// (nil: it starts with the JVM) and waits, within the agent timeout, for
// the agent to connect to the session's channel.
func (s *session) connectAgent(ctx context.Context, pid int, exited <-chan struct{}, load func(context.Context) error) error {
	if s.shared != nil {
		s.feed = s.shared.Add(pid)
	}
	if err := s.sampler.AddPID(pid); err != nil {
		return fmt.Errorf("sample pid %d: %w", pid, err)
	}
	conn, err := agentconn.Accept(ctx, s.ch, pid, s.opts.AgentTimeout, exited, load)
	if err != nil {
		return err
	}
	s.conn = conn
	return nil
}

// Launch starts argv (a java command line) with the agent on -agentpath and
// profiles it until it exits, ctx ends or the duration passes. The JVM runs
// in a session of its own with no terminal: stdin is relayed to it and its
// output copied to stdout and stderr, and the SIGINT, SIGTERM, SIGHUP and
// Ctrl-Z djx-bpf receives are forwarded to it until it exits (launch.Child).
// The returned wait function waits for the JVM to exit and gives its exit
// code (128+N when signal N killed it).
func Launch(ctx context.Context, argv []string, opts Options, stdin io.Reader, stdout, stderr io.Writer) (*report.Report, func() (int, error), error) {
	if len(argv) == 0 {
		return nil, nil, errors.New("launch: no command given after --")
	}
	s, err := newSession(opts, "launch")
	if err != nil {
		return nil, nil, err
	}
	defer s.close()
	s.stacks.ForOpenJ9(openj9.Launches(argv[0]), s.addNote)
	if err := s.openSampler(); err != nil {
		return nil, nil, err
	}
	exited, wait, err := s.launch(ctx, argv, stdin, stdout, stderr)
	if err != nil {
		return nil, wait, err
	}
	rep, err := s.run(ctx, exited)
	return rep, wait, err
}

// launch starts argv with the agent on -agentpath and waits for the agent
// to connect. exited is closed when the JVM exits, and wait gives its exit
// code (nil when it did not start).
func (s *session) launch(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) (exited <-chan struct{}, wait func() (int, error), err error) {
	lib, err := agent.Library()
	if err != nil {
		return nil, nil, err
	}
	uid, gid := s.opts.RunAs.Owner()
	if s.ch, err = channel.Create(channel.Spec{Root: "/", UID: uid, GID: gid, Library: lib}); err != nil {
		return nil, nil, fmt.Errorf("prepare agent channel: %w", err)
	}
	args := append([]string{argv[0], "-agentpath:" + s.ch.LibraryPath() + "=" + s.opts.agentOptions(s.ch.SocketPath(), s.stacks)}, argv[1:]...)
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return nil, nil, fmt.Errorf("launch %s: %w", argv[0], err)
	}
	if s.opts.Relocation == follow.Uprobe {
		// Finding the copy sites takes tens of ms: before the first GC.
		reloc.PrepareJava(path)
	}
	if lib, err := jvmsym.LibJVM(path); err == nil {
		// Best effort: without it the symbols load on the first lookup.
		s.libjvm, _ = jvmsym.Preload(lib)
	}
	c, err := launch.Start(path, args, s.opts.RunAs, stdin, stdout, stderr)
	if err != nil {
		return nil, nil, fmt.Errorf("launch %s: %w", argv[0], err)
	}
	s.pid, s.proc = c.PID(), jvm.LiveProcess(c.PID())
	if err := s.connectAgent(ctx, s.pid, c.Done(), nil); err != nil {
		return nil, c.ExitCode, err
	}
	// The attach listener serves jcmd (heap ranges) once the VM is up.
	t, ierr := attach.Inspect(s.pid)
	if ierr != nil {
		t = nil // the session goes without jcmd
	}
	s.vm = jvm.NewHotSpot(s.pid, t)
	return c.Done(), c.ExitCode, nil
}
