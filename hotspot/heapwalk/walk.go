package heapwalk

import (
	"context"
	"fmt"
	"math/bits"
	"slices"
	"time"
)

// Root is an object the caller knows is live, to walk from besides the
// statics: a thread's local, say. Lower ranks name first: the statics
// are rank 0, then rank 1, 2, ... each walked to the end before the
// next, so an object gets the name of the lowest-ranked root that
// reaches it (outer frames before inner ones, as the caller ranks them).
type Root struct {
	Addr uint64 // the object (a full address, not a narrow oop)
	Hop  string // what the chain says for it: "Main.main:12 local #3"
	Rank int
	// Others counts the roots besides this one that the caller knows
	// hold the object and does not list (the inner frames it passed the
	// object to): they count in the row's OtherRoots.
	Others int
}

// FieldRef is a reference field the walk names: an instance field of a
// class, or a static.
type FieldRef struct {
	// Klass is the Klass* of the object holding the field; for a
	// static, of the class declaring it.
	Klass uint64
	// Declaring is the Klass* of the class declaring the field, found
	// through the superclasses' oop maps; Class is its Java name.
	Declaring uint64
	Class     string
	// Offset is the field's offset in the object; for a static, in the
	// class's java.lang.Class instance.
	Offset uint32
	Static bool
}

// Object is one object of at least Config.MinSize bytes, given to
// Config.OnObject as the walk finds it.
type Object struct {
	Addr, Size uint64
	Klass      uint64
	Class      string
	Row        int // its row's index in Result.Rows
	Chain      ChainID
}

// Config says what to walk from and how far. Zero caps take the
// defaults (in brackets).
type Config struct {
	// Roots are walked after the statics, by rank.
	Roots []Root
	// Refresh, when set, is called once the statics are walked: ok
	// says to walk roots in place of those of Roots with a rank above
	// 0 (a collection since Roots were taken moved their objects).
	Refresh func(ctx context.Context) (roots []Root, ok bool)
	// Hot are addresses the samples hit: the objects on their pages are
	// walked first, and kept past the caps in place of others.
	Hot []uint64
	// FieldName, when set, names a reference field: it returns the
	// hop's text ("java.util.TreeMap.root"), or "" if it does not know,
	// and the walk then says Class+Offset ("java.util.TreeMap+24").
	// It is called once per class and field.
	FieldName func(FieldRef) string
	// MinSize: objects of at least MinSize bytes go to OnObject and not
	// into the address lookup. 0: none do.
	MinSize  uint64
	OnObject func(Object)
	// StopOnGC stops the walk as soon as it sees that a collection ran.
	StopOnGC bool
	// FieldOffset, when set, makes the walk find the direct buffers and
	// native segments (offheap.go), at most MaxOwners [1<<20].
	FieldOffset FieldOffset
	MaxOwners   int
	// Pace, when set, is called between batches and may block to share
	// the CPU with other walks (a scan's); false stops the walk, as the
	// end of its context does.
	Pace func(ctx context.Context) bool

	MaxObjects int64 // objects visited [1<<28]
	MaxChains  int   // distinct chains [1<<20]
	MaxRows    int   // distinct (chain, class) rows [1<<20]
	MaxHops    int   // distinct hops: fields, statics, array classes, roots [1<<20]
	MaxEdges   int   // distinct (chain, hop) pairs [1<<21]
	MaxRefs    int64 // references read, a bound on the walk's work [1<<31]
	MaxDepth   int   // hops of a chain [64]
	MaxQueue   int   // objects found and not yet visited [1<<25, 256 MiB]
	MaxRuns    int   // lookup runs [1<<22, 64 MiB]
	MaxCross   int   // references across roots kept [1<<21, 16 MiB]
	MaxPages   int   // heap pages of the approximate lookup [1<<20, 32 MiB]
	MaxBitmap  int   // bytes of the visited bitmap [256 MiB: 32 GiB of used heap]
	MaxKlasses int   // classes [1<<18]
	MaxCLDs    int   // class loaders [1<<18]
	MaxClasses int   // classes on the class loaders' lists [1<<20]
	MaxCopy    int   // bytes of the heap copied in pieces and parsed in place [256 MiB]
	CacheBytes int   // the metadata chunk cache [8 MiB]
	ChunkSize  int   // a chunk of it, a power of two [16 KiB]
	Batch      int   // objects read in one vector [4096]
	Sample     int   // addresses kept per row [8]
}

func (c Config) withDefaults() Config {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	if c.MaxObjects <= 0 {
		c.MaxObjects = 1 << 28
	}
	def(&c.MaxChains, 1<<20)
	def(&c.MaxRows, 1<<20)
	def(&c.MaxHops, 1<<20)
	def(&c.MaxEdges, 1<<21)
	if c.MaxRefs <= 0 {
		c.MaxRefs = 1 << 31
	}
	def(&c.MaxDepth, 64)
	def(&c.MaxQueue, 1<<25)
	def(&c.MaxRuns, 1<<22)
	def(&c.MaxCross, 1<<21)
	def(&c.MaxPages, 1<<20)
	def(&c.MaxBitmap, 256<<20)
	def(&c.MaxKlasses, 1<<18)
	def(&c.MaxCLDs, 1<<18)
	def(&c.MaxClasses, 1<<20)
	def(&c.MaxCopy, 256<<20)
	def(&c.CacheBytes, 8<<20)
	def(&c.ChunkSize, 16<<10)
	def(&c.Batch, 4096)
	def(&c.Sample, 8)
	if c.ChunkSize&(c.ChunkSize-1) != 0 || c.ChunkSize < 4096 {
		c.ChunkSize = 16 << 10
	}
	c.MaxChains = min(c.MaxChains, 1<<31)
	c.MaxRows = min(c.MaxRows, 1<<31)
	c.MaxDepth = min(c.MaxDepth, 1<<16)
	c.Batch = min(c.Batch, 1<<16)
	return c
}

// Stats says what a walk did.
type Stats struct {
	Objects int64 // objects visited
	Bytes   int64 // their shallow bytes
	Large   int64 // objects given to OnObject
	Hot     int64 // objects found on pages Config.Hot named

	CLDs    int   // class loaders walked
	Classes int   // classes on their lists
	Mirrors int   // java.lang.Class instances taken as roots
	Roots   int64 // the caller's roots taken
	// RootsRefreshed: Config.Refresh gave roots in place of Roots'.
	RootsRefreshed bool
	BadRoots       int64 // the caller's roots outside the heap or misaligned
	Klasses        int   // distinct valid classes read
	Chains         int
	Rows           int

	Reads     int64 // read calls on the target's memory (one vector counts one)
	BytesRead int64
	Pieces    int   // pieces of the heap copied whole (pieces.go)
	Reread    int64 // objects whose copy did not parse, read again from the JVM
	// CopyResets: the pieces were dropped after a collection, and
	// copied again as needed.
	CopyResets int

	Invalid    int64 // objects skipped: klass, size or length not valid
	Unreadable int64 // objects skipped: memory unreadable
	Forwarded  int64 // objects skipped: a GC's forwarding pointer in the mark word
	// ReadForwarded: of those, objects read at their forwardee instead
	// (Shenandoah's concurrent evacuation).
	ReadForwarded int64
	OutOfHeap     int64 // references outside the heap or misaligned, not followed

	ObjectsCapped int64 // objects found past MaxObjects, not visited
	QueueDropped  int64 // objects found past MaxQueue, not visited
	BitmapDropped int64 // objects found past MaxBitmap, not visited
	KlassesCapped int64 // lookups of classes past MaxKlasses
	ChainsCapped  int64 // hops not added past MaxChains (the objects keep the parent's chain)
	DepthCapped   int64 // hops not added past MaxDepth
	RowsCapped    int64 // objects put in a class's "(rows capped)" row
	EdgesCapped   int64 // references not followed past MaxEdges
	HopsCapped    int64 // hops named "(hops capped)" past MaxHops
	RefsCapped    bool  // the walk stopped at MaxRefs references read
	ClassesCapped bool  // the class loaders' lists were cut at a cap or a cycle

	// The address lookup: runs of consecutive objects of one row,
	// merged; objects past MaxRuns are entered on their pages (the four
	// rows with most bytes on each: approximate), and past MaxPages not
	// at all.
	Runs         int
	LookupApprox int64
	LookupLost   int64

	// References across roots: CrossEdges distinct (chain, chain)
	// pairs; CrossCapped: past MaxCross some were not kept (OtherRoots
	// are then a lower bound, and Retained is not computed).
	CrossEdges  int
	CrossCapped bool

	// Pending: objects found and not visited when the walk stopped
	// early (its context, MaxRefs, StopOnGC, Pace), hot ones included.
	Pending int64
	Waited  time.Duration // in Config.Pace
	// GCWaited: waiting for stop-the-world collections to end;
	// GCRetried: objects skipped in a batch a collection overlapped,
	// read again after it (Invalid, Unreadable and Forwarded count
	// those that still did not parse).
	GCWaited  time.Duration
	GCRetried int64
	// GCReread: batches and large arrays' pieces read again after a
	// collection overlapped their read.
	GCReread int64
	// ArrayMoved: large arrays' elements not followed because a
	// collection moved the array between its header's read and theirs.
	ArrayMoved int64
	// Stale: objects found before a collection and not visited after
	// it: the slot their reference was read from holds another now, so
	// the collection moved them (or their referrer) and what is at the
	// address may be another object, held by something else.
	Stale       int64
	MaxQueueLen int   // the queue's longest
	Deferred    int64 // large arrays' rests that waited for the queue to empty
	BitmapBytes int
	Canceled    bool // the context or Config.Pace ended the walk
	StoppedOnGC bool // Config.StopOnGC saw a collection and stopped

	RootsTime time.Duration // walking the class loaders
	Time      time.Duration // the whole walk
}

// GCCheck compares CollectedHeap::_total_collections before and after a
// walk: when a collection overlapped it, objects moved under the walk
// and its result mixes two heaps (discard it, or walk again).
type GCCheck struct {
	Before, After             uint32
	ActiveBefore, ActiveAfter bool
	// Evacuated: under Shenandoah and ZGC, whose concurrent cycles leave
	// the count alone, the walk met objects it could not parse (or,
	// Shenandoah, forwarded): a cycle evacuated during it, and may have
	// freed and reused regions the walk read before their references
	// were updated.
	Evacuated  bool
	Overlapped bool
	// Full: a full collection ran during the walk (by
	// CollectedHeap::_total_full_collections): it compacted the heap,
	// and the walk's addresses from before it are stale.
	Full bool
}

// Row is what the walk found of one class on one holder chain.
type Row struct {
	Chain ChainID
	Class string // Java name
	Klass uint64 // its Klass*
	Count uint64
	Bytes uint64 // shallow
	// Sample holds up to Config.Sample of its objects' addresses, a
	// uniform sample.
	Sample []uint64
	// Recursive says some of its objects hang off another object of
	// the same class (a linked list's nodes, a tree's): they share
	// the chain of the first.
	Recursive bool
	// OtherRoots counts the roots other than its chain's own that reach
	// it or a chain above it (at most 64).
	OtherRoots int
	// Retained is what its chain retains: its bytes and those of the
	// chains below it that no other root reaches; 0 when not computed
	// (a chain of several classes, or cross references past MaxCross).
	Retained uint64
}

// Result is one walk's rows, chains and address lookup.
type Result struct {
	Rows  []Row
	Stats Stats
	GC    GCCheck
	// OffHeap is what the direct buffers and native segments own outside
	// the heap.
	OffHeap OffHeap

	chains []chainNode
	texts  []string
	runs   runList
	pages  *pageTable
}

// walker is one walk's state.
type walker struct {
	l     *Layout
	r     *reader
	zf    *zForwarder // ZGC's forwarding table; nil under other collectors
	cfg   Config
	stats Stats
	lo    uint64 // the heap span's start: queue entries are offsets from it

	visited *bitmap
	q       queue
	qh      queue // objects on pages the samples hit: walked first
	// qs and qhs hold, entry for entry, the address each of q's and
	// qh's references was read from (0: a root), to check the entries
	// found before a collection against (checkMoved).
	qs, qhs queue
	// queueGC and queueFull are the counts of collections and of full
	// ones the queued entries were checked at; checkSlots says a
	// collection moves objects only in its pauses (not ZGC's or
	// Shenandoah's concurrent relocation), and the layout tells the
	// full ones.
	queueGC, queueFull uint32
	checkSlots         bool
	hot                *hotPages

	klasses    map[uint64]*klass // nil: known bad
	kcache     [1 << kcacheBits]kcacheEntry
	badKlasses int
	klassList  []*klass
	kbuf       []byte

	texts    []string
	textIdx  map[string]uint32
	hops     []hop
	hopIdx   map[[3]uint32]uint32
	edges    []edge
	edgeIdx  map[uint64]uint32
	chains   []chainNode
	chainIdx map[uint64]uint32
	// chainRoot is each chain's root chain (its one-hop ancestor).
	chainRoot []uint32
	rootPg    *rootPages
	cross     []crossRef
	extras    []extraRef
	large     []run // the objects given to OnObject, for cross references
	rows      []rowRec
	rowIdx    map[uint64]uint32

	cappedChain uint32
	cappedHop   uint32
	oopFields   int // in all klasses read
	nameBytes   int
	refs        int64 // references read
	runs        *runStore
	pages       *pageTable
	rng         uint64

	found   int64 // objects found (marked) so far
	stopped bool
	gcSeen  gcState
	batches int

	// Per batch buffers.
	batch    []uint64
	bslots   []uint64 // each batch entry's slot, before the sort
	unsorted []uint64 // the batch before the sort, beside bslots
	slotBuf  []byte
	slotSpan []Span
	slotOK   []int
	slotIdx  []int // the batch entries whose slots are read
	sortBuf  []uint64
	offBits  int // significant bits of a heap offset in words
	spans    []Span
	heap     *heapCopy
	copyGC   uint32 // the collection count the pieces were copied after
	copyOK   bool   // this batch may copy pieces and parse them
	batchGC  uint32 // the collection count when the batch started
	skips    []skipped
	retrying bool // visiting a batch's skipped objects again
	ctx      context.Context
	// gcWaitDone: a wait for a collection to end timed out; the walk
	// waits no more.
	gcWaitDone bool
	sink       byte // keeps the touching loop
	views      [][]byte
	hbuf       []byte
	spanOf     []int  // for each object of the batch, the span holding it
	need       []bool // for each span: some object's view is not in the copy
	rspans     []Span // the spans read
	rvalid     []int
	spanAt     []int // for each span, its offset in buf
	valid      []int
	buf        []byte
	tails      []tail
	later      []tail // the rest of large arrays, for when the queue is empty
	mbuf       []byte
	off        offHeapState
}

// copyStable says whether the walk may parse its copy of the heap: no
// collection ran since the pieces were copied and none runs now. When
// one did, or its state cannot be read, the pieces are dropped: a
// collection moves objects, and one that runs while a piece is copied
// leaves its objects half way, parsing and missing what they hold. It
// is asked before each batch and after each copy (a read of a few bytes
// a batch of thousands of objects).
func (w *walker) copyStable(n uint32, active, ok bool) bool {
	if !ok {
		n, active = w.copyGC, true
	}
	if n != w.copyGC || active {
		if w.heap.used > 0 {
			w.heap.reset()
			w.stats.CopyResets++
		}
		w.copyGC = n
	}
	return !active
}

// Header bytes read of each object at first: the header, and the
// fields of most small objects.
const (
	headBytes = 64
	mergeGap  = 256      // objects this close share a span
	maxSpan   = 64 << 10 // bytes of one merged span
	// tails larger than this are read on their own, in pieces.
	bigTail   = 1 << 20
	tailBatch = 4 << 20 // bytes of tails read in one vector
	// maxMirrorSize caps a java.lang.Class instance (its statics).
	maxMirrorSize = 1 << 24
)

// Walk walks the heap of the JVM l describes, reading mem while the JVM
// runs: from every loaded class's statics, then from cfg.Roots by rank.
// It errs only when the target cannot be read at all (it exited, or no
// permission); what it cannot parse it skips and counts.
func Walk(ctx context.Context, l *Layout, mem Mem, cfg Config) (*Result, error) {
	start := time.Now()
	w := newWalker(l, mem, cfg.withDefaults())
	w.ctx = ctx
	defer w.heap.free()
	defer w.visited.free()
	before, err := l.state(w.r)
	if err != nil {
		return nil, fmt.Errorf("walk: %w", err)
	}
	w.gcSeen, w.copyGC, w.batchGC, w.queueGC, w.queueFull = before, before.count, before.count, before.count, before.full

	mirrors := w.classMirrors()
	w.stats.RootsTime = time.Since(start)
	if w.r.gone != nil {
		return nil, fmt.Errorf("walk the class loaders: %w", w.r.gone)
	}
	loaded, _ := w.edgeOf(0, w.hopOf("(loaded classes)", "(loaded classes)", 0))
	for _, m := range mirrors {
		w.discover(m, loaded, 0)
	}
	w.stats.Mirrors = len(mirrors)

	roots := slices.Clone(cfg.Roots)
	slices.SortStableFunc(roots, func(a, b Root) int { return a.Rank - b.Rank })
	for i := 0; i < len(roots) && roots[i].Rank <= 0; i++ {
		w.root(roots[i])
	}
	w.drain(ctx)
	if cfg.Refresh != nil && !w.stopped {
		if fresh, ok := cfg.Refresh(ctx); ok {
			roots = slices.DeleteFunc(roots, func(r Root) bool { return r.Rank > 0 })
			for _, r := range fresh {
				if r.Rank > 0 {
					roots = append(roots, r)
				}
			}
			slices.SortStableFunc(roots, func(a, b Root) int { return a.Rank - b.Rank })
			w.stats.RootsRefreshed = true
		}
	}
	for i := 0; i < len(roots); {
		j := i
		for j < len(roots) && roots[j].Rank == roots[i].Rank {
			if roots[j].Rank > 0 {
				w.root(roots[j])
			}
			j++
		}
		w.drain(ctx)
		i = j
	}
	if w.r.gone != nil {
		return nil, fmt.Errorf("walk: %w", w.r.gone)
	}
	after, err := l.state(w.r)
	if err != nil {
		return nil, fmt.Errorf("walk: %w", err)
	}
	if w.stopped {
		w.stats.Pending = int64(w.q.len() + w.qh.len() + len(w.later))
	}
	res := w.result()
	// ZGC's stale references are read through its forwarding tables, but
	// objects it could not parse mean pages freed and reused under the
	// walk, as under Shenandoah's evacuation.
	evac := l.GC == "shenandoah" && (w.stats.Forwarded > 0 || w.stats.Invalid > 0) || l.z != nil && w.stats.Invalid > 0
	res.GC = GCCheck{Before: before.count, After: after.count, ActiveBefore: before.active, ActiveAfter: after.active, Evacuated: evac,
		Overlapped: before.moved(after) || evac, Full: before.full != after.full}
	res.Stats.Time = time.Since(start)
	return res, nil
}

func newWalker(l *Layout, mem Mem, cfg Config) *walker {
	w := &walker{l: l, cfg: cfg, lo: l.Heap[0].Start}
	w.r = &reader{mem: mem, stats: &w.stats, cache: newChunkCache(cfg.ChunkSize, cfg.CacheBytes)}
	if v, ok := mem.(VectorMem); ok {
		w.r.vec = v
	}
	w.zf = newZForwarder(l.z, w.r, &w.stats)
	w.checkSlots = l.z == nil && l.GC != "shenandoah" && l.off.hasFull
	w.offBits = bits.Len64((l.Heap[len(l.Heap)-1].End - w.lo) >> 3)
	w.heap = newHeapCopy(w.lo, l.Heap[len(l.Heap)-1].End, cfg.MaxCopy)
	w.visited = newBitmap(w.lo, l.Heap[len(l.Heap)-1].End, cfg.MaxBitmap, l.minObjectShift())
	w.klasses = make(map[uint64]*klass)
	w.kbuf = make([]byte, max(l.off.klassSize, l.off.ikSize))
	w.textIdx = make(map[string]uint32)
	w.hopIdx = make(map[[3]uint32]uint32)
	w.edgeIdx = make(map[uint64]uint32)
	w.chainIdx = make(map[uint64]uint32)
	w.rowIdx = make(map[uint64]uint32)
	w.pages = newPageTable(w.lo, l.Heap[len(l.Heap)-1].End, cfg.MaxPages)
	w.runs = newRunStore(w.lo, l.Heap[len(l.Heap)-1].End)
	hot := cfg.Hot
	if l.z != nil {
		hot = make([]uint64, 0, len(cfg.Hot))
		for _, a := range cfg.Hot {
			if c, ok := l.Canonical(a); ok {
				hot = append(hot, c)
			}
		}
	}
	w.hot = newHotPages(w.lo, l.Heap[len(l.Heap)-1].End, hot)
	w.rng = 0x9e3779b97f4a7c15
	// Id 0 of hops, edges and rows means none; chain 0 is the empty one.
	w.intern("")
	w.hops = append(w.hops, hop{})
	w.edges = append(w.edges, edge{})
	w.chains = append(w.chains, chainNode{})
	w.chainRoot = append(w.chainRoot, 0)
	w.rootPg = newPages[uint32](w.lo, l.Heap[len(l.Heap)-1].End, w.visited.maxBlocks)
	w.rows = append(w.rows, rowRec{lastRun: -1})
	w.cappedChain = w.extend(0, w.hopOf("(rows capped)", "(rows capped)", 0))
	w.cappedHop = w.hopOf("(hops capped)", "(hops capped)", 0)
	return w
}

// root takes one of the caller's roots.
func (w *walker) root(r Root) {
	e, ok := w.edgeOf(0, w.hopOf(r.Hop, r.Hop, 0))
	if !ok {
		w.stats.EdgesCapped++
		return
	}
	if a, ok := w.l.Canonical(r.Addr); ok {
		r.Addr = a // ZGC: the view the walk reads
	}
	if _, in := w.l.inHeap(r.Addr, w.l.HeaderSize); !in || r.Addr%8 != 0 {
		w.stats.BadRoots++
		return
	}
	w.stats.Roots++
	w.discover(r.Addr, e, 0)
	if r.Others > 0 && len(w.extras) < w.cfg.MaxCross {
		w.extras = append(w.extras, extraRef{uint32(min(r.Others, maxOtherRoots)), uint32((r.Addr - w.lo) >> 3)})
	}
}

// discover marks the object at a found over edge e, its reference read
// from slot (0: a root), and queues it, once.
func (w *walker) discover(a uint64, e uint32, slot uint64) {
	if q := w.fresh(a, w.rootChain(&w.edges[e])); q != nil {
		w.push(q, a, e, slot)
	}
}

// drain visits the queue's objects breadth first, a batch at a time:
// each batch sorted by address and read in one vector of spans.
func (w *walker) drain(ctx context.Context) {
	for !w.stopped && w.q.len()+w.qh.len()+len(w.later) > 0 && w.r.gone == nil {
		if ctx.Err() != nil {
			w.stats.Canceled = true
			w.stopped = true
			return
		}
		if w.q.len()+w.qh.len() == 0 {
			t := w.later[len(w.later)-1]
			w.later = w.later[:len(w.later)-1]
			w.readBig(t)
			continue
		}
		w.batches++
		if w.cfg.Pace != nil {
			t := time.Now()
			ok := w.cfg.Pace(ctx)
			w.stats.Waited += time.Since(t)
			if !ok {
				w.stats.Canceled = true
				w.stopped = true
				return
			}
		}
		n, full, active, ok := w.collectionState(ctx)
		w.batchGC = n
		w.copyOK = w.heap != nil && w.copyStable(n, active, ok)
		w.sawCollections(n, full, ok)
		if w.cfg.StopOnGC && w.batches%64 == 0 {
			if g, err := w.l.state(w.r); err == nil && w.gcSeen.moved(g) {
				w.stats.StoppedOnGC = true
				w.stopped = true
				return
			}
		}
		w.popBatch()
		if len(w.batch) == 0 {
			continue
		}
		if cap(w.sortBuf) < len(w.batch) {
			w.sortBuf = make([]uint64, cap(w.batch))
		}
		sortEntries(w.batch, w.sortBuf, w.offBits) // by address: the offset is the entry's high bits
		w.visitBatch()
		if len(w.skips) > 0 {
			w.retrySkips(ctx)
		}
	}
}

// visitBatch reads and visits the objects of w.batch, sorted by address.
// A batch whose read a collection overlapped is read again once it
// ended: its objects may parse with references half updated.
func (w *walker) visitBatch() {
	w.readBatch()
	for try := 2; try <= stableTries; try++ {
		n, active, err := w.l.collections(w.r)
		if err != nil || (n == w.batchGC && !active) {
			break
		}
		n, full, active, ok := w.collectionState(w.ctx)
		w.batchGC = n
		w.copyOK = w.heap != nil && w.copyStable(n, active, ok)
		if w.sawCollections(n, full, ok) {
			w.batch = w.checkMovedAgain(w.batch)
		}
		w.stats.GCReread++
		w.readBatch()
	}
	w.tails = w.tails[:0]
	// Touch each copied object's first line in a loop of
	// independent loads, which the CPU overlaps: visit's own
	// loads, each behind the last, then hit the cache.
	var sink byte
	for _, v := range w.views {
		if len(v) > 0 {
			sink += v[0]
		}
	}
	w.sink = sink
	for i, ent := range w.batch {
		a := w.lo + ent>>edgeBits<<3
		view, copied := w.views[i], w.views[i] != nil
		if !copied {
			si := w.spanOf[i]
			s := w.spans[si]
			lo := w.spanAt[si] + int(a-s.Addr)
			hi := w.spanAt[si] + w.valid[si]
			if lo < hi {
				view = w.buf[lo:hi]
			}
		}
		w.visit(a, uint32(ent&maxEdges), view, copied)
	}
	w.readTails()
}

// A stop-the-world collection rewrites the objects it moves and marks:
// an object read while one runs may not parse (a header marked or
// forwarded, a klass or length half moved), and skipping it loses all it
// holds, which may be most of a structure. The walk reads nothing while
// a collection runs (collectionState waits for it to end), and the
// objects it skipped in a batch that a collection overlapped are read
// once more after it ended; only then are they counted as skipped.

// gcWaitMax bounds one wait for a collection to end, and gcWaitTotal a
// walk's waits: a collection that does not end by then, or a flag the
// target keeps set, is not waited for again. gcPoll is how often the
// wait reads whether it ended.
const (
	gcWaitMax   = 3 * time.Second
	gcWaitTotal = 10 * time.Second
	gcPoll      = time.Millisecond
)

// collectionState reads the collection count, first waiting for a
// collection that runs to end (within gcWaitMax and gcWaitTotal, and
// ctx), and the count of full ones: active says one still runs; ok is
// false when the counts cannot be read.
func (w *walker) collectionState(ctx context.Context) (n, full uint32, active, ok bool) {
	n, full, active, err := w.l.collectionsFull(w.r)
	if err != nil {
		return w.batchGC, 0, false, false
	}
	if !active || w.gcWaitDone {
		return n, full, active, true
	}
	start := time.Now()
	limit := min(gcWaitMax, gcWaitTotal-w.stats.GCWaited)
	defer func() {
		w.stats.GCWaited += time.Since(start)
		if active {
			w.gcWaitDone = true
		}
	}()
	for time.Since(start) < limit && ctx.Err() == nil {
		time.Sleep(gcPoll)
		if n, full, active, err = w.l.collectionsFull(w.r); err != nil {
			return w.batchGC, 0, false, false
		}
		if !active {
			return n, full, false, true
		}
	}
	return n, full, true, true
}

// readStable reads b at a while no collection runs, and reads it again
// once one ended when one ran during the read: a large array's
// references read while a collection moved it point at whatever moved
// in (a 64K-element piece of ServiceTruth's list named tree entries).
func (w *walker) readStable(ctx context.Context, b []byte, a uint64) bool {
	for try := 1; ; try++ {
		n0, _, _, ok := w.collectionState(ctx)
		if !w.r.readAt(b, a) {
			return false
		}
		n1, active, err := w.l.collections(w.r)
		if !ok || err != nil || (n1 == n0 && !active) || try == stableTries {
			return true
		}
		w.stats.GCReread++
	}
}

// stillThere says the array t is a piece of is still where its header
// was read: a collection that compacted the heap since moved it, and
// what moved in would be read as its references (ServiceTruth's list
// once named 65,536 tree entries after Parallel's full GC).
func (w *walker) stillThere(t *tail) bool {
	if t.obj == 0 {
		return true
	}
	n, _, err := w.l.collections(w.r)
	if err != nil || n == t.gc {
		return true
	}
	var hb [32]byte
	h := hb[:w.l.HeaderSize+4]
	if !w.r.readAt(h, t.obj) {
		return false
	}
	// Shenandoah evacuates while the JVM runs: the old copy's mark
	// forwards to the array, whose rest is read there.
	if mark := le64(h); mark&3 == 3 && w.l.GC == "shenandoah" {
		fwd := mark &^ 3
		if fwd == t.obj || !w.r.readAt(h, fwd) {
			return false
		}
		t.addr, t.obj = fwd+(t.addr-t.obj), fwd
	}
	if le64(h)&3 == 3 || w.l.decodeKlass(h) != t.k.addr || w.l.arrayLength(h) != t.length {
		return false
	}
	t.gc = n
	return true
}

// arrayLength is the length field of the array whose header h holds
// (negative lengths come out huge, and fail the callers' room checks).
func (l *Layout) arrayLength(h []byte) uint64 {
	return uint64(int64(int32(le32(h[l.HeaderSize:]))))
}

// stableTries bounds the reads of one span that collections overlap.
const stableTries = 3

// skip keeps an object the walk could not parse, to be read again if a
// collection overlapped its batch, else counts it in *why.
func (w *walker) skip(a uint64, e uint32, why *int64) {
	if w.retrying {
		*why++
		return
	}
	w.skips = append(w.skips, skipped{ent: (a-w.lo)>>3<<edgeBits | uint64(e), why: why})
}

// skipped is an object a batch could not parse, and why.
type skipped struct {
	ent uint64 // its queue entry
	why *int64 // the Stats count it goes to
}

// retrySkips reads the batch's skipped objects again once the
// collection that overlapped the batch ended; with none, they count as
// skipped.
func (w *walker) retrySkips(ctx context.Context) {
	n, full, active, ok := w.collectionState(ctx)
	if !ok || active || n == w.batchGC {
		for _, sk := range w.skips {
			*sk.why++
		}
		w.skips = w.skips[:0]
		return
	}
	w.batchGC = n
	w.copyOK = w.heap != nil && w.copyStable(n, active, ok)
	w.batch = w.batch[:0]
	for _, sk := range w.skips {
		w.batch = append(w.batch, sk.ent)
	}
	if w.sawCollections(n, full, ok) {
		w.batch = w.checkMovedAgain(w.batch)
	}
	w.skips = w.skips[:0]
	w.stats.GCRetried += int64(len(w.batch))
	w.retrying = true
	w.visitBatch()
	w.retrying = false
}

// readBatch reads the first headBytes of each object of the batch,
// merging neighbours into one span, into w.buf; spanOf says which span
// holds each object's start, spanAt where each span is in w.buf.
func (w *walker) readBatch() {
	w.spans = w.spans[:0]
	w.spanOf = w.spanOf[:0]
	w.views = w.views[:0]
	for _, ent := range w.batch {
		a := w.lo + ent>>edgeBits<<3
		rg, _ := w.l.inHeap(a, 0)
		end := min(a+headBytes, rg.End)
		if n := len(w.spans); n > 0 {
			s := &w.spans[n-1]
			sEnd := s.Addr + uint64(s.Len)
			if a <= sEnd+mergeGap && end-s.Addr <= maxSpan && rg.contains(s.Addr) {
				if end > sEnd {
					s.Len = int(end - s.Addr)
				}
				w.spanOf = append(w.spanOf, n-1)
				continue
			}
		}
		// A new span, even where the last one overlaps a's start.
		w.spans = append(w.spans, Span{Addr: a, Len: int(end - a)})
		w.spanOf = append(w.spanOf, len(w.spans)-1)
	}
	// An object's view is its span's bytes from its start, from the copy
	// when the copy holds them all: the same bytes either way, so the
	// walk visits the same objects in the same order.
	if cap(w.need) < len(w.spans) {
		w.need = make([]bool, len(w.spans))
	}
	w.need = w.need[:len(w.spans)]
	clear(w.need)
	if w.copyOK && w.heap.load(w, func(i int) uint64 { return w.lo + w.batch[i]>>edgeBits<<3 }, len(w.batch)) {
		// A collection that started while the pieces were copied
		// left them half way: they are dropped, and read as spans.
		n, active, err := w.l.collections(w.r)
		w.copyOK = w.copyStable(n, active, err == nil)
	}
	for i, ent := range w.batch {
		a := w.lo + ent>>edgeBits<<3
		s := w.spans[w.spanOf[i]]
		var v []byte
		if w.heap != nil {
			v = w.heap.span(a, s.Addr+uint64(s.Len))
		}
		if v == nil {
			w.need[w.spanOf[i]] = true
		}
		w.views = append(w.views, v)
	}
	w.spanAt, w.valid = sized(w.spanAt, len(w.spans)), sized(w.valid, len(w.spans))
	w.rspans = w.rspans[:0]
	total := 0
	for i, s := range w.spans {
		w.spanAt[i] = total
		if w.need[i] {
			w.rspans = append(w.rspans, s)
			total += s.Len
		}
	}
	if len(w.rspans) == 0 {
		return
	}
	w.buf, w.rvalid = sized(w.buf, total), sized(w.rvalid, len(w.rspans))
	w.r.readSpans(w.buf, w.rspans, w.rvalid)
	k := 0
	for i := range w.spans {
		if w.need[i] {
			w.valid[i] = w.rvalid[k]
			k++
		}
	}
}

// tail is the part of an object the first read did not cover and whose
// references the walk needs.
type tail struct {
	addr  uint64 // where the bytes to read start
	n     uint64
	k     *klass
	chain uint32
	// copied: the object's header was read from the copy, and so may
	// the rest be; else the rest is read from the JVM, as the header was.
	copied bool
	// An array's start, length and the collection count when its header
	// was read: a large array's pieces are read later, maybe after a
	// collection moved it.
	obj, length uint64
	gc          uint32
}

// visit validates the object at a, found over edge e, whose first
// bytes are view, counts it in its row and follows its references.
// copied says view is the heap's copy (pieces.go): what does not parse
// there is read again from the JVM.
func (w *walker) visit(a uint64, e uint32, view []byte, copied bool) {
	l := w.l
	if len(view) < int(l.HeaderSize)+4 {
		w.skip(a, e, &w.stats.Unreadable)
		return
	}
	if mark := le64(view); mark&3 == 3 {
		if copied {
			w.reread(a, e)
			return
		}
		// marked: by a collection that runs, or a forwarding pointer,
		// only seen while a GC moves objects. Shenandoah moves them
		// while the JVM runs: the copy is the object, and is read in
		// its place.
		if fwd := mark &^ 3; w.l.GC == "shenandoah" {
			w.stats.Forwarded++
			if fwd != a {
				w.stats.ReadForwarded++
				w.discover(fwd, e, 0)
			}
			return
		}
		w.skip(a, e, &w.stats.Forwarded)
		return
	}
	k := w.klassAt(l.decodeKlass(view))
	if k == nil || k.kind == kindNone {
		if copied {
			w.reread(a, e)
			return
		}
		w.skip(a, e, &w.stats.Invalid)
		return
	}
	rg, _ := l.inHeap(a, 0)
	room := rg.End - a
	var size, length uint64
	switch k.kind {
	case kindInstance, kindOpaque:
		size = k.size
	case kindObjArray, kindTypeArray:
		length = l.arrayLength(view)
		if length > room>>k.log2 {
			if copied {
				w.reread(a, e)
				return
			}
			w.skip(a, e, &w.stats.Invalid)
			return
		}
		size = (k.hdr + length<<k.log2 + l.Alignment - 1) &^ (l.Alignment - 1)
	case kindMirror:
		w.visitMirror(a, e, k, view, room)
		return
	}
	if size > room {
		if copied {
			w.reread(a, e)
			return
		}
		w.skip(a, e, &w.stats.Invalid)
		return
	}
	ed := &w.edges[e]
	chain, rec := w.childChain(ed, k)
	row := w.rowOf(ed, chain, k)
	w.count(row, a, size, rec, k, chain)
	if k.kind == kindInstance && w.cfg.FieldOffset != nil {
		w.offHeap(a, k, view, chain)
	}

	switch k.kind {
	case kindInstance:
		if len(k.oops) == 0 {
			return
		}
		end := uint64(k.oops[len(k.oops)-1]) + l.OopSize
		if end <= uint64(len(view)) {
			w.scanFields(k, view, chain, a)
		} else {
			w.tails = append(w.tails, tail{addr: a, n: end, k: k, chain: chain, copied: copied})
		}
	case kindObjArray:
		end := k.hdr + length*l.OopSize
		if end <= uint64(len(view)) {
			w.scanArray(k, view[k.hdr:end], chain, a+k.hdr)
		} else if length > 0 {
			w.tails = append(w.tails, tail{addr: a + k.hdr, n: length * l.OopSize, k: k, chain: chain, copied: copied,
				obj: a, length: length, gc: w.batchGC})
		}
	}
}

// reread visits the object at a, whose copy did not parse, from the
// JVM's memory as it is now.
func (w *walker) reread(a uint64, e uint32) {
	w.stats.Reread++
	rg, _ := w.l.inHeap(a, 0)
	n := min(headBytes, rg.End-a)
	if cap(w.hbuf) < headBytes {
		w.hbuf = make([]byte, headBytes)
	}
	var view []byte
	if w.r.readAt(w.hbuf[:n], a) {
		view = w.hbuf[:n]
	}
	w.visit(a, e, view, false)
}

// visitMirror visits a java.lang.Class instance: its size and its
// statics are in it (java_lang_Class's offsets), and the statics are
// roots of their own, named by the class they belong to.
func (w *walker) visitMirror(a uint64, e uint32, k *klass, view []byte, room uint64) {
	l, o := w.l, &w.l.off
	fixed := k.size // java.lang.Class's own fields; the statics follow
	buf := view
	if uint64(len(buf)) < fixed {
		if cap(w.mbuf) < int(fixed) {
			w.mbuf = make([]byte, fixed)
		}
		buf = w.mbuf[:fixed]
		if !w.r.readAt(buf, a) {
			w.skip(a, e, &w.stats.Unreadable)
			return
		}
	}
	words := int64(int32(le32(buf[o.mirrorOopSize:])))
	count := int64(int32(le32(buf[o.mirrorStaticCount:])))
	size := uint64(words) * 8
	if words <= 0 || size < fixed || size > maxMirrorSize || size > room || count < 0 || count > maxStatics ||
		fixed+uint64(count)*l.OopSize > size {
		w.skip(a, e, &w.stats.Invalid)
		return
	}
	ed := &w.edges[e]
	chain, rec := w.childChain(ed, k)
	row := w.rowOf(ed, chain, k)
	w.count(row, a, size, rec, k, chain)
	if len(k.oops) > 0 && uint64(k.oops[len(k.oops)-1])+l.OopSize <= fixed {
		w.scanFields(k, buf, chain, a)
	}
	if count == 0 {
		return
	}
	// The class it mirrors names its statics; 0 for a primitive type's.
	var mk *klass
	if ka := le64(buf[o.mirrorKlass:]); ka != 0 {
		if mk = w.klassAt(ka); mk == nil || mk.mirror != a {
			mk = nil
		}
	}
	if !w.work(int(count)) {
		return
	}
	n := uint64(count) * l.OopSize
	st := buf[min(fixed, uint64(len(buf))):]
	if uint64(len(st)) < n {
		if cap(w.mbuf) < int(n) {
			w.mbuf = make([]byte, n)
		}
		st = w.mbuf[:n]
		if !w.r.readAt(st, a+fixed) {
			w.stats.Unreadable++
			return
		}
	}
	for j := uint64(0); j < uint64(count); j++ {
		v := w.slot(st[j*l.OopSize:])
		if v == 0 {
			continue
		}
		se, ok := w.staticEdge(mk, uint32(fixed+j*l.OopSize))
		if !ok {
			w.stats.EdgesCapped++
			continue
		}
		w.discover(w.ref(v), se, a+fixed+j*l.OopSize)
	}
}

// slot reads one reference slot's raw value.
func (w *walker) slot(b []byte) uint64 {
	if w.l.OopSize == 4 {
		return uint64(le32(b))
	}
	return le64(b)
}

// count adds an object to its row, and to OnObject or the lookup.
func (w *walker) count(row uint32, a, size uint64, rec bool, k *klass, chain uint32) {
	r := &w.rows[row]
	r.count++
	r.bytes += size
	r.recursive = r.recursive || rec
	w.stats.Objects++
	w.stats.Bytes += int64(size)
	// Reservoir sampling keeps a uniform sample of the row's addresses.
	if len(r.sample) < w.cfg.Sample {
		r.sample = append(r.sample, a)
	} else {
		w.rng ^= w.rng << 13
		w.rng ^= w.rng >> 7
		w.rng ^= w.rng << 17
		if j := w.rng % r.count; j < uint64(len(r.sample)) {
			r.sample[j] = a
		}
	}
	if w.cfg.MinSize > 0 && size >= w.cfg.MinSize {
		w.stats.Large++
		w.noteLarge(row, a, size)
		if w.cfg.OnObject != nil {
			w.cfg.OnObject(Object{Addr: a, Size: size, Klass: k.addr, Class: k.name, Row: int(row) - 1, Chain: ChainID(chain)})
		}
		return
	}
	w.record(row, a, size)
}

// scanFields follows the oop fields of an instance of k at base, whose
// bytes from its start are obj.
func (w *walker) scanFields(k *klass, obj []byte, chain uint32, base uint64) {
	if !w.work(len(k.oops)) {
		return
	}
	for i, off := range k.oops {
		v := w.slot(obj[off:])
		if v == 0 {
			continue
		}
		a := w.ref(v)
		q := w.fresh(a, chain)
		if q == nil {
			continue
		}
		e, ok := w.fieldEdge(k, i, chain)
		if !ok {
			w.stats.EdgesCapped++
			continue
		}
		w.push(q, a, e, base+uint64(off))
	}
}

// scanArray follows the elements of an object array of class k, elems
// read from base.
func (w *walker) scanArray(k *klass, elems []byte, chain uint32, base uint64) {
	step := int(w.l.OopSize)
	if !w.work(len(elems) / step) {
		return
	}
	for i := 0; i+step <= len(elems); i += step {
		v := w.slot(elems[i:])
		if v == 0 {
			continue
		}
		a := w.ref(v)
		q := w.fresh(a, chain)
		if q == nil {
			continue
		}
		e, ok := w.arrayEdge(k, chain)
		if !ok {
			w.stats.EdgesCapped++
			continue
		}
		w.push(q, a, e, base+uint64(i))
	}
}

// work counts n references about to be read, and stops the walk past
// MaxRefs.
func (w *walker) work(n int) bool {
	w.refs += int64(n)
	if w.refs > w.cfg.MaxRefs {
		w.stats.RefsCapped = true
		w.stopped = true
		return false
	}
	return true
}

// fresh marks the object at a, referenced from an object of chain
// from, as found and returns the queue it goes to: nil when it is not
// new or a cap keeps it out. A field's or element's edge is made only
// for new objects, after it.
func (w *walker) fresh(a uint64, from uint32) *queue {
	if a == 0 {
		return nil // ZGC's null keeps its color bits
	}
	if a%8 != 0 {
		w.stats.OutOfHeap++
		return nil
	}
	if _, in := w.l.inHeap(a, w.l.HeaderSize); !in {
		w.stats.OutOfHeap++
		return nil
	}
	newly, ok := w.visited.testAndSet(a)
	if !ok {
		w.stats.BitmapDropped++
		return nil
	}
	if !newly {
		w.seen(a, from)
		return nil
	}
	w.mark(a, from)
	return w.admit(a)
}

func (w *walker) push(q *queue, a uint64, e uint32, slot uint64) {
	q.push((a-w.lo)>>3<<edgeBits | uint64(e))
	if w.checkSlots {
		if q == &w.qh {
			w.qhs.push(slot)
		} else {
			w.qs.push(slot)
		}
	}
	if n := w.q.len() + w.qh.len(); n > w.stats.MaxQueueLen {
		w.stats.MaxQueueLen = n
	}
}

// readTails reads what the batch's objects need beyond their first
// bytes and follows their references: small tails together in vectors,
// large arrays on their own, in pieces.
func (w *walker) readTails() {
	for i := 0; i < len(w.tails) && w.r.gone == nil; {
		t := w.tails[i]
		if t.n > bigTail {
			w.readBig(t)
			i++
			continue
		}
		j, total := i, uint64(0)
		w.spans = w.spans[:0]
		for j < len(w.tails) && w.tails[j].n <= bigTail && total+w.tails[j].n <= tailBatch {
			n := w.tails[j].n
			if w.tails[j].copied && w.heap.span(w.tails[j].addr, w.tails[j].addr+n) != nil {
				n = 0 // in the copy
			}
			w.spans = append(w.spans, Span{Addr: w.tails[j].addr, Len: int(n)})
			total += n
			j++
		}
		w.buf, w.valid = sized(w.buf, int(total)), sized(w.valid, len(w.spans))
		if total > 0 {
			w.r.readSpans(w.buf, w.spans, w.valid)
		}
		off := 0
		for s := i; s < j; s++ {
			t := w.tails[s]
			var b []byte
			if w.spans[s-i].Len == 0 {
				b = w.heap.span(t.addr, t.addr+t.n)
			} else {
				b = w.buf[off : off+int(t.n)]
				off += int(t.n)
				if w.valid[s-i] < int(t.n) {
					w.stats.Unreadable++
					continue
				}
			}
			if t.k.kind == kindObjArray {
				w.scanArray(t.k, b, t.chain, t.addr)
			} else {
				w.scanFields(t.k, b, t.chain, t.addr)
			}
		}
		i = j
	}
}

// readBig follows the elements of a large object array, a piece at a
// time. While the queue is past a quarter of its cap, the rest waits in
// w.later until the queue is empty: a list of millions of objects then
// costs the queue a piece of them at a time, not all.
func (w *walker) readBig(t tail) {
	const piece = 1 << 20
	if cap(w.mbuf) < piece {
		w.mbuf = make([]byte, piece)
	}
	for off := uint64(0); off < t.n && w.r.gone == nil; off += piece {
		if off > 0 && w.q.len()+w.qh.len() > w.cfg.MaxQueue/4 {
			w.later = append(w.later, tail{addr: t.addr + off, n: t.n - off, k: t.k, chain: t.chain, obj: t.obj, length: t.length, gc: t.gc})
			w.stats.Deferred++
			return
		}
		b := w.mbuf[:min(piece, t.n-off)]
		if !w.readStable(w.ctx, b, t.addr+off) {
			w.stats.Unreadable++
			return
		}
		if t.k.kind == kindObjArray && !w.stillThere(&t) {
			w.stats.ArrayMoved += int64((t.n - off) / w.l.OopSize)
			return
		}
		if t.k.kind == kindObjArray {
			w.scanArray(t.k, b, t.chain, t.addr+off)
		}
	}
}
