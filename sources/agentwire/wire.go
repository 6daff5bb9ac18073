// Package agentwire is the Go side of the C agent's wire format (the agent
// is in ../agent): the record types, the Reader that decodes the agent's
// stream, and the commands sent back. It is pure Go and builds without the
// agent; its Encoder writes the format for tests and fakes, and a test
// checks the constants against agent/src/djx.h.
//
// The stream is a sequence of batches, all integers little-endian:
//
//	batch  = u32 magic "DXJB" (0x424A5844), u16 version (1), u16 flags (0),
//	         u32 payload_len, u32 nrecords, u64 watermark, payload
//	record = u32 body_len, u16 type, u16 reserved (0), body
//	string = u32 len, bytes (no NUL)
//
// The watermark is CLOCK_MONOTONIC in ns when the batch was cut: every record
// stamped at or before it has been sent by the end of the batch, and records
// within the stream are in timestamp order. STACK records are the
// exception: the signal handler stamps them when it runs and the writer
// ships them later, so they are not in timestamp order with the other
// records (nor always with each other), and a STACK stamped at or before a
// batch's watermark may still arrive in the next batch if its handler was
// running when the batch was cut (rare). Loaders must tolerate both.
//
// Readers skip unknown record types (returned as Unknown) and ignore
// trailing bytes in known bodies, so fields can be appended without a
// version bump; a reader fills fields missing from an older agent's record
// with zero (ALLOC's tag, STATS' counters from Frees on, HELLO's
// stack_signal).
//
// The Reader cuts what a record would make the loader keep to far past
// what a JVM sends: strings to MaxString bytes (ending in StringCut),
// frame lists to MaxFrames, METHOD lines to MaxLines, CLASS fields to
// MaxFields; the batch counts what it cut (Batch.StringsCut, ListsCut).
//
// Record bodies (u64 time is CLOCK_MONOTONIC ns):
//
//	HELLO     1  u32 proto, u32 pid, u64 interval, u64 minsize, u64 time,
//	             string vm_name, string vm_version, string mode,
//	             u32 stack_signal (trailing; 0: no stack handler)
//	METHOD    2  u64 jmethodid, string class_sig, string name, string sig,
//	             string source_file, u32 n, n × {u64 start_bci, u32 line}
//	ALLOC     3  u64 time, u64 addr, u64 size, u32 tid, u32 nframes,
//	             string type_sig, nframes × {u64 jmethodid, u64 bci},
//	             u64 tag (trailing; absent from older agents: 0)
//	STATS     4  u64 callbacks, u64 below_minsize, u64 dropped,
//	             u64 stack_errors, u64 allocs_sent, then trailing:
//	             u64 frees, u64 gcs, u64 reconciles, u64 reconciled,
//	             u64 reconcile_skipped, u64 reconcile_limited,
//	             u64 reconcile_ns, u64 stack_signals, u64 stacks_sent,
//	             u64 stacks_dropped, u64 code_sent, u64 code_dropped,
//	             u64 signals_chained, u64 untagged, u64 untagged_freed,
//	             u64 alloc_ns, u64 stack_ns, u64 code_ns, u64 writer_cpu_ns,
//	             u64 process_cpu_ns, u64 tracked, u64 tracked_live,
//	             u64 census_ns
//	BYE       5  string reason
//	ERROR     6  string message
//	INTERVAL  7  u64 time, u64 interval
//	FREE      8  u64 time, u64 tag
//	GC_START  9  u64 time
//	GC_FINISH 10 u64 time
//	RECONCILE 11 u64 time, u32 n, n × {u64 tag, u64 addr}
//	STACK     12 u64 time, u32 tid, i32 status, u64 pc, u32 nframes,
//	             nframes × frame
//	CODE      13 u64 time, u64 method, u64 start, u32 size, u32 npcs,
//	             npcs × {u64 pc, u32 nframes, nframes × frame}
//	CODE_UNLOAD 14 u64 time, u64 method, u64 start
//	STUB      15 u64 time, u64 start, u32 size, string name
//	CENSUS_START 16 u64 time, u32 kind
//	CENSUS_PATH  17 u32 id, u32 parent, string hop
//	CENSUS    18 u64 time, u64 addr, u64 size, u64 tag, u32 path, u32 kind,
//	             string type_sig
//	CENSUS_END 19 u64 time, u32 kind, u32 status, u64 objects, u64 bytes,
//	             u64 heap_objects, u64 heap_bytes, u64 heap_walk_ns,
//	             u64 holder_walk_ns, u64 emit_ns, u64 paths, u64 reached,
//	             u64 unreachable, u64 unplaced, string note, u64 strays,
//	             u64 heap_walk_passes, u64 pause_max_ns
//	TYPES_INFO 20 u32 flags (1: ok, 2: field offsets, 4: static offsets),
//	             string reason, u64 oop_base, u32 oop_shift, u32 oop_bytes,
//	             u64 klass_base, u32 klass_shift, u32 klass_bytes
//	CLASS     21 u64 time, u64 klass, u32 narrow_klass, string sig,
//	             u32 nfields, nfields × field,
//	             u32 nstatics, nstatics × field (trailing; absent: none)
//	ROOT      22 u64 time, u64 addr, u32 kind, u32 rank, u32 reach,
//	             string hop
//	ROOTS_END 23 u64 time, u64 roots, u64 follow_ns, u64 tags_ns,
//	             u32 status, string note, then trailing: u64 refs,
//	             u64 objects, u64 threads, u64 gone, u64 tags_max_ns,
//	             u64 emit_ns
//	ALLOC_RAW 24 u64 time, u64 addr, u64 size, u32 tid, u32 nframes,
//	             u32 end, string type_sig, nframes × raw_frame, u64 tag
//
// field = {u32 offset, string name, string sig}.
//
// raw_frame = {u64 blob, u64 a, u64 b}: a frame as the BPF unwinder writes
// it (bpf/hotspot_unwind.h): blob is the code blob's start with the frame's
// kind in its low bits, 1 a fixed-size frame (a = pc, b = compile id) or 2
// an rbp-linked one (a = the interpreter's Method* slot, b = its bcp slot);
// end is why the walk stopped (1: at the thread's entry, 0: at the depth
// cap). ALLOC_RAW replaces ALLOC after the loader's 'A' (CommandRawStacks)
// where the agent walked the allocating thread's stack itself (no METHOD
// records: the loader names the frames from the JVM's memory); where the
// walk found no whole stack the allocation still comes as an ALLOC.
//
// frame = {u64 jmethodid, u64 bci}, bci a signed 64-bit integer, innermost
// frame first (as in ALLOC). Every nonzero jmethodid in an ALLOC, STACK or
// CODE is described by a METHOD record earlier in the stream; 0 means
// AsyncGetCallTrace found no jmethodID for the frame. A METHOD for a
// jmethodID whose class was unloaded meanwhile has empty strings and no
// lines.
//
// Access stacks (HELLO stack_signal ≠ 0, option stacks=SIG): the agent's
// handler for that signal records a STACK for each signal it takes as its
// own: si_code SI_KERNEL (the loader's BPF program calls
// bpf_send_signal_thread), or SI_QUEUE with si_value.sival_int 0x534A5844
// (for tests and BPF-less loaders, via rt_tgsigqueueinfo). Other signals go
// to the handler installed before the agent's if that was a function, and
// are ignored otherwise; after the session the handler stays installed and
// treats every signal so, so signalling a JVM late never kills it. time
// (CLOCK_MONOTONIC, the clock of bpf_ktime_get_ns), tid and pc (the
// interrupted instruction pointer, from the signal's ucontext) join the
// STACK to its sample. status is AsyncGetCallTrace's: the frame count (> 0;
// stacks are cut at 128 frames), or ≤ 0 as the Stack* constants
// (StackNoEnv: a thread without a JNIEnv, e.g. a GC worker; no frames). A
// native frame has bci -3. A full handler ring (128 stacks) drops stacks,
// counted in STATS stacks_dropped.
//
// JIT code (option code=1, the default; code=2, with BPF stacks, sends it
// only from a JVM other than HotSpot): CODE for each compiled method
// (JVMTI CompiledMethodLoad). Code that existed before the session (all of
// it in attach mode) is replayed at its start, so a CODE may be repeated.
// PCs are sorted by pc, each with its inlining chain innermost first; at
// most 64 frames per PC, and PCs past ~512 KiB of record are left out.
// CODE_UNLOAD when the code is freed (its method may be stale by then);
// STUB for code the JVM generated outside Java methods (interpreter, stubs,
// adapters: DynamicCodeGenerated, also replayed at the start). CODE,
// CODE_UNLOAD and STUB are in timestamp order with the other records.
//
// Tags: the agent gives every object it sends an ALLOC or CENSUS for a
// per-session sequential tag (from 1; 0 means untracked) and follows it
// with a JNI weak reference. GC_START/GC_FINISH bracket each stop-the-world
// collection the JVM reports to JVMTI. After a GC_FINISH the agent reads
// every tracked object's reference: a cleared one is sent as FREE, and
// with reconcile=1 the ones whose address changed are sent in RECONCILE
// records, each listing addresses valid at its time (no GC ran between
// their reading and the record); the scan's last RECONCILE, empty or not,
// says it is complete. FREE is stamped with the end of the GC the object
// died in, so it may precede records sent before it: loaders order FREE by
// time. The scan is O(tracked), with no cap.
//
// Census (option census=1|2, on the loader's 'C'): the agent walks the
// heap and tracks every live object of at least minsize that exists, as
// CENSUS records between a CENSUS_START and a CENSUS_END. A CENSUS's time
// is when its address became valid (the census start or the GC before it
// was read), so CENSUS records may be stamped earlier than records before
// them: loaders order them by time. With census=2 each object also names
// its holder: the reference chain that reached it from a GC root, as the
// id of a CENSUS_PATH chain (parent 0 ends it at the root; 0 in CENSUS:
// unknown). Paths are sent before the CENSUS records that use them.
// Kind 2 (census after a GC, option recensus=MS) tracks large objects the
// heap sampler missed, without holders.
//
// Commands: the loader writes single commands on the same socket. 'Q' asks
// for the last batch (BYE "detach") and ends the session. 'H' and a u64 N
// (CommandUntag) has objects of at least N bytes tracked without a JVMTI
// tag: for G1's humongous objects, which a tag keeps from being eagerly
// reclaimed and which never move. Their ALLOC still carries a tag number;
// after each GC the agent rereads the word at offset 8 of each such object
// (klass, and array length with compressed class pointers) and sends FREE
// when it changed, i.e. once the region was reused or uncommitted. They are
// never in RECONCILE records. 'P' and 'R' pause and resume allocation
// sampling. 'C' (CommandCensus) runs the census. 'K' (CommandClasses)
// sends the CLASS records not sent yet. 'G' (CommandRoots) sends the
// heap's roots. 'A' (CommandRawStacks) has allocations walk their own
// stacks (ALLOC_RAW); an ERROR says why when the agent cannot.
//
// Data types (option types=1, HotSpot only): a TYPES_INFO first, then a
// CLASS for every loaded class (array classes included), and one for each
// class prepared later. TYPES_INFO says whether the agent could read
// class layouts (flags bit 1; else reason says why, and no CLASS follows),
// whether field offsets hold (bit 2; else CLASS records name classes and
// carry no fields), and how the JVM encodes references (oop_bytes 4:
// address = oop_base + narrow << oop_shift) and the klass word at offset
// 8 of every object header (klass_bytes 4: Klass* = klass_base +
// narrow_klass << klass_shift; 8: the Klass* itself). CLASS gives a class's
// Klass* (and its narrow value when klass_bytes is 4), its JVM signature
// ("Ljava/util/TreeMap$Entry;", "[J") and its instance fields, inherited
// ones included, sorted by offset from the object's start. Array classes
// have no JVMTI event: the loader sends 'K' when it meets a klass it does
// not know, and the agent sends the loaded classes it has not sent yet. A
// Klass* can be reused after its class was unloaded: the latest CLASS for
// a klass wins. When TYPES_INFO has bit 4, CLASS also lists the statics the
// class declares (interfaces' too, none for arrays), sorted by their offset
// in the class's java.lang.Class instance (its mirror), where HotSpot keeps
// them: a heap walker that reads a mirror's static slots names them so. The
// agent checks the offsets on Boolean.TRUE and FALSE (the reference at
// mirror + offset is the object JNI's GetStaticObjectField returns) and
// leaves them out, saying why in reason, when that fails.
//
// Roots (command 'G'): the objects that the JVM's threads, JNI handles,
// monitors and the VM itself hold, for a heap walker outside the JVM that
// finds the statics itself but cannot see stacks. The agent runs JVMTI
// FollowReferences with a callback that visits nothing, so the pause covers
// the roots only, not the heap, and sends one ROOT per object, then a
// ROOTS_END. kind is the JVMTI heap reference kind of the root that names
// the object (RootKind; system classes are left out); of several roots,
// a lasting one (JNI global, thread, VM) names it before a frame's local,
// a frame before a monitor, a frame's before a constant of compiled code
// (which HotSpot reports as a JNI local of the compiled frame), and of
// several frames the outermost: the caller that owns what it passed down.
// rank is that frame's place from its thread's outermost frame holding a
// root (0), and 0 for the other kinds: a walker names objects from the
// statics first, then from roots by rank. reach counts the roots that
// reached the object. hop is the root as the census's holder chains name
// it: "Main.main:54 local #5 (thread "main")", "Main.read JNI local
// (thread "main")", "JNI global", "thread "main"", "monitor", "VM root".
// addr is valid at time (no GC between its reading and the record).
// ROOTS_END counts the ROOT records sent and says what the pass cost:
// follow_ns is FollowReferences (the pause, and on a JVM with C2-compiled
// frames whose objects escape analysis removed, their first
// deoptimization), tags_ns the GetObjectsWithTags calls that brought the
// objects back (each holds off safepoints for at most tags_max_ns); refs
// counts the root references reported, objects the distinct objects, gone
// those collected before they were read; status is RootsStatus, note says
// why when it is not 0.
package agentwire

import (
	"encoding/binary"
	"fmt"
)

// CommandQuit asks the agent for its last batch and ends the session.
const CommandQuit = 'Q'

// CommandPause switches the JVM's allocation sampling off until
// CommandResume (djx-bpf --control): objects allocated meanwhile are not
// tracked; tags, frees, GC events and JIT records go on.
const (
	CommandPause  = 'P'
	CommandResume = 'R'
)

// CommandCensus asks the agent for a census of the live heap (option
// census=1|2).
const CommandCensus = 'C'

// CommandClasses asks the agent for the CLASS records of the loaded classes
// it has not sent yet (option types=1).
const CommandClasses = 'K'

// CommandRoots asks the agent for the heap's roots: ROOT records, then a
// ROOTS_END (see the package comment).
const CommandRoots = 'G'

// CommandRawStacks has the agent walk sampled allocations' stacks itself
// (ALLOC_RAW).
const CommandRawStacks = 'A'

// CommandUntag returns the command that tracks objects of at least min
// bytes without JVMTI tags (see the package comment); 0 tags every object.
func CommandUntag(min uint64) []byte {
	return binary.LittleEndian.AppendUint64([]byte{'H'}, min)
}

// Wire constants.
const (
	Magic        = 0x424A5844 // "DXJB" as little-endian bytes
	Version      = 1          // batch format version
	ProtoVersion = 1          // HELLO proto_version
	HeaderLen    = 24         // batch header size
	RecHeaderLen = 8          // record header size

	// MaxPayload bounds one batch so that a corrupt peer cannot make the
	// reader allocate gigabytes. The agent's batches are at most 4 MiB.
	MaxPayload = 64 << 20
)

// RCSamplerBusy is Agent_OnAttach's return code when another JVMTI
// environment holds the JVM's heap sampler (one at a time in HotSpot).
const RCSamplerBusy = 98

// What the Reader keeps of a record; the JVM's own limits are far above
// (65535 bytes for a name) but no real name comes near them, and the
// agent sends at most 64 frames. See the package comment.
const (
	MaxString = 4 << 10
	MaxFrames = 1024
	MaxLines  = 1 << 16 // a method's bytecode is under 64 KiB
	MaxFields = 1 << 16
	// StringCut ends a string cut to MaxString.
	StringCut = "…"
)

// RecordType is the type field of a record header.
type RecordType uint16

// Record types.
const (
	TypeHello  RecordType = 1
	TypeMethod RecordType = 2
	TypeAlloc  RecordType = 3
	TypeStats  RecordType = 4
	TypeBye    RecordType = 5
	TypeError  RecordType = 6
	// TypeInterval: the agent raised the heap sampling interval to stay
	// within its callback budget; allocations after Time use it.
	TypeInterval RecordType = 7
	// TypeFree: a tagged object was collected.
	TypeFree RecordType = 8
	// TypeGCStart and TypeGCFinish bracket a stop-the-world collection.
	TypeGCStart  RecordType = 9
	TypeGCFinish RecordType = 10
	// TypeReconcile: tracked objects a GC moved, with their new addresses.
	TypeReconcile RecordType = 11
	// TypeStack: a thread's Java stack, taken by the agent's signal handler
	// (AsyncGetCallTrace) when the loader's BPF program signalled it.
	TypeStack RecordType = 12
	// TypeCode and TypeCodeUnload: JIT-compiled code appeared or went away
	// (CompiledMethodLoad/Unload), with the pc → (method, bci) map.
	TypeCode       RecordType = 13
	TypeCodeUnload RecordType = 14
	// TypeStub: code the JVM generated that is not a Java method
	// (DynamicCodeGenerated: interpreter, stubs, adapters).
	TypeStub RecordType = 15
	// TypeCensusStart, TypeCensusPath, TypeCensus and TypeCensusEnd: a
	// census of the objects that exist (see the package comment).
	TypeCensusStart RecordType = 16
	TypeCensusPath  RecordType = 17
	TypeCensus      RecordType = 18
	TypeCensusEnd   RecordType = 19
	// TypeTypesInfo and TypeClass: class layouts for naming data types
	// (see the package comment).
	TypeTypesInfo RecordType = 20
	TypeClass     RecordType = 21
	// TypeRoot and TypeRootsEnd: the heap's roots (see the package comment).
	TypeRoot     RecordType = 22
	TypeRootsEnd RecordType = 23
	// TypeAllocRaw: an ALLOC whose stack the agent walked itself.
	TypeAllocRaw RecordType = 24
)

func (t RecordType) String() string {
	switch t {
	case TypeHello:
		return "HELLO"
	case TypeMethod:
		return "METHOD"
	case TypeAlloc:
		return "ALLOC"
	case TypeStats:
		return "STATS"
	case TypeBye:
		return "BYE"
	case TypeError:
		return "ERROR"
	case TypeInterval:
		return "INTERVAL"
	case TypeFree:
		return "FREE"
	case TypeGCStart:
		return "GC_START"
	case TypeGCFinish:
		return "GC_FINISH"
	case TypeReconcile:
		return "RECONCILE"
	case TypeStack:
		return "STACK"
	case TypeCode:
		return "CODE"
	case TypeCodeUnload:
		return "CODE_UNLOAD"
	case TypeStub:
		return "STUB"
	case TypeCensusStart:
		return "CENSUS_START"
	case TypeCensusPath:
		return "CENSUS_PATH"
	case TypeCensus:
		return "CENSUS"
	case TypeCensusEnd:
		return "CENSUS_END"
	case TypeTypesInfo:
		return "TYPES_INFO"
	case TypeClass:
		return "CLASS"
	case TypeRoot:
		return "ROOT"
	case TypeRootsEnd:
		return "ROOTS_END"
	case TypeAllocRaw:
		return "ALLOC_RAW"
	}
	return fmt.Sprintf("type %d", uint16(t))
}

// Record is one decoded record: *Hello, *Method, *Alloc, *Stats, *Bye,
// *ErrorRec, *Interval, *Free, *GCStart, *GCFinish, *Reconcile, *Stack,
// *Code, *CodeUnload, *Stub, *CensusStart, *CensusPath, *Census,
// *CensusEnd, *TypesInfo, *Class, *Root, *RootsEnd or *Unknown.
type Record interface {
	Type() RecordType
}

// Batch is one batch of the stream.
type Batch struct {
	// Watermark is CLOCK_MONOTONIC ns at the cut: no later batch holds a
	// record stamped at or before it.
	Watermark uint64
	Records   []Record
	// StringsCut and ListsCut count the strings and lists (frames, lines,
	// fields) of the batch's records cut to the Reader's limits.
	StringsCut int
	ListsCut   int
}

// Hello is the first record of a stream.
type Hello struct {
	ProtoVersion uint32
	PID          uint32 // in the JVM's own pid namespace
	Interval     uint64 // heap sampling interval, bytes
	MinSize      uint64 // smaller sampled objects are only counted
	Monotonic    uint64 // CLOCK_MONOTONIC ns when the session started
	VMName       string // java.vm.name
	VMVersion    string // java.vm.version
	Mode         string // "attach" or "launch"
	// StackSignal is the signal the agent's stack handler is installed on
	// (trailing; 0: no handler, do not signal the JVM for stacks).
	StackSignal uint32
}

// Method describes a jmethodID, sent before the first ALLOC that uses it.
type Method struct {
	ID         uint64 // jmethodID
	ClassSig   string // JVM form, "Ljava/util/HashMap;"
	Name       string
	Sig        string // "(I)V"
	SourceFile string // "" when absent
	Lines      []LineEntry
}

// LineEntry maps bytecode indices from Start onwards to a source line.
type LineEntry struct {
	Start int64
	Line  int32
}

// Alloc is one sampled allocation of at least MinSize bytes.
type Alloc struct {
	Time    uint64 // CLOCK_MONOTONIC ns when recorded (Addr was read then)
	Addr    uint64 // object address at Time
	Size    uint64 // bytes, header included
	TID     uint32 // kernel thread id
	TypeSig string // JVM form, "[J"
	Frames  []Frame
	// Tag identifies the object in later FREE and RECONCILE records; 0 when
	// the agent could not tag it (or predates tags).
	Tag uint64
}

// AllocRaw is a sampled allocation whose stack the agent walked itself:
// frames as the BPF unwinder writes them, named from the JVM's memory.
type AllocRaw struct {
	Time, Addr, Size uint64
	TID              uint32
	TypeSig          string
	Frames           []RawFrame // innermost first
	End              uint32     // why the walk stopped (the BPF unwinder's codes)
	Tag              uint64
}

// RawFrame is a frame as the BPF unwinder writes it (sample.RawFrame).
type RawFrame struct {
	Blob, A, B uint64
}

// Frame is one stack frame, innermost first.
type Frame struct {
	Method uint64 // jmethodID, described by an earlier METHOD record
	BCI    int64  // bytecode index; -1 for native methods
}

// Stats carries the agent's cumulative counters; one ends every batch.
type Stats struct {
	Callbacks    uint64 // SampledObjectAlloc callbacks
	BelowMinSize uint64
	Dropped      uint64 // records dropped because the buffer was full
	StackErrors  uint64 // GetStackTrace failures (the ALLOC has no frames)
	AllocsSent   uint64
	// Trailing fields; zero from agents that predate them.
	Frees            uint64 // ObjectFree events (FREE records)
	GCs              uint64 // GarbageCollectionFinish events
	Reconciles       uint64 // scans after GCs completed
	Reconciled       uint64 // objects listed in RECONCILE records
	ReconcileSkipped uint64 // scans cut short by a new GC (the next one covers it) or the session's end
	ReconcileLimited uint64 // always 0: the weak-reference scan has no limit (kept for the wire)
	ReconcileNanos   uint64 // time spent reconciling, on the agent's writer thread
	// Stack collection.
	StackSignals   uint64 // signals the handler took as ours while a session ran
	StacksSent     uint64 // STACK records sent
	StacksDropped  uint64 // stacks lost: the handler's ring was full
	CodeSent       uint64 // CODE records sent
	CodeDropped    uint64 // CODE records lost: buffer full
	SignalsChained uint64 // signals passed on to the handler installed before ours
	// Objects tracked without weak references (CommandUntag).
	Untagged      uint64 // ALLOCs whose death the agent checks after each GC
	UntaggedFreed uint64 // ... found dead (FREE records sent)
	// What the agent cost the JVM: wall time in its SampledObjectAlloc
	// callbacks, its stack signal handler, its JIT code and ClassPrepare
	// callbacks, and its writer thread's CPU time.
	AllocNanos     uint64
	StackNanos     uint64
	CodeNanos      uint64
	WriterCPUNanos uint64
	// ProcessCPUNanos is the JVM's CPU time (all its threads) since the
	// session started.
	ProcessCPUNanos uint64
	// Tracked counts objects ever followed by weak references,
	// TrackedLive those followed now; CensusNanos the census pauses.
	Tracked     uint64
	TrackedLive uint64
	CensusNanos uint64
	// Data types: CLASS records sent and dropped (buffer full; 'K' sends
	// them later), time spent building them (session start, ClassPrepare, 'K').
	ClassesSent    uint64
	ClassesDropped uint64
	TypesNanos     uint64
	// Allocation stacks the agent walked itself (ALLOC_RAW), and walks
	// that found no whole stack (then GetStackTrace's ALLOC).
	RawStacks    uint64
	RawFallbacks uint64
}

// CensusKind says why a census ran.
type CensusKind uint32

// Census kinds.
const (
	CensusAttach  CensusKind = 1 // at the start of an attached profile
	CensusAfterGC CensusKind = 2 // large objects the heap sampler missed
)

// CensusStatus is CENSUS_END's outcome bits.
type CensusStatus uint32

// Census outcome bits (DJX_CENSUS_* in agent/src/djx.h).
const (
	CensusOverBudget     CensusStatus = 0x1 // the heap walk passed the pause budget: no census
	CensusCancelled      CensusStatus = 0x2
	CensusFailed         CensusStatus = 0x4
	CensusHolders        CensusStatus = 0x8  // every object has its holder chain
	CensusHoldersSkipped CensusStatus = 0x10 // the holder walk would have passed the budget
	CensusHoldersPartial CensusStatus = 0x20 // it did: objects it had not reached have none
	CensusHoldersFailed  CensusStatus = 0x40
	CensusPartial        CensusStatus = 0x80 // the heap walk passed the budget: objects past where it stopped are left out
)

// CensusStart opens a census; the loader holds its join at Time until the
// CensusEnd, so that samples from then on meet the census objects.
type CensusStart struct {
	Time uint64
	Kind CensusKind
}

// CensusPath is one hop of a holder chain: the chain ID is the chain
// Parent (0: none, Hop is the GC root) followed by Hop.
type CensusPath struct {
	ID, Parent uint32
	Hop        string // "RealService.index (static)", "java.util.HashMap.table", "[]"
}

// Census is one object that existed when the census ran.
type Census struct {
	Time    uint64 // from when Addr holds
	Addr    uint64
	Size    uint64
	Tag     uint64 // as ALLOC's tag
	Path    uint32 // holder chain (CensusPath ID), 0: unknown
	Kind    CensusKind
	TypeSig string
}

// CensusEnd closes a census with what it found and cost.
type CensusEnd struct {
	Time        uint64
	Kind        CensusKind
	Status      CensusStatus
	Objects     uint64 // CENSUS records sent
	Bytes       uint64
	HeapObjects uint64 // every object the heap walk saw
	HeapBytes   uint64
	// The two stop-the-world walks and the work after them (no pause).
	HeapWalkNanos   uint64
	HolderWalkNanos uint64
	EmitNanos       uint64
	Paths           uint64 // holder chains interned
	Reached         uint64 // objects the holder walk reached
	Unreachable     uint64 // large objects no root reached (garbage): not tracked
	Unplaced        uint64 // references the walk could not place on a chain
	Note            string
	Strays          uint64 // objects the JVM returned without the census's tag: left out
	// The heap walk runs in passes of at most the pause budget each;
	// PauseMaxNanos is the longest stop-the-world pause of the census.
	HeapWalkPasses uint64
	PauseMaxNanos  uint64
}

// Stack status codes below zero. 0 and -1..-10 are AsyncGetCallTrace's own
// (ticks_no_Java_frame ... ticks_safepoint); the agent adds its own below.
const (
	StackNoJavaFrame    = 0
	StackNoClassLoad    = -1
	StackGCActive       = -2
	StackUnknownNotJava = -3
	StackNotWalkableNot = -4
	StackUnknownJava    = -5
	StackNotWalkableJ   = -6
	StackUnknownState   = -7
	StackThreadExit     = -8
	StackDeopt          = -9
	StackSafepoint      = -10
	// StackNoEnv: the thread has no JNIEnv (GC, compiler or other native
	// threads): no Java stack to ask for.
	StackNoEnv = -100
)

// Stack is one thread's Java stack at the moment the handler ran.
type Stack struct {
	Time   uint64  // CLOCK_MONOTONIC ns when the handler ran
	TID    uint32  // kernel thread id
	Status int32   // number of frames (> 0), or a Stack* code (≤ 0)
	PC     uint64  // the interrupted instruction pointer (ucontext RIP)
	Frames []Frame // innermost first; BCI -3 marks a native method (ASGCT's lineno)
}

// Code is one blob of JIT-compiled code of a method.
type Code struct {
	Time   uint64
	Method uint64 // jmethodID of the compiled (root) method
	Start  uint64 // code_addr
	Size   uint32
	// PCs: scope descriptors sorted by PC, each with its inlining chain,
	// innermost method first (JVMTI_CMLR_INLINE_INFO). Empty when the JVM
	// gave none.
	PCs []PCInfo
}

// PCInfo is the (inlined) Java position of the code ending at PC.
type PCInfo struct {
	PC     uint64
	Frames []Frame
}

// CodeUnload says the compiled code of Method at Start was freed.
type CodeUnload struct {
	Time   uint64
	Method uint64
	Start  uint64
}

// Stub is code the JVM generated outside Java methods.
type Stub struct {
	Time  uint64
	Start uint64
	Size  uint32
	Name  string // "Interpreter", "StubRoutines::..." as the JVM names it
}

// Bye is the last record of a stream.
type Bye struct {
	Reason string // "detach" or "vmdeath"
}

// Interval says that from Time on the heap sampling interval is Interval
// bytes (body: u64 time, u64 interval).
type Interval struct {
	Time     uint64
	Interval uint64
}

// Free says that the object tagged Tag was collected; Time is when the JVM
// reported it, which may be well after the GC that freed it.
type Free struct {
	Time uint64
	Tag  uint64
}

// GCStart marks the start of a stop-the-world collection.
type GCStart struct {
	Time uint64
}

// GCFinish marks the end of a stop-the-world collection.
type GCFinish struct {
	Time uint64
}

// Reconcile lists the tracked objects whose address changed, at Time, read
// after the latest GC_FINISH and before any later GC_START; the last of a
// scan may be empty.
type Reconcile struct {
	Time    uint64
	Objects []TagAddr
}

// TagAddr is one tagged object's address.
type TagAddr struct {
	Tag  uint64
	Addr uint64
}

// ErrorRec reports a non-fatal problem inside the agent.
type ErrorRec struct {
	Message string
}

// Unknown is a record of a type this package does not know.
type Unknown struct {
	RecType RecordType
	Body    []byte
}

func (*Hello) Type() RecordType       { return TypeHello }
func (*Method) Type() RecordType      { return TypeMethod }
func (*Alloc) Type() RecordType       { return TypeAlloc }
func (*AllocRaw) Type() RecordType    { return TypeAllocRaw }
func (*Stats) Type() RecordType       { return TypeStats }
func (*Bye) Type() RecordType         { return TypeBye }
func (*ErrorRec) Type() RecordType    { return TypeError }
func (*Interval) Type() RecordType    { return TypeInterval }
func (*Free) Type() RecordType        { return TypeFree }
func (*GCStart) Type() RecordType     { return TypeGCStart }
func (*GCFinish) Type() RecordType    { return TypeGCFinish }
func (*Reconcile) Type() RecordType   { return TypeReconcile }
func (u *Unknown) Type() RecordType   { return u.RecType }
func (*Stack) Type() RecordType       { return TypeStack }
func (*Code) Type() RecordType        { return TypeCode }
func (*CodeUnload) Type() RecordType  { return TypeCodeUnload }
func (*Stub) Type() RecordType        { return TypeStub }
func (*CensusStart) Type() RecordType { return TypeCensusStart }
func (*CensusPath) Type() RecordType  { return TypeCensusPath }
func (*Census) Type() RecordType      { return TypeCensus }
func (*CensusEnd) Type() RecordType   { return TypeCensusEnd }
func (*TypesInfo) Type() RecordType   { return TypeTypesInfo }
func (*Class) Type() RecordType       { return TypeClass }
func (*Root) Type() RecordType        { return TypeRoot }
func (*RootsEnd) Type() RecordType    { return TypeRootsEnd }

// TypesInfo says whether CLASS records follow and how the JVM encodes
// references and header klass words.
type TypesInfo struct {
	OK      bool   // CLASS records follow
	Fields  bool   // ... with their instance fields
	Statics bool   // ... and their statics, by offset in the class's mirror
	Reason  string // why not OK, Fields or Statics; "" otherwise
	// A reference field of OopBytes 4 holds a narrow oop: the address is
	// OopBase + narrow << OopShift. OopBytes 8: the address itself.
	OopBase  uint64
	OopShift uint32
	OopBytes uint32
	// The klass word at offset 8 of an object: KlassBytes 4, a narrow
	// klass (Klass* = KlassBase + narrow << KlassShift); 8, the Klass*.
	KlassBase  uint64
	KlassShift uint32
	KlassBytes uint32
	// KlassInMark, when not 0, says the object header is compact
	// (-XX:+UseCompactObjectHeaders): the narrow klass (KlassBytes 4) is
	// the mark word's bits from KlassInMark up, not the word at offset 8.
	// A trailing field: 0 from an agent that does not send it.
	KlassInMark uint32
}

// Class is one loaded class: its Klass*, JVM signature, instance fields
// and statics.
type Class struct {
	Time   uint64
	Klass  uint64 // Klass*
	Narrow uint32 // the narrow klass when TypesInfo.KlassBytes is 4, else 0
	Sig    string // "Ljava/util/TreeMap$Entry;", "[J"
	Fields []Field
	// Statics are the statics the class declares (Static set), by offset
	// in its java.lang.Class instance; none when TypesInfo.Statics is
	// false. Apart from Fields, so that a reader of instance layouts
	// never takes a static's offset for an instance field's.
	Statics []Field
}

// Field is one instance field, declared or inherited, or one static, by
// offset.
type Field struct {
	Offset uint32 // from the object's start; a static's, from its class's mirror's
	Name   string
	Sig    string // "J", "Ljava/lang/Object;"
	Static bool
}

// RootKind is the JVMTI heap reference kind (jvmtiHeapReferenceKind) of
// the root that names a ROOT's object.
type RootKind uint32

// Root kinds.
const (
	RootJNIGlobal  RootKind = 21
	RootMonitor    RootKind = 23
	RootStackLocal RootKind = 24
	RootJNILocal   RootKind = 25 // a native frame's handle, or a constant of a compiled frame's code
	RootThread     RootKind = 26
	RootOther      RootKind = 27 // held by the VM itself
)

func (k RootKind) String() string {
	switch k {
	case RootJNIGlobal:
		return "jni-global"
	case RootMonitor:
		return "monitor"
	case RootStackLocal:
		return "stack-local"
	case RootJNILocal:
		return "jni-local"
	case RootThread:
		return "thread"
	case RootOther:
		return "other"
	}
	return fmt.Sprintf("root kind %d", uint32(k))
}

// Root is one object a root holds (see the package comment).
type Root struct {
	Time  uint64 // Addr holds from Time until the next GC_START
	Addr  uint64
	Kind  RootKind
	Rank  uint32 // 0: its thread's outermost frame, or not a frame
	Reach uint32 // roots that reached the object
	Hop   string // "Main.main:54 local #5 (thread \"main\")", "JNI global"
}

// RootsStatus is ROOTS_END's outcome bits; 0: every root was sent.
type RootsStatus uint32

// Roots outcome bits (DJX_ROOTS_* in agent/src/djx.h).
const (
	RootsFailed  RootsStatus = 0x1 // a JVMTI call failed or memory ran out: the note says which
	RootsCapped  RootsStatus = 0x2 // more roots than a pass keeps: the first ones were sent
	RootsRefused RootsStatus = 0x4 // this JVM's object addresses cannot be read safely: none sent
	// RootsNoVM: the VM's own roots (RootOther) were left out but the
	// first: before JDK 21, a heap walk that collected them all ends by
	// touching every object in the heap (a pause that grows with it).
	RootsNoVM RootsStatus = 0x8
)

// RootsEnd closes a roots pass with what it sent and cost.
type RootsEnd struct {
	Time        uint64
	Roots       uint64 // ROOT records sent
	FollowNanos uint64 // FollowReferences: the pause
	TagsNanos   uint64 // GetObjectsWithTags, all calls
	Status      RootsStatus
	Note        string
	// Trailing.
	Refs         uint64 // root references reported (several may hold one object)
	Objects      uint64 // distinct objects they hold
	Threads      uint64
	Gone         uint64 // objects collected before they were read
	TagsMaxNanos uint64 // the longest GetObjectsWithTags call
	EmitNanos    uint64 // naming the roots and sending them (no pause)
}
