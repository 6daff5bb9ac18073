package profiler

import (
	"bufio"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/djx-bpf/djx-bpf/agent"
	"github.com/djx-bpf/djx-bpf/hotspot/targetmem"
	"github.com/djx-bpf/djx-bpf/hotspot/vmcode"
	"github.com/djx-bpf/djx-bpf/hotspot/vmstructs"
	"github.com/djx-bpf/djx-bpf/internal/testenv"
	"github.com/djx-bpf/djx-bpf/join"
	"github.com/djx-bpf/djx-bpf/jvmsym"
	"github.com/djx-bpf/djx-bpf/loader"
	"github.com/djx-bpf/djx-bpf/naming/region"
	"github.com/djx-bpf/djx-bpf/naming/stacks"
	"github.com/djx-bpf/djx-bpf/report"
	"github.com/djx-bpf/djx-bpf/sources/agentwire"
	"github.com/djx-bpf/djx-bpf/sources/pmu"
	"github.com/djx-bpf/djx-bpf/sources/sample"
	"github.com/djx-bpf/djx-bpf/target/channel"
	"github.com/djx-bpf/djx-bpf/target/jvm"
)

var record = flag.Bool("record", false, "profile a real JVM and rewrite the replay fixture in "+replayDir+" (root, JDK 17)")

// The recorded profile: short and at a low rate, so that the fixture
// holds a few hundred samples.
const (
	recordFreq     = 199
	recordDuration = 3 * time.Second
)

// TestRecord profiles testdata/java/HotArrays.java with recorders around
// the session's seams and writes what they saw as the replay fixtures:
// in launch mode with the agent's stacks (testdata/replay), and attached
// at the defaults, a heap walk and stacks from BPF, on each JDK
// (testdata/replay-attach-JDK); then it replays each fixture and compares
// the replay's report with the run's own. Run it as root with -record,
// then TestReplay with -update.
func TestRecord(t *testing.T) {
	if !*record {
		t.Skip("rewrites the replay fixtures: go test -run TestRecord -record ./profiler (root, JDK 17)")
	}
	testenv.Root(t)
	if err := loader.Preflight(); err != nil {
		testenv.Skip(t, "needs BPF privileges: %v", err)
	}
	jdks := testenv.JDKs(t)
	classes := t.TempDir()
	javac := filepath.Join(jdks[0].Home, "bin", "javac")
	if out, err := exec.Command(javac, "--release", "17", "-d", classes, "../testdata/java/HotArrays.java").CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	t.Run("launch", func(t *testing.T) {
		jdk := jdks[0]
		argv := []string{jdk.Java(), "-cp", classes, "HotArrays", "60"}
		rec, live := recordLaunch(t, argv, Options{Event: pmu.NameDecode, Freq: recordFreq, Duration: recordDuration, AllocBudget: DefaultAllocBudget,
			Stacks: stacks.Agent})
		rec.fx.Comment = "made by TestRecord (record_test.go: go test -run TestRecord -record ./profiler, as root): " +
			"a launch profile of testdata/java/HotArrays.java on " + jdk.Name + " with the agent's stacks, event decode at " +
			strconv.Itoa(recordFreq) + " Hz for " + recordDuration.String()
		saveAndReplay(t, rec, live, replayDir)
	})
	for _, jdk := range jdks {
		t.Run("attach-"+jdk.Name, func(t *testing.T) {
			pid := startAttachTarget(t, jdk, classes)
			rec, live := recordAttach(t, pid, Options{Event: pmu.NameDecode, Freq: recordFreq, Duration: recordAttachDuration})
			rec.fx.Comment = "made by TestRecord (record_test.go: go test -run TestRecord -record ./profiler, as root): " +
				"an attach at the defaults (heap walk, stacks from BPF) to testdata/java/HotArrays.java (-Xmx64m, arrays allocated once) on " +
				jdk.Name + ", event decode at " + strconv.Itoa(recordFreq) + " Hz for " + recordAttachDuration.String()
			if rec.fx.Stacks == nil || rec.fx.Stacks.Mode != stacks.BPF || live.Stats.SamplesBPFStack == 0 || live.Stats.WalkObjects == 0 {
				t.Fatalf("not an attach at the defaults: stacks %+v, %d samples with BPF stacks, %d objects walked (notes %q)",
					rec.fx.Stacks, live.Stats.SamplesBPFStack, live.Stats.WalkObjects, live.Notes)
			}
			saveAndReplay(t, rec, live, attachReplayDir(jdk.Name))
		})
	}
}

// recordAttachDuration leaves the heap walk of HotArrays's small heap
// time to end within the profile.
const recordAttachDuration = 4 * time.Second

// saveAndReplay saves rec as the fixture in dir, replays it and compares
// the replay's report with the run's own.
func saveAndReplay(t *testing.T, rec *recording, live *report.Report, dir string) {
	t.Helper()
	if err := rec.save(dir); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{fixtureFile, samplesFile, agentFile, stacksFile, memoryFile} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err == nil {
			t.Logf("%s: %d bytes", f, fi.Size())
		}
	}
	saved, err := loadRecording(dir)
	if err != nil {
		t.Fatal(err)
	}
	got, err := replay(saved)
	if err != nil {
		t.Fatal(err)
	}
	compareLive(t, got, live)
}

// startAttachTarget starts HotArrays on jdk with its arrays allocated
// once, into statics, and returns its pid once it is ready; the test's
// end kills it.
func startAttachTarget(t *testing.T, jdk testenv.JDK, classes string) int {
	t.Helper()
	cmd := exec.Command(jdk.Java(), "-Xmx64m", "-cp", classes, "HotArrays", "60", "0")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == "ready" {
				close(ready)
				break
			}
		}
		io.Copy(io.Discard, out)
	}()
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		t.Fatal("HotArrays did not say ready")
	}
	time.Sleep(time.Second) // attached after a second, as a running service is
	return cmd.Process.Pid
}

// recordAttach attaches to pid as Attach does, with recorders around the
// session's seams from before the census is planned.
func recordAttach(t *testing.T, pid int, opts Options) (*recording, *report.Report) {
	s, err := newSession(opts, "attach")
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	if err := s.openSampler(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s.pid = pid
	vm, err := jvm.Inspect(ctx, pid, s.opts.AgentTimeout, s.addNote)
	if err != nil {
		t.Fatal(err)
	}
	s.vm, s.proc = vm, jvm.LiveProcess(pid)
	r := &recorder{stopped: -1, img: newImage()}
	r.wrap(s)
	if err := s.planCensus(); err != nil {
		t.Fatal(err)
	}
	lib, err := agent.Library()
	if err != nil {
		t.Fatal(err)
	}
	if s.ch, err = channel.Create(vm.ChannelSpec(lib)); err != nil {
		t.Fatal(err)
	}
	exited := jvm.WatchExit(pid)
	err = s.connectAgent(ctx, pid, exited, func(actx context.Context) error {
		return vm.LoadAgent(actx, s.ch.LibraryPath(), s.agentOptions())
	})
	if err != nil {
		t.Fatal(err)
	}
	r.wrapConn(s)
	rep, err := s.run(ctx, exited)
	if err != nil {
		t.Fatal(err)
	}
	return r.recording(s, rep), rep
}

// recordLaunch launches argv, profiles it with recorders around the
// session's seams and kills it.
func recordLaunch(t *testing.T, argv []string, opts Options) (*recording, *report.Report) {
	s, err := newSession(opts, "launch")
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	if err := s.openSampler(); err != nil {
		t.Fatal(err)
	}
	exited, wait, err := s.launch(context.Background(), argv, nil, nil, nil)
	if wait != nil {
		defer func() {
			unix.Kill(s.pid, unix.SIGKILL)
			wait()
		}()
	}
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{stopped: -1, img: newImage()}
	r.wrap(s)
	r.wrapConn(s)
	rep, err := s.run(context.Background(), exited)
	if err != nil {
		t.Fatal(err)
	}
	return r.recording(s, rep), rep
}

// compareLive checks the replay of a recording against the run's own
// report: the same samples, and the same objects charged with them. The
// replay hands the streams to the loop in the order they were read, not
// always the order the loop took them in, so counts may differ a little.
func compareLive(t *testing.T, got, live *report.Report) {
	t.Helper()
	if got.Stats.Samples != live.Stats.Samples || got.Stats.InHeap != live.Stats.InHeap {
		t.Errorf("replay: %d samples, %d in the heap; the run: %d, %d", got.Stats.Samples, got.Stats.InHeap, live.Stats.Samples, live.Stats.InHeap)
	}
	t.Logf("attributed: replay %d, run %d", got.Stats.Attributed, live.Stats.Attributed)
	if len(got.Objects) == 0 || len(live.Objects) == 0 {
		t.Fatalf("objects: replay %d, run %d", len(got.Objects), len(live.Objects))
	}
	g, l := got.Objects[0], live.Objects[0]
	if g.Type != l.Type || g.Site != l.Site {
		t.Errorf("top object: replay %s at %s, run %s at %s", g.Type, g.Site, l.Type, l.Site)
	}
	t.Logf("top object %s at %s: replay %d samples, run %d", l.Type, l.Site, g.Samples, l.Samples)
}

// recorder numbers the batches the session's readers read, in the order
// they read them, and keeps what else the session read.
type recorder struct {
	mu      sync.Mutex
	seq     int
	stopped int // the seq when sampling stopped; -1 before
	samples []sampleEvent
	agent   []agentEvent
	pending []byte // the agent's bytes of a batch not yet whole
	fx      fixture
	syms    tape[uint64, nativeAnswer]
	code    tape[codeKey, codeAnswer]
	regs    tape[regionKey, region.Region]
	tids    tape[uint32, tidAnswer]
	threads tape[uint32, bool]
	comms   tape[uint32, reply]
	img     *image // the target's memory as read
}

// wrap puts recorders around s's seams but the agent's connection.
func (r *recorder) wrap(s *session) {
	r.fx.Stacks = &stacksChoice{s.stacks.Mode, s.stacks.Signal}
	s.sampler = recSampler{s.sampler, r}
	if h, ok := s.vm.(*jvm.HotSpot); ok && h.L != nil {
		r.fx.Jcmd = map[string]reply{}
		h.L = recListener{h.L, r}
	}
	s.proc = recProcess{s.proc, r, s.pid}
	s.clk = recClock{s.clk, r}
}

// wrapConn puts a recorder around the agent's connection.
func (r *recorder) wrapConn(s *session) { s.conn = recConn{s.conn, r} }

// recording is what r saw of s's run, which reported rep.
func (r *recorder) recording(s *session, rep *report.Report) *recording {
	r.mu.Lock()
	defer r.mu.Unlock()
	fx := r.fx
	fx.PID, fx.NSPID, fx.Mode, fx.Event = s.pid, s.vm.NSPID(), s.mode, s.src.Name
	fx.Options = optionsOf(s.opts)
	fx.Duration = time.Duration(rep.DurationSec * float64(time.Second))
	fx.Events, fx.Stopped = r.seq, r.stopped
	if fx.Stopped < 0 {
		fx.Stopped = r.seq
	}
	fx.Native = r.syms.entries(cmp.Compare[uint64])
	fx.Code = r.code.entries(compareCodeKeys)
	fx.Regions = r.regs.entries(compareRegionKeys)
	fx.HostTIDs = r.tids.entries(cmp.Compare[uint32])
	fx.Threads = r.threads.entries(cmp.Compare[uint32])
	fx.Comms = r.comms.entries(cmp.Compare[uint32])
	rec := &recording{fx: fx, samples: r.samples, agent: r.agent, img: r.img}
	if r.img != nil {
		fx.MemoryBytes = r.img.bytes()
		r.img.mu.Lock()
		fx.FailedReads, fx.Failures = r.img.failed, slices.Clone(r.img.kept)
		r.img.mu.Unlock()
	}
	fx.Live = map[string]float64{"samples": float64(rep.Stats.Samples), "in_heap": float64(rep.Stats.InHeap),
		"attributed": float64(rep.Stats.Attributed), "objects": float64(len(rep.Objects))}
	rec.fx = fx
	return rec
}

func (r *recorder) addSamples(b []sample.Sample, complete uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.samples = append(r.samples, sampleEvent{r.seq, complete, append([]sample.Sample(nil), b...)})
	r.seq++
}

// addAgentBytes cuts the agent's stream into its batches, each numbered
// when its last byte was read.
func (r *recorder) addAgentBytes(b []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pending = append(r.pending, b...)
	for len(r.pending) >= agentwire.HeaderLen {
		n := agentwire.HeaderLen + int(binary.LittleEndian.Uint32(r.pending[8:]))
		if len(r.pending) < n {
			return
		}
		r.agent = append(r.agent, agentEvent{r.seq, append([]byte(nil), r.pending[:n]...)})
		r.seq++
		r.pending = r.pending[n:]
	}
}

func (r *recorder) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped < 0 {
		r.stopped = r.seq
	}
}

func (r *recorder) note(f func(fx *fixture)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(&r.fx)
}

func (r *recorder) noteErr(method string, err error) {
	if err == nil {
		return
	}
	r.note(func(fx *fixture) {
		if fx.Errors == nil {
			fx.Errors = map[string]string{}
		}
		if fx.Errors[method] == "" {
			fx.Errors[method] = err.Error()
		}
	})
}

type recSampler struct {
	sampler
	r *recorder
}

func (s recSampler) ReadBatch(buf []sample.Sample) ([]sample.Sample, uint64, error) {
	b, complete, err := s.sampler.ReadBatch(buf)
	if len(b) > 0 || complete != 0 {
		s.r.addSamples(b, complete)
	}
	return b, complete, err
}

func (s recSampler) Disable() {
	s.r.stop()
	s.sampler.Disable()
}

func (s recSampler) Counters() (loader.Counters, error) {
	c, err := s.sampler.Counters()
	if err == nil {
		s.r.note(func(fx *fixture) { fx.Counters = c })
	}
	return c, err
}

func (s recSampler) RunTime() (time.Duration, bool) {
	d, ok := s.sampler.RunTime()
	s.r.note(func(fx *fixture) { fx.RunTime = append(fx.RunTime, runTime{d, ok}) })
	return d, ok
}

func (s recSampler) SetHeap(pid int, lo, hi, base uint64, shift uint) error {
	err := s.sampler.SetHeap(pid, lo, hi, base, shift)
	s.r.noteErr("SetHeap", err)
	return err
}

func (s recSampler) SetStackSignal(pid, sig int) error {
	err := s.sampler.SetStackSignal(pid, sig)
	s.r.noteErr("SetStackSignal", err)
	return err
}

func (s recSampler) NoJavaThread(pid int, tid uint32) error {
	err := s.sampler.NoJavaThread(pid, tid)
	s.r.noteErr("NoJavaThread", err)
	return err
}

func (s recSampler) SetUnwind(pid int, heaps []loader.CodeHeap, l loader.CodeLayout) error {
	u, ok := s.sampler.(interface {
		SetUnwind(int, []loader.CodeHeap, loader.CodeLayout) error
	})
	err := errors.New("the sampler does not unwind")
	if ok {
		err = u.SetUnwind(pid, heaps, l)
	}
	s.r.noteErr("SetUnwind", err)
	return err
}

func (s recSampler) VMThread(pid int, tid uint32) error {
	m, ok := s.sampler.(interface{ VMThread(int, uint32) error })
	err := errors.New("the sampler marks no VM threads")
	if ok {
		err = m.VMThread(pid, tid)
	}
	s.r.noteErr("VMThread", err)
	return err
}

func (s recSampler) SetHeaderMask(k sample.HeaderKey, mask uint32) error {
	return s.sampler.SetHeaderMask(k, mask)
}

func (s recSampler) DropHeaderMask(k sample.HeaderKey) error {
	return s.sampler.DropHeaderMask(k)
}

type recConn struct {
	agentConn
	r *recorder
}

func (c recConn) Read(p []byte) (int, error) {
	n, err := c.agentConn.Read(p)
	c.r.addAgentBytes(p[:n])
	return n, err
}

type recListener struct {
	jvm.Listener
	r *recorder
}

func (l recListener) Jcmd(ctx context.Context, command string) (string, error) {
	out, err := l.Listener.Jcmd(ctx, command)
	rep := replyOf(out, err)
	if command == "VM.info" {
		rep.Out = "" // only the region namer reads it, whose answers are kept
	}
	l.r.note(func(fx *fixture) { fx.Jcmd[command] = rep })
	return out, err
}

type recProcess struct {
	jvm.Process
	r   *recorder
	pid int
}

func (p recProcess) Native() join.NativeSymbols { return recNative{p.Process.Native(), p.r} }
func (p recProcess) CodeMem() io.ReaderAt       { return recTargetMem{p.Process.CodeMem(), p.r.img} }
func (p recProcess) Mem() targetmem.Mem         { return recTargetMem{p.Process.Mem(), p.r.img} }

// VMStructs reads the table as the live process does, its memory
// recorded with the rest.
func (p recProcess) VMStructs() (*vmstructs.Table, error) {
	t, syms, err := recordVMStructs(p.pid, p.Mem())
	p.r.note(func(fx *fixture) {
		if fx.VMStructs == nil {
			fx.VMStructs = &syms
		}
	})
	return t, err
}

func (p recProcess) Continuation(t *vmstructs.Table) (vmcode.Continuation, error) {
	c, err := p.Process.Continuation(t)
	a := contAnswer{Cont: c}
	if err != nil {
		a.Err = err.Error()
	}
	p.r.note(func(fx *fixture) {
		if fx.Continuation == nil {
			fx.Continuation = &a
		}
	})
	return c, err
}

func (p recProcess) Comm(tid uint32) (string, error) {
	c, err := p.Process.Comm(tid)
	p.r.comms.record(tid, replyOf(c, err))
	return c, err
}

func (p recProcess) PerfMap(nsPID int) (*jvmsym.PerfMap, error) {
	pm, err := p.Process.PerfMap(nsPID)
	rep := replyOf("", err)
	if pm != nil {
		path := filepath.Join("/proc", strconv.Itoa(p.pid), "root", "tmp", "perf-"+strconv.Itoa(nsPID)+".map")
		text, rerr := os.ReadFile(path)
		rep = replyOf(string(text), rerr)
	}
	p.r.note(func(fx *fixture) { fx.PerfMap = rep })
	return pm, err
}

func (p recProcess) Regions(text region.JVMText) (join.Regions, error) {
	n, err := p.Process.Regions(text)
	if err != nil {
		p.r.note(func(fx *fixture) { fx.RegionsErr = err.Error() })
		return nil, err
	}
	return recRegions{n, p.r}, nil
}

func (p recProcess) HostTID() func(uint32) (uint32, bool) {
	f := p.Process.HostTID()
	return func(tid uint32) (uint32, bool) {
		h, ok := f(tid)
		p.r.tids.record(tid, tidAnswer{h, ok})
		return h, ok
	}
}

func (p recProcess) HasThread(tid uint32) bool {
	ok := p.Process.HasThread(tid)
	p.r.threads.record(tid, ok)
	return ok
}

type recNative struct {
	join.NativeSymbols
	r *recorder
}

func (n recNative) Lookup(ip uint64) (jvmsym.NativeFrame, bool) {
	f, ok := n.NativeSymbols.Lookup(ip)
	n.r.syms.record(ip, nativeAnswer{f, ok})
	return f, ok
}

type recRegions struct {
	join.Regions
	r *recorder
}

func (g recRegions) Name(addr uint64, tid uint32, rsp uint64) region.Region {
	reg := g.Regions.Name(addr, tid, rsp)
	g.r.regs.record(regionKey{addr, tid, rsp}, reg)
	return reg
}

type recClock struct {
	clock
	r *recorder
}

func (c recClock) Mono() uint64 {
	v := c.clock.Mono()
	c.r.note(func(fx *fixture) { fx.Mono = append(fx.Mono, v) })
	return v
}
