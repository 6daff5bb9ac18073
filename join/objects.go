package join

import (
	"math"

	"github.com/djx-bpf/djx-bpf/objindex"
	"github.com/djx-bpf/djx-bpf/report"
	"github.com/djx-bpf/djx-bpf/sources/agentwire"
)

// objectTable holds the tracked objects, indexed by address, and the
// sites they were allocated at (or, for census objects, held by).
type objectTable struct {
	idx     *objindex.Index
	objs    []object // by objindex.ID
	free    []objindex.ID
	sites   []*site
	siteIdx map[string]int32
	tags    map[uint64]objindex.ID // agent tag -> live tracked object
	keyBuf  []byte
	chunks  map[uint64]struct{} // 1 GiB ranges that held tracked objects (caps.go)
}

// object is a tracked allocation; its index in objectTable.objs is its
// objindex.ID.
type object struct {
	site   int32
	weight float32 // 1/p: the heap sampler caught it with probability p
	start  uint64  // current address (kept up to date through moves)
	size   uint64
	tag    uint64 // the agent's tag, 0 if none
}

// site is one (allocation path, type) pair, or for census objects one
// (holder chain, type) pair.
type site struct {
	typeSig   string
	frames    []agentwire.Frame
	names     []string             // the frames named already (an ALLOC_RAW's), instead of frames
	census    agentwire.CensusKind // 0: sampled allocations
	holder    uint32               // census: the holder chain (agentwire.CensusPath ID)
	structure bool                 // a heap walk's data structure: objects counted, not tracked
	offHeap   bool                 // the off-heap memory of a walk's direct buffers and segments
	file      string               // offHeap: the file a mapped buffer maps, from the regions
	// What the last heap walk says of its holder chain and type: the
	// other roots that reach it, the bytes it retains.
	otherRoots int
	retained   uint64
	objects    uint64
	bytes      uint64
	estObjects float64
	estBytes   float64
	samples    uint64
	estSamples float64
	accesses   accessSet
	fields     map[string]uint64 // instance objects: samples by field
	mem        *report.MemMetrics
	numa       *report.NUMAMetrics
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

func (j *JVM) siteOf(a *agentwire.Alloc) int32 {
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
	return j.internSite(k, 0, func() *site {
		return &site{typeSig: a.TypeSig, frames: append([]agentwire.Frame(nil), a.Frames...)}
	})
}

// internSite returns the index of the site keyed k, made by mk if new,
// whose named frames print names bytes; sitePastCount or sitePastBytes
// past a cap (caps.go).
func (j *JVM) internSite(k []byte, names int, mk func() *site) int32 {
	j.keyBuf = k
	if i, ok := j.siteIdx[string(k)]; ok {
		return i
	}
	if len(j.sites) >= maxSites {
		return sitePastCount
	}
	// The key and the site's own copies of the type and frames.
	n := siteOverhead + len(k) + len(k) + names
	if j.siteBytes+n > maxSiteBytes {
		return sitePastBytes
	}
	j.siteBytes += n
	i := int32(len(j.sites))
	j.sites = append(j.sites, mk())
	j.siteIdx[string(k)] = i
	return i
}

// siteOverhead estimates a site's struct, pointer and index entry.
const siteOverhead = 256

// rawSiteOf is the site of an allocation whose stack came named.
func (j *JVM) rawSiteOf(a *rawAlloc) int32 {
	k := append(j.keyBuf[:0], 1) // apart from frame keys, whose type follows
	k = append(k, a.rec.TypeSig...)
	k = append(k, 0)
	names := 0
	for _, id := range a.ids {
		k = append(k, byte(id), byte(id>>8), byte(id>>16), byte(id>>24))
		names += 16 + len(j.names.Name(id))
	}
	return j.internSite(k, names, func() *site {
		s := &site{typeSig: a.rec.TypeSig, names: make([]string, len(a.ids))}
		for i, id := range a.ids {
			s.names[i] = j.names.Name(id)
		}
		return s
	})
}

func (j *JVM) onRawAlloc(a *rawAlloc) {
	j.trackAlloc(j.rawSiteOf(a), a.rec.Addr, a.rec.Size, a.rec.Tag)
}

func (j *JVM) onAlloc(a *agentwire.Alloc) {
	j.trackAlloc(j.siteOf(a), a.Addr, a.Size, a.Tag)
}

// trackAlloc tracks a sampled allocation of site si, weighted by its
// chance of capture.
func (j *JVM) trackAlloc(si int32, addr, size, tag uint64) {
	if !j.roomForObject(si) {
		return // past a per-JVM cap (caps.go)
	}
	j.track(si, addr, size, tag, captureWeight(size, j.interval))
	j.stats.AllocsTracked++
}

// track starts following an object of site si, weighted w (1/p).
func (j *JVM) track(si int32, addr, size, tag uint64, w float64) objindex.ID {
	addr = j.canonical(addr)
	s := j.sites[si]
	s.objects++
	s.bytes += size
	s.estObjects += w
	s.estBytes += w * float64(size)
	o := object{site: si, weight: float32(w), start: addr, size: size, tag: tag}
	var id objindex.ID
	if n := len(j.free); n > 0 {
		id = j.free[n-1]
		j.free = j.free[:n-1]
		j.objs[id] = o
	} else {
		id = objindex.ID(len(j.objs))
		j.objs = append(j.objs, o)
	}
	j.idx.Insert(addr, size, id)
	if tag != 0 {
		j.tags[tag] = id
	}
	return id
}

// forget releases an object the index no longer holds.
func (j *JVM) forget(id objindex.ID) {
	if t := j.objs[id].tag; t != 0 && j.tags[t] == id {
		delete(j.tags, t)
	}
	j.objs[id].tag = 0
	j.free = append(j.free, id)
}

// onFree drops an object the JVM collected, so that memory reused by an
// untracked object is not charged to the dead one.
func (j *JVM) onFree(tag uint64) {
	id, ok := j.tags[tag]
	if !ok {
		return // already evicted by a reuse of its memory
	}
	if j.indexed(id) {
		j.idx.Remove(j.objs[id].start)
	}
	j.forget(id)
	j.stats.Freed++
}
