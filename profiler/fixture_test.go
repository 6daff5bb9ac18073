package profiler

import (
	"bufio"
	"bytes"
	"cmp"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/djx-bpf/djx-bpf/jvmsym"
	"github.com/djx-bpf/djx-bpf/loader"
	"github.com/djx-bpf/djx-bpf/naming/region"
	"github.com/djx-bpf/djx-bpf/sources/agentwire"
	"github.com/djx-bpf/djx-bpf/sources/sample"
)

// The replay fixture's format: session.json, the sample batches and the
// agent's batches, as TestRecord writes them and TestReplay reads them.

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
	// What the stacks from BPF and the heap walk read of the process
	// beside its memory (memory.bin.gz): where the stacks came from at
	// the start, the vmStructs symbols, the continuations, threads' names,
	// and the reads that came back short.
	Stacks       *stacksChoice              `json:"stacks,omitempty"`
	VMStructs    *vmSymbols                 `json:"vmstructs,omitempty"`
	Continuation *contAnswer                `json:"continuation,omitempty"`
	Comms        []tapeEntry[uint32, reply] `json:"comms,omitempty"`
	MemoryBytes  int                        `json:"memory_bytes,omitempty"`
	FailedReads  int                        `json:"failed_reads,omitempty"`
	Failures     []failure                  `json:"failures,omitempty"`
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
		if _, err := zw.Write(hdr); err != nil {
			return err
		}
		if err := binary.Write(zw, binary.LittleEndian, toWire(e.samples)); err != nil {
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
		w := make([]wireSample, binary.LittleEndian.Uint32(hdr[12:]))
		if err := binary.Read(r, binary.LittleEndian, w); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		e.samples = fromWire(w)
		evs = append(evs, e)
	}
}

// wireSample is a sample as recordings hold it: sample.Sample's
// fixed-size fields, in its order (a BPF-unwound stack is not recorded),
// with the 16 bytes before ip that samples held when the recordings were
// made.
type wireSample struct {
	Time             uint64
	PID, TID         uint32
	Addr, Period     uint64
	Regs             [21]uint64
	Before, At       [16]byte
	Flags, CPU       uint32
	DataSrc, Weight  uint64
	HdrOK, HdrNarrow uint16
	Hdr              [15][2]uint64
}

func toWire(ss []sample.Sample) []wireSample {
	w := make([]wireSample, len(ss))
	for i, s := range ss {
		w[i] = wireSample{Time: s.Time, Addr: s.Addr, Period: s.Period, PID: s.PID, TID: s.TID, Regs: s.Regs, Before: [16]byte(s.Before[sample.BeforeBytes-16:]), At: s.At,
			Flags: s.Flags, CPU: s.CPU, DataSrc: s.DataSrc, Weight: s.Weight, HdrOK: s.HdrOK, HdrNarrow: s.HdrNarrow, Hdr: s.Hdr}
	}
	return w
}

func fromWire(w []wireSample) []sample.Sample {
	ss := make([]sample.Sample, len(w))
	for i, s := range w {
		ss[i] = sample.Sample{Time: s.Time, Addr: s.Addr, Period: s.Period, PID: s.PID, TID: s.TID, Regs: s.Regs, At: s.At,
			Flags: s.Flags, CPU: s.CPU, DataSrc: s.DataSrc, Weight: s.Weight, HdrOK: s.HdrOK, HdrNarrow: s.HdrNarrow, Hdr: s.Hdr}
		copy(ss[i].Before[sample.BeforeBytes-16:], s.Before[:])
		if s.Flags&sample.FlagBeforeOK != 0 {
			ss[i].Flags |= sample.FlagBeforeShort
		}
	}
	return ss
}

// writeAgent writes the agent's batches: per batch u32 seq, then the
// batch as the agent sent it (agentwire's header says its length);
// gzipped.
func writeAgent(path string, evs []agentEvent) error {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	for _, e := range evs {
		if _, err := zw.Write(binary.LittleEndian.AppendUint32(nil, uint32(e.seq))); err != nil {
			return err
		}
		if _, err := zw.Write(e.batch); err != nil {
			return err
		}
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

// recording is a fixture, its streams and the target's memory (nil:
// none recorded).
type recording struct {
	fx      fixture
	samples []sampleEvent
	agent   []agentEvent
	img     *image
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
	if err := readStacks(filepath.Join(dir, stacksFile), rec.samples); err != nil {
		return nil, err
	}
	if img, err := readImage(filepath.Join(dir, memoryFile)); err == nil {
		rec.img = img
	} else if !errors.Is(err, os.ErrNotExist) {
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
	for _, f := range []string{stacksFile, memoryFile} {
		// Only a recording that has them writes them anew.
		if err := os.Remove(filepath.Join(dir, f)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	if err := writeStacks(filepath.Join(dir, stacksFile), rec.samples); err != nil {
		return err
	}
	if rec.img != nil && rec.img.bytes() > 0 {
		if err := writeImage(filepath.Join(dir, memoryFile), rec.img); err != nil {
			return err
		}
	}
	return writeAgent(filepath.Join(dir, agentFile), rec.agent)
}
