// HotSpot x86-64 stack unwinder for the sampling program, compiled only
// into the DjxUnwind variant (-DDJX_UNWIND): the default object stays as
// it was. It walks the sampled thread's frames from pt_regs and writes raw
// (kind|blob, a, b) triples into the sample (its programs:
// hotspot_unwind_prog.h); package bpfstack names them from the JVM's
// memory (vmcode). Every read is bpf_probe_read_user, every
// loop has a constant bound (bounded loops: Linux 5.3+, no bpf_loop), and
// a failure ends the walk with a reason code.
//
// Frames, as HotSpot's frame_x86 lays them out (JDK 17 and 25 agree):
//   - a blob with a fixed frame (nmethods, runtime stubs: _frame_size > 0):
//     sender sp = sp + frame_size words, return address at sender sp - 8,
//     saved rbp at sender sp - 16 (frame::sender_for_compiled_frame);
//   - a blob without one (the interpreter, BufferBlob stubs such as
//     call_stub): rbp-linked, return address at rbp + 8, caller's rbp at
//     rbp, caller's sp (unextended: before a c2i adapter grew it) at
//     rbp - 8 (interpreter_frame_sender_sp_offset = -1); an interpreter
//     frame holds its Method* at rbp - 24 (interpreter_frame_method_offset
//     = -3) and its bcp at rbp - 64 (interpreter_frame_bcp_offset = -8,
//     after the mirror, mdp, cache and locals slots);
//   - native code (libjvm is built with frame pointers): rbp-linked.
// The kind of a fixed-frame-less blob (interpreter or stub) is told in
// user space by its start, so BPF needs no interpreter bounds.

#ifndef DJX_HOTSPOT_UNWIND_H
#define DJX_HOTSPOT_UNWIND_H

// Physical frames per sample. The walk runs UNWIND_STEP_FRAMES frames per
// program run and tail-calls itself for the next ones (the verifier
// checks a run's frames once, not the whole walk's), so the kernel's
// chain limit (33 tail calls; 32 before 5.17) is the last bound:
// 128 / 4 = 32 runs. The agent's stacks go to 128 Java frames.
#define UNWIND_FRAMES 128
#define UNWIND_STEP_FRAMES 4
#define UNWIND_HEAPS 4   // CodeCache has at most 3 heaps (segmented code cache)
// Segment map hops to a block's start: HotSpot writes the distances so
// that a block of n segments takes about n/254 + log(n) hops; 32 covers
// blobs of megabytes at 128-byte segments.
#define SEGMAP_HOPS 32
// Native frames walked by rbp before the first Java frame (a sample in
// libjvm called from Java code); a libc frame without frame pointer
// ends it.
#define NATIVE_FRAMES 8
#define FREE_SEGMENT 0xFF

// Loaded once per use: the verifier then need not carry bounds between
// checks (as READ in sample.bpf.c).
#define UW_READ(x) (*(volatile typeof(x) *)&(x))

// Frame kinds, in the low bits of unwind_frame.blob (blob starts are
// segment-aligned, at least 16 bytes).
enum unwind_kind {
	UW_SIZED = 1,  // blob with a fixed frame: a = pc, b = the nmethod's compile id
	UW_FP = 2,     // rbp-linked blob: a = Method* slot, b = bcp slot (the interpreter's)
	UW_NATIVE = 3, // pc outside the code cache: a = pc, blob 0
	UW_KIND_MASK = 7,
};

// Why a walk ended.
enum unwind_end {
	UW_END_DEPTH = 0,    // UNWIND_FRAMES reached: truncated
	UW_END_ENTRY = 1,    // a Java frame returned into native code: the thread's entry, complete
	UW_END_NO_JAVA = 2,  // native frames only (no code cache pc within NATIVE_FRAMES)
	UW_END_READ = 3,     // a stack or code cache read failed
	UW_END_SEGMAP = 4,   // the segment map walk failed (free block, too many hops)
	UW_END_FRAME = 5,    // a frame went backwards or had an impossible size
	UW_END_NO_INFO = 6,  // no code heaps known for the process
	UW_END_PROLOGUE = 7, // the top compiled frame is not set up yet
	UW_END_ZERO = 8,     // a zero pc or rbp: the end of the chain
	UW_END_CHUNK = 9,    // a virtual thread's frozen frames could not be walked
};

struct unwind_frame {
	__u64 blob; // blob start | enum unwind_kind
	__u64 a;
	__u64 b;
};

struct code_heap {
	__u64 low;        // committed start: segment 0
	__u64 high;       // committed end
	__u64 segmap;     // segment map: a byte per segment
	__u64 segmap_len; // committed bytes of the segment map
	__u32 log2_seg;
	__u32 pad;
};

// One JVM's code cache and CodeBlob layout (vmcode.Offsets), filled by
// the loader.
struct unwind_target {
	__u32 nheaps;
	__u32 hb_size;        // sizeof(HeapBlock): a blob starts this far into its block
	__u32 off_frame_size; // CodeBlob::_frame_size (int, words)
	__u32 off_frame_complete; // CodeBlob::_frame_complete_offset: int, int16_t from JDK 23
	__u32 off_code_begin; // CodeBlob::_code_begin (pointer), or its offset (int, JDK 23+)
	__u32 code_is_offset;
	__u32 frame_complete_16; // _frame_complete_offset is an int16_t
	__u32 off_compile_id;    // nmethod::_compile_id (int; 0: not read)
	// Unique per process and code cache given (loader.SetUnwind): the key
	// of the frame cache's entries with the pc, so that another process,
	// or a new JVM with the same pid, misses.
	__u64 gen;
	struct code_heap heaps[UNWIND_HEAPS];
	// Virtual threads (JDK 21+; all 0 before): the return barrier
	// (StubRoutines::_cont_returnBarrier), where the static
	// ContinuationEntry::_enter_special (the enterSpecial nmethod, set
	// at the first continuation) is, ContinuationEntry::size() and its
	// _cont's offset, the offset of a Continuation's tail (its top
	// StackChunk: a narrow oop when narrow_oops, decoded as oop_base +
	// n << oop_shift), and those of a StackChunk's sp, bottom (ints, in
	// words from its stack), pc, stack and parent (an oop).
	__u64 ret_barrier;
	__u64 enter_special;
	__u64 oop_base;
	__u32 oop_shift;
	__u32 narrow_oops;
	__u32 entry_size;
	__u32 off_entry_cont;
	__u32 off_cont_tail;
	__u32 off_chunk_sp;
	__u32 off_chunk_bottom;
	__u32 off_chunk_pc;
	__u32 off_chunk_stack;
	__u32 off_chunk_parent;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32); // tgid
	__type(value, struct unwind_target);
} unwind_targets SEC(".maps");

const struct unwind_frame *unused_unwind_frame __attribute__((unused));
const struct unwind_target *unused_unwind_target __attribute__((unused));
const enum unwind_kind *unused_unwind_kind __attribute__((unused));
const enum unwind_end *unused_unwind_end __attribute__((unused));

// Where the walk is, kept in the per-CPU scratch between the step
// program's runs: the frame's pc, its (unextended) sp and rbp, how many
// frames are written, whether a Java-side frame (one in the code cache)
// was seen, and the first 3 bytes of the instruction at the sampled pc.
struct uw_state {
	__u64 pc, sp, fp;
	// A virtual thread's entry: the enterSpecial nmethod (0: none yet),
	// and the bottom of its StackChunk while the walk is in it (0: on
	// the thread's stack; rbp then holds the address of the frame's saved
	// rbp slot, relative in a chunk).
	__u64 enter_blob, chunk_end;
	__u32 n;
	__u32 java;
	__u32 insn;
	__u32 tgid;
	__u32 tick; // the sample's time in ticks (UW_TICK_SHIFT)
	__u32 barrier; // the walk is at the return barrier (uw_step goes on in the chunk)
};

// A per-CPU cache of frames by (code cache, pc): the blob, its frame size
// (0: rbp-linked) and the int at nmethod::_compile_id's offset, so that a
// frame seen before costs no read, or one (that int) when its entry was
// last checked UW_TRUST_TICKS or more ago, instead of the segment map walk
// and the blob's header. Direct-mapped. A pc on a live stack is in live
// code, so an entry for it is stale only if its blob was freed and other
// code now covers the pc: a new nmethod at the blob holds another compile
// id (unique among a JVM's nmethods), and one starting elsewhere holds
// the old id at that offset only by chance. HotSpot frees an nmethod only
// after a sweep or GC cycle found it on no stack, so within a check's
// trust (about 67 ms) the same pc in a new blob would take that cycle, a
// new compile into the same memory and a frame at the very same pc. The
// checks read cold cache lines: skipping them is most of a warm walk's
// saving (docs/stacks.md).
#define UW_CACHE_SLOTS 256
#define UW_TICK_SHIFT 20 // a tick is 2^20 ns, about 1 ms
#define UW_TRUST_TICKS 64

struct uw_cache_entry {
	__u64 pc;
	__u64 blob;
	__u32 gen; // unwind_target.gen's low half
	__s32 words;
	__u32 id;
	__u32 checked; // the tick of the last check
};

static __always_inline __u32 uw_slot(__u64 pc)
{
	return ((pc >> 2) ^ (pc >> 11)) & (UW_CACHE_SLOTS - 1);
}

static __always_inline __u64 uw_read(__u64 addr, int *err)
{
	__u64 v = 0;
	if (bpf_probe_read_user(&v, sizeof(v), (void *)addr) != 0)
		*err = 1;
	return v;
}

// uw_heap returns the index of the code heap holding pc, or -1.
static __always_inline int uw_heap(const struct unwind_target *ut, __u64 pc)
{
	for (int h = 0; h < UNWIND_HEAPS; h++) {
		if (h >= UW_READ(ut->nheaps))
			break;
		if (pc >= UW_READ(ut->heaps[h].low) && pc < UW_READ(ut->heaps[h].high))
			return h;
	}
	return -1;
}

// uw_blob walks heap h's segment map back from pc's segment to its
// block's first (CodeHeap::find_start: a byte is the distance to a
// segment nearer the start, 0 at the start, 0xFF in a free block) and
// returns the blob's start, or 0.
static __always_inline __u64 uw_blob(const struct unwind_target *ut, int h, __u64 pc)
{
	if (h < 0 || h >= UNWIND_HEAPS)
		return 0;
	const struct code_heap *ch = &ut->heaps[h];
	__u32 shift = UW_READ(ch->log2_seg) & 31;
	__u64 low = UW_READ(ch->low), segmap = UW_READ(ch->segmap);
	__u64 seg = (pc - low) >> shift;
	if (seg >= UW_READ(ch->segmap_len))
		return 0;
	for (int i = 0; i < SEGMAP_HOPS; i++) {
		__u8 v = 0;
		if (bpf_probe_read_user(&v, 1, (void *)(segmap + seg)) != 0 || v == FREE_SEGMENT || v > seg)
			return 0;
		if (v == 0)
			return low + (seg << shift) + UW_READ(ut->hb_size);
		seg -= v;
	}
	return 0;
}

// uw_cached says whether e is still right for the frame at st: checked
// within the trust, or its blob still holding e's compile id.
static __always_inline int uw_cached(const struct unwind_target *ut, const struct uw_state *st,
				     struct uw_cache_entry *e)
{
	__u32 off = UW_READ(ut->off_compile_id);
	__s32 id = 0;
	if (st->tick - e->checked < UW_TRUST_TICKS)
		return 1;
	if (!off || bpf_probe_read_user(&id, 4, (void *)(e->blob + off)) != 0 || (__u32)id != e->id)
		return 0;
	e->checked = st->tick;
	return 1;
}

// uw_prologue unwinds a top compiled frame whose prologue has not built
// it yet, told by the instruction at pc (insn: its first 3 bytes, 0 if
// unknown). C1's and C2's x86-64 prologues are a stack bang `mov
// %eax,-N(%rsp)`, `push %rbp`, `sub $N,%rsp`: before the push the return
// address is at sp, at the sub it is above the saved rbp. Anything else
// (the inline cache check, the entry barrier) stops the walk.
static __always_inline int uw_prologue(struct uw_state *st, __u32 insn)
{
	int err = 0;
	__u64 pc, sp, fp = st->fp;
	if ((insn & 0xff) == 0x55 || (insn & 0xffffff) == 0x248489) {
		pc = uw_read(st->sp, &err);
		sp = st->sp + 8;
	} else if ((insn & 0xffffff) == 0xec8348 || (insn & 0xffffff) == 0xec8148) {
		fp = uw_read(st->sp, &err);
		pc = uw_read(st->sp + 8, &err);
		sp = st->sp + 16;
	} else {
		return UW_END_PROLOGUE;
	}
	if (err)
		return UW_END_READ;
	st->pc = pc;
	st->sp = sp;
	st->fp = fp;
	return -1;
}

#define UW_NOT_EPILOGUE (-2)

// uw_epilogue unwinds a top compiled frame already torn down, told by the
// instruction at pc. C1's and C2's x86-64 epilogue is `add $N,%rsp`, `pop
// %rbp`, the return poll `cmp disp(%r15),%rsp` (then `ja`) and `ret`: at
// the pop the saved rbp is at sp, after it the return address is. It
// returns UW_NOT_EPILOGUE for any other instruction.
static __always_inline int uw_epilogue(struct uw_state *st, __u32 insn)
{
	__u64 link[2] = {};
	__u32 op = insn & 0xffffff;
	if ((insn & 0xff) == 0x5d) {
		if (bpf_probe_read_user(link, sizeof(link), (void *)st->sp) != 0)
			return UW_END_READ;
		st->fp = link[0];
		st->pc = link[1];
		st->sp += 16;
		return -1;
	}
	if ((insn & 0xff) == 0xc3 || op == 0xa73b49 || op == 0x673b49) {
		if (bpf_probe_read_user(link, 8, (void *)st->sp) != 0)
			return UW_END_READ;
		st->pc = link[0];
		st->sp += 8;
		return -1;
	}
	return UW_NOT_EPILOGUE;
}

// uw_sized unwinds a fixed-size frame of blob, recorded in f: the
// sender's sp, pc and rbp. In the top frame a pc before the frame is
// complete means the prologue has not built it (uw_prologue). A frame of
// enterSpecial below the top is a virtual thread's entry: its stack ends
// there, whole, without the carrier's frames (f is dropped).
static __always_inline int uw_sized(const struct unwind_target *ut, struct uw_state *st, struct unwind_frame *f,
				    __u64 blob, __s32 words, int top, __u32 insn)
{
	int err = 0;
	if (!top && blob == st->enter_blob) {
		f->blob = 0;
		return UW_END_ENTRY;
	}
	if (top) {
		__s32 complete = 0;
		__u64 begin = 0;
		if (bpf_probe_read_user(&complete, 4, (void *)(blob + UW_READ(ut->off_frame_complete))) != 0)
			return UW_END_READ;
		if (UW_READ(ut->frame_complete_16))
			complete = (__s16)complete; // little-endian: the field's two bytes
		if (UW_READ(ut->code_is_offset)) {
			__s32 off = 0;
			if (bpf_probe_read_user(&off, 4, (void *)(blob + UW_READ(ut->off_code_begin))) != 0)
				return UW_END_READ;
			begin = blob + off;
		} else {
			begin = uw_read(blob + UW_READ(ut->off_code_begin), &err);
		}
		if (err)
			return UW_END_READ;
		if (complete > 0 && st->pc < begin + complete)
			return uw_prologue(st, insn);
		int r = uw_epilogue(st, insn);
		if (r != UW_NOT_EPILOGUE)
			return r;
	}
	// The saved rbp and the return address in one read.
	__u64 sender = st->sp + (__u64)words * 8, link[2] = {};
	if (bpf_probe_read_user(link, sizeof(link), (void *)(sender - 16)) != 0)
		return UW_END_READ;
	st->pc = link[1];
	st->sp = sender;
	st->fp = st->chunk_end ? sender - 16 : link[0];
	return -1;
}

// The slots of an rbp-linked frame, read at once from rbp - 64 up to the
// return address: the interpreter's bcp (rbp - 64) and Method* (rbp - 24),
// the sender's sp (rbp - 8), the caller's rbp and the return address.
enum {
	UW_FP_BCP = 0,
	UW_FP_METHOD = 5,
	UW_FP_SENDER_SP = 7,
	UW_FP_LINK = 8,
	UW_FP_PC = 9,
	UW_FP_SLOTS = 10,
};

// uw_fp unwinds an rbp-linked frame whose slots (from rbp - 64) are in
// w; java says whether it may be an interpreter frame, whose sender sp is
// saved in it.
static __always_inline void uw_fp(struct uw_state *st, const __u64 *w, int java)
{
	__u64 fp = st->fp, sp = fp + 16;
	if (java) {
		// The interpreter saves the caller's unextended sp; a stub
		// that never set it has left rbp + 16's neighbour there.
		__u64 saved = w[UW_FP_SENDER_SP];
		if (saved > st->sp && saved <= fp + 16 + (1 << 16))
			sp = saved;
	}
	st->pc = w[UW_FP_PC];
	st->sp = sp;
	st->fp = w[UW_FP_LINK];
}

// uw_fp_ok says whether rbp can be the frame pointer of the frame at sp:
// above it, aligned, and at most 1 MiB away.
static __always_inline int uw_fp_ok(const struct uw_state *st)
{
	__u64 fp = st->fp;
	return fp > st->sp && !(fp & 7) && fp - st->sp <= (1 << 20);
}

// uw_frame met the return barrier: the next run of uw_step goes on in
// the chunk (uw_chunk), so that the verifier checks one copy of it,
// not one per frame.
#define UW_AT_BARRIER (-4)
#define UW_CHUNK_ENTERED (-3)

// uw_oop reads the oop field at addr (narrow with compressed oops); 0 if
// it cannot.
static __always_inline __u64 uw_oop(const struct unwind_target *ut, __u64 addr)
{
	__u64 v = 0;
	if (UW_READ(ut->narrow_oops)) {
		__u32 n = 0;
		if (bpf_probe_read_user(&n, 4, (void *)addr) != 0 || !n)
			return 0;
		v = UW_READ(ut->oop_base) + ((__u64)n << (UW_READ(ut->oop_shift) & 7));
	} else if (bpf_probe_read_user(&v, 8, (void *)addr) != 0) {
		return 0;
	}
	return v & 7 ? 0 : v;
}

// Chunks tried from a continuation's tail: an empty one's frames were
// all thawed, the rest are in its parent.
#define UW_CHUNKS 3

// uw_chunk follows the return barrier, where a virtual thread's stack
// goes on in a StackChunk (its frames not thawed yet, in the heap). The
// ContinuationEntry is right below the entry frame's saved rbp, which an
// interpreted lowest thawed frame links to; a compiled one returns to
// the entry's sp. The continuation's tail chunk, or the first non-empty
// one of its parents, holds the frames from the chunk's sp to its
// bottom, laid out as on a stack, the top frame's pc in the chunk. The
// walk goes on there, once.
static __always_inline int uw_chunk(const struct unwind_target *ut, struct uw_state *st)
{
	int err = 0;
	__s32 csp = 0, bottom = 0;
	__u64 entry = st->fp - UW_READ(ut->entry_size);
	if (st->chunk_end)
		return UW_END_CHUNK;
	if (entry + 64 < st->sp || entry > st->sp + 64 || (entry & 7))
		entry = st->sp;
	__u64 cont = uw_read(entry + UW_READ(ut->off_entry_cont), &err);
	if (err || !cont || (cont & 7))
		return UW_END_CHUNK;
	__u64 chunk = uw_oop(ut, cont + UW_READ(ut->off_cont_tail));
	for (int i = 0; i < UW_CHUNKS; i++) {
		if (!chunk)
			return UW_END_CHUNK;
		if (bpf_probe_read_user(&csp, 4, (void *)(chunk + UW_READ(ut->off_chunk_sp))) != 0 ||
		    bpf_probe_read_user(&bottom, 4, (void *)(chunk + UW_READ(ut->off_chunk_bottom))) != 0)
			return UW_END_CHUNK;
		if (csp < bottom)
			break;
		chunk = uw_oop(ut, chunk + UW_READ(ut->off_chunk_parent));
	}
	__u64 pc = uw_read(chunk + UW_READ(ut->off_chunk_pc), &err);
	if (err || csp < 0 || bottom <= csp || bottom > (1 << 20))
		return UW_END_CHUNK;
	__u64 stack = chunk + UW_READ(ut->off_chunk_stack);
	st->sp = stack + (__u64)csp * 8;
	st->chunk_end = stack + (__u64)bottom * 8;
	st->fp = st->sp - 16; // the top frame's saved rbp slot
	st->pc = pc;
	return UW_CHUNK_ENTERED;
}

// uw_chunk_fp unwinds an interpreter frame in a chunk: its rbp is
// stored relative to its slot, in words (ContinuationHelper::Frame::
// patch_callee_link_relative); the caller's sp is right above the return
// address, its rbp slot at this frame's rbp.
static __always_inline int uw_chunk_fp(struct uw_state *st, struct unwind_frame *f)
{
	__u64 w[UW_FP_SLOTS] = {};
	__s64 rel = 0;
	if (bpf_probe_read_user(&rel, 8, (void *)st->fp) != 0)
		return UW_END_CHUNK;
	__u64 fp = st->fp + (__u64)(rel * 8);
	if (fp <= st->sp || (fp & 7) || fp + 16 > st->chunk_end || fp - st->sp > (1 << 16))
		return UW_END_CHUNK;
	if (bpf_probe_read_user(w, sizeof(w), (void *)(fp - 64)) != 0)
		return UW_END_CHUNK;
	f->a = w[UW_FP_METHOD];
	f->b = w[UW_FP_BCP];
	st->pc = w[UW_FP_PC];
	st->sp = fp + 16;
	st->fp = fp;
	return -1;
}

// uw_frame records the frame at st and unwinds it. It returns -1 to go on,
// else the reason the walk ends; st->java says whether a Java-side frame
// (one in the code cache) has been seen.
static __always_inline int uw_frame(const struct unwind_target *ut, struct uw_state *st, struct unwind_frame *f,
				    struct uw_cache_entry *cache, int top)
{
	__u64 w[UW_FP_SLOTS] = {};
	if (st->pc == 0)
		return UW_END_ZERO;
	if (!top && st->pc == UW_READ(ut->ret_barrier))
		return UW_AT_BARRIER;
	int h = uw_heap(ut, st->pc);
	if (h < 0) {
		if (st->java)
			return UW_END_ENTRY;
		f->blob = UW_NATIVE;
		f->a = st->pc;
		f->b = 0;
		if (st->fp == 0)
			return UW_END_ZERO;
		if (!uw_fp_ok(st))
			return UW_END_FRAME;
		if (bpf_probe_read_user(&w[UW_FP_LINK], 16, (void *)st->fp) != 0)
			return UW_END_READ;
		uw_fp(st, w, 0);
		return -1;
	}
	st->java = 1;
	struct uw_cache_entry *e = &cache[uw_slot(st->pc) & (UW_CACHE_SLOTS - 1)];
	__u64 blob;
	__s32 words;
	// The hit and the miss each unwind a fixed-size frame themselves:
	// joined after the if, their paths doubled the verifier's work.
	if (e->pc == st->pc && e->gen == (__u32)UW_READ(ut->gen) && uw_cached(ut, st, e)) {
		words = e->words;
		if (words < 0 || words > (1 << 16))
			return UW_END_FRAME;
		if (words > 0) {
			f->blob = e->blob | UW_SIZED;
			f->a = st->pc;
			f->b = e->id;
			return uw_sized(ut, st, f, e->blob, words, top, st->insn);
		}
		blob = e->blob;
	} else {
		blob = uw_blob(ut, h, st->pc);
		if (!blob)
			return UW_END_SEGMAP;
		words = 0;
		if (bpf_probe_read_user(&words, 4, (void *)(blob + UW_READ(ut->off_frame_size))) != 0)
			return UW_END_READ;
		if (words < 0 || words > (1 << 16))
			return UW_END_FRAME;
		// The compile id tells user space which nmethod the blob held,
		// so that it may name the pc from its cache without a read.
		__s32 id = 0;
		__u32 off = UW_READ(ut->off_compile_id);
		if (off && bpf_probe_read_user(&id, 4, (void *)(blob + off)) == 0) {
			e->pc = st->pc;
			e->blob = blob;
			e->words = words;
			e->id = (__u32)id;
			e->gen = (__u32)UW_READ(ut->gen);
			e->checked = st->tick;
		}
		if (words > 0) {
			f->blob = blob | UW_SIZED;
			f->a = st->pc;
			f->b = (__u32)id;
			return uw_sized(ut, st, f, blob, words, top, st->insn);
		}
	}
	f->blob = blob | UW_FP;
	f->a = 0;
	f->b = 0;
	if (st->chunk_end)
		return uw_chunk_fp(st, f);
	int r = -1;
	if (st->fp == 0)
		r = UW_END_ZERO;
	else if (!uw_fp_ok(st))
		r = UW_END_FRAME;
	else if (bpf_probe_read_user(w, sizeof(w), (void *)(st->fp - 64)) != 0)
		r = UW_END_READ;
	if (r < 0) {
		f->a = w[UW_FP_METHOD];
		f->b = w[UW_FP_BCP];
		uw_fp(st, w, 1);
		return -1;
	}
	if (top) {
		// A frameless stub (a vtable stub, a GC barrier) called
		// from code that uses rbp as a register: the return
		// address is at sp.
		int err = 0;
		__u64 pc = uw_read(st->sp, &err);
		if (err)
			return UW_END_READ;
		st->pc = pc;
		st->sp += 8;
		return -1;
	}
	return r;
}

// uw_walk walks up to UNWIND_STEP_FRAMES frames from st into frames
// (st->n of them written so far). It returns -1 when the walk goes on in
// the next run, UW_AT_BARRIER at the return barrier, else why it ended. Native frames count against
// NATIVE_FRAMES until the first Java frame; sp must grow with every
// frame, so a forged stack cannot loop.
static __always_inline int uw_walk(const struct unwind_target *ut, struct uw_state *st, struct unwind_frame *frames,
				   struct uw_cache_entry *cache)
{
	for (int k = 0; k < UNWIND_STEP_FRAMES; k++) {
		__u32 n = st->n;
		if (n >= UNWIND_FRAMES)
			return UW_END_DEPTH;
		if (!st->java && n >= NATIVE_FRAMES)
			return UW_END_NO_JAVA;
		__u64 sp = st->sp;
		struct unwind_frame *f = &frames[n];
		f->blob = 0;
		int r = uw_frame(ut, st, f, cache, n == 0);
		if (f->blob)
			st->n = n + 1;
		if (r >= 0 || r == UW_AT_BARRIER)
			return r;
		if (st->sp <= sp)
			return UW_END_FRAME;
		// A chunk's bottom frame is the virtual thread's first: past it no
		// room is left for a frame's saved rbp and return address.
		if (st->chunk_end && st->sp + 16 > st->chunk_end)
			return UW_END_ENTRY;
	}
	return st->n >= UNWIND_FRAMES ? UW_END_DEPTH : -1;
}

#endif
