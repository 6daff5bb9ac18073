package profiler

import (
	"math"
	"strings"

	"github.com/djx-bpf/djx-bpf/agent"
	"github.com/djx-bpf/djx-bpf/decode"
	"github.com/djx-bpf/djx-bpf/heap"
	"github.com/djx-bpf/djx-bpf/jvmsym"
	"github.com/djx-bpf/djx-bpf/loader"
	"github.com/djx-bpf/djx-bpf/objindex"
	"github.com/djx-bpf/djx-bpf/report"
)

// maxPending bounds the samples waiting for the agent's watermark; past it
// the oldest are attributed against what is known (a stalled agent must not
// make the loader grow without bound).
const maxPending = 1 << 20

// pending is a decoded sample waiting until the allocation stream has caught
// up with its timestamp.
type pending struct {
	time uint64
	addr uint64
}

// site is one (allocation path, type) pair.
type site struct {
	typeSig    string
	frames     []agent.Frame
	objects    uint64
	bytes      uint64
	estObjects float64
	estBytes   float64
	samples    uint64
	estSamples float64
}

// object is a tracked allocation; its index in jvm.objs is its objindex.ID.
type object struct {
	site   int32
	weight float32 // 1/p: the heap sampler caught it with probability p
}

// jvm is the joined state of one profiled JVM. It is owned by one goroutine.
type jvm struct {
	pid       int
	interval  uint64 // heap sampling interval now in force
	initial   uint64 // ... when the agent started
	raisedAt  uint64 // when the agent first raised it to stay within budget
	connected bool
	helloTime uint64
	watermark uint64
	heap      heap.Info
	heapKnown bool

	idx     *objindex.Index
	syms    *jvmsym.Table
	objs    []object
	free    []objindex.ID
	sites   []*site
	siteIdx map[string]int32
	keyBuf  []byte

	dec     decode.Decoder
	regs    decode.Regs
	queue   []pending
	head    int
	stats   report.Stats
	lastAgt agent.Stats
	vmName  string
}

func newJVM(pid int) *jvm {
	j := &jvm{pid: pid, idx: objindex.New(), syms: jvmsym.NewTable(), siteIdx: make(map[string]int32)}
	j.idx.OnEvict(func(o objindex.Object) { j.free = append(j.free, o.ID) })
	return j
}

// captureWeight is 1/p for an object of size bytes under a heap sampling
// interval: the sampler picks points a geometric (mean interval) number of
// bytes apart, so p = 1 - exp(-size/interval).
func captureWeight(size, interval uint64) float64 {
	if interval == 0 {
		return 1
	}
	p := -math.Expm1(-float64(size) / float64(interval))
	if p <= 0 {
		return 1
	}
	return 1 / p
}

// onBatch applies one batch of the agent's stream.
func (j *jvm) onBatch(b *agent.Batch) {
	for _, r := range b.Records {
		switch r := r.(type) {
		case *agent.Hello:
			j.connected = true
			j.helloTime = r.Monotonic
			j.interval, j.initial = r.Interval, r.Interval
			j.vmName = strings.TrimSpace(r.VMName + " " + r.VMVersion)
		case *agent.Method:
			lines := make([]jvmsym.LineEntry, len(r.Lines))
			for i, l := range r.Lines {
				lines[i] = jvmsym.LineEntry{Start: l.Start, Line: l.Line}
			}
			j.syms.Add(r.ID, jvmsym.Method{ClassSig: r.ClassSig, Name: r.Name, Sig: r.Sig, SourceFile: r.SourceFile, Lines: lines})
		case *agent.Alloc:
			j.onAlloc(r)
		case *agent.Interval:
			if j.raisedAt == 0 {
				j.raisedAt = r.Time
			}
			j.interval = r.Interval
		case *agent.Stats:
			j.lastAgt = *r
		case *agent.ErrorRec:
			j.stats.AgentErrors++
		}
	}
	if b.Watermark > j.watermark {
		j.watermark = b.Watermark
	}
	j.drain(false)
}

func (j *jvm) siteOf(a *agent.Alloc) int32 {
	k := append(j.keyBuf[:0], a.TypeSig...)
	k = append(k, 0)
	for _, f := range a.Frames {
		for s := 0; s < 64; s += 8 {
			k = append(k, byte(f.Method>>s))
		}
		for s := 0; s < 64; s += 8 {
			k = append(k, byte(uint64(f.BCI)>>s))
		}
	}
	j.keyBuf = k
	if i, ok := j.siteIdx[string(k)]; ok {
		return i
	}
	i := int32(len(j.sites))
	j.sites = append(j.sites, &site{typeSig: a.TypeSig, frames: append([]agent.Frame(nil), a.Frames...)})
	j.siteIdx[string(k)] = i
	return i
}

func (j *jvm) onAlloc(a *agent.Alloc) {
	si := j.siteOf(a)
	s := j.sites[si]
	w := captureWeight(a.Size, j.interval)
	s.objects++
	s.bytes += a.Size
	s.estObjects += w
	s.estBytes += w * float64(a.Size)
	j.stats.AllocsTracked++
	var id objindex.ID
	if n := len(j.free); n > 0 {
		id = j.free[n-1]
		j.free = j.free[:n-1]
		j.objs[id] = object{site: si, weight: float32(w)}
	} else {
		id = objindex.ID(len(j.objs))
		j.objs = append(j.objs, object{site: si, weight: float32(w)})
	}
	j.idx.Insert(a.Addr, a.Size, id)
}

// onSample decodes a sample and queues it for attribution.
func (j *jvm) onSample(s *loader.Sample, src loader.Source) {
	if !j.connected || s.Time < j.helloTime {
		// No allocation is known before the agent's first record.
		j.stats.Unjoined++
		return
	}
	j.stats.Samples++
	addr := s.Addr
	if src == loader.Decode {
		j.regs = decode.RegsFromPtRegs(&s.Regs)
		var before, at []byte
		if s.Flags&loader.FlagBeforeOK != 0 {
			before = s.Before[:]
		}
		if s.Flags&loader.FlagAtOK != 0 {
			at = s.At[:]
		}
		res := j.dec.Decode(before, at, &j.regs)
		switch res.Method {
		case decode.AtIP:
			j.stats.DecodedAtIP++
		case decode.LookBack:
			j.stats.DecodedLookBack++
		default:
			return
		}
		addr = res.Addr
	}
	if addr == 0 {
		return
	}
	j.stats.WithAddress++
	if j.heapKnown && j.heap.Contains(addr) {
		j.stats.InHeap++
	}
	if len(j.queue)-j.head >= maxPending {
		j.attribute(j.queue[j.head])
		j.head++
	}
	j.queue = append(j.queue, pending{time: s.Time, addr: addr})
}

// drain attributes queued samples the allocation stream has caught up with
// (all of them when final).
func (j *jvm) drain(final bool) {
	for j.head < len(j.queue) && (final || j.queue[j.head].time <= j.watermark) {
		j.attribute(j.queue[j.head])
		j.head++
	}
	if j.head > 4096 && j.head*2 > len(j.queue) {
		n := copy(j.queue, j.queue[j.head:])
		j.queue = j.queue[:n]
		j.head = 0
	}
}

func (j *jvm) attribute(p pending) {
	o, ok := j.idx.Lookup(p.addr)
	if !ok {
		return
	}
	obj := j.objs[o.ID]
	s := j.sites[obj.site]
	s.samples++
	s.estSamples += float64(obj.weight)
	j.stats.Attributed++
}

// report resolves names and builds the object table.
func (j *jvm) report() []report.Object {
	out := make([]report.Object, 0, len(j.sites))
	byName := make(map[string]int)
	for _, s := range j.sites {
		path := make([]string, len(s.frames))
		for i, f := range s.frames {
			path[i] = j.syms.Resolve(f.Method, f.BCI).String()
		}
		siteName := "[no Java frames]"
		if len(path) > 0 {
			siteName = path[0]
		}
		typ := jvmsym.TypeName(s.typeSig)
		// Different bcis on one line name the same site: merge them.
		key := typ + "\x00" + strings.Join(path, "\x00")
		if i, ok := byName[key]; ok {
			o := &out[i]
			o.Objects += s.objects
			o.Bytes += s.bytes
			o.EstObjects += s.estObjects
			o.EstBytes += s.estBytes
			o.Samples += s.samples
			o.EstSamples += s.estSamples
			continue
		}
		byName[key] = len(out)
		out = append(out, report.Object{
			Type: typ, Site: siteName, AllocPath: path,
			Objects: s.objects, Bytes: s.bytes, EstObjects: s.estObjects, EstBytes: s.estBytes,
			Samples: s.samples, EstSamples: s.estSamples,
		})
	}
	return out
}
