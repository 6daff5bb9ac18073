// Package region names the memory region of a data address of a JVM: a
// thread's stack (and whose), the code cache, metaspace, class space, the
// CDS archive, GC structures, malloc memory, a memory-mapped file, another
// anonymous mapping, or "unknown" when no mapping holds it.
//
// A Map is built from /proc/PID/maps and what the JVM says about its own
// ranges: `jcmd PID VM.info` (always), `jcmd PID VM.native_memory detail`
// (when NMT is on) and `jcmd PID Thread.print` (Java thread names), plus the
// stack pointers of the target's threads. A Namer keeps a Map of a live
// process current: it re-reads the maps (rate-limited) when an address
// misses, and learns a thread's stack from the sampled stack pointer.
//
// The rules, most specific first (each is argued at its code):
//
//   - thread stack: the mapping that holds a thread's stack pointer (from
//     /proc/PID/task/TID/syscall, Thread.print's last Java sp, a sample's
//     rsp), cut to NMT's "Thread Stack" reservation when NMT is on; an
//     hs_err file's stack(lo,hi); the kernel's [stack] (the primordial
//     thread). NMT Thread Stack reservations no sp falls in are "thread
//     stack" without an owner.
//   - Java heap, code cache, class space, CDS archive, GC card table, GC
//     mark bitmap: the ranges VM.info prints (exact).
//   - metaspace: NMT only (VM.info prints the non-class space's size, not
//     its address); without NMT it is "anonymous".
//   - GC data: other NMT "GC" reservations (G1's mark stack, block offset
//     table, card counts; the names of NMT detail's call sites are not
//     parsed).
//   - native (malloc): [heap] and glibc arenas (see isArena).
//   - mapped file PATH: a file-backed mapping.
//   - anonymous: any other mapping. unknown: no mapping.
package region

import (
	"cmp"
	"slices"
	"strings"

	"github.com/djx-bpf/djx-bpf/hotspot/heap"
)

// Region names. The JSON report's `where` carries them.
const (
	Stack      = "thread stack"
	JavaHeap   = "Java heap"
	CodeCache  = "code cache"
	Metaspace  = "metaspace"
	ClassSpace = "class space"
	CDS        = "CDS archive"
	CardTable  = "GC card table"
	MarkBitmap = "GC mark bitmap"
	// RemSet is never returned from mappings: G1 allocates its remembered
	// sets with malloc (they are in "native (malloc)"), and the serial and
	// parallel collectors' remembered set is their card table.
	RemSet     = "GC remembered set"
	GCOther    = "GC data"
	Malloc     = "native (malloc)"
	MappedFile = "mapped file " // followed by the path
	Anonymous  = "anonymous"
	Unknown    = "unknown"
)

// Region is the region of an address. Thread and TID are set for a thread
// stack whose owner is known: the Java name from Thread.print when the
// caller passed it, else the kernel's comm (15 bytes at most).
type Region struct {
	Name   string
	Thread string
	TID    uint32
}

// JVMText is what the JVM said about itself, as jcmd printed it. VMInfo is
// needed for the JVM's own ranges; NMT (VM.native_memory detail; empty or
// "not enabled" when NMT is off) and Threads (Thread.print) are optional.
type JVMText struct {
	VMInfo  string
	NMT     string
	Threads string
}

// Task is one thread of the target: its TID, comm and a stack pointer (0
// when unknown, e.g. while it runs).
type Task struct {
	TID  uint32
	Comm string
	SP   uint64
	// NSTID is the TID in the target's own pid namespace (the last field
	// of NSpid in /proc/PID/task/TID/status), which Thread.print and an
	// hs_err file print; 0 or TID outside a container.
	NSTID uint32
}

// Map is an immutable-by-readers snapshot: sorted, non-overlapping
// segments, each with an index into regions. Only a Namer mutates one
// (it learns stacks from samples).
type Map struct {
	starts  []uint64
	ends    []uint64
	reg     []int32
	mapIdx  []int32
	mstart  []uint64 // mapping bounds, by mapping index
	mend    []uint64
	regions []Region
	byName  map[string]int32 // plain regions (no owner)
	byTID   map[uint32]int32 // owned stacks
	names   map[uint32]string
	pid     uint32
}

// Build makes a Map from /proc/PID/maps text, the JVM's texts and its
// threads. pid is the target's pid (the owner of the [stack] mapping).
func Build(maps string, text JVMText, tasks []Task, pid uint32) *Map {
	ms := parseMaps(maps)
	m := &Map{byName: map[string]int32{}, byTID: map[uint32]int32{}, names: map[uint32]string{}, pid: pid}
	m.intern(Region{Name: Unknown})
	jts, vm := m.nameThreads(text, tasks)
	nmt := parseNMT(text.NMT)
	hasMetaspace := false
	for _, c := range nmt {
		hasMetaspace = hasMetaspace || c.name == Metaspace
	}

	// Level 0: each mapping's own name.
	segs := m.mappingSegs(ms)
	for _, a := range arenas(ms, vm, hasMetaspace) {
		for k := a[0]; k < a[1]; k++ {
			segs[k].reg = m.plain(Malloc)
		}
	}

	// Level 1: NMT; level 2: VM.info and the heap.
	segs = paint(segs, m.claims(nmt), nil)
	jvm := vm.claims
	if g, err := heap.ParseVMInfo(text.VMInfo); err == nil && g.Reserved.Start < g.Reserved.End && g.Reserved.End <= MaxAddr {
		jvm = append(jvm, claim{g.Reserved.Start, g.Reserved.End, JavaHeap})
	}
	segs = paint(segs, m.claims(jvm), nil)

	// Level 3: stacks, by stack pointer and by stated range.
	m.setSegs(segs)
	stacks := m.stackClaims(nmt, jts, tasks)
	for _, s := range vm.stacks {
		if s.tid != 0 {
			stacks = append(stacks, pclaim{s.start, s.end, m.owned(s.tid)})
		}
	}
	m.setSegs(paint(segs, normalize(stacks), m.stackableReg))
	return m
}

// nameThreads names the threads of tasks, then by the longer names the
// JVM's texts give them, and returns the threads of those texts with the
// host's TIDs: the JVM prints TIDs of its own pid namespace.
func (m *Map) nameThreads(text JVMText, tasks []Task) ([]javaThread, vmInfo) {
	for _, t := range tasks {
		if t.TID != 0 && len(m.names) < maxClaims {
			m.names[t.TID] = capName(t.Comm)
		}
	}
	host := map[uint32]uint32{}
	for _, t := range tasks {
		if t.NSTID != 0 && t.NSTID != t.TID {
			host[t.NSTID] = t.TID
		}
	}
	toHost := func(tid uint32) uint32 {
		if len(host) == 0 {
			return tid
		}
		return host[tid] // 0 (unknown) when the namespace has no such thread
	}
	jts := parseThreads(text.Threads)
	for i := range jts {
		jts[i].tid = toHost(jts[i].tid)
		if jts[i].tid != 0 {
			m.names[jts[i].tid] = jts[i].name // the Java name is longer than comm
		}
	}
	vm := parseVMInfo(text.VMInfo)
	for i := range vm.stacks {
		vm.stacks[i].tid = toHost(vm.stacks[i].tid)
		if vm.stacks[i].tid != 0 {
			m.names[vm.stacks[i].tid] = vm.stacks[i].name
		}
	}
	return jts, vm
}

// mappingSegs gives each mapping of ms the region its own name says, and
// sets m's mapping bounds.
func (m *Map) mappingSegs(ms []mapping) []seg {
	segs := make([]seg, 0, len(ms))
	m.mstart = make([]uint64, len(ms))
	m.mend = make([]uint64, len(ms))
	files := map[string]int32{}
	for i, mp := range ms {
		m.mstart[i], m.mend[i] = mp.start, mp.end
		var r int32
		switch {
		case mp.path == "[heap]":
			r = m.plain(Malloc)
		case mp.path == "[stack]":
			r = m.owned(m.pid)
		case strings.HasPrefix(mp.path, "/memfd:java_heap"):
			// ZGC's heap: views of one memfd, which it names so.
			r = m.plain(JavaHeap)
		case mp.path != "" && !strings.HasPrefix(mp.path, "["):
			var ok bool
			if r, ok = files[mp.path]; !ok {
				r = m.intern(Region{Name: MappedFile + mp.path})
				files[mp.path] = r
			}
		default:
			r = m.plain(Anonymous)
		}
		segs = append(segs, seg{mp.start, mp.end, r, int32(i)})
	}
	return segs
}

// stackClaims are the stacks of the threads whose stack pointers the JVM's
// thread dump and the tasks give: the run of stackable mappings around the
// pointer, narrowed to NMT's stack there if it states one. m's segments
// must be set.
func (m *Map) stackClaims(nmt []claim, jts []javaThread, tasks []Task) []pclaim {
	var stacks []pclaim
	var nmtStacks []claim
	for _, c := range nmt {
		if c.name == Stack {
			nmtStacks = append(nmtStacks, c)
		}
	}
	slices.SortFunc(nmtStacks, func(a, b claim) int { return cmp.Compare(a.start, b.start) })
	bySP := func(tid uint32, sp uint64) {
		if sp == 0 || tid == 0 {
			return
		}
		i := m.find(sp)
		if i < 0 || !m.stackable(i) {
			return
		}
		a, b := m.stackRun(i)
		lo, hi := m.starts[a], m.ends[b]
		if j, ok := slices.BinarySearchFunc(nmtStacks, sp, func(c claim, sp uint64) int {
			if c.end <= sp {
				return -1
			}
			if c.start > sp {
				return 1
			}
			return 0
		}); ok {
			lo, hi = max(lo, nmtStacks[j].start), min(hi, nmtStacks[j].end)
		}
		stacks = append(stacks, pclaim{lo, hi, m.owned(tid)})
	}
	for _, t := range jts {
		bySP(t.tid, t.sp)
	}
	for _, t := range tasks {
		bySP(t.TID, t.SP)
	}
	return stacks
}

// Lookup returns the region of addr (no learning, no re-read).
func (m *Map) Lookup(addr uint64) Region {
	i := m.find(addr)
	if i < 0 {
		return m.regions[0]
	}
	return m.regions[m.reg[i]]
}

// Len is the number of segments.
func (m *Map) Len() int { return len(m.starts) }

// find returns the segment holding addr, or -1.
func (m *Map) find(addr uint64) int {
	lo, hi := 0, len(m.starts)
	for lo < hi {
		h := int(uint(lo+hi) >> 1)
		if m.starts[h] <= addr {
			lo = h + 1
		} else {
			hi = h
		}
	}
	if lo == 0 || addr >= m.ends[lo-1] {
		return -1
	}
	return lo - 1
}

// stackable reports whether segment i may be a thread's stack: it is
// anonymous, or a stack (whoever's; the kernel's [stack] included).
func (m *Map) stackable(i int) bool { return m.stackableReg(m.reg[i]) }

func (m *Map) stackableReg(r int32) bool {
	n := m.regions[r].Name
	return n == Anonymous || n == Stack
}

// stackRun returns the first and last segment of the run of stack-able
// segments of one mapping around segment i.
func (m *Map) stackRun(i int) (int, int) {
	a, b := i, i
	for a > 0 && m.mapIdx[a-1] == m.mapIdx[i] && m.stackable(a-1) {
		a--
	}
	for b+1 < len(m.starts) && m.mapIdx[b+1] == m.mapIdx[i] && m.stackable(b+1) {
		b++
	}
	return a, b
}

// learn makes the stack-able run around segment i tid's stack. It
// allocates only the first time it sees tid.
func (m *Map) learn(i int, tid uint32) {
	r := m.owned(tid)
	a, b := m.stackRun(i)
	for k := a; k <= b; k++ {
		m.reg[k] = r
	}
}

type seg struct {
	start, end uint64
	reg        int32
	mapIdx     int32
}

// pclaim is a claim with its region interned.
type pclaim struct {
	start, end uint64
	reg        int32
}

func (m *Map) intern(r Region) int32 {
	m.regions = append(m.regions, r)
	return int32(len(m.regions) - 1)
}

func (m *Map) plain(name string) int32 {
	if r, ok := m.byName[name]; ok {
		return r
	}
	r := m.intern(Region{Name: name})
	m.byName[name] = r
	return r
}

func (m *Map) owned(tid uint32) int32 {
	if r, ok := m.byTID[tid]; ok {
		return r
	}
	r := m.intern(Region{Name: Stack, Thread: m.names[tid], TID: tid})
	m.byTID[tid] = r
	return r
}

func (m *Map) claims(cs []claim) []pclaim {
	out := make([]pclaim, 0, len(cs))
	for _, c := range cs {
		out = append(out, pclaim{c.start, c.end, m.plain(c.name)})
	}
	return normalize(out)
}

func (m *Map) setSegs(segs []seg) {
	n := len(segs)
	m.starts, m.ends = make([]uint64, n), make([]uint64, n)
	m.reg, m.mapIdx = make([]int32, n), make([]int32, n)
	for i := len(segs) - 1; i >= 0; i-- {
		s := segs[i]
		m.starts[i], m.ends[i], m.reg[i], m.mapIdx[i] = s.start, s.end, s.reg, s.mapIdx
	}
}

// normalize sorts claims and makes them disjoint: where two overlap, the
// one that starts first (or, starting together, comes first) keeps the
// overlap.
func normalize(cs []pclaim) []pclaim {
	slices.SortStableFunc(cs, func(a, b pclaim) int { return cmp.Compare(a.start, b.start) })
	out := cs[:0]
	for _, c := range cs {
		if n := len(out); n > 0 && c.start < out[n-1].end {
			c.start = out[n-1].end
		}
		if c.start < c.end {
			out = append(out, c)
		}
	}
	return out
}

// paint overlays disjoint sorted claims on disjoint sorted segments: a
// claim renames the part of every segment it covers and nothing outside
// the segments (an address no mapping holds stays unknown), and, if allow
// is not nil, only segments whose region allow accepts. Adjacent pieces of
// one mapping with one region merge. O(len(segs)+len(claims)).
func paint(segs []seg, cs []pclaim, allow func(int32) bool) []seg {
	out := make([]seg, 0, len(segs)+2*len(cs))
	emit := func(s seg) {
		if n := len(out); n > 0 && out[n-1].end == s.start && out[n-1].reg == s.reg && out[n-1].mapIdx == s.mapIdx {
			out[n-1].end = s.end
			return
		}
		out = append(out, s)
	}
	j := 0
	for _, s := range segs {
		for j < len(cs) && cs[j].end <= s.start {
			j++
		}
		cur := s.start
		if allow != nil && !allow(s.reg) {
			emit(s)
			continue
		}
		for k := j; cur < s.end; {
			if k < len(cs) && cs[k].start < s.end {
				c := cs[k]
				if c.start > cur {
					emit(seg{cur, c.start, s.reg, s.mapIdx})
					cur = c.start
				}
				e := min(c.end, s.end)
				emit(seg{cur, e, c.reg, s.mapIdx})
				cur = e
				k++
				continue
			}
			emit(seg{cur, s.end, s.reg, s.mapIdx})
			cur = s.end
		}
	}
	return out
}

// arenaSize is glibc's HEAP_MAX_SIZE on 64-bit: 2 * DEFAULT_MMAP_THRESHOLD_MAX
// (2 * 4 * 1024 * 1024 * sizeof(long)) = 64 MiB.
const arenaSize = 64 << 20

// arenas returns the runs [first, end) of mappings that are glibc malloc
// arena heaps. glibc's new_heap reserves HEAP_MAX_SIZE aligned to
// HEAP_MAX_SIZE with PROT_NONE and makes its first bytes read-write as the
// heap grows (grow_heap/shrink_heap keep one committed prefix, the
// heap_info header at its start). So an arena heap is: an anonymous rw-p
// mapping at a 64 MiB boundary, then at most one anonymous ---p mapping,
// ending exactly 64 MiB later.
//
// A HotSpot metaspace node can look the same (64 MiB, reserved PROT_NONE,
// committed from its start, and its reservation alignment of 4 or 16 MiB
// makes a 64 MiB boundary likely). Its committed bytes are a multiple of
// the commit granule (VM.info's commit_granule_bytes, 64 KiB) while an
// arena's are a multiple of the page; with NMT the metaspace's ranges are
// known and painted over this guess. Without NMT, a run whose committed
// size is a multiple of the granule is ambiguous and stays "anonymous"
// (about 1 arena in 16 by chance; every fully committed arena).
func arenas(ms []mapping, vm vmInfo, nmtKnowsMetaspace bool) [][2]int {
	granule := vm.granule
	if granule == 0 {
		granule = 64 << 10
	}
	anon := func(mp mapping) bool { return mp.inode == 0 && mp.path == "" }
	var out [][2]int
	for i := 0; i < len(ms); i++ {
		a := ms[i]
		if !anon(a) || a.perms != "rw-p" || a.start%arenaSize != 0 || a.end-a.start > arenaSize {
			continue
		}
		end, j := a.end, i+1
		if end < a.start+arenaSize {
			if j >= len(ms) || ms[j].start != end || !anon(ms[j]) || ms[j].perms != "---p" {
				continue
			}
			end = ms[j].end
			j++
		}
		if end != a.start+arenaSize {
			continue
		}
		committed := a.end - a.start
		if !nmtKnowsMetaspace && vm.metaspaceNodes != 0 && committed%granule == 0 {
			continue // could be a metaspace node
		}
		out = append(out, [2]int{i, j})
		i = j - 1
	}
	return out
}
