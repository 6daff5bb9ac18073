package bpfstack

import (
	"strings"
	"testing"
	"time"

	"github.com/djx-bpf/djx-bpf/hotspot/vmcode"
	"github.com/djx-bpf/djx-bpf/jvmsym"
	"github.com/djx-bpf/djx-bpf/loader"
	"github.com/djx-bpf/djx-bpf/sources/sample"
)

// slowCode is a code cache where every pc is a frame of its own nmethod
// (blob = pc &^ 0xfff, compile id 1) with an inlining chain of depth
// frames named name, and every query takes cost on the clock.
type slowCode struct {
	clock   *time.Time
	cost    time.Duration
	depth   int
	name    string
	queries int
}

func (c *slowCode) Frames(pc uint64) ([]vmcode.Frame, vmcode.Blob, error) {
	c.queries++
	*c.clock = c.clock.Add(c.cost)
	fs := make([]vmcode.Frame, c.depth)
	for i := range fs {
		fs[i] = vmcode.Frame{Method: pc, Class: "C", Name: c.name, Line: i + 1}
	}
	start := pc &^ 0xfff
	return fs, vmcode.Blob{Start: start, End: start + 0x1000, CodeBegin: start, CodeEnd: start + 0x1000, Kind: vmcode.KindNMethod, CompileID: 1}, nil
}
func (c *slowCode) Blob(pc uint64) (vmcode.Blob, error) { _, b, err := c.Frames(pc); return b, err }
func (c *slowCode) InterpretedFrame(method, bcp uint64) (vmcode.Frame, error) {
	fs, _, _ := c.Frames(method)
	return fs[0], nil
}
func (c *slowCode) Heaps() ([]vmcode.Heap, error) {
	return []vmcode.Heap{{Start: 0x10000, End: 1 << 40, Low: 0x10000, High: 1 << 40}}, nil
}
func (c *slowCode) Offsets() vmcode.Offsets { return vmcode.Offsets{} }

// stackOf is a stack of n compiled frames, each in its own nmethod.
func stackOf(n int, id uint64) *sample.Stack {
	st := &sample.Stack{End: loader.UnwindEntry}
	for i := range n {
		pc := uint64(0x100000+i*0x1000) + 0x10
		st.Frames = append(st.Frames, sample.RawFrame{Blob: pc&^0xfff | loader.FrameSized, A: pc, B: id})
	}
	return st
}

func slowResolver(cost time.Duration, depth int) (*Resolver, *slowCode, *time.Time) {
	clock := time.Unix(1000, 0)
	c := &slowCode{clock: &clock, cost: cost, depth: depth, name: "m"}
	r := New(c)
	r.budget.now = func() time.Time { return clock }
	return r, c, &clock
}

// One record of 1024 frames whose naming is slow (forged memory, huge
// names) makes root spend at most RecordBudget on it, not 1024 queries:
// the path ends at the budget, and the frames left are counted. The JVM's
// budget per second bounds what many such records take.
func TestResolveTimeBudget(t *testing.T) {
	r, c, clock := slowResolver(10*time.Millisecond, 1)
	p := r.Resolve(stackOf(1024, 0), Sample{IP: 1, Calls: true})
	want := int(RecordBudget / (10 * time.Millisecond))
	if c.queries > want+1 || len(p.Frames) > want+1 || len(p.Frames) == 0 {
		t.Errorf("one record: %d queries, %d frames named; want at most %d", c.queries, len(p.Frames), want+1)
	}
	if p.Missing != budgetEnd || r.Stats().OverBudget != uint64(1024-len(p.Frames)) {
		t.Errorf("missing %q, over budget %d, want %q and %d", p.Missing, r.Stats().OverBudget, budgetEnd, 1024-len(p.Frames))
	}
	// Records in a row, as fast as they come: the burst, then nothing
	// until the clock moves.
	c.queries = 0
	for range 100 {
		r.Resolve(stackOf(1024, 0), Sample{IP: 1, Calls: true})
	}
	// The clock runs while they do: a fifth of their time comes back.
	spent := time.Duration(c.queries) * c.cost
	if spent > (BurstBudget+RecordBudget)*5/4 {
		t.Errorf("100 records took %v of queries, burst %v", spent, BurstBudget)
	}
	if p := r.Resolve(stackOf(4, 0), Sample{IP: 1}); len(p.Frames) != 0 || p.Missing != budgetEnd {
		t.Errorf("with the JVM's budget spent: %d frames, missing %q", len(p.Frames), p.Missing)
	}
	// A second later, SecondBudget more.
	*clock = clock.Add(time.Second)
	c.queries = 0
	for range 100 {
		r.Resolve(stackOf(1024, 0), Sample{IP: 1, Calls: true})
	}
	if spent := time.Duration(c.queries) * c.cost; spent > (SecondBudget+RecordBudget)*5/4 || spent == 0 {
		t.Errorf("a second later: %v of queries, want up to %v", spent, SecondBudget)
	}
	// Code maps share their resolver's budget.
	if _, ok := r.CodeMap().Lookup(0x200010); ok {
		t.Error("a code map lookup past the resolver's budget")
	}
}

// An inlining chain is cut at MaxInlined frames and a path at MaxFrames,
// each saying so.
func TestResolveDepthCaps(t *testing.T) {
	r, _, _ := slowResolver(0, vmcode.MaxInlineDepth)
	p := r.Resolve(stackOf(3, 0), Sample{IP: 1})
	if len(p.Frames) != MaxInlined || !strings.Contains(p.Missing, "inlined deeper than") {
		t.Errorf("a chain of %d: %d frames, missing %q", vmcode.MaxInlineDepth, len(p.Frames), p.Missing)
	}
	r, _, _ = slowResolver(0, 3)
	p = r.Resolve(stackOf(300, 0), Sample{IP: 1})
	if len(p.Frames) != MaxFrames || !strings.Contains(p.Missing, "deeper than") || r.Stats().Cut != 1 {
		t.Errorf("900 frames: %d kept, missing %q, stats %+v", len(p.Frames), p.Missing, r.Stats())
	}
	if p := r.Resolve(stackOf(100, 0), Sample{IP: 1}); len(p.Frames) != 300 || p.Missing != "" {
		t.Errorf("300 frames: %d kept, missing %q", len(p.Frames), p.Missing)
	}
	m := NewCodeMap(&slowCode{clock: new(time.Time), depth: vmcode.MaxInlineDepth, name: "m"})
	hit, ok := m.Lookup(0x200010)
	if !ok || len(hit.Named) != MaxInlined+1 || hit.Named[MaxInlined] != inlinedCut {
		t.Errorf("code map, a chain of %d: %d names, last %q", vmcode.MaxInlineDepth, len(hit.Named), hit.Named[len(hit.Named)-1])
	}
}

// The caches of named frames hold a bounded number of bytes whatever the
// names' length, and the code map interns names it is given an interner
// for: a name repeated in every frame is kept once.
func TestNamedCachesBytes(t *testing.T) {
	r, c, _ := slowResolver(0, 8)
	c.name = strings.Repeat("n", jvmsym.MaxName)
	for i := range 64 {
		r.Resolve(stackOf(1024, uint64(i+1)), Sample{IP: 1})
	}
	held := 0
	for _, fs := range r.named {
		for _, f := range fs {
			held += 96 + len(f.Class) + len(f.Name)
		}
	}
	if held > maxNamedBytes {
		t.Errorf("the resolver's cache holds %d MiB of frames, budget %d MiB", held>>20, maxNamedBytes>>20)
	}
	m := NewCodeMap(c)
	held = 0
	for pc := uint64(0x100010); pc < 0x100010+40000*0x1000; pc += 0x1000 {
		m.Lookup(pc)
	}
	for _, h := range m.named {
		for _, n := range h.Named {
			held += len(n)
		}
	}
	if held > maxMapHitBytes {
		t.Errorf("the code map's cache holds %d MiB of names, budget %d MiB", held>>20, maxMapHitBytes>>20)
	}
	names := jvmsym.NewNames(1 << 20)
	c.name = "m"
	m = NewCodeMap(c)
	m.UseNames(names)
	for pc := uint64(0x100010); pc < 0x100010+100*0x1000; pc += 0x1000 {
		m.Lookup(pc)
	}
	if names.Len() != 1+8 { // NamesFull and C.m:1 to :8
		t.Errorf("%d names interned for 100 lookups of the same 8 frames", names.Len())
	}
}
