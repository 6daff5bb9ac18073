/* JVMTI entry points and callbacks of the djx-bpf agent.
 *
 * Agent_OnLoad (-agentpath:libdjxagent.so=OPTIONS) connects at VMInit;
 * Agent_OnAttach connects immediately. Sampled allocations of at least
 * minsize bytes become ALLOC records (preceded by METHOD records for frames
 * not yet described) and get a JNI weak reference (track.c), through which
 * the writer finds their deaths (FREE) and moves (RECONCILE) after each GC;
 * GarbageCollectionStart/Finish become GC_START and GC_FINISH records. A
 * writer thread (writer.c) ships them in batches and runs the census
 * (census.c) when the loader asks. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "djx.h"

struct djx djx = {
	.mu = PTHREAD_MUTEX_INITIALIZER,
	.sock = -1,
	.evfd = -1,
};

#define RELAXED __ATOMIC_RELAXED

/* Once the writer has detached, the first callback on a Java thread switches
 * the event off (the writer is a plain pthread, and JVMTI refuses most calls
 * from unattached threads). */
static void disable_after_detach(jvmtiEnv *j)
{
	if (!__atomic_exchange_n(&djx.disabled, 1, __ATOMIC_ACQ_REL))
		(*j)->SetEventNotificationMode(j, JVMTI_DISABLE, JVMTI_EVENT_SAMPLED_OBJECT_ALLOC, NULL);
}

/* Raises the heap sampling interval to what the writer asked for, on this
 * Java thread (JVMTI refuses the writer), and records when, so that the
 * loader weights each allocation by the interval it was sampled with. */
static void apply_interval(jvmtiEnv *j)
{
	uint64_t cur = __atomic_load_n(&djx.cur_interval, __ATOMIC_ACQUIRE);
	uint64_t want = __atomic_load_n(&djx.want_interval, __ATOMIC_ACQUIRE);
	uint8_t mem[64];
	struct wbuf w;
	size_t start;

	if (want <= cur || !__atomic_compare_exchange_n(&djx.cur_interval, &cur, want, 0,
							__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return; /* another thread does it */
	if ((*j)->SetHeapSamplingInterval(j, (jint)want) != JVMTI_ERROR_NONE)
		return;
	wb_init(&w, mem, sizeof mem, 0);
	start = wb_begin(&w, REC_INTERVAL);
	wb_u64(&w, 0); /* time, set under the lock */
	wb_u64(&w, want);
	wb_end(&w, start);
	pthread_mutex_lock(&djx.mu);
	if (!djx.detached && !w.err && djx.cur_len + w.len <= DJX_BUF_CAP - DJX_BUF_RESERVE) {
		put_u64(w.p + start + DJX_REC_HDR, djx_now_ns());
		djx_append_locked(w.p, w.len, 1);
	}
	pthread_mutex_unlock(&djx.mu);
	wb_free(&w);
}

/* A METHOD record for m. A stale jmethodID (its class unloaded) makes the
 * JVMTI lookups fail with INVALID_METHODID: the record is then honest and
 * empty, never a crash. jni may be NULL (no local reference to delete then
 * leaks one into the caller's frame). */
void djx_build_method(jvmtiEnv *j, JNIEnv *jni, jmethodID m, struct wbuf *w)
{
	char *csig = NULL, *name = NULL, *msig = NULL, *src = NULL;
	jvmtiLineNumberEntry *lt = NULL;
	jint nl = 0;
	jclass k = NULL;
	size_t start;

	if ((*j)->GetMethodDeclaringClass(j, m, &k) != JVMTI_ERROR_NONE)
		k = NULL;
	if (k != NULL) {
		if ((*j)->GetClassSignature(j, k, &csig, NULL) != JVMTI_ERROR_NONE)
			csig = NULL;
		if ((*j)->GetSourceFileName(j, k, &src) != JVMTI_ERROR_NONE)
			src = NULL; /* ABSENT_INFORMATION without -g:source */
	}
	if ((*j)->GetMethodName(j, m, &name, &msig, NULL) != JVMTI_ERROR_NONE)
		name = msig = NULL;
	/* ABSENT_INFORMATION or NATIVE_METHOD: no table. */
	if ((*j)->GetLineNumberTable(j, m, &nl, &lt) != JVMTI_ERROR_NONE || lt == NULL)
		nl = 0;
	if (nl > DJX_MAX_LINES)
		nl = DJX_MAX_LINES;

	start = wb_begin(w, REC_METHOD);
	wb_u64(w, (uint64_t)(uintptr_t)m);
	wb_str(w, csig);
	wb_str(w, name);
	wb_str(w, msig);
	wb_str(w, src);
	wb_u32(w, (uint32_t)nl);
	for (jint i = 0; i < nl; i++) {
		wb_u64(w, (uint64_t)lt[i].start_location);
		wb_u32(w, (uint32_t)lt[i].line_number);
	}
	wb_end(w, start);

	djx_dealloc(j, csig);
	djx_dealloc(j, src);
	djx_dealloc(j, name);
	djx_dealloc(j, msig);
	djx_dealloc(j, lt);
	if (k != NULL && jni != NULL)
		(*jni)->DeleteLocalRef(jni, k);
}

static void append_error_locked(const char *msg)
{
	uint8_t mem[256];
	struct wbuf w;
	size_t start;

	if (djx.errors_sent >= DJX_MAX_ERRORS)
		return;
	wb_init(&w, mem, sizeof mem, 1);
	start = wb_begin(&w, REC_ERROR);
	wb_str(&w, djx.errors_sent + 1 == DJX_MAX_ERRORS ? "further errors suppressed" : msg);
	wb_end(&w, start);
	if (!w.err && djx_append_locked(w.p, w.len, 1) == 0)
		djx.errors_sent++;
}

void djx_error_locked(const char *msg)
{
	append_error_locked(msg);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

#define EMIT_SMALL 128

int djx_emit(JNIEnv *jni, const uint64_t *ids, size_t nids, uint8_t *rec, size_t len, size_t time_off)
{
	uint64_t ubuf[EMIT_SMALL], *u = ubuf;
	size_t obuf[EMIT_SMALL + 1], *mstart = obuf;
	uint8_t mem[4096];
	struct wbuf w;
	size_t nu = 0, nneed = 0, total;
	int rc = -1;

	if (nids > EMIT_SMALL) {
		u = malloc(nids * sizeof *u);
		mstart = malloc((nids + 1) * sizeof *mstart);
		if (u == NULL || mstart == NULL) {
			rc = -1;
			goto out;
		}
	}
	/* Distinct nonzero ids (ASGCT reports 0 for a method without a
	 * jmethodID: the frame is sent as is, with no METHOD). */
	for (size_t i = 0; i < nids; i++)
		if (ids[i] != 0)
			u[nu++] = ids[i];
	qsort(u, nu, sizeof *u, cmp_u64);
	pthread_mutex_lock(&djx.mu);
	if (djx.detached) {
		pthread_mutex_unlock(&djx.mu);
		rc = 1;
		goto out;
	}
	for (size_t i = 0; i < nu; i++)
		if ((nneed == 0 || u[nneed - 1] != u[i]) && !mset_has(&djx.methods, u[i]))
			u[nneed++] = u[i];
	pthread_mutex_unlock(&djx.mu);

	/* JVMTI lookups outside the lock. */
	wb_init(&w, mem, sizeof mem, 0);
	for (size_t k = 0; k < nneed; k++) {
		mstart[k] = w.len;
		djx_build_method(djx_cfg->jvmti, jni, (jmethodID)(uintptr_t)u[k], &w);
	}
	mstart[nneed] = w.len;
	if (w.err) {
		wb_free(&w);
		goto out;
	}

	pthread_mutex_lock(&djx.mu);
	if (djx.detached) {
		rc = 1;
	} else {
		total = len;
		for (size_t k = 0; k < nneed; k++) {
			/* Another thread may have described it meanwhile: mark with 0. */
			if (mset_has(&djx.methods, u[k]))
				u[k] = 0;
			else
				total += mstart[k + 1] - mstart[k];
		}
		if (djx.cur == NULL || djx.cur_len + total > DJX_BUF_CAP - DJX_BUF_RESERVE) {
			rc = -1;
		} else {
			for (size_t k = 0; k < nneed; k++) {
				if (u[k] == 0)
					continue;
				djx_append_locked(w.p + mstart[k], mstart[k + 1] - mstart[k], 1);
				mset_add(&djx.methods, u[k]); /* on OOM it is just resent */
			}
			if (time_off != DJX_NO_TIME)
				put_u64(rec + time_off, djx_now_ns());
			djx_append_locked(rec, len, 1);
			rc = 0;
		}
	}
	pthread_mutex_unlock(&djx.mu);
	wb_free(&w);
out:
	if (u != ubuf)
		free(u);
	if (mstart != obuf)
		free(mstart);
	return rc;
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
	uint64_t quota = djx_cfg->opt.budget * DJX_BUDGET_NS / 1000000000ull;
	uint64_t base = __atomic_load_n(&djx.win_calls, RELAXED), now, want, len;
	int changed;

	if (quota == 0 || n - base < quota)
		return;
	if (!__atomic_compare_exchange_n(&djx.win_calls, &base, n, 0, RELAXED, RELAXED))
		return; /* another callback closes this window */
	now = djx_now_ns();
	/* The window took len instead of DJX_BUDGET_NS: the rate is over the
	 * budget by DJX_BUDGET_NS / len; double until it fits. */
	len = now - __atomic_load_n(&djx.win_ns, RELAXED);
	want = __atomic_load_n(&djx.want_interval, __ATOMIC_ACQUIRE);
	for (changed = 0; len < DJX_BUDGET_NS && want < DJX_MAX_INTERVAL; len *= 2, changed = 1)
		want *= 2;
	if (changed)
		__atomic_store_n(&djx.want_interval, want, __ATOMIC_RELEASE);
	__atomic_store_n(&djx.win_ns, now, RELAXED);
}

static void sampled_alloc(jvmtiEnv *j, JNIEnv *jni, jobject object, jclass klass, jlong size)
{
	jvmtiFrameInfo frames[DJX_MAX_FRAMES];
	uint64_t need[DJX_MAX_FRAMES];
	size_t mstart[DJX_MAX_FRAMES + 1];
	int skip[DJX_MAX_FRAMES];
	uint8_t mem[4096];
	struct wbuf w;
	char *tsig = NULL;
	char errmsg[64];
	jint nf = 0;
	int nneed = 0;
	size_t aoff, start;
	uint64_t tag, addr;
	jweak ref = NULL;
	int big;
	jvmtiError e;

	check_budget(__atomic_add_fetch(&djx.n_callbacks, 1, RELAXED));
	if (__atomic_load_n(&djx.detached, __ATOMIC_ACQUIRE)) {
		disable_after_detach(j);
		return;
	}
	if (__atomic_load_n(&djx.want_interval, RELAXED) > __atomic_load_n(&djx.cur_interval, RELAXED))
		apply_interval(j);
	if (size < 0 || (uint64_t)size < djx_cfg->opt.minsize) {
		__atomic_add_fetch(&djx.n_below, 1, RELAXED);
		return;
	}

	/* NULL = current thread, which is the allocating one. */
	e = (*j)->GetStackTrace(j, NULL, 0, DJX_MAX_FRAMES, frames, &nf);
	if (e != JVMTI_ERROR_NONE) {
		__atomic_add_fetch(&djx.n_stackerr, 1, RELAXED);
		nf = 0;
	}
	if ((*j)->GetClassSignature(j, klass, &tsig, NULL) != JVMTI_ERROR_NONE)
		tsig = NULL;

	pthread_mutex_lock(&djx.mu);
	if (djx.detached) {
		pthread_mutex_unlock(&djx.mu);
		djx_dealloc(j, tsig);
		return;
	}
	for (jint i = 0; i < nf; i++) {
		uint64_t id = (uint64_t)(uintptr_t)frames[i].method;
		int dup = mset_has(&djx.methods, id);
		for (int k = 0; k < nneed && !dup; k++)
			dup = need[k] == id;
		if (!dup)
			need[nneed++] = id;
	}
	pthread_mutex_unlock(&djx.mu);

	/* Build outside the lock: JVMTI lookups are the slow part. */
	wb_init(&w, mem, sizeof mem, 0);
	for (int k = 0; k < nneed; k++) {
		mstart[k] = w.len;
		djx_build_method(j, jni, (jmethodID)(uintptr_t)need[k], &w);
	}
	mstart[nneed] = aoff = w.len;
	start = wb_begin(&w, REC_ALLOC);
	wb_u64(&w, 0); /* time, patched under the lock */
	wb_u64(&w, 0); /* addr, patched under the lock */
	wb_u64(&w, (uint64_t)size);
	wb_u32(&w, djx_tid());
	wb_u32(&w, (uint32_t)nf);
	wb_str(&w, tsig);
	for (jint i = 0; i < nf; i++) {
		wb_u64(&w, (uint64_t)(uintptr_t)frames[i].method);
		wb_u64(&w, (uint64_t)frames[i].location);
	}
	wb_u64(&w, 0); /* tag, trailing so that old readers still work */
	wb_end(&w, start);
	djx_dealloc(j, tsig);
	if (w.err) {
		__atomic_add_fetch(&djx.n_dropped, 1, RELAXED);
		wb_free(&w);
		return;
	}
	if (e != JVMTI_ERROR_NONE)
		snprintf(errmsg, sizeof errmsg, "GetStackTrace failed: %d", (int)e);
	/* A weak reference follows the object through GCs (track.c); made
	 * outside mu, as every JNI call. Humongous objects get none (big.c). */
	big = djx.tagging && djx_big_wants((uint64_t)size); /* checked after GCs */
	tag = djx.tagging ? __atomic_add_fetch(&djx.next_tag, 1, RELAXED) : 0;
	if (tag != 0 && !big && (ref = (*jni)->NewWeakGlobalRef(jni, object)) == NULL)
		tag = 0;
	put_u64(w.p + w.len - 8, tag);

	pthread_mutex_lock(&djx.mu);
	if (!djx.detached) {
		size_t total = w.len - aoff;
		for (int k = 0; k < nneed; k++) {
			/* Another thread may have described it meanwhile. */
			skip[k] = mset_has(&djx.methods, need[k]);
			if (!skip[k])
				total += mstart[k + 1] - mstart[k];
		}
		if (djx.cur_len + total > DJX_BUF_CAP - DJX_BUF_RESERVE) {
			__atomic_add_fetch(&djx.n_dropped, 1, RELAXED);
		} else {
			for (int k = 0; k < nneed; k++) {
				if (skip[k])
					continue;
				djx_append_locked(w.p + mstart[k], mstart[k + 1] - mstart[k], 1);
				mset_add(&djx.methods, need[k]); /* on OOM it is just resent */
			}
			/* Time and address are read together under the lock: the stream
			 * stays time-ordered and the watermark holds. The callback runs
			 * in native state, so a GC may have moved the object since the
			 * allocation; the handle always holds the current address. */
			addr = (uint64_t)(uintptr_t)*(void **)object;
			put_u64(w.p + aoff + DJX_REC_HDR, djx_now_ns());
			put_u64(w.p + aoff + DJX_REC_HDR + 8, addr);
			if (big && djx_big_add_locked(tag, addr, (uint64_t)size) != 0)
				put_u64(w.p + w.len - 8, 0); /* out of memory: death untracked */
			if (ref != NULL && djx_track_add_locked(tag, ref, addr) == 0)
				ref = NULL; /* the table owns it */
			else if (ref != NULL)
				put_u64(w.p + w.len - 8, 0);
			djx_append_locked(w.p + aoff, w.len - aoff, 1);
			__atomic_add_fetch(&djx.n_sent, 1, RELAXED);
			if (e != JVMTI_ERROR_NONE)
				append_error_locked(errmsg);
		}
	}
	pthread_mutex_unlock(&djx.mu);
	wb_free(&w);
	if (ref != NULL)
		(*jni)->DeleteWeakGlobalRef(jni, ref);
}

static void JNICALL on_sampled_alloc(jvmtiEnv *j, JNIEnv *jni, jthread thread, jobject object,
				     jclass klass, jlong size)
{
	uint64_t t0 = djx_thread_ns();

	(void)thread;
	sampled_alloc(j, jni, object, klass, size);
	__atomic_add_fetch(&djx.ns_alloc, djx_thread_ns() - t0, RELAXED);
}

/* GarbageCollectionStart and GarbageCollectionFinish run in a restricted
 * context (inside the GC pause): no JNI, no JVMTI but raw monitors and
 * memory. They only append
 * a fixed-size record under mu, which no thread holds across a JVM call or
 * for longer than a memcpy, and touch nothing once the session is over. */
static int append_fixed_locked(uint16_t type, uint64_t arg, int has_arg)
{
	uint8_t rec[DJX_REC_HDR + 16];
	uint32_t blen = has_arg ? 16 : 8;

	put_rec_hdr(rec, type, blen);
	put_u64(rec + DJX_REC_HDR, djx_now_ns());
	put_u64(rec + DJX_REC_HDR + 8, arg);
	if (djx_append_locked(rec, DJX_REC_HDR + blen, 1) != 0) {
		__atomic_add_fetch(&djx.n_dropped, 1, RELAXED);
		return -1;
	}
	return 0;
}

int djx_free_locked(uint64_t tag)
{
	return append_fixed_locked(REC_FREE, tag, 1);
}

int djx_free_at_locked(uint64_t tag, uint64_t t)
{
	uint8_t rec[DJX_REC_HDR + 16];

	put_rec_hdr(rec, REC_FREE, 16);
	put_u64(rec + DJX_REC_HDR, t);
	put_u64(rec + DJX_REC_HDR + 8, tag);
	if (djx_append_locked(rec, sizeof rec, 1) != 0) {
		__atomic_add_fetch(&djx.n_dropped, 1, RELAXED);
		return -1;
	}
	return 0;
}

static void JNICALL on_gc_start(jvmtiEnv *j)
{
	(void)j;
	pthread_mutex_lock(&djx.mu);
	if (!djx.detached) {
		/* Before any object moves: a reconciliation that read addresses
		 * before this sees the count change and discards them. */
		djx.gc_starts++;
		append_fixed_locked(REC_GC_START, 0, 0);
	}
	pthread_mutex_unlock(&djx.mu);
}

static void JNICALL on_gc_finish(jvmtiEnv *j)
{
	(void)j;
	pthread_mutex_lock(&djx.mu);
	if (!djx.detached) {
		djx.gc_finishes++;
		__atomic_add_fetch(&djx.n_gcs, 1, RELAXED);
		append_fixed_locked(REC_GC_FINISH, 0, 0);
		djx.last_gc_end = djx_now_ns(); /* not before GC_FINISH's own time */
		/* The writer scans the tracked objects and checks the humongous ones. */
		if (djx_track_pending_locked() || djx_big_pending_locked() || djx_cfg->opt.recensus_ms != 0)
			djx_kick_locked();
	}
	pthread_mutex_unlock(&djx.mu);
}

static void JNICALL on_vm_death(jvmtiEnv *j, JNIEnv *jni)
{
	struct timespec dl;

	(void)j;
	(void)jni;
	pthread_mutex_lock(&djx.mu);
	if (djx.started && !djx.done) {
		djx.stop = 1;
		djx.stop_ns = djx_now_ns();
		djx_kick_locked();
		clock_gettime(CLOCK_MONOTONIC, &dl);
		dl.tv_sec += 2;
		while (!djx.done)
			if (pthread_cond_timedwait(&djx.donecv, &djx.mu, &dl) == ETIMEDOUT)
				break;
	}
	pthread_mutex_unlock(&djx.mu);
}

static char *sysprop(jvmtiEnv *j, const char *name)
{
	char *v = NULL;
	if ((*j)->GetSystemProperty(j, name, &v) != JVMTI_ERROR_NONE)
		return NULL;
	return v;
}

static void disable_tracking(jvmtiEnv *j)
{
	(*j)->SetEventNotificationMode(j, JVMTI_DISABLE, JVMTI_EVENT_GARBAGE_COLLECTION_START, NULL);
	(*j)->SetEventNotificationMode(j, JVMTI_DISABLE, JVMTI_EVENT_GARBAGE_COLLECTION_FINISH, NULL);
}

/* Enables the GC events, which drive the tracking of frees and moves; a
 * failure turns tracking off and is reported, profiling goes on without it. */
static void enable_tracking(jvmtiEnv *j)
{
	char msg[96];
	jvmtiError e;

	if (djx.gc_events) {
		e = (*j)->SetEventNotificationMode(j, JVMTI_ENABLE, JVMTI_EVENT_GARBAGE_COLLECTION_START, NULL);
		if (e == JVMTI_ERROR_NONE)
			e = (*j)->SetEventNotificationMode(j, JVMTI_ENABLE, JVMTI_EVENT_GARBAGE_COLLECTION_FINISH, NULL);
		if (e != JVMTI_ERROR_NONE) {
			(*j)->SetEventNotificationMode(j, JVMTI_DISABLE, JVMTI_EVENT_GARBAGE_COLLECTION_START, NULL);
			djx.gc_events = djx.tagging = 0;
			snprintf(msg, sizeof msg, "enable GC events: error %d: no GC epochs, frees or moves", (int)e);
			pthread_mutex_lock(&djx.mu);
			append_error_locked(msg);
			pthread_mutex_unlock(&djx.mu);
		}
	}
}

/* Connects, queues HELLO, starts the writer and enables the events.
 * On failure nothing is left running and the message is in err. */
static int start_session(jvmtiEnv *j, char *err, size_t errlen)
{
	pthread_condattr_t ca;
	struct wbuf w;
	char *vmname, *vmver;
	size_t start;
	jvmtiError e;
	char stk_err[160];
	int stack_signal = 0;
	JNIEnv *jni = NULL;
	int rc;

	/* Before the events are enabled: callbacks compare against these. */
	djx.cur_interval = djx.want_interval = djx_cfg->opt.interval;
	djx.cpu0 = djx_cpu_ns(CLOCK_PROCESS_CPUTIME_ID);
	djx.win_ns = djx_now_ns();
	djx.win_calls = 0;

	djx.sock = djx_connect(djx_cfg->opt.sock, err, errlen);
	if (djx.sock < 0)
		return -1;
	if (djx_cfg->mode[0] == 'a') {
		/* Launch mode set it in Agent_OnLoad, before any thread exists.
		 * Attach mode: threads sample once more at the old interval. */
		e = (*j)->SetHeapSamplingInterval(j, (jint)djx_cfg->opt.interval);
		if (e != JVMTI_ERROR_NONE) {
			snprintf(err, errlen, "SetHeapSamplingInterval: error %d", (int)e);
			goto fail_sock;
		}
	}
	djx.evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	djx.cur = malloc(DJX_BUF_CAP);
	djx.spare = malloc(DJX_BUF_CAP);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	rc = pthread_cond_init(&djx.donecv, &ca);
	pthread_condattr_destroy(&ca);
	if (djx.evfd < 0 || djx.cur == NULL || djx.spare == NULL || rc != 0) {
		snprintf(err, errlen, "out of resources");
		goto fail_mem;
	}

	/* Before HELLO, which says whether the handler is in place. Every
	 * failure below takes it off again: HotSpot may unload a library whose
	 * Agent_OnAttach failed (JDK-8252657). */
	if (djx_cfg->opt.stacks != 0) {
		if (djx_stacks_install(djx_cfg->opt.stacks, stk_err, sizeof stk_err) == 0)
			stack_signal = djx_cfg->opt.stacks;
	}
	vmname = sysprop(j, "java.vm.name");
	vmver = sysprop(j, "java.vm.version");
	wb_init(&w, djx.cur, DJX_BUF_CAP, 1);
	w.len = djx.cur_len = DJX_HDR_LEN;
	start = wb_begin(&w, REC_HELLO);
	wb_u32(&w, DJX_PROTO);
	wb_u32(&w, (uint32_t)getpid());
	wb_u64(&w, djx_cfg->opt.interval);
	wb_u64(&w, djx_cfg->opt.minsize);
	wb_u64(&w, djx_now_ns());
	wb_str(&w, vmname);
	wb_str(&w, vmver);
	wb_str(&w, djx_cfg->mode);
	wb_u32(&w, (uint32_t)stack_signal);
	wb_end(&w, start);
	djx_dealloc(j, vmname);
	djx_dealloc(j, vmver);
	djx.cur_len = w.len;
	djx.cur_n = 1;
	pthread_mutex_lock(&djx.mu);
	if (djx.cap_err != NULL)
		append_error_locked(djx.cap_err);
	if (djx_cfg->opt.stacks != 0 && stack_signal == 0)
		append_error_locked(stk_err);
	if (stack_signal != 0 && !djx_stacks_key_ok())
		append_error_locked("stacks: HotSpot's thread key not found: the handler asks GetEnv, which is not async-signal-safe");
	if (djx_cfg->opt.reconcile && !djx.gc_events)
		append_error_locked("reconcile=1 needs GC events: reconciliation off");
	pthread_mutex_unlock(&djx.mu);

	rc = djx_writer_start();
	if (rc != 0) {
		snprintf(err, errlen, "pthread_create: %s", strerror(rc));
		goto fail_mem;
	}
	e = (*j)->SetEventNotificationMode(j, JVMTI_ENABLE, JVMTI_EVENT_VM_DEATH, NULL);
	if (e == JVMTI_ERROR_NONE) {
		/* Before SampledObjectAlloc, which reads djx.tagging. */
		enable_tracking(j);
		e = (*j)->SetEventNotificationMode(j, JVMTI_ENABLE, JVMTI_EVENT_SAMPLED_OBJECT_ALLOC, NULL);
	}
	if (e != JVMTI_ERROR_NONE) {
		snprintf(err, errlen, "enable events: error %d", (int)e);
		(*j)->SetEventNotificationMode(j, JVMTI_DISABLE, JVMTI_EVENT_SAMPLED_OBJECT_ALLOC, NULL);
		disable_tracking(j);
		(*j)->SetEventNotificationMode(j, JVMTI_DISABLE, JVMTI_EVENT_VM_DEATH, NULL);
		djx_writer_abort(); /* the writer frees buffers and closes the fds */
		djx_stacks_uninstall(); /* the library may be unloaded: no handler of ours stays */
		return -1;
	}
	/* Class events (jmethodIDs for ASGCT) and JIT code records; failures
	 * are reported as ERROR records, profiling goes on without them. */
	if ((*djx_cfg->vm)->GetEnv(djx_cfg->vm, (void **)&jni, JNI_VERSION_1_6) != JNI_OK)
		jni = NULL;
	djx_code_start(j, jni);
	if (stack_signal != 0)
		djx_stacks_start();
	djx_writer_release_if_done();
	pthread_detach(djx.writer);
	return 0;

fail_mem:
	djx_stacks_uninstall();
	free(djx.cur);
	free(djx.spare);
	djx.cur = djx.spare = NULL;
	if (djx.evfd >= 0)
		close(djx.evfd);
	djx.evfd = -1;
fail_sock:
	close(djx.sock);
	djx.sock = -1;
	return -1;
}

static void JNICALL on_vm_init(jvmtiEnv *j, JNIEnv *jni, jthread thread)
{
	char err[256];

	(void)jni;
	(void)thread;
	(*j)->SetEventNotificationMode(j, JVMTI_DISABLE, JVMTI_EVENT_VM_INIT, NULL);
	if (start_session(j, err, sizeof err) != 0)
		djx_log("%s (profiling disabled)", err);
}

/* GC events are optional: without them profiling still works, with no
 * frees or moves (the failure is sent as an ERROR after HELLO). HotSpot
 * offers them in every phase, so failures are not expected. Deaths and
 * moves are followed with JNI weak references, which need no capability. */
static void add_tracking_caps(jvmtiEnv *j)
{
	jvmtiCapabilities caps;

	memset(&caps, 0, sizeof caps);
	caps.can_generate_garbage_collection_events = 1;
	djx.gc_events = (*j)->AddCapabilities(j, &caps) == JVMTI_ERROR_NONE;
	djx.tagging = djx.gc_events;
	if (!djx.gc_events)
		djx.cap_err = "AddCapabilities: no GC events: no frees or moves";
}

/* Gets an env with the capabilities and callbacks; 0 or -1 with err set. */
static int setup_env(JavaVM *vm, char *err, size_t errlen)
{
	jvmtiCapabilities caps;
	jvmtiEventCallbacks cb;
	jvmtiEnv *j = NULL;
	jvmtiError e;

	/* SampledObjectAlloc needs JVMTI 11. */
	if ((*vm)->GetEnv(vm, (void **)&j, JVMTI_VERSION_11) != JNI_OK || j == NULL) {
		snprintf(err, errlen, "JVMTI 11 not available (JDK 11 or newer needed)");
		return -1;
	}
	memset(&caps, 0, sizeof caps);
	caps.can_generate_sampled_object_alloc_events = 1;
	caps.can_get_line_numbers = 1;
	caps.can_get_source_file_name = 1;
	e = (*j)->AddCapabilities(j, &caps);
	if (e == JVMTI_ERROR_NONE) {
		add_tracking_caps(j);
		djx_code_caps(j);
	}
	if (e == JVMTI_ERROR_NOT_AVAILABLE) {
		snprintf(err, errlen, "heap sampling is in use by another agent (another djx-bpf profile?)");
		(*j)->DisposeEnvironment(j);
		return DJX_RC_SAMPLER_BUSY;
	}
	if (e != JVMTI_ERROR_NONE) {
		snprintf(err, errlen, "AddCapabilities: error %d", (int)e);
		goto fail;
	}
	memset(&cb, 0, sizeof cb);
	cb.VMInit = on_vm_init;
	cb.VMDeath = on_vm_death;
	cb.SampledObjectAlloc = on_sampled_alloc;
	cb.GarbageCollectionStart = on_gc_start;
	cb.GarbageCollectionFinish = on_gc_finish;
	djx_code_callbacks(&cb);
	e = (*j)->SetEventCallbacks(j, &cb, (jint)sizeof cb);
	if (e != JVMTI_ERROR_NONE) {
		snprintf(err, errlen, "SetEventCallbacks: error %d", (int)e);
		goto fail;
	}
	djx_config_set_env(vm, j);
	return 0;
fail:
	(*j)->DisposeEnvironment(j);
	return -1;
}

JNIEXPORT jint JNICALL Agent_OnLoad(JavaVM *vm, char *options, void *reserved)
{
	char err[256];
	jvmtiError e;

	(void)reserved;
	/* Bad options are a caller bug: fail the launch loudly. */
	if (djx_config_parse(options, "launch", err, sizeof err) != 0) {
		djx_log("%s", err);
		return JNI_ERR;
	}
	if (setup_env(vm, err, sizeof err) != 0) {
		djx_log("%s (profiling disabled)", err);
		return JNI_OK;
	}
	/* Set now so that threads created later draw their first sample point
	 * with this interval. */
	e = (*djx_cfg->jvmti)->SetHeapSamplingInterval(djx_cfg->jvmti, (jint)djx_cfg->opt.interval);
	if (e == JVMTI_ERROR_NONE)
		e = (*djx_cfg->jvmti)->SetEventNotificationMode(djx_cfg->jvmti, JVMTI_ENABLE, JVMTI_EVENT_VM_INIT, NULL);
	if (e != JVMTI_ERROR_NONE) {
		snprintf(err, sizeof err, "error %d", (int)e);
		djx_log("setup: %s (profiling disabled)", err);
	}
	return JNI_OK;
}

JNIEXPORT jint JNICALL Agent_OnAttach(JavaVM *vm, char *options, void *reserved)
{
	char err[256];
	int rc;

	(void)reserved;
	if (djx_cfg->jvmti != NULL) {
		/* The loader copies the library per profile; the same copy twice is a bug. */
		djx_log("this copy of the library is already attached");
		return JNI_ERR;
	}
	if (djx_config_parse(options, "attach", err, sizeof err) != 0) {
		djx_log("%s", err);
		return JNI_ERR;
	}
	rc = setup_env(vm, err, sizeof err);
	if (rc != 0) {
		djx_log("%s", err);
		return rc == DJX_RC_SAMPLER_BUSY ? rc : JNI_ERR;
	}
	if (start_session(djx_cfg->jvmti, err, sizeof err) != 0) {
		djx_log("%s", err);
		(*djx_cfg->jvmti)->DisposeEnvironment(djx_cfg->jvmti);
		djx_config_set_env(vm, NULL);
		return JNI_ERR;
	}
	return JNI_OK;
}
