/* The calling thread's Java stack, walked in-process (unwind.h).
 *
 * JVMTI GetStackTrace cost a recorded allocation most of its 30-55 us:
 * HotSpot builds a vframe per frame and a jmethodID per method. This walk
 * reads what the BPF unwinder reads (bpf/hotspot_unwind.h), with plain
 * loads: the native frames from here up by rbp (libjvm and this library
 * keep frame pointers) to the first return address in the code cache, then
 * the Java side, a fixed-size frame by its blob's frame size and an
 * rbp-linked one (the interpreter, call_stub) by rbp, until a frame
 * returns into native code: the thread's entry.
 *
 * Every load is inside memory that is mapped while it is read: the
 * thread's own stack between this frame and its top, and the committed
 * part of a code heap and of its segment map, whose bounds are read from
 * the live CodeHeap each time (they only grow). Code on this thread's stack
 * cannot be freed under it. A walk that leaves those bounds, or meets
 * anything else it does not expect, ends with a reason: the caller then
 * falls back to GetStackTrace. */
#define _GNU_SOURCE
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "unwind.h"
#include "vmstructs.h"

#define UW_HEAPS 4           /* CodeCache has at most 3 heaps */
#define UW_NATIVE_FRAMES 32  /* native frames from here to the first Java-side one */
#define UW_SEGMAP_HOPS 4096  /* a block of 2^16 segments takes about 256 + 16 */
#define UW_MAX_FRAME (1 << 16) /* words */
#define FREE_SEGMENT 0xFF

struct uw_heap {
	uint64_t low, segmap;
	const volatile uint64_t *high, *segmap_high; /* VirtualSpace::_high, live */
	uint32_t log2_seg;
};

static struct {
	int ready; /* atomic: set once the rest is */
	int nheaps;
	struct uw_heap heaps[UW_HEAPS];
	uint64_t hb_size, off_frame_size, off_compile_id;
	/* Virtual threads (JDK 21+; vt 0 before): a JavaThread's
	 * ContinuationEntry*, that entry's size, and the static
	 * ContinuationEntry::_return_pc (a pc in enterSpecial, set at the
	 * first continuation); off_env, the JNIEnv's offset in a JavaThread
	 * (not in vmStructs), is found at the first walk (atomic; 0 unknown). */
	int vt;
	uint64_t off_env, off_cont_entry, entry_size;
	const volatile uint64_t *enter_pc;
} uw;

static int int_field(const char *type, const char *field, uint64_t *off)
{
	const char *ftype;

	return djx_vm_field(type, field, off, &ftype) == 0 && strcmp(ftype, "int") == 0 && *off < 4096 ? 0 : -1;
}

int djx_unwind_init(char *err, size_t errlen)
{
	void *const *heaps_p;
	uint64_t o_len, o_data, o_mem, o_segmap, o_log2, o_low, o_high;

	if (__atomic_load_n(&uw.ready, __ATOMIC_ACQUIRE))
		return 0;
	if (djx_vm_init(err, errlen) != 0)
		return -1;
	heaps_p = djx_vm_static("CodeCache", "_heaps");
	if (heaps_p == NULL || *heaps_p == NULL ||
	    (djx_vm_offset("GrowableArrayBase", "_len", &o_len) && djx_vm_offset("GenericGrowableArray", "_len", &o_len)) ||
	    djx_vm_offset("GrowableArray<int>", "_data", &o_data) || djx_vm_offset("CodeHeap", "_memory", &o_mem) ||
	    djx_vm_offset("CodeHeap", "_segmap", &o_segmap) || djx_vm_offset("CodeHeap", "_log2_segment_size", &o_log2) ||
	    djx_vm_offset("VirtualSpace", "_low", &o_low) || djx_vm_offset("VirtualSpace", "_high", &o_high) ||
	    djx_vm_type_size("HeapBlock", &uw.hb_size) || int_field("CodeBlob", "_frame_size", &uw.off_frame_size) ||
	    int_field("nmethod", "_compile_id", &uw.off_compile_id)) {
		snprintf(err, errlen, "the code cache's layout is not in vmStructs");
		return -1;
	}
	const uint8_t *arr = *heaps_p;
	int n = *(const int *)(arr + o_len);
	const uint8_t *const *data = *(const uint8_t *const *const *)(arr + o_data);
	if (n < 1 || n > UW_HEAPS || data == NULL || uw.hb_size == 0 || uw.hb_size > 64) {
		snprintf(err, errlen, "%d code heaps, HeapBlock of %llu bytes", n, (unsigned long long)uw.hb_size);
		return -1;
	}
	for (int i = 0; i < n; i++) {
		const uint8_t *h = data[i];
		struct uw_heap *u = &uw.heaps[i];
		if (h == NULL) {
			snprintf(err, errlen, "code heap %d is null", i);
			return -1;
		}
		u->low = *(const uint64_t *)(h + o_mem + o_low);
		u->high = (const volatile uint64_t *)(h + o_mem + o_high);
		u->segmap = *(const uint64_t *)(h + o_segmap + o_low);
		u->segmap_high = (const volatile uint64_t *)(h + o_segmap + o_high);
		u->log2_seg = (uint32_t) * (const int *)(h + o_log2);
		if (u->low == 0 || u->segmap == 0 || u->log2_seg < 4 || u->log2_seg > 16 || *u->high < u->low ||
		    *u->segmap_high < u->segmap) {
			snprintf(err, errlen, "code heap %d: an implausible layout", i);
			return -1;
		}
	}
	uw.nheaps = n;
	uw.enter_pc = djx_vm_static("ContinuationEntry", "_return_pc");
	uw.vt = uw.enter_pc != NULL && djx_vm_offset("JavaThread", "_cont_entry", &uw.off_cont_entry) == 0 &&
		djx_vm_type_size("ContinuationEntry", &uw.entry_size) == 0 && uw.off_cont_entry < 4096 &&
		uw.entry_size < 256;
	__atomic_store_n(&uw.ready, 1, __ATOMIC_RELEASE);
	return 0;
}

int djx_unwind_ready(void)
{
	return __atomic_load_n(&uw.ready, __ATOMIC_ACQUIRE);
}

/* Stack bounds by thread, without TLS (util.c says why): a direct-mapped
 * cache keyed by pthread_self(), filled from pthread_getattr_np (a
 * system call and a malloc: once per thread). An entry's key is written
 * last and checked again after its bounds are read. */
#define STACKS 1024
static struct {
	uint64_t self, lo, hi;
} stacks[STACKS];

static uint64_t stack_top(uint64_t sp)
{
	uint64_t self = (uint64_t)pthread_self(), lo, hi;
	size_t k = (self >> 12 ^ self >> 24) & (STACKS - 1);
	pthread_attr_t attr;
	void *addr;
	size_t size;

	if (__atomic_load_n(&stacks[k].self, __ATOMIC_ACQUIRE) == self) {
		lo = __atomic_load_n(&stacks[k].lo, __ATOMIC_RELAXED);
		hi = __atomic_load_n(&stacks[k].hi, __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&stacks[k].self, __ATOMIC_RELAXED) == self && sp >= lo && sp < hi)
			return hi;
	}
	if (pthread_getattr_np(pthread_self(), &attr) != 0)
		return 0;
	int rc = pthread_attr_getstack(&attr, &addr, &size);
	pthread_attr_destroy(&attr);
	lo = (uint64_t)addr;
	hi = lo + size;
	if (rc != 0 || sp < lo || sp >= hi)
		return 0;
	__atomic_store_n(&stacks[k].self, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&stacks[k].lo, lo, __ATOMIC_RELAXED);
	__atomic_store_n(&stacks[k].hi, hi, __ATOMIC_RELAXED);
	__atomic_store_n(&stacks[k].self, self, __ATOMIC_RELEASE);
	return hi;
}

/* The heap holding pc, or NULL; *high is its committed end. */
static const struct uw_heap *heap_of(uint64_t pc, uint64_t *high)
{
	for (int i = 0; i < uw.nheaps; i++) {
		uint64_t h = *uw.heaps[i].high;
		if (pc >= uw.heaps[i].low && pc < h) {
			*high = h;
			return &uw.heaps[i];
		}
	}
	return NULL;
}

/* The blob holding pc: its block's first segment by the segment map
 * (CodeHeap::find_start), then sizeof(HeapBlock) in; 0 if none. */
static uint64_t blob_of(const struct uw_heap *h, uint64_t pc)
{
	const volatile uint8_t *map = (const volatile uint8_t *)h->segmap;
	uint64_t seg = (pc - h->low) >> h->log2_seg, len = *h->segmap_high - h->segmap;

	if (seg >= len)
		return 0;
	for (int i = 0; i < UW_SEGMAP_HOPS; i++) {
		uint8_t v = map[seg];
		if (v == FREE_SEGMENT || v > seg)
			return 0;
		if (v == 0)
			return h->low + (seg << h->log2_seg) + uw.hb_size;
		seg -= v;
	}
	return 0;
}

/* The int at blob + off, inside the committed heap; ok = 0 if not. */
static int32_t blob_int(uint64_t blob, uint64_t off, uint64_t high, int *ok)
{
	if (blob + off + 4 > high) {
		*ok = 0;
		return 0;
	}
	return *(const volatile int32_t *)(blob + off);
}

/* A stack word at a, inside [lo, hi); ok = 0 if not. */
static uint64_t stack_word(uint64_t a, uint64_t lo, uint64_t hi, int *ok)
{
	if (a < lo || a + 8 > hi || (a & 7)) {
		*ok = 0;
		return 0;
	}
	return *(const volatile uint64_t *)a;
}

struct walk {
	uint64_t pc, sp, fp, lo, hi;
};

/* One Java-side frame at w into *f, then its caller into w; 0 to go on,
 * else why the walk ends. */
static uint32_t java_frame(struct walk *w, struct djx_raw_frame *f)
{
	uint64_t high, blob, sp = w->sp;
	const struct uw_heap *h = heap_of(w->pc, &high);
	int ok = 1;

	if (h == NULL)
		return DJX_UW_END_ENTRY;
	if ((blob = blob_of(h, w->pc)) == 0)
		return DJX_UW_END_SEGMAP;
	int32_t words = blob_int(blob, uw.off_frame_size, high, &ok);
	if (!ok)
		return DJX_UW_END_READ;
	if (words < 0 || words > UW_MAX_FRAME)
		return DJX_UW_END_FRAME;
	if (words > 0) {
		int32_t id = blob_int(blob, uw.off_compile_id, high, &ok);
		uint64_t sender = w->sp + (uint64_t)words * 8;
		*f = (struct djx_raw_frame){.blob = blob | DJX_UW_SIZED, .a = w->pc, .b = ok ? (uint32_t)id : 0};
		ok = 1;
		w->fp = stack_word(sender - 16, w->lo, w->hi, &ok);
		w->pc = stack_word(sender - 8, w->lo, w->hi, &ok);
		w->sp = sender;
	} else {
		/* rbp-linked, as the interpreter lays out its frame
		 * (frame_x86.hpp): Method* at rbp - 24, bcp at rbp - 64, the
		 * sender's sp at rbp - 8. */
		uint64_t fp = w->fp, saved;
		if (fp <= w->sp || fp - w->sp > (1 << 20))
			return DJX_UW_END_FRAME;
		*f = (struct djx_raw_frame){.blob = blob | DJX_UW_FP};
		f->a = stack_word(fp - 24, w->lo, w->hi, &ok);
		f->b = stack_word(fp - 64, w->lo, w->hi, &ok);
		saved = stack_word(fp - 8, w->lo, w->hi, &ok);
		w->pc = stack_word(fp + 8, w->lo, w->hi, &ok);
		w->fp = stack_word(fp, w->lo, w->hi, &ok);
		w->sp = saved > sp && saved <= fp + 16 + (1 << 16) ? saved : fp + 16;
	}
	if (!ok)
		return DJX_UW_END_READ;
	return w->sp > sp ? 0 : DJX_UW_END_FRAME;
}

/* The ContinuationEntry of the virtual thread mounted on the thread whose
 * JNIEnv is env, 0 if none: JavaThread::_cont_entry, on its stack. */
static uint64_t cont_entry(const void *env, uint64_t lo, uint64_t hi)
{
	uint64_t e, off = __atomic_load_n(&uw.off_env, __ATOMIC_RELAXED);

	if (!uw.vt || env == NULL)
		return 0;
	if (off == 0) {
		/* HotSpot keeps the current Thread* under a pthread key of its
		 * own: the value just below env, the JNIEnv inside it. */
		for (unsigned k = 0; k < PTHREAD_KEYS_MAX && off == 0; k++) {
			const char *v = pthread_getspecific((pthread_key_t)k);
			if (v != NULL && (const char *)env > v && (const char *)env - v < 4096)
				off = (uint64_t)((const char *)env - v);
		}
		if (off == 0)
			return 0;
		__atomic_store_n(&uw.off_env, off, __ATOMIC_RELAXED);
	}
	e = *(const volatile uint64_t *)((const char *)env - off + uw.off_cont_entry);
	return e >= lo && e < hi && !(e & 7) ? e : 0;
}

/* Whether pc, where the walk left a virtual thread's lowest frame, is in
 * enterSpecial (its frames all on the stack: whole) rather than the
 * return barrier (more frames frozen in the heap, which this walk does not
 * read). */
static int in_enter_special(uint64_t pc)
{
	uint64_t high, rpc = *uw.enter_pc;
	const struct uw_heap *h = heap_of(pc, &high), *hr = heap_of(rpc, &high);

	return h != NULL && h == hr && blob_of(h, pc) != 0 && blob_of(h, pc) == blob_of(hr, rpc);
}

__attribute__((noinline)) int djx_unwind_self(struct djx_raw_frame *out, int max, uint32_t *end, const void *env)
{
	struct walk w = {.fp = (uint64_t)__builtin_frame_address(0)};
	uint64_t high, entry;
	int n = 0, ok = 1;

	*end = DJX_UW_END_NO_JAVA;
	if (!djx_unwind_ready())
		return 0;
	w.lo = w.sp = w.fp;
	if ((w.hi = stack_top(w.sp)) == 0) {
		*end = DJX_UW_END_READ;
		return 0;
	}
	/* Native frames, by rbp: this one first. */
	for (int i = 0;; i++) {
		uint64_t fp = w.fp;
		if (i == UW_NATIVE_FRAMES)
			return 0;
		if (fp < w.sp || fp - w.sp > (1 << 20)) {
			*end = DJX_UW_END_FRAME;
			return 0;
		}
		w.fp = stack_word(fp, w.lo, w.hi, &ok);
		w.pc = stack_word(fp + 8, w.lo, w.hi, &ok);
		w.sp = fp + 16;
		if (!ok) {
			*end = DJX_UW_END_READ;
			return 0;
		}
		if (heap_of(w.pc, &high) != NULL)
			break;
	}
	entry = cont_entry(env, w.lo, w.hi);
	while (n < max) {
		uint32_t e = java_frame(&w, &out[n]);
		if (e != 0) {
			*end = e;
			return n;
		}
		n++;
		/* A virtual thread's stack ends at its entry: the lowest frame's
		 * caller is at the ContinuationEntry (compiled) or a word below
		 * it (interpreted), no other frame's within 16 bytes of it. */
		if (entry != 0 && w.sp + 8 >= entry && w.sp <= entry + uw.entry_size) {
			*end = in_enter_special(w.pc) ? DJX_UW_END_ENTRY : DJX_UW_END_FROZEN;
			return n;
		}
	}
	*end = DJX_UW_END_DEPTH;
	return n;
}
