package profiler

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/djx-bpf/djx-bpf/hotspot/targetmem"
	"github.com/djx-bpf/djx-bpf/hotspot/vmcode"
	"github.com/djx-bpf/djx-bpf/hotspot/vmstructs"
	"github.com/djx-bpf/djx-bpf/join"
	"github.com/djx-bpf/djx-bpf/jvmsym"
	"github.com/djx-bpf/djx-bpf/loader"
	"github.com/djx-bpf/djx-bpf/naming/bpfstack"
	"github.com/djx-bpf/djx-bpf/naming/region"
	"github.com/djx-bpf/djx-bpf/naming/stacks"
	"github.com/djx-bpf/djx-bpf/report"
	"github.com/djx-bpf/djx-bpf/report/pprofile"
	"github.com/djx-bpf/djx-bpf/sources/agentwire"
	"github.com/djx-bpf/djx-bpf/sources/event"
	"github.com/djx-bpf/djx-bpf/sources/sample"
	"github.com/djx-bpf/djx-bpf/target/jvm"
)

var update = flag.Bool("update", false, "rewrite the replay test's golden files")

// The replay fixture (testdata/replay, written by TestRecord) is a real
// run: the sample batches and the agent's batches, each numbered in the
// order the session's readers read them, and in session.json whatever
// else the session read: the heap (jcmd), the native symbols, JIT code,
// regions and threads the join looked up, the clocks, the sampler's
// counters. TestReplay puts it behind the session's seams and checks the
// report against golden files.
const (
	replayDir     = "testdata/replay"
	replayJSON    = "testdata/replay.json"
	replayPprof   = "testdata/replay.pb.gz"
	fixtureFile   = "session.json"
	samplesFile   = "samples.bin.gz"
	agentFile     = "agent.bin.gz"
	replayStartNs = 1_700_000_000_000_000_000 // the replay's wall clock at its start
)

// lockstep hands out a recording's batches read while profiling in their
// recorded order, one at a time: a reader gets its next batch only once
// the loop has taken the one before (the reader asks again, its channel
// being unbuffered: session.lockstep), so the loop never has two ready.
// The batches read after sampling stopped go once the session asks for
// them (Flush, the agent's quit command).
type lockstep struct {
	mu       sync.Mutex
	cond     *sync.Cond
	order    []stream // the stream of each batch read while profiling
	next     int
	left     [numStreams]int // batches read while profiling still to hand out
	out      stream          // whose batch is out, maybe not taken yet
	released [numStreams]bool
	closed   bool
	end      func() // once the loop has taken the last batch
	ended    bool
}

type stream int

const (
	noStream stream = iota
	sampleStream
	agentStream
	numStreams
)

func newLockstep(order []stream, end func()) *lockstep {
	l := &lockstep{order: order, end: end}
	l.cond = sync.NewCond(&l.mu)
	for _, st := range order {
		l.left[st]++
	}
	if len(order) == 0 {
		l.ended = true
		end()
	}
	return l
}

// turn waits until st's next batch read while profiling is due, and says
// whether there is one.
func (l *lockstep) turn(st stream) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.out == st {
		l.out = noStream // st reads again: the loop took its batch
		if l.next == len(l.order) && !l.ended {
			l.ended = true
			l.end()
		}
		l.cond.Broadcast()
	}
	for !l.closed && l.left[st] > 0 {
		if l.out == noStream && l.order[l.next] == st {
			l.next++
			l.left[st]--
			l.out = st
			return true
		}
		l.cond.Wait()
	}
	return false
}

// release lets st's batches read after sampling stopped go.
func (l *lockstep) release(st stream) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.released[st] = true
	l.cond.Broadcast()
}

// waitRelease waits for release(st); false when the session closed first.
func (l *lockstep) waitRelease(st stream) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for !l.released[st] && !l.closed {
		l.cond.Wait()
	}
	return l.released[st]
}

func (l *lockstep) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	l.cond.Broadcast()
}

var errReplayClosed = errors.New("replay closed")

// replaySampler is the recorded sampler.
type replaySampler struct {
	ls         *lockstep
	loop, stop []sampleEvent
	fx         *fixture
	runTimes   []runTime
}

func (r *replaySampler) ReadBatch(buf []sample.Sample) ([]sample.Sample, uint64, error) {
	var e sampleEvent
	switch {
	case r.ls.turn(sampleStream):
		e, r.loop = r.loop[0], r.loop[1:]
	case !r.ls.waitRelease(sampleStream):
		return buf[:0], 0, errReplayClosed
	case len(r.stop) > 0:
		e, r.stop = r.stop[0], r.stop[1:]
	default:
		return buf[:0], 0, loader.ErrFlushed
	}
	return append(buf[:0], e.samples...), e.complete, nil
}

func (r *replaySampler) Counters() (loader.Counters, error) { return r.fx.Counters, nil }
func (r *replaySampler) Close() error                       { r.ls.close(); return nil }
func (r *replaySampler) AddPID(int) error                   { return nil }
func (r *replaySampler) RemovePID(int) error                { return nil }
func (r *replaySampler) SetHeap(int, uint64, uint64, uint64, uint) error {
	return r.err("SetHeap")
}
func (r *replaySampler) SetStackSignal(int, int) error  { return r.err("SetStackSignal") }
func (r *replaySampler) NoJavaThread(int, uint32) error { return r.err("NoJavaThread") }
func (r *replaySampler) SetUnwind(int, []loader.CodeHeap, loader.CodeLayout) error {
	return r.err("SetUnwind")
}
func (r *replaySampler) VMThread(int, uint32) error                   { return r.err("VMThread") }
func (r *replaySampler) SetHeaderMask(sample.HeaderKey, uint32) error { return nil }
func (r *replaySampler) DropHeaderMask(sample.HeaderKey) error        { return nil }
func (r *replaySampler) Enable() error                                { return nil }
func (r *replaySampler) Disable()                                     {}
func (r *replaySampler) Flush() error                                 { r.ls.release(sampleStream); return nil }
func (r *replaySampler) RunTime() (time.Duration, bool) {
	if len(r.runTimes) == 0 {
		return 0, false
	}
	rt := r.runTimes[0]
	if len(r.runTimes) > 1 {
		r.runTimes = r.runTimes[1:]
	}
	return rt.D, rt.OK
}

func (r *replaySampler) err(method string) error {
	if msg := r.fx.Errors[method]; msg != "" {
		return errors.New(msg)
	}
	return nil
}

// replayConn is the recorded agent's connection; of the commands sent to
// it, only quit matters: the batches after it go then.
type replayConn struct {
	ls         *lockstep
	loop, stop []agentEvent
	rem        []byte // what is left of the batch being read
}

func (c *replayConn) Read(p []byte) (int, error) {
	if len(c.rem) == 0 {
		switch {
		case c.ls.turn(agentStream):
			c.rem, c.loop = c.loop[0].batch, c.loop[1:]
		case !c.ls.waitRelease(agentStream) || len(c.stop) == 0:
			return 0, io.EOF
		default:
			c.rem, c.stop = c.stop[0].batch, c.stop[1:]
		}
	}
	n := copy(p, c.rem)
	c.rem = c.rem[n:]
	return n, nil
}

func (c *replayConn) Write(b []byte) (int, error) {
	if len(b) == 1 && b[0] == agentwire.CommandQuit {
		c.ls.release(agentStream)
	}
	return len(b), nil
}

func (c *replayConn) Close() error { c.ls.close(); return nil }

// replayListener answers jcmd from the recording.
type replayListener map[string]reply

func (l replayListener) Jcmd(_ context.Context, command string) (string, error) {
	r, ok := l[command]
	if !ok {
		return "", fmt.Errorf("jcmd %s was not recorded", command)
	}
	return r.result()
}

func (l replayListener) LoadAgent(context.Context, string, bool, string) error {
	return errors.New("a replay loads no agent")
}

// replayProcess answers what the session read of the recorded process:
// its memory from the recorded image, the rest from the recorded answers.
type replayProcess struct {
	fx      *fixture
	img     *image // nil: a recording of JIT code reads alone (code)
	syms    *tape[uint64, nativeAnswer]
	code    *tape[codeKey, codeAnswer]
	regs    *tape[regionKey, region.Region]
	tids    *tape[uint32, tidAnswer]
	threads *tape[uint32, bool]
	comms   *tape[uint32, reply]
}

func newReplayProcess(rec *recording) *replayProcess {
	fx := &rec.fx
	return &replayProcess{fx: fx, img: rec.img, syms: tapeOf(fx.Native), code: tapeOf(fx.Code), regs: tapeOf(fx.Regions),
		tids: tapeOf(fx.HostTIDs), threads: tapeOf(fx.Threads), comms: tapeOf(fx.Comms)}
}

func (p *replayProcess) Native() join.NativeSymbols { return replayNative{p.syms} }

func (p *replayProcess) CodeMem() io.ReaderAt {
	if p.img == nil {
		return replayMem{p.code}
	}
	return p.Mem()
}

func (p *replayProcess) Mem() targetmem.Mem {
	img := p.img
	if img == nil {
		img = newImage()
	}
	return imageMem{img, p.fx.PID}
}

func (p *replayProcess) VMStructs() (*vmstructs.Table, error) { return p.fx.VMStructs.table(p.Mem()) }

func (p *replayProcess) Continuation(*vmstructs.Table) (vmcode.Continuation, error) {
	a := p.fx.Continuation
	if a == nil {
		return vmcode.Continuation{}, errors.New("continuations were not recorded")
	}
	if a.Err != "" {
		return a.Cont, errors.New(a.Err)
	}
	return a.Cont, nil
}

func (p *replayProcess) Comm(tid uint32) (string, error) {
	r, ok := p.comms.play(tid)
	if !ok {
		return "", fmt.Errorf("name of thread %d: not recorded", tid)
	}
	return r.result()
}

func (p *replayProcess) PerfMap(int) (*jvmsym.PerfMap, error) {
	text, err := p.fx.PerfMap.result()
	if err != nil {
		return nil, err
	}
	return jvmsym.ParsePerfMap(strings.NewReader(text))
}

func (p *replayProcess) Regions(region.JVMText) (join.Regions, error) {
	if p.fx.RegionsErr != "" {
		return nil, errors.New(p.fx.RegionsErr)
	}
	return replayRegions{p.regs}, nil
}

func (p *replayProcess) HostTID() func(uint32) (uint32, bool) {
	return func(tid uint32) (uint32, bool) {
		a, _ := p.tids.play(tid)
		return a.Host, a.OK
	}
}

func (p *replayProcess) HasThread(tid uint32) bool {
	ok, _ := p.threads.play(tid)
	return ok
}

type replayNative struct{ t *tape[uint64, nativeAnswer] }

func (n replayNative) Lookup(ip uint64) (jvmsym.NativeFrame, bool) {
	a, _ := n.t.play(ip)
	return a.Frame, a.OK
}

type replayMem struct{ t *tape[codeKey, codeAnswer] }

func (m replayMem) ReadAt(b []byte, off int64) (int, error) {
	a, ok := m.t.play(codeKey{off, len(b)})
	if !ok {
		return 0, fmt.Errorf("read at %#x: not recorded", off)
	}
	n := copy(b, a.Data[:a.N])
	if a.Err != "" {
		return n, errors.New(a.Err)
	}
	return n, nil
}

type replayRegions struct {
	t *tape[regionKey, region.Region]
}

func (r replayRegions) Name(addr uint64, tid uint32, rsp uint64) region.Region {
	reg, _ := r.t.play(regionKey{addr, tid, rsp})
	return reg
}

// replayClock stands still while the batches go, and has moved by the
// recorded duration once the last has gone; its monotonic readings are
// the recorded ones, and djx-bpf's CPU time is 0.
type replayClock struct {
	dur   time.Duration
	ended atomic.Bool
	mu    sync.Mutex
	mono  []uint64
}

func (c *replayClock) Now() time.Time {
	t := time.Unix(0, replayStartNs)
	if c.ended.Load() {
		t = t.Add(c.dur)
	}
	return t
}

func (c *replayClock) Mono() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.mono) == 0 {
		return 0
	}
	v := c.mono[0]
	if len(c.mono) > 1 {
		c.mono = c.mono[1:]
	}
	return v
}

func (c *replayClock) CPU() time.Duration { return 0 }

// After never fires: a replay's walks start on the recorded batches
// alone, and are not checked again.
func (c *replayClock) After(time.Duration) <-chan time.Time { return nil }

// replay runs a session on a recording and returns its report. The BPF
// stacks' time budgets, the one wall-clock limit left on naming their
// frames, are lifted for it: reads of the recorded memory cost no time
// worth a budget, and a slow machine must not cut a replay's paths.
func replay(rec *recording) (*report.Report, error) {
	defer func(r, s, b time.Duration) {
		bpfstack.RecordBudget, bpfstack.SecondBudget, bpfstack.BurstBudget = r, s, b
	}(bpfstack.RecordBudget, bpfstack.SecondBudget, bpfstack.BurstBudget)
	bpfstack.RecordBudget, bpfstack.SecondBudget, bpfstack.BurstBudget = time.Hour, time.Hour, time.Hour
	fx := &rec.fx
	src, _, err := event.Choose(fx.Event, nil)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clk := &replayClock{dur: fx.Duration, mono: fx.Mono}
	order := make([]stream, fx.Stopped)
	smp := &replaySampler{fx: fx, runTimes: fx.RunTime}
	conn := &replayConn{}
	for _, e := range rec.samples {
		if e.seq < fx.Stopped {
			order[e.seq] = sampleStream
			smp.loop = append(smp.loop, e)
		} else {
			smp.stop = append(smp.stop, e)
		}
	}
	for _, e := range rec.agent {
		if e.seq < fx.Stopped {
			order[e.seq] = agentStream
			conn.loop = append(conn.loop, e)
		} else {
			conn.stop = append(conn.stop, e)
		}
	}
	if i := slices.Index(order, noStream); i >= 0 {
		return nil, fmt.Errorf("batch %d of %d read while profiling is missing", i, fx.Stopped)
	}
	smp.ls = newLockstep(order, func() { clk.ended.Store(true); cancel() })
	conn.ls = smp.ls
	vm := &jvm.HotSpot{PID: fx.PID, NS: fx.NSPID}
	if fx.Jcmd != nil {
		vm.L = replayListener(fx.Jcmd) // nil: the run had no attach listener
	}
	opts := fx.Options.options()
	s := &session{opts: opts, mode: fx.Mode, src: src, pid: fx.PID, sampler: smp, conn: conn,
		vm: vm, proc: newReplayProcess(rec), clk: clk, lockstep: true, stacks: opts.stacksChoice()}
	if fx.Stacks != nil {
		s.stacks = stacks.Choice{Mode: fx.Stacks.Mode, Signal: fx.Stacks.Signal}
	}
	defer s.close()
	if err := s.planCensus(); err != nil {
		return nil, err
	}
	return s.run(ctx, nil)
}

// A replay: its fixture's directory, and its golden files.
type replayCase struct {
	name, dir, json, pprof string
	// attach: an attach at the defaults, whose report must show the heap
	// walk's objects and samples on stacks from BPF.
	attach bool
}

// attachReplayDir is where the recording of an attach on jdk goes.
func attachReplayDir(jdk string) string { return "testdata/replay-attach-" + jdk }

var replayCases = []replayCase{
	{name: "launch", dir: replayDir, json: replayJSON, pprof: replayPprof},
	attachCase("jdk17"),
	attachCase("jdk25"),
}

// attachCase is the replay of an attach on jdk. Its JSON golden is
// gzipped: the walk's structures make it over a MiB.
func attachCase(jdk string) replayCase {
	d := attachReplayDir(jdk)
	return replayCase{name: "attach-" + jdk, dir: d, json: d + ".json.gz", pprof: d + ".pb.gz", attach: true}
}

// TestReplay runs the recorded profiles of testdata/java/HotArrays.java
// through a session and its join (no BPF, no JVM: each fixture stands
// behind the session's seams) and compares each report, as JSON and as
// pprof, with its golden files; -update rewrites them. The launch one
// has the agent's stacks; the attached ones (JDK 17 and 25) the defaults,
// a heap walk from outside the JVM and stacks from BPF, both read from
// the recorded memory.
func TestReplay(t *testing.T) {
	for _, c := range replayCases {
		t.Run(c.name, func(t *testing.T) { testReplay(t, c) })
	}
}

func testReplay(t *testing.T, c replayCase) {
	rec, err := loadRecording(c.dir)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := replay(rec)
	if err != nil {
		t.Fatal(err)
	}
	if c.attach && (rep.Stats.WalkObjects == 0 || rep.Stats.SamplesBPFStack == 0 || rep.Stats.StructureSamples+rep.Stats.Attributed == 0) {
		t.Errorf("the replayed attach: %d objects walked, %d samples on BPF stacks, %d attributed (notes %q)",
			rep.Stats.WalkObjects, rep.Stats.SamplesBPFStack, rep.Stats.Attributed, rep.Notes)
	}
	var js, pb bytes.Buffer
	if err := report.WriteJSON(&js, rep, 0); err != nil {
		t.Fatal(err)
	}
	if err := pprofile.Write(&pb, pprofile.Options{Time: time.Unix(0, replayStartNs)}, rep); err != nil {
		t.Fatal(err)
	}
	jsGolden, jsText := js.Bytes(), func(b []byte) string { return string(b) }
	if strings.HasSuffix(c.json, ".gz") {
		jsGolden, jsText = gzipped(t, js.Bytes()), gunzipText
	}
	if *update {
		for path, data := range map[string][]byte{c.json: jsGolden, c.pprof: pb.Bytes()} {
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	checkGolden(t, c.json, jsGolden, jsText)
	checkGolden(t, c.pprof, pb.Bytes(), pprofText)
}

// gzipped is b gzipped, the same bytes every time (no name, no time).
func gzipped(t *testing.T, b []byte) []byte {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// gunzipText is gzipped text, or why it is none.
func gunzipText(b []byte) string {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return err.Error()
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		return err.Error()
	}
	return string(out)
}

// checkGolden compares got with the golden file at path, and shows the
// first lines where their text differs.
func checkGolden(t *testing.T, path string, got []byte, text func([]byte) string) {
	t.Helper()
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run TestReplay -update writes it)", err)
	}
	if bytes.Equal(got, want) {
		return
	}
	g, w := strings.Split(text(got), "\n"), strings.Split(text(want), "\n")
	i := 0
	for i < len(g) && i < len(w) && g[i] == w[i] {
		i++
	}
	show := func(ls []string) string {
		var b strings.Builder
		for _, l := range ls[max(0, i-3):min(len(ls), i+4)] {
			b.WriteString(l[:min(len(l), 200)] + "\n")
		}
		return b.String()
	}
	t.Errorf("%s differs (-update rewrites it) from line %d:\ngot:\n%s\nwant:\n%s", path, i+1, show(g), show(w))
}

// pprofText is a pprof profile as pprof's text dump, or why it is none.
func pprofText(b []byte) string {
	p, err := profile.Parse(bytes.NewReader(b))
	if err != nil {
		return err.Error()
	}
	return p.String()
}
