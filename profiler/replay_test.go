package profiler

import (
	"bufio"
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/djx-bpf/djx-bpf/agentwire"
	"github.com/djx-bpf/djx-bpf/join"
	"github.com/djx-bpf/djx-bpf/jvmsym"
	"github.com/djx-bpf/djx-bpf/loader"
	"github.com/djx-bpf/djx-bpf/pprofile"
	"github.com/djx-bpf/djx-bpf/region"
	"github.com/djx-bpf/djx-bpf/report"
	"github.com/djx-bpf/djx-bpf/sample"
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

// fixture is session.json.
type fixture struct {
	Comment string         `json:"comment"`
	PID     int            `json:"pid"`
	NSPID   int            `json:"ns_pid"`
	Mode    string         `json:"mode"`
	Event   string         `json:"event"`
	Options fixtureOptions `json:"options"`
	// Duration is the profile's wall time; Stopped numbers the first
	// batch read after sampling stopped.
	Duration time.Duration `json:"duration_ns"`
	Stopped  int           `json:"stopped"`
	Events   int           `json:"events"`
	// Mono are the monotonic clock's readings, in order.
	Mono     []uint64          `json:"mono"`
	RunTime  []runTime         `json:"bpf_run_time"`
	Counters loader.Counters   `json:"counters"`
	Errors   map[string]string `json:"sampler_errors,omitempty"`
	// Jcmd holds the diagnostic commands' replies; VM.info's text, which
	// only feeds the region namer, is left out: Regions holds its answers.
	Jcmd       map[string]reply                      `json:"jcmd"`
	PerfMap    reply                                 `json:"perf_map"`
	RegionsErr string                                `json:"regions_error,omitempty"`
	Native     []tapeEntry[uint64, nativeAnswer]     `json:"native"`
	Code       []tapeEntry[codeKey, codeAnswer]      `json:"code,omitempty"`
	Regions    []tapeEntry[regionKey, region.Region] `json:"regions"`
	HostTIDs   []tapeEntry[uint32, tidAnswer]        `json:"host_tids,omitempty"`
	Threads    []tapeEntry[uint32, bool]             `json:"threads,omitempty"`
	// Live is the recorded run's own report, in brief.
	Live map[string]float64 `json:"live_report"`
}

// fixtureOptions are the recorded run's settings that the session reads.
type fixtureOptions struct {
	MinSize       uint64        `json:"min_size"`
	Interval      uint64        `json:"interval"`
	Freq          int           `json:"freq"`
	AllocBudget   uint64        `json:"alloc_budget"`
	Relocation    string        `json:"relocation"`
	StackSignal   int           `json:"stack_signal"`
	StackInterval time.Duration `json:"stack_interval_ns"`
	Census        string        `json:"census"`
	NoDataTypes   bool          `json:"no_data_types"`
}

func optionsOf(o Options) fixtureOptions {
	return fixtureOptions{o.MinSize, o.Interval, o.Freq, o.AllocBudget, o.Relocation, o.StackSignal, o.StackInterval, o.Census, o.NoDataTypes}
}

func (f fixtureOptions) options() Options {
	o := Options{MinSize: f.MinSize, Interval: f.Interval, Freq: f.Freq, AllocBudget: f.AllocBudget, Relocation: f.Relocation,
		StackSignal: f.StackSignal, StackInterval: f.StackInterval, Census: f.Census, NoDataTypes: f.NoDataTypes}
	o.fill()
	return o
}

type runTime struct {
	D  time.Duration `json:"ns"`
	OK bool          `json:"ok"`
}

// reply is a text or the error that came instead.
type reply struct {
	Out string `json:"out,omitempty"`
	Err string `json:"err,omitempty"`
}

func (r reply) result() (string, error) {
	if r.Err != "" {
		return r.Out, errors.New(r.Err)
	}
	return r.Out, nil
}

func replyOf(out string, err error) reply {
	if err != nil {
		return reply{Out: out, Err: err.Error()}
	}
	return reply{Out: out}
}

type nativeAnswer struct {
	Frame jvmsym.NativeFrame `json:"frame"`
	OK    bool               `json:"ok"`
}

type codeKey struct {
	Off int64 `json:"off"`
	Len int   `json:"len"`
}

type codeAnswer struct {
	Data []byte `json:"data"`
	N    int    `json:"n"`
	Err  string `json:"err,omitempty"`
}

type regionKey struct {
	Addr uint64 `json:"addr"`
	TID  uint32 `json:"tid"`
	RSP  uint64 `json:"rsp"`
}

type tidAnswer struct {
	Host uint32 `json:"host"`
	OK   bool   `json:"ok"`
}

// tape holds the answers a lookup gave, per key and in order: a replay
// gives them back in the same order, and the last one again after that.
type tape[K comparable, V any] struct {
	mu   sync.Mutex
	m    map[K][]V
	next map[K]int
}

type tapeEntry[K comparable, V any] struct {
	Key     K   `json:"key"`
	Answers []V `json:"answers"`
}

func (t *tape[K, V]) record(k K, v V) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = make(map[K][]V)
	}
	t.m[k] = append(t.m[k], v)
}

func (t *tape[K, V]) play(k K) (V, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	as := t.m[k]
	if len(as) == 0 {
		var zero V
		return zero, false
	}
	if t.next == nil {
		t.next = make(map[K]int)
	}
	i := min(t.next[k], len(as)-1)
	t.next[k] = i + 1
	return as[i], true
}

// entries are the tape's answers, by key in order.
func (t *tape[K, V]) entries(compare func(a, b K) int) []tapeEntry[K, V] {
	t.mu.Lock()
	defer t.mu.Unlock()
	var es []tapeEntry[K, V]
	for k, as := range t.m {
		es = append(es, tapeEntry[K, V]{k, as})
	}
	slices.SortFunc(es, func(a, b tapeEntry[K, V]) int { return compare(a.Key, b.Key) })
	return es
}

func tapeOf[K comparable, V any](es []tapeEntry[K, V]) *tape[K, V] {
	t := &tape[K, V]{}
	for _, e := range es {
		for _, a := range e.Answers {
			t.record(e.Key, a)
		}
	}
	return t
}

func compareRegionKeys(a, b regionKey) int {
	return cmp.Or(cmp.Compare(a.Addr, b.Addr), cmp.Compare(a.TID, b.TID), cmp.Compare(a.RSP, b.RSP))
}

func compareCodeKeys(a, b codeKey) int {
	return cmp.Or(cmp.Compare(a.Off, b.Off), cmp.Compare(a.Len, b.Len))
}

// sampleEvent is one batch the sampler's reader read, numbered.
type sampleEvent struct {
	seq      int
	complete uint64
	samples  []sample.Sample
}

// agentEvent is one batch of the agent's stream as it came, numbered.
type agentEvent struct {
	seq   int
	batch []byte
}

// writeSamples writes the sample batches: per batch u32 seq, u64
// complete, u32 count, then the samples as sample.Sample lays them out,
// little-endian; gzipped.
func writeSamples(path string, evs []sampleEvent) error {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	for _, e := range evs {
		hdr := binary.LittleEndian.AppendUint32(nil, uint32(e.seq))
		hdr = binary.LittleEndian.AppendUint64(hdr, e.complete)
		hdr = binary.LittleEndian.AppendUint32(hdr, uint32(len(e.samples)))
		zw.Write(hdr)
		if err := binary.Write(zw, binary.LittleEndian, e.samples); err != nil {
			return err
		}
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

func readSamples(path string) ([]sampleEvent, error) {
	r, err := openGzip(path)
	if err != nil {
		return nil, err
	}
	var evs []sampleEvent
	for {
		var hdr [16]byte
		if _, err := io.ReadFull(r, hdr[:]); err == io.EOF {
			return evs, nil
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		e := sampleEvent{seq: int(binary.LittleEndian.Uint32(hdr[0:])), complete: binary.LittleEndian.Uint64(hdr[4:])}
		e.samples = make([]sample.Sample, binary.LittleEndian.Uint32(hdr[12:]))
		if err := binary.Read(r, binary.LittleEndian, e.samples); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		evs = append(evs, e)
	}
}

// writeAgent writes the agent's batches: per batch u32 seq, then the
// batch as the agent sent it (agentwire's header says its length);
// gzipped.
func writeAgent(path string, evs []agentEvent) error {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	for _, e := range evs {
		zw.Write(binary.LittleEndian.AppendUint32(nil, uint32(e.seq)))
		zw.Write(e.batch)
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

func readAgentEvents(path string) ([]agentEvent, error) {
	r, err := openGzip(path)
	if err != nil {
		return nil, err
	}
	var evs []agentEvent
	for {
		var hdr [4 + agentwire.HeaderLen]byte
		if _, err := io.ReadFull(r, hdr[:]); err == io.EOF {
			return evs, nil
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		plen := binary.LittleEndian.Uint32(hdr[4+8:])
		b := make([]byte, agentwire.HeaderLen+int(plen))
		copy(b, hdr[4:])
		if _, err := io.ReadFull(r, b[agentwire.HeaderLen:]); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		evs = append(evs, agentEvent{seq: int(binary.LittleEndian.Uint32(hdr[:])), batch: b})
	}
}

func openGzip(path string) (io.Reader, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return bufio.NewReader(zr), nil
}

// recording is a fixture and its streams.
type recording struct {
	fx      fixture
	samples []sampleEvent
	agent   []agentEvent
}

func loadRecording(dir string) (*recording, error) {
	data, err := os.ReadFile(filepath.Join(dir, fixtureFile))
	if err != nil {
		return nil, err
	}
	rec := &recording{}
	if err := json.Unmarshal(data, &rec.fx); err != nil {
		return nil, fmt.Errorf("%s: %w", fixtureFile, err)
	}
	if rec.samples, err = readSamples(filepath.Join(dir, samplesFile)); err != nil {
		return nil, err
	}
	if rec.agent, err = readAgentEvents(filepath.Join(dir, agentFile)); err != nil {
		return nil, err
	}
	return rec, nil
}

func (rec *recording) save(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(&rec.fx, "", " ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, fixtureFile), append(data, '\n'), 0o644); err != nil {
		return err
	}
	if err := writeSamples(filepath.Join(dir, samplesFile), rec.samples); err != nil {
		return err
	}
	return writeAgent(filepath.Join(dir, agentFile), rec.agent)
}

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
func (r *replaySampler) Enable() error                  { return nil }
func (r *replaySampler) Disable()                       {}
func (r *replaySampler) Flush() error                   { r.ls.release(sampleStream); return nil }
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

// replayProcess answers what the join looked up in the recorded process.
type replayProcess struct {
	fx      *fixture
	syms    *tape[uint64, nativeAnswer]
	code    *tape[codeKey, codeAnswer]
	regs    *tape[regionKey, region.Region]
	tids    *tape[uint32, tidAnswer]
	threads *tape[uint32, bool]
}

func newReplayProcess(fx *fixture) *replayProcess {
	return &replayProcess{fx: fx, syms: tapeOf(fx.Native), code: tapeOf(fx.Code), regs: tapeOf(fx.Regions),
		tids: tapeOf(fx.HostTIDs), threads: tapeOf(fx.Threads)}
}

func (p *replayProcess) native() join.NativeSymbols { return replayNative{p.syms} }
func (p *replayProcess) codeMem() io.ReaderAt       { return replayMem{p.code} }

func (p *replayProcess) perfMap(int) (*jvmsym.PerfMap, error) {
	text, err := p.fx.PerfMap.result()
	if err != nil {
		return nil, err
	}
	return jvmsym.ParsePerfMap(strings.NewReader(text))
}

func (p *replayProcess) regions(region.JVMText) (join.Regions, error) {
	if p.fx.RegionsErr != "" {
		return nil, errors.New(p.fx.RegionsErr)
	}
	return replayRegions{p.regs}, nil
}

func (p *replayProcess) hostTID() func(uint32) (uint32, bool) {
	return func(tid uint32) (uint32, bool) {
		a, _ := p.tids.play(tid)
		return a.Host, a.OK
	}
}

func (p *replayProcess) hasThread(tid uint32) bool {
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

// replay runs a session on a recording and returns its report.
func replay(rec *recording) (*report.Report, error) {
	fx := &rec.fx
	src, _, err := chooseSource(fx.Event, nil)
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
	vm := &hotspot{pid: fx.PID, ns: fx.NSPID}
	if fx.Jcmd != nil {
		vm.l = replayListener(fx.Jcmd) // nil: the run had no attach listener
	}
	s := &session{opts: fx.Options.options(), mode: fx.Mode, src: src, pid: fx.PID, sampler: smp, conn: conn,
		vm: vm, proc: newReplayProcess(fx), clk: clk, lockstep: true}
	defer s.close()
	return s.run(ctx, nil)
}

// TestReplay runs a recorded profile of testdata/java/HotArrays.java
// through a session and its join (no BPF, no JVM: the fixture stands
// behind the session's seams) and compares the report, as JSON and as
// pprof, with the golden files; -update rewrites them.
func TestReplay(t *testing.T) {
	rec, err := loadRecording(replayDir)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := replay(rec)
	if err != nil {
		t.Fatal(err)
	}
	var js, pb bytes.Buffer
	if err := report.WriteJSON(&js, rep, 0); err != nil {
		t.Fatal(err)
	}
	if err := pprofile.Write(&pb, pprofile.Options{Time: time.Unix(0, replayStartNs)}, rep); err != nil {
		t.Fatal(err)
	}
	if *update {
		for path, data := range map[string][]byte{replayJSON: js.Bytes(), replayPprof: pb.Bytes()} {
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	checkGolden(t, replayJSON, js.Bytes(), func(b []byte) string { return string(b) })
	checkGolden(t, replayPprof, pb.Bytes(), pprofText)
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
