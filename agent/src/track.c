/* Tracked objects, followed through GCs with JNI weak global references.
 *
 * Every tracked object (a sampled allocation or a census object) holds one
 * weak reference. After each GC the writer reads every reference's slot:
 * a cleared slot is a dead object (FREE), a changed one a move (RECONCILE).
 * That is O(tracked) per GC with a few ns per object, where HotSpot's
 * GetObjectsWithTags costs O(tagged x requested). The slot is read raw, as
 * the old reconciliation read handles: right for Serial, Parallel and G1,
 * whose moves all happen inside the pauses the GC events bracket; reads
 * happen under djx.mu with no GC in progress, and GarbageCollectionStart
 * takes djx.mu before anything moves. */
#include <stdlib.h>
#include <string.h>

#include "djx.h"

#define SCAN_CHUNK 2048u /* entries per lock hold */

struct trk {
	uint64_t tag;
	jweak ref;
	uint64_t addr; /* as last reported to the loader */
};

/* Guarded by djx.mu; only the writer removes entries. */
static struct {
	struct trk *v;
	size_t n, cap;
	uint64_t scanned; /* djx.gc_finishes at the last complete scan */
} trk;

uint64_t djx_weak_addr(jweak ref)
{
	/* JNI handles carry a type tag in their low bits (weak: 1). */
	return (uint64_t)(uintptr_t)*(void *volatile *)((uintptr_t)ref & ~(uintptr_t)3);
}

int djx_track_add_locked(uint64_t tag, jweak ref, uint64_t addr)
{
	if (trk.n == trk.cap) {
		size_t cap = trk.cap ? trk.cap * 2 : 1024;
		struct trk *v = realloc(trk.v, cap * sizeof *v);
		if (v == NULL)
			return -1;
		trk.v = v;
		trk.cap = cap;
	}
	trk.v[trk.n].tag = tag;
	trk.v[trk.n].ref = ref;
	trk.v[trk.n].addr = addr;
	trk.n++;
	__atomic_add_fetch(&djx.n_tracked, 1, __ATOMIC_RELAXED);
	return 0;
}

size_t djx_track_count_locked(void)
{
	return trk.n;
}

int djx_track_pending_locked(void)
{
	return trk.n != 0 && djx.gc_finishes != trk.scanned;
}

int djx_track_addrs_locked(uint64_t *out, size_t max)
{
	size_t n = trk.n < max ? trk.n : max;
	for (size_t i = 0; i < n; i++)
		out[i] = djx_weak_addr(trk.v[i].ref);
	return (int)n;
}

/* One chunk from *pos under one lock hold: dead entries become FREE
 * records and are swapped out (their references go to dead[] for the
 * caller to delete outside the lock), moved ones go into one RECONCILE
 * record. Returns 0 done with the chunk, 1 stop (a GC started or the
 * session ended), 2 the batch lacks room (the caller flushes and retries). */
static int scan_chunk(size_t *pos, uint64_t epoch, jweak *dead, size_t *ndead, struct wbuf *w)
{
	size_t end, start, nmoved = 0, countoff;

	pthread_mutex_lock(&djx.mu);
	if (djx.detached || djx.gc_starts != epoch || djx.gc_starts != djx.gc_finishes) {
		pthread_mutex_unlock(&djx.mu);
		return 1;
	}
	/* Worst case: every entry freed (24 bytes) or moved (16). */
	if (djx.cur == NULL || djx.cur_len + SCAN_CHUNK * 24 + 64 > DJX_BUF_CAP - DJX_BUF_RESERVE) {
		pthread_mutex_unlock(&djx.mu);
		return 2;
	}
	w->len = 0;
	w->err = 0;
	start = wb_begin(w, REC_RECONCILE);
	wb_u64(w, 0); /* time, stamped when appended */
	countoff = w->len;
	wb_u32(w, 0);
	end = *pos + SCAN_CHUNK;
	for (size_t i = *pos; i < trk.n && i < end;) {
		struct trk *t = &trk.v[i];
		uint64_t a = djx_weak_addr(t->ref);
		if (a == 0) {
			djx_free_at_locked(t->tag, djx.last_gc_end);
			__atomic_add_fetch(&djx.n_frees, 1, __ATOMIC_RELAXED);
			dead[(*ndead)++] = t->ref;
			*t = trk.v[--trk.n];
			end--; /* the entry swapped in counts against this chunk */
			continue;
		}
		if (a != t->addr && djx_cfg->opt.reconcile) {
			wb_u64(w, t->tag);
			wb_u64(w, a);
			nmoved++;
		}
		t->addr = a;
		i++;
	}
	*pos = end < trk.n ? end : trk.n;
	wb_end(w, start);
	put_u32(w->p + countoff, (uint32_t)nmoved);
	/* The last chunk's record goes out even when empty: it tells the
	 * loader that the scan after this GC is complete. */
	if ((nmoved > 0 || (*pos >= trk.n && djx_cfg->opt.reconcile)) && !w->err) {
		/* Stamped last: the FREE records of this chunk went out first. */
		put_u64(w->p + start + DJX_REC_HDR, djx_now_ns());
		djx_append_locked(w->p, w->len, 1);
		__atomic_add_fetch(&djx.n_reconciled, nmoved, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&djx.mu);
	return 0;
}

int djx_track_scan(JNIEnv *jni, int (*flush)(void))
{
	uint64_t t0 = djx_now_ns(), epoch;
	jweak dead[SCAN_CHUNK];
	uint8_t mem[SCAN_CHUNK * 16 + 64];
	struct wbuf w;
	size_t pos = 0;
	int rc = 0, tries = 0;

	pthread_mutex_lock(&djx.mu);
	epoch = djx.gc_starts;
	if (trk.n == 0 || djx.detached || djx.gc_finishes == trk.scanned || djx.gc_starts != djx.gc_finishes) {
		pthread_mutex_unlock(&djx.mu);
		return 0;
	}
	pthread_mutex_unlock(&djx.mu);
	wb_init(&w, mem, sizeof mem, 1);
	for (;;) {
		size_t ndead = 0;
		int r = scan_chunk(&pos, epoch, dead, &ndead, &w);
		for (size_t i = 0; i < ndead; i++)
			(*jni)->DeleteWeakGlobalRef(jni, dead[i]);
		if (r == 2) {
			if (tries++ > 0 || flush() != 0) {
				rc = -1;
				break;
			}
			continue;
		}
		tries = 0;
		if (r == 1) {
			/* A new GC (its finish asks for another scan) or the end. */
			__atomic_add_fetch(&djx.n_rec_skipped, 1, __ATOMIC_RELAXED);
			break;
		}
		pthread_mutex_lock(&djx.mu);
		if (pos >= trk.n) {
			trk.scanned = epoch;
			pthread_mutex_unlock(&djx.mu);
			__atomic_add_fetch(&djx.n_reconciles, 1, __ATOMIC_RELAXED);
			break;
		}
		pthread_mutex_unlock(&djx.mu);
	}
	__atomic_add_fetch(&djx.ns_reconcile, djx_now_ns() - t0, __ATOMIC_RELAXED);
	return rc;
}

void djx_track_release(JNIEnv *jni)
{
	struct trk *v;
	size_t n;

	pthread_mutex_lock(&djx.mu);
	v = trk.v;
	n = trk.n;
	trk.v = NULL;
	trk.n = trk.cap = 0;
	trk.scanned = 0;
	pthread_mutex_unlock(&djx.mu);
	if (jni != NULL)
		for (size_t i = 0; i < n; i++)
			(*jni)->DeleteWeakGlobalRef(jni, v[i].ref);
	free(v);
}
