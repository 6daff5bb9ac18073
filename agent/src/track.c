/* Tracked objects, followed through GCs with JNI weak global references.
 *
 * Every tracked object (a sampled allocation or a census object) holds one
 * weak reference. After each GC the writer reads every reference's slot:
 * a cleared slot is a dead object (FREE), a changed one a move (RECONCILE).
 * That is O(tracked) per GC with a few ns per object, where HotSpot's
 * GetObjectsWithTags costs O(tagged x requested). The slot is read raw:
 * right for Serial, Parallel and G1, whose moves all happen inside the
 * pauses the GC events bracket; reads
 * happen under the session lock with no GC in progress, and
 * GarbageCollectionStart takes the lock before anything moves. */
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "emit.h"
#include "epoch.h"
#include "stats.h"
#include "track.h"
#include "util.h"
#include "writer.h"
#include "zaddr.h"

#define SCAN_CHUNK 2048u /* entries per lock hold */

struct trk {
	uint64_t tag;
	jweak ref;
	uint64_t addr; /* as last reported to the loader */
};

/* Under the session lock; only the writer thread removes entries. */
static struct {
	struct trk *v;
	size_t n, cap;
	uint64_t scanned; /* the GCs finished at the last complete scan */
} trk;

static uint64_t next_tag; /* atomic; the last tag issued */

uint64_t djx_track_next_tag(void)
{
	return __atomic_add_fetch(&next_tag, 1, __ATOMIC_RELAXED);
}

/* STATS reports the table's size; the writer reads it under the lock. */
static void set_live_locked(void)
{
	__atomic_store_n(&djx_stats.tracked_live, trk.n, __ATOMIC_RELAXED);
}

uint64_t djx_weak_addr(jweak ref)
{
	/* JNI handles carry a type tag in their low bits (weak: 1); under
	 * ZGC the slot holds a colored reference (zaddr.c). */
	return djx_z_decode((uint64_t)(uintptr_t)*(void *volatile *)((uintptr_t)ref & ~(uintptr_t)3));
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
	set_live_locked();
	djx_count(&djx_stats.tracked, 1);
	return 0;
}

size_t djx_track_alive_locked(const uint64_t *tags, size_t n)
{
	size_t alive = 0;

	for (size_t i = 0; i < trk.n && n > 0; i++)
		if (bsearch(&trk.v[i].tag, tags, n, sizeof *tags, djx_cmp_u64) != NULL)
			alive++;
	return alive;
}

size_t djx_track_count_locked(void)
{
	return trk.n;
}

int djx_track_pending_locked(void)
{
	return trk.n != 0 && djx_epoch_finishes_locked() != trk.scanned;
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
static int scan_chunk(size_t *pos, uint64_t epoch, jweak *dead, size_t *ndead, uint64_t *moves)
{
	size_t end;
	uint32_t nmoved = 0;

	djx_lock();
	if (djx_detached_locked() || djx_epoch_starts_locked() != epoch || !djx_epoch_idle_locked()) {
		djx_unlock();
		return 1;
	}
	/* Worst case: every entry freed (24 bytes) or moved (16). */
	if (!djx_room_locked(SCAN_CHUNK * 24 + 64)) {
		djx_unlock();
		return 2;
	}
	end = *pos + SCAN_CHUNK;
	for (size_t i = *pos; i < trk.n && i < end;) {
		struct trk *t = &trk.v[i];
		uint64_t a = djx_weak_addr(t->ref);
		if (a == 0) {
			djx_emit_free_locked(t->tag, djx_epoch_last_end_locked());
			djx_count(&djx_stats.frees, 1);
			dead[(*ndead)++] = t->ref;
			*t = trk.v[--trk.n];
			end--; /* the entry swapped in counts against this chunk */
			continue;
		}
		if (a != t->addr && djx_cfg->opt.reconcile) {
			moves[2 * nmoved] = t->tag;
			moves[2 * nmoved + 1] = a;
			nmoved++;
		}
		t->addr = a;
		i++;
	}
	*pos = end < trk.n ? end : trk.n;
	set_live_locked();
	/* The last chunk's record goes out even when empty: it tells the
	 * loader that the scan after this GC is complete. Stamped last: the
	 * FREE records of this chunk went out first. */
	if (nmoved > 0 || (*pos >= trk.n && djx_cfg->opt.reconcile)) {
		djx_emit_reconcile_locked(moves, nmoved);
		djx_count(&djx_stats.reconciled, nmoved);
	}
	djx_unlock();
	return 0;
}

int djx_track_scan(JNIEnv *jni)
{
	uint64_t t0 = djx_now_ns(), epoch;
	jweak dead[SCAN_CHUNK];
	uint64_t moves[2 * SCAN_CHUNK];
	size_t pos = 0;
	int rc = 0, tries = 0;

	djx_lock();
	epoch = djx_epoch_starts_locked();
	if (trk.n == 0 || djx_detached_locked() || djx_epoch_finishes_locked() == trk.scanned ||
	    !djx_epoch_idle_locked()) {
		djx_unlock();
		return 0;
	}
	djx_unlock();
	for (;;) {
		size_t ndead = 0;
		int r = scan_chunk(&pos, epoch, dead, &ndead, moves);
		for (size_t i = 0; i < ndead; i++)
			(*jni)->DeleteWeakGlobalRef(jni, dead[i]);
		if (r == 2) {
			if (tries++ > 0 || djx_flush(NULL) != 0) {
				rc = -1;
				break;
			}
			continue;
		}
		tries = 0;
		if (r == 1) {
			/* A new GC (its finish asks for another scan) or the end. */
			djx_count(&djx_stats.reconcile_skipped, 1);
			break;
		}
		djx_lock();
		if (pos >= trk.n) {
			trk.scanned = epoch;
			djx_unlock();
			djx_count(&djx_stats.reconciles, 1);
			break;
		}
		djx_unlock();
	}
	djx_count(&djx_stats.reconcile_ns, djx_now_ns() - t0);
	return rc;
}

/* The last session's table went with its end (djx_track_release); the
 * tags go on rising, one sequence per JVM. */
void djx_track_reset_locked(void)
{
	trk.scanned = 0;
}

void djx_track_release(JNIEnv *jni)
{
	struct trk *v;
	size_t n;

	djx_lock();
	v = trk.v;
	n = trk.n;
	trk.v = NULL;
	trk.n = trk.cap = 0;
	trk.scanned = 0;
	djx_unlock();
	if (jni != NULL)
		for (size_t i = 0; i < n; i++)
			(*jni)->DeleteWeakGlobalRef(jni, v[i].ref);
	free(v);
}
