/* Sampled allocations. Objects of at least minsize bytes become ALLOC
 * records (after METHOD records for frames not yet described) and get a
 * tag and a JNI weak reference (track.c), or none for G1's humongous
 * objects (big.c). The allocating thread does all of it in the callback;
 * the writer thread only ships the batch. */
#include <stdio.h>

#include "alloc.h"
#include "big.h"
#include "config.h"
#include "djx.h"
#include "emit.h"
#include "epoch.h"
#include "stats.h"
#include "track.h"
#include "unwind.h"
#include "util.h"
#include "writer.h"
#include "zaddr.h"

#define RELAXED __ATOMIC_RELAXED

/* Budget window: the callback that completes a window's share of the
 * budget (budget x BUDGET_NS) doubles the interval if the window took less
 * than BUDGET_NS. */
#define BUDGET_NS 250000000ull
#define MAX_INTERVAL (1ull << 30)

static struct {
	int disabled; /* SampledObjectAlloc switched off after the session */
	int raw;      /* atomic: walk allocation stacks in-process (the loader's 'A') */
	int paused;   /* writer thread only: the loader paused sampling ('P') */
	/* Atomic. A callback that finds the rate over the budget asks for a
	 * larger interval (want); a Java thread applies it (cur). */
	uint64_t want_interval, cur_interval;
	uint64_t win_ns, win_calls; /* the budget window's start */
} al;

jvmtiError djx_alloc_set_interval(jvmtiEnv *j)
{
	return (*j)->SetHeapSamplingInterval(j, (jint)djx_cfg->opt.interval);
}

/* The event is off (the last session switched it off for good). */
void djx_alloc_reset_locked(void)
{
	__atomic_store_n(&al.disabled, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&al.raw, 0, __ATOMIC_RELEASE);
	al.paused = 0;
}

/* Before the events are enabled: callbacks compare against these. */
void djx_alloc_start(void)
{
	al.cur_interval = al.want_interval = djx_cfg->opt.interval;
	al.win_ns = djx_now_ns();
	al.win_calls = 0;
}

jvmtiError djx_alloc_enable(jvmtiEnv *j)
{
	return (*j)->SetEventNotificationMode(j, JVMTI_ENABLE, JVMTI_EVENT_SAMPLED_OBJECT_ALLOC, NULL);
}

void djx_alloc_stop(jvmtiEnv *j)
{
	(*j)->SetEventNotificationMode(j, JVMTI_DISABLE, JVMTI_EVENT_SAMPLED_OBJECT_ALLOC, NULL);
}

void djx_alloc_disable(jvmtiEnv *j)
{
	if (!__atomic_exchange_n(&al.disabled, 1, __ATOMIC_ACQ_REL))
		djx_alloc_stop(j);
}

/* While paused the JVM pays nothing for sampling, and objects allocated
 * meanwhile are not tracked; tags, frees, GC events and JIT records go on,
 * so that tracked objects stay right. */
void djx_alloc_pause(jvmtiEnv *j, int on)
{
	if (on == al.paused || __atomic_load_n(&al.disabled, __ATOMIC_ACQUIRE))
		return;
	if ((*j)->SetEventNotificationMode(j, on ? JVMTI_DISABLE : JVMTI_ENABLE,
					   JVMTI_EVENT_SAMPLED_OBJECT_ALLOC, NULL) == JVMTI_ERROR_NONE)
		al.paused = on;
}

int djx_alloc_raw_stacks(char *err, size_t errlen)
{
	if (djx_unwind_init(err, errlen) != 0)
		return -1;
	__atomic_store_n(&al.raw, 1, __ATOMIC_RELEASE);
	return 0;
}

uint64_t djx_alloc_interval(void)
{
	return __atomic_load_n(&al.cur_interval, RELAXED);
}

/* Raises the heap sampling interval to what a callback asked for, on this
 * Java thread (JVMTI refuses the writer thread), and records when, so that
 * the loader weights each allocation by the interval it was sampled with. */
static void apply_interval(jvmtiEnv *j)
{
	uint64_t cur = __atomic_load_n(&al.cur_interval, __ATOMIC_ACQUIRE);
	uint64_t want = __atomic_load_n(&al.want_interval, __ATOMIC_ACQUIRE);

	if (want <= cur || !__atomic_compare_exchange_n(&al.cur_interval, &cur, want, 0, __ATOMIC_ACQ_REL,
							__ATOMIC_ACQUIRE))
		return; /* another thread does it */
	if ((*j)->SetHeapSamplingInterval(j, (jint)want) != JVMTI_ERROR_NONE)
		return;
	djx_emit_interval(want);
}

/* Keeps the JVM's cost of heap sampling bounded: each sampled allocation
 * costs the allocating thread a slow path and a callback (~0.4 us when we
 * drop it, 10-40 us when we record it, mostly GetStackTrace). The callback
 * that uses up a window's share of the budget checks the window's length
 * (one clock read per window) and raises the interval by the factor the
 * window was too short.
 * Done by the writer every 250 ms instead, Xalan took ~100k callbacks in
 * the first 0.3 s of an attach (the interval starts at min-size/4). */
static void check_budget(uint64_t n)
{
	uint64_t quota = djx_cfg->opt.budget * BUDGET_NS / 1000000000ull;
	uint64_t base = __atomic_load_n(&al.win_calls, RELAXED), now, want, len;
	int changed;

	if (quota == 0 || n - base < quota)
		return;
	if (!__atomic_compare_exchange_n(&al.win_calls, &base, n, 0, RELAXED, RELAXED))
		return; /* another callback closes this window */
	now = djx_now_ns();
	/* The window took len instead of BUDGET_NS: the rate is over the
	 * budget by BUDGET_NS / len; double until it fits. */
	len = now - __atomic_load_n(&al.win_ns, RELAXED);
	want = __atomic_load_n(&al.want_interval, __ATOMIC_ACQUIRE);
	for (changed = 0; len < BUDGET_NS && want < MAX_INTERVAL; len *= 2, changed = 1)
		want *= 2;
	if (changed)
		__atomic_store_n(&al.want_interval, want, __ATOMIC_RELEASE);
	__atomic_store_n(&al.win_ns, now, RELAXED);
}

/* Lock held: tracks the object at addr, by its weak reference *ref (which
 * the table then owns) or as a humongous one. Returns the tag to send,
 * 0 when the object goes untracked. */
static uint64_t track_locked(uint64_t tag, int big, jweak *ref, uint64_t addr, uint64_t size)
{
	if (big)
		return djx_big_add_locked(tag, addr, size) == 0 ? tag : 0; /* out of memory: death untracked */
	if (*ref == NULL)
		return tag;
	if (djx_track_add_locked(tag, *ref, addr) != 0)
		return 0;
	*ref = NULL;
	return tag;
}

/* Tags the object, then under the lock appends its METHODs and ALLOC and
 * tracks it. err, if not NULL, follows as an ERROR. */
static void record(struct djx_pending *p, JNIEnv *jni, jobject object, uint64_t size, const char *err)
{
	/* A weak reference follows the object through GCs (track.c); made
	 * outside the lock, as every JNI call. Humongous objects get none
	 * (big.c checks them after GCs). */
	int tagging = djx_epoch_events();
	int big = tagging && djx_big_wants(size);
	uint64_t tag = tagging ? djx_track_next_tag() : 0;
	jweak ref = NULL;

	if (tag != 0 && !big && (ref = (*jni)->NewWeakGlobalRef(jni, object)) == NULL)
		tag = 0;
	djx_lock();
	if (!djx_detached_locked() && djx_emit_methods_locked(p) != 0) {
		djx_count(&djx_stats.dropped, 1);
	} else if (!djx_detached_locked()) {
		/* Time and address are read together under the lock: the stream
		 * stays time-ordered and the watermark holds. The callback runs
		 * in native state, so a GC may have moved the object since the
		 * allocation; the handle always holds the current address. */
		uint64_t now = djx_now_ns(), addr = djx_z_decode((uint64_t)(uintptr_t)*(void **)object);
		tag = track_locked(tag, big, &ref, addr, size);
		djx_emit_alloc_locked(p, now, addr, tag);
		djx_count(&djx_stats.allocs_sent, 1);
		if (err != NULL)
			djx_emit_error_locked(err);
	}
	djx_unlock();
	if (ref != NULL)
		(*jni)->DeleteWeakGlobalRef(jni, ref);
}

/* Prepares the ALLOC_RAW of an allocation whose stack this thread walks
 * itself: 0, 1 the walk found no whole Java stack (the caller asks JVMTI),
 * or -1 out of memory. */
static int prepare_raw(struct djx_pending *p, struct djx_alloc *a, JNIEnv *jni)
{
	struct djx_raw_frame raw[DJX_MAX_FRAMES];
	uint32_t end;
	int n = djx_unwind_self(raw, DJX_MAX_FRAMES, &end, jni);

	if (n == 0 || (end != DJX_UW_END_ENTRY && end != DJX_UW_END_DEPTH)) {
		djx_count(&djx_stats.raw_fallbacks, 1);
		return 1;
	}
	djx_count(&djx_stats.raw_stacks, 1);
	return djx_emit_alloc_raw_prepare(p, a, raw, n, end);
}

void djx_alloc_sampled(jvmtiEnv *j, JNIEnv *jni, jobject object, jclass klass, jlong size)
{
	jvmtiFrameInfo frames[DJX_MAX_FRAMES];
	struct djx_alloc a = {.size = (uint64_t)size, .frames = frames};
	struct djx_pending p;
	char *tsig = NULL, errmsg[64];
	jvmtiError e = JVMTI_ERROR_NONE;
	int rc = 1;

	check_budget(djx_count(&djx_stats.callbacks, 1));
	if (djx_detached()) {
		/* The first callback after the session switches the event off:
		 * the writer thread may be detached from the VM by now, and JVMTI
		 * refuses most calls from unattached threads. */
		djx_alloc_disable(j);
		return;
	}
	if (__atomic_load_n(&al.want_interval, RELAXED) > __atomic_load_n(&al.cur_interval, RELAXED))
		apply_interval(j);
	if (size < 0 || (uint64_t)size < djx_cfg->opt.minsize) {
		djx_count(&djx_stats.below_minsize, 1);
		return;
	}
	a.tid = djx_tid(); /* a system call: not for the samples dropped above */
	if ((*j)->GetClassSignature(j, klass, &tsig, NULL) != JVMTI_ERROR_NONE)
		tsig = NULL;
	a.type = tsig;
	if (__atomic_load_n(&al.raw, __ATOMIC_ACQUIRE))
		rc = prepare_raw(&p, &a, jni);
	if (rc == 1) {
		/* NULL = current thread, which is the allocating one. */
		e = (*j)->GetStackTrace(j, NULL, 0, DJX_MAX_FRAMES, frames, &a.nframes);
		if (e != JVMTI_ERROR_NONE) {
			djx_count(&djx_stats.stack_errors, 1);
			a.nframes = 0;
		}
		rc = djx_emit_alloc_prepare(&p, jni, &a);
	}
	djx_dealloc(j, tsig);
	if (rc < 0)
		djx_count(&djx_stats.dropped, 1);
	if (rc == 0) {
		if (e != JVMTI_ERROR_NONE)
			snprintf(errmsg, sizeof errmsg, "GetStackTrace failed: %d", (int)e);
		record(&p, jni, object, (uint64_t)size, e != JVMTI_ERROR_NONE ? errmsg : NULL);
	}
	djx_pending_free(&p);
}
