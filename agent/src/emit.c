/* The emitter: builds every record but STATS and BYE and appends it to the
 * writer's batch. The set of jmethodIDs described to the loader lives
 * here, under the session lock; their METHOD records are built outside it
 * (the JVMTI lookups are the slow part) and appended, in the same lock hold
 * as the record that names them, unless another thread described them
 * meanwhile. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "djx.h"
#include "emit.h"
#include "mset.h"
#include "stats.h"
#include "util.h"
#include "wbuf.h"
#include "writer.h"

#define MAX_ERRORS 32                /* ERROR records per session */
#define CODE_MAX_FRAMES 64           /* inlining depth kept per PC */
#define CODE_MAX_BYTES (512u << 10)  /* PCs past this are left out */
#define CODE_WAIT_MS 200             /* wait for buffer space, then drop */
#define NO_TIME ((size_t)-1)

/* Under the session lock. */
static struct mset methods; /* jmethodIDs described */
static uint32_t errors_sent;

void djx_emit_end_locked(void)
{
	mset_free(&methods);
}

void djx_emit_reset_locked(void)
{
	djx_emit_end_locked();
	errors_sent = 0;
}

/* Appends rec unless the session is over, stamping the u64 at time_off
 * (unless NO_TIME) under the lock. 0, 1 the session is over, -1 no room
 * (counted in dropped if count). */
static int append_now(uint8_t *rec, size_t len, size_t time_off, int count)
{
	int rc = 1;

	djx_lock();
	if (!djx_detached_locked()) {
		rc = djx_room_locked(len) ? 0 : -1;
		if (rc == 0) {
			if (time_off != NO_TIME)
				put_u64(rec + time_off, djx_now_ns());
			djx_append_locked(rec, len, 1);
		} else if (count) {
			djx_count(&djx_stats.dropped, 1);
		}
	}
	djx_unlock();
	return rc;
}

/* Writer thread: appends, flushing once when the batch is full. 0, 1 the
 * session is over, -1 the connection failed (or rec fits no batch). */
static int append_flushing(uint8_t *rec, size_t len, size_t time_off)
{
	for (int attempt = 0;; attempt++) {
		int rc = append_now(rec, len, time_off, 0);
		if (rc >= 0)
			return rc;
		if (attempt > 0 || djx_flush(NULL) != 0)
			return -1;
	}
}

void djx_emit_hello(const char *vm_name, const char *vm_version, int stack_signal)
{
	uint8_t mem[512];
	struct wbuf w;
	size_t start;

	wb_init(&w, mem, sizeof mem, 0);
	start = wb_begin(&w, REC_HELLO);
	wb_u32(&w, DJX_PROTO);
	wb_u32(&w, (uint32_t)getpid());
	wb_u64(&w, djx_cfg->opt.interval);
	wb_u64(&w, djx_cfg->opt.minsize);
	wb_u64(&w, djx_now_ns());
	wb_str(&w, vm_name);
	wb_str(&w, vm_version);
	wb_str(&w, djx_cfg->mode);
	wb_u32(&w, (uint32_t)stack_signal);
	wb_end(&w, start);
	djx_lock();
	if (!w.err)
		djx_append_locked(w.p, w.len, 1);
	djx_unlock();
	wb_free(&w);
}

void djx_emit_error_locked(const char *msg)
{
	uint8_t mem[256];
	struct wbuf w;
	size_t start;

	if (errors_sent >= MAX_ERRORS)
		return;
	wb_init(&w, mem, sizeof mem, 1);
	start = wb_begin(&w, REC_ERROR);
	wb_str(&w, errors_sent + 1 == MAX_ERRORS ? "further errors suppressed" : msg);
	wb_end(&w, start);
	if (!w.err && djx_append_locked(w.p, w.len, 1) == 0)
		errors_sent++;
}

void djx_emit_error(const char *msg)
{
	djx_lock();
	djx_emit_error_locked(msg);
	djx_unlock();
}

void djx_emit_interval(uint64_t interval)
{
	uint8_t rec[DJX_REC_HDR + 16];

	put_rec_hdr(rec, REC_INTERVAL, 16);
	put_u64(rec + DJX_REC_HDR + 8, interval);
	append_now(rec, sizeof rec, DJX_REC_HDR, 0);
}

/* The fixed-size records of the GC callbacks, which run inside the pause:
 * no allocation, only the lock. */
static int fixed_locked(uint16_t type, uint64_t time, const uint64_t *arg)
{
	uint8_t rec[DJX_REC_HDR + 16];
	uint32_t blen = arg ? 16 : 8;

	put_rec_hdr(rec, type, blen);
	put_u64(rec + DJX_REC_HDR, time);
	if (arg)
		put_u64(rec + DJX_REC_HDR + 8, *arg);
	if (djx_append_locked(rec, DJX_REC_HDR + blen, 1) != 0) {
		djx_count(&djx_stats.dropped, 1);
		return -1;
	}
	return 0;
}

int djx_emit_free_locked(uint64_t tag, uint64_t time)
{
	return fixed_locked(REC_FREE, time, &tag);
}

void djx_emit_gc_locked(int finish)
{
	fixed_locked(finish ? REC_GC_FINISH : REC_GC_START, djx_now_ns(), NULL);
}

void djx_emit_reconcile_locked(const uint64_t *moves, uint32_t n)
{
	size_t len = DJX_REC_HDR + 12 + (size_t)n * 16;
	uint8_t *r = djx_claim_locked(len, 1);

	if (r == NULL)
		return;
	put_rec_hdr(r, REC_RECONCILE, (uint32_t)(len - DJX_REC_HDR));
	put_u64(r + DJX_REC_HDR, djx_now_ns());
	put_u32(r + DJX_REC_HDR + 8, n);
	for (uint32_t i = 0; i < 2 * n; i++)
		put_u64(r + DJX_REC_HDR + 12 + (size_t)i * 8, moves[i]);
}

/* A METHOD record for m. A stale jmethodID (its class unloaded) makes the
 * JVMTI lookups fail with INVALID_METHODID: the record is then honest and
 * empty, never a crash. jni may be NULL (no local reference to delete then
 * leaks one into the caller's frame). */
static void build_method(JNIEnv *jni, jmethodID m, struct wbuf *w)
{
	jvmtiEnv *j = djx_cfg->jvmti;
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

static void pending_init(struct djx_pending *p)
{
	p->ids = p->small_ids;
	p->off = p->small_off;
	p->n = p->rec = 0;
	wb_init(&p->w, p->mem, sizeof p->mem, 0);
}

/* Room for n ids: 0, or -1 out of memory. */
static int pending_reserve(struct djx_pending *p, size_t n)
{
	if (n <= DJX_PENDING_IDS)
		return 0;
	p->ids = malloc(n * sizeof *p->ids);
	p->off = malloc((n + 1) * sizeof *p->off);
	return p->ids != NULL && p->off != NULL ? 0 : -1;
}

void djx_pending_free(struct djx_pending *p)
{
	wb_free(&p->w);
	if (p->ids != p->small_ids)
		free(p->ids);
	if (p->off != p->small_off)
		free(p->off);
	p->ids = p->small_ids;
	p->off = p->small_off;
}

static void build_methods(struct djx_pending *p, JNIEnv *jni)
{
	for (size_t k = 0; k < p->n; k++) {
		p->off[k] = p->w.len;
		build_method(jni, (jmethodID)(uintptr_t)p->ids[k], &p->w);
	}
	p->off[p->n] = p->w.len;
}

/* Lock held: drops the METHODs another thread described meanwhile and, if
 * the rest and rec_len more bytes fit, appends them. 0, or -1 no room. */
static int append_methods_locked(struct djx_pending *p, size_t rec_len)
{
	size_t total = rec_len;

	for (size_t k = 0; k < p->n; k++) {
		if (mset_has(&methods, p->ids[k]))
			p->ids[k] = 0;
		else
			total += p->off[k + 1] - p->off[k];
	}
	if (!djx_room_locked(total))
		return -1;
	for (size_t k = 0; k < p->n; k++) {
		if (p->ids[k] == 0)
			continue;
		djx_append_locked(p->w.p + p->off[k], p->off[k + 1] - p->off[k], 1);
		mset_add(&methods, p->ids[k]); /* on OOM it is just resent */
	}
	return 0;
}

/* Appends rec[0..len) after METHOD records for the ids (any order,
 * duplicates and 0 allowed) not yet described, stamping the u64 at
 * rec + time_off (unless NO_TIME) under the lock. 0 appended, 1 the
 * session is over, -1 no room or out of memory. */
static int emit_with_methods(JNIEnv *jni, const uint64_t *ids, size_t nids, uint8_t *rec, size_t len,
			     size_t time_off)
{
	struct djx_pending p;
	size_t nu = 0;
	int rc = -1;

	pending_init(&p);
	if (pending_reserve(&p, nids) != 0)
		goto out;
	/* Distinct nonzero ids (ASGCT reports 0 for a method without a
	 * jmethodID: the frame is sent as is, with no METHOD). */
	for (size_t i = 0; i < nids; i++)
		if (ids[i] != 0)
			p.ids[nu++] = ids[i];
	qsort(p.ids, nu, sizeof *p.ids, djx_cmp_u64);
	djx_lock();
	if (djx_detached_locked()) {
		djx_unlock();
		rc = 1;
		goto out;
	}
	for (size_t i = 0; i < nu; i++)
		if ((p.n == 0 || p.ids[p.n - 1] != p.ids[i]) && !mset_has(&methods, p.ids[i]))
			p.ids[p.n++] = p.ids[i];
	djx_unlock();

	build_methods(&p, jni);
	if (p.w.err)
		goto out;
	djx_lock();
	if (djx_detached_locked()) {
		rc = 1;
	} else if (append_methods_locked(&p, len) == 0) {
		if (time_off != NO_TIME)
			put_u64(rec + time_off, djx_now_ns());
		djx_append_locked(rec, len, 1);
		rc = 0;
	}
	djx_unlock();
out:
	djx_pending_free(&p);
	return rc;
}

int djx_emit_alloc_prepare(struct djx_pending *p, JNIEnv *jni, const struct djx_alloc *a)
{
	size_t start;

	pending_init(p);
	djx_lock();
	if (djx_detached_locked()) {
		djx_unlock();
		return 1;
	}
	/* At most DJX_MAX_FRAMES: no sort needed to find the new ones. */
	for (jint i = 0; i < a->nframes; i++) {
		uint64_t id = (uint64_t)(uintptr_t)a->frames[i].method;
		int dup = mset_has(&methods, id);
		for (size_t k = 0; k < p->n && !dup; k++)
			dup = p->ids[k] == id;
		if (!dup)
			p->ids[p->n++] = id;
	}
	djx_unlock();

	build_methods(p, jni);
	p->rec = p->w.len;
	start = wb_begin(&p->w, REC_ALLOC);
	wb_u64(&p->w, 0); /* time, stamped under the lock */
	wb_u64(&p->w, 0); /* addr, read under the lock */
	wb_u64(&p->w, a->size);
	wb_u32(&p->w, a->tid);
	wb_u32(&p->w, (uint32_t)a->nframes);
	wb_str(&p->w, a->type);
	for (jint i = 0; i < a->nframes; i++) {
		wb_u64(&p->w, (uint64_t)(uintptr_t)a->frames[i].method);
		wb_u64(&p->w, (uint64_t)a->frames[i].location);
	}
	wb_u64(&p->w, 0); /* tag, trailing so that old readers still work */
	wb_end(&p->w, start);
	return p->w.err ? -1 : 0;
}

int djx_emit_alloc_raw_prepare(struct djx_pending *p, const struct djx_alloc *a, const struct djx_raw_frame *frames,
			       int nframes, uint32_t end)
{
	size_t start;

	pending_init(p);
	p->rec = 0;
	start = wb_begin(&p->w, REC_ALLOC_RAW);
	wb_u64(&p->w, 0); /* time, stamped under the lock */
	wb_u64(&p->w, 0); /* addr, read under the lock */
	wb_u64(&p->w, a->size);
	wb_u32(&p->w, a->tid);
	wb_u32(&p->w, (uint32_t)nframes);
	wb_u32(&p->w, end);
	wb_str(&p->w, a->type);
	for (int i = 0; i < nframes; i++) {
		wb_u64(&p->w, frames[i].blob);
		wb_u64(&p->w, frames[i].a);
		wb_u64(&p->w, frames[i].b);
	}
	wb_u64(&p->w, 0); /* tag */
	wb_end(&p->w, start);
	return p->w.err ? -1 : 0;
}

int djx_emit_methods_locked(struct djx_pending *p)
{
	return append_methods_locked(p, p->w.len - p->rec);
}

void djx_emit_alloc_locked(struct djx_pending *p, uint64_t time, uint64_t addr, uint64_t tag)
{
	uint8_t *r = p->w.p + p->rec;

	put_u64(r + DJX_REC_HDR, time);
	put_u64(r + DJX_REC_HDR + 8, addr);
	put_u64(p->w.p + p->w.len - 8, tag);
	djx_append_locked(r, p->w.len - p->rec, 1);
}

int djx_emit_stack(JNIEnv *jni, const struct djx_stack *s)
{
	uint8_t rec[DJX_REC_HDR + 28 + DJX_STACK_FRAMES * 16];
	uint64_t ids[DJX_STACK_FRAMES];
	int nf = s->nframes < DJX_STACK_FRAMES ? s->nframes : DJX_STACK_FRAMES;
	size_t len = DJX_REC_HDR + 28 + (size_t)nf * 16;

	put_rec_hdr(rec, REC_STACK, (uint32_t)(len - DJX_REC_HDR));
	put_u64(rec + DJX_REC_HDR, s->time);
	put_u32(rec + DJX_REC_HDR + 8, s->tid);
	put_u32(rec + DJX_REC_HDR + 12, (uint32_t)s->status);
	put_u64(rec + DJX_REC_HDR + 16, s->pc);
	put_u32(rec + DJX_REC_HDR + 24, (uint32_t)nf);
	/* Frame layout as in ALLOC: u64 jmethodID, u64 bci (signed; -3 native). */
	for (int i = 0; i < nf; i++) {
		uint8_t *f = rec + DJX_REC_HDR + 28 + (size_t)i * 16;
		ids[i] = (uint64_t)(uintptr_t)s->frames[i].method;
		put_u64(f, ids[i]);
		put_u64(f + 8, (uint64_t)s->frames[i].location);
	}
	return emit_with_methods(jni, ids, (size_t)nf, rec, len, NO_TIME);
}

/* Neighbouring pcs mostly share their scopes: skipping an id seen among
 * the last few keeps emit_with_methods's sort short (it sorted every frame
 * of every pc: a fifth of the callback's time on H2). */
static size_t add_id(uint64_t *ids, size_t n, uint64_t id)
{
	for (size_t k = n > 8 ? n - 8 : 0; k < n; k++)
		if (ids[k] == id)
			return n;
	ids[n] = id;
	return n + 1;
}

/* The CODE record into w, its methods into ids (room for every frame the
 * byte cap lets in, plus the method). Returns the number of ids. */
static size_t build_code(const struct djx_code *c, uint32_t npcs, uint64_t *ids, struct wbuf *w)
{
	size_t nids = 0, npos, start;
	uint32_t sent = 0;

	ids[nids++] = (uint64_t)(uintptr_t)c->method;
	start = wb_begin(w, REC_CODE);
	wb_u64(w, 0); /* time, stamped when appended */
	wb_u64(w, (uint64_t)(uintptr_t)c->method);
	wb_u64(w, (uint64_t)(uintptr_t)c->start);
	wb_u32(w, (uint32_t)c->size);
	npos = w->len;
	wb_u32(w, 0); /* npcs, patched */
	for (uint32_t i = 0; i < npcs && w->len < CODE_MAX_BYTES && !w->err; i++) {
		const PCStackInfo *p = c->pcs[i];
		jint nf = p->numstackframes;
		if (nf < 0 || p->methods == NULL || p->bcis == NULL)
			nf = 0;
		if (nf > CODE_MAX_FRAMES)
			nf = CODE_MAX_FRAMES; /* keeps the innermost ones */
		wb_u64(w, (uint64_t)(uintptr_t)p->pc);
		wb_u32(w, (uint32_t)nf);
		for (jint f = 0; f < nf; f++) {
			wb_u64(w, (uint64_t)(uintptr_t)p->methods[f]);
			wb_u64(w, (uint64_t)(int64_t)p->bcis[f]);
			nids = add_id(ids, nids, (uint64_t)(uintptr_t)p->methods[f]);
		}
		sent++;
	}
	if (!w->err)
		put_u32(w->p + npos, sent);
	wb_end(w, start);
	return nids;
}

/* For records that JVMTI callbacks (not signal handlers) produce: when the
 * batch is full, wakes the writer thread and waits for it a little. 0
 * appended, -1 dropped. */
static int emit_wait(JNIEnv *jni, const uint64_t *ids, size_t nids, uint8_t *rec, size_t len)
{
	struct timespec nap = {.tv_nsec = 2000000};

	if (len > DJX_BATCH_ROOM)
		return -1;
	for (int waited = 0;; waited += 2) {
		int rc = emit_with_methods(jni, ids, nids, rec, len, DJX_REC_HDR);
		if (rc >= 0)
			return rc == 0 ? 0 : -1;
		if (waited >= CODE_WAIT_MS || djx_writer_stalled())
			return -1; /* a stalled loader must not slow every compile */
		djx_lock();
		djx_kick_locked();
		djx_unlock();
		nanosleep(&nap, NULL);
	}
}

int djx_emit_code(JNIEnv *jni, const struct djx_code *c)
{
	/* The byte cap bounds the frames a record can hold. */
	size_t maxf = (size_t)c->npcs * CODE_MAX_FRAMES, nids;
	uint32_t npcs = c->npcs;
	uint64_t *ids;
	struct wbuf w;
	int rc = -1;

	if (maxf > CODE_MAX_BYTES / 16 + CODE_MAX_FRAMES)
		maxf = CODE_MAX_BYTES / 16 + CODE_MAX_FRAMES;
	ids = malloc((maxf + 1) * sizeof *ids);
	if (ids == NULL) {
		npcs = 0; /* out of memory: the CODE goes without its pc map */
		if ((ids = malloc(sizeof *ids)) == NULL)
			return -1;
	}
	wb_init(&w, NULL, 0, 0);
	nids = build_code(c, npcs, ids, &w);
	if (!w.err)
		rc = emit_wait(jni, ids, nids, w.p, w.len);
	wb_free(&w);
	free(ids);
	return rc;
}

/* CODE_UNLOAD and STUB only need the lock: these callbacks may come from
 * the ServiceThread or, in JDK 17, while the JVM holds code-cache locks. */
void djx_emit_code_unload(jmethodID method, const void *start)
{
	uint8_t rec[DJX_REC_HDR + 24];

	put_rec_hdr(rec, REC_CODE_UNLOAD, 24);
	put_u64(rec + DJX_REC_HDR + 8, (uint64_t)(uintptr_t)method);
	put_u64(rec + DJX_REC_HDR + 16, (uint64_t)(uintptr_t)start);
	append_now(rec, sizeof rec, DJX_REC_HDR, 1);
}

void djx_emit_stub(const char *name, const void *start, jint size)
{
	uint8_t rec[DJX_REC_HDR + 24 + 256];
	size_t n = name ? strlen(name) : 0;

	if (n > 256)
		n = 256; /* HotSpot's stub names are short */
	put_rec_hdr(rec, REC_STUB, (uint32_t)(24 + n));
	put_u64(rec + DJX_REC_HDR + 8, (uint64_t)(uintptr_t)start);
	put_u32(rec + DJX_REC_HDR + 16, (uint32_t)size);
	put_u32(rec + DJX_REC_HDR + 20, (uint32_t)n);
	if (n)
		memcpy(rec + DJX_REC_HDR + 24, name, n);
	append_now(rec, DJX_REC_HDR + 24 + n, DJX_REC_HDR, 1);
}

int djx_emit_census_start_flushing(uint32_t kind, uint64_t time)
{
	uint8_t rec[DJX_REC_HDR + 12];

	put_rec_hdr(rec, REC_CENSUS_START, 12);
	put_u64(rec + DJX_REC_HDR, time);
	put_u32(rec + DJX_REC_HDR + 8, kind);
	return append_flushing(rec, sizeof rec, NO_TIME);
}

int djx_emit_census_path_flushing(uint32_t id, uint32_t parent, const char *hop)
{
	uint8_t mem[1024];
	struct wbuf w;
	size_t start;

	wb_init(&w, mem, sizeof mem, 1);
	start = wb_begin(&w, REC_CENSUS_PATH);
	wb_u32(&w, id);
	wb_u32(&w, parent);
	wb_str(&w, hop);
	wb_end(&w, start);
	return w.err ? 0 : append_flushing(w.p, w.len, NO_TIME);
}

int djx_emit_census_locked(const struct djx_census_obj *o)
{
	uint8_t mem[1024];
	struct wbuf w;
	size_t start;
	int rc;

	wb_init(&w, mem, sizeof mem, 0);
	start = wb_begin(&w, REC_CENSUS);
	wb_u64(&w, o->time);
	wb_u64(&w, o->addr);
	wb_u64(&w, o->size);
	wb_u64(&w, o->tag);
	wb_u32(&w, o->path);
	wb_u32(&w, o->kind);
	wb_str(&w, o->type);
	wb_end(&w, start);
	rc = w.err ? -1 : djx_append_locked(w.p, w.len, 1);
	wb_free(&w);
	return rc;
}

int djx_emit_census_end_flushing(const struct djx_census_end *e)
{
	uint8_t mem[512];
	struct wbuf w;
	size_t start;

	wb_init(&w, mem, sizeof mem, 1);
	start = wb_begin(&w, REC_CENSUS_END);
	wb_u64(&w, djx_now_ns());
	wb_u32(&w, e->kind);
	wb_u32(&w, e->status);
	wb_u64(&w, e->objects);
	wb_u64(&w, e->bytes);
	wb_u64(&w, e->heap_objects);
	wb_u64(&w, e->heap_bytes);
	wb_u64(&w, e->heap_walk_ns);
	wb_u64(&w, e->holder_walk_ns);
	wb_u64(&w, e->emit_ns);
	wb_u64(&w, e->paths);
	wb_u64(&w, e->reached);
	wb_u64(&w, e->unreachable);
	wb_u64(&w, e->unplaced);
	wb_str(&w, e->note);
	wb_u64(&w, e->strays);
	wb_u64(&w, e->passes);
	wb_u64(&w, e->pause_max_ns);
	wb_end(&w, start);
	return w.err ? 0 : append_flushing(w.p, w.len, NO_TIME);
}

void djx_emit_types_info(const struct djx_types_info *in)
{
	uint8_t mem[512];
	struct wbuf w;
	size_t start;

	wb_init(&w, mem, sizeof mem, 1);
	start = wb_begin(&w, REC_TYPES_INFO);
	wb_u32(&w, (in->ok ? 1u : 0u) | (in->fields ? 2u : 0u) | (in->statics ? 4u : 0u));
	wb_str(&w, in->reason);
	wb_u64(&w, in->oop_base);
	wb_u32(&w, in->oop_shift);
	wb_u32(&w, in->oop_bytes);
	wb_u64(&w, in->kbase);
	wb_u32(&w, in->kshift);
	wb_u32(&w, in->kbytes);
	wb_u32(&w, in->kmark);
	wb_end(&w, start);
	if (!w.err)
		append_now(w.p, w.len, NO_TIME, 1);
}

int djx_emit_class(const struct djx_class *c, int flushing)
{
	uint8_t mem[4096];
	struct wbuf w;
	size_t start;
	int rc;

	wb_init(&w, mem, sizeof mem, 0);
	start = wb_begin(&w, REC_CLASS);
	wb_u64(&w, 0); /* time, stamped when appended */
	wb_u64(&w, c->klass);
	wb_u32(&w, c->narrow);
	wb_str(&w, c->sig);
	wb_u32(&w, (uint32_t)c->nfields);
	for (size_t i = 0; i < c->nfields; i++) {
		wb_u32(&w, c->fields[i].off);
		wb_str(&w, c->fields[i].name);
		wb_str(&w, c->fields[i].sig);
	}
	/* Trailing, so that older readers skip them. */
	wb_u32(&w, (uint32_t)c->nstatics);
	for (size_t i = 0; i < c->nstatics; i++) {
		wb_u32(&w, c->statics[i].off);
		wb_str(&w, c->statics[i].name);
		wb_str(&w, c->statics[i].sig);
	}
	wb_end(&w, start);
	if (w.err)
		rc = 1;
	else if (flushing)
		rc = append_flushing(w.p, w.len, DJX_REC_HDR) == 0 ? 0 : -1;
	else
		rc = append_now(w.p, w.len, DJX_REC_HDR, 0) == 0 ? 0 : -1;
	wb_free(&w);
	return rc;
}

int djx_emit_root_locked(const struct djx_root *r)
{
	uint8_t mem[1024];
	struct wbuf w;
	size_t start;
	int rc;

	wb_init(&w, mem, sizeof mem, 0);
	start = wb_begin(&w, REC_ROOT);
	wb_u64(&w, djx_now_ns());
	wb_u64(&w, r->addr);
	wb_u32(&w, r->kind);
	wb_u32(&w, r->rank);
	wb_u32(&w, r->reach);
	wb_str(&w, r->hop);
	wb_end(&w, start);
	rc = w.err ? 1 : djx_append_locked(w.p, w.len, 1);
	wb_free(&w);
	return rc;
}

int djx_emit_roots_end_flushing(const struct djx_roots_end *e)
{
	uint8_t mem[512];
	struct wbuf w;
	size_t start;

	wb_init(&w, mem, sizeof mem, 1);
	start = wb_begin(&w, REC_ROOTS_END);
	wb_u64(&w, djx_now_ns());
	wb_u64(&w, e->roots);
	wb_u64(&w, e->follow_ns);
	wb_u64(&w, e->tags_ns);
	wb_u32(&w, e->status);
	wb_str(&w, e->note);
	wb_u64(&w, e->refs);
	wb_u64(&w, e->objects);
	wb_u64(&w, e->threads);
	wb_u64(&w, e->gone);
	wb_u64(&w, e->tags_max_ns);
	wb_u64(&w, e->emit_ns);
	wb_end(&w, start);
	return w.err ? 0 : append_flushing(w.p, w.len, NO_TIME);
}
