/* Humongous objects on G1, tracked without JVMTI tags.
 *
 * A JVMTI tag is a weak root, and G1's young-GC weak processing treats a
 * humongous object that a weak root refers to as live (G1KeepAliveClosure
 * calls set_humongous_is_live), so a tagged humongous array is never
 * eagerly reclaimed: it waits for the next concurrent cycle. With only
 * Xalan's humongous arrays tagged, its heap after young GCs grew from 35 to
 * 63 MB over 20 transforms (and its peak RSS by 10%).
 *
 * G1 does not move humongous objects, so for objects of at least the size
 * the loader names (half a region) the agent issues a tag number without
 * calling SetTag and remembers the object's address and header word at
 * offset 8 (the klass and, with compressed class pointers, the array
 * length: fixed for the object's life). After each GC the writer rereads
 * that word through /proc/self/mem, where a region G1 has uncommitted reads
 * as an error instead of faulting, and reports the object freed (a FREE
 * record for its tag) when the word changed or cannot be read.
 *
 * The check sees a reclaimed region only once something else has been
 * allocated over it or it was uncommitted; until then the object still
 * counts as live, and samples in a new object there are charged to it up to
 * the next GC. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "big.h"
#include "emit.h"
#include "epoch.h"
#include "stats.h"
#include "util.h"
#include "writer.h"

#define BIG_MAX 65536u /* beyond this, objects are tagged as usual */

struct big {
	uint64_t tag, addr, size, word;
	int gone; /* a later object overlapped it: FREE sent, entry not yet removed */
};

/* Under the session lock; only the writer thread removes entries. */
static struct {
	struct big *v;
	size_t n, cap;
	uint64_t checked; /* the GCs finished at the last check */
} bigs;

static int memfd = -1;     /* /proc/self/mem; opened per session, closed at its end */
static uint64_t untag_min; /* atomic; 0: tag every object */

static int read_word(uint64_t addr, uint64_t *out)
{
	return pread(memfd, out, sizeof *out, (off_t)addr) == (ssize_t)sizeof *out ? 0 : -1;
}

int djx_big_enable(uint64_t min)
{
	uint64_t probe = 0x4a5844, got = 0;

	if (memfd < 0)
		memfd = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
	if (memfd < 0 || read_word((uint64_t)(uintptr_t)&probe, &got) != 0 || got != probe)
		return -1;
	__atomic_store_n(&untag_min, min, __ATOMIC_RELAXED);
	return 0;
}

int djx_big_wants(uint64_t size)
{
	uint64_t min = __atomic_load_n(&untag_min, __ATOMIC_RELAXED);

	return min != 0 && size >= min && memfd >= 0 &&
	       __atomic_load_n(&bigs.n, __ATOMIC_RELAXED) < BIG_MAX;
}

int djx_big_add_locked(uint64_t tag, uint64_t addr, uint64_t size)
{
	struct big *v;

	/* A new object over an old one's memory proves the old one dead, also
	 * when its header looks the same (G1 tends to place the next array of
	 * the same size in the same regions). */
	for (size_t i = 0; i < bigs.n; i++) {
		struct big *b = &bigs.v[i];
		if (!b->gone && b->addr < addr + size && addr < b->addr + b->size) {
			b->gone = 1;
			djx_emit_free_locked(b->tag, djx_now_ns());
			djx_count(&djx_stats.untagged_freed, 1);
		}
	}

	if (bigs.n == bigs.cap) {
		size_t cap = bigs.cap ? bigs.cap * 2 : 64;
		if ((v = realloc(bigs.v, cap * sizeof *v)) == NULL)
			return -1;
		bigs.v = v;
		bigs.cap = cap;
	}
	/* The caller holds a reference to the object, a humongous one G1 never
	 * moves: its header is there to read. */
	bigs.v[bigs.n].tag = tag;
	bigs.v[bigs.n].addr = addr;
	bigs.v[bigs.n].size = size;
	bigs.v[bigs.n].gone = 0;
	bigs.v[bigs.n].word = *(const volatile uint64_t *)(uintptr_t)(addr + 8);
	__atomic_store_n(&bigs.n, bigs.n + 1, __ATOMIC_RELAXED);
	djx_count(&djx_stats.untagged, 1);
	return 0;
}

int djx_big_check(void)
{
	struct big *snap = NULL;
	unsigned char *dead = NULL;
	size_t n;
	int rc = 0;

	djx_lock();
	/* After a GC finished, and not while another runs. */
	if (bigs.n == 0 || djx_detached_locked() || djx_epoch_finishes_locked() == bigs.checked ||
	    !djx_epoch_idle_locked()) {
		djx_unlock();
		return 0;
	}
	bigs.checked = djx_epoch_finishes_locked();
	n = bigs.n;
	snap = malloc(n * sizeof *snap);
	dead = calloc(n, 1);
	if (snap != NULL && dead != NULL)
		memcpy(snap, bigs.v, n * sizeof *snap);
	djx_unlock();
	if (snap == NULL || dead == NULL)
		goto out; /* checked after the next GC */

	/* The reads run without the lock; the entries [0, n) stay where they
	 * are meanwhile, since only this thread removes any. */
	for (size_t i = 0; i < n; i++) {
		uint64_t w;
		dead[i] = read_word(snap[i].addr + 8, &w) != 0 || w != snap[i].word;
	}

	djx_lock();
	if (!djx_detached_locked()) {
		/* Downwards: the entry swapped into i is either checked and live or
		 * added after the snapshot. */
		for (size_t i = n; i-- > 0;) {
			if (!dead[i] && !bigs.v[i].gone)
				continue;
			if (!bigs.v[i].gone) {
				if (djx_emit_free_locked(bigs.v[i].tag, djx_epoch_last_end_locked()) != 0)
					rc = -1;
				djx_count(&djx_stats.untagged_freed, 1);
			}
			bigs.v[i] = bigs.v[bigs.n - 1];
			__atomic_store_n(&bigs.n, bigs.n - 1, __ATOMIC_RELAXED);
		}
	}
	djx_unlock();
out:
	free(snap);
	free(dead);
	return rc;
}

int djx_big_pending_locked(void)
{
	return bigs.n != 0 && djx_epoch_finishes_locked() != bigs.checked;
}

void djx_big_end_locked(void)
{
	/* Each session opens its own: one left open per session would pile
	 * up in the JVM, which keeps the library loaded between them. Callbacks only
	 * read it under the lock (djx_big_add_locked) or once untag_min is set. */
	if (memfd >= 0)
		close(memfd);
	memfd = -1;
	free(bigs.v);
	bigs.v = NULL;
	bigs.n = bigs.cap = 0;
	bigs.checked = 0;
	__atomic_store_n(&untag_min, 0, __ATOMIC_RELAXED);
}

void djx_big_reset_locked(void)
{
	djx_big_end_locked();
}

size_t djx_big_count_locked(void)
{
	return bigs.n;
}

size_t djx_big_addrs_locked(uint64_t *out, size_t max)
{
	size_t n = 0;
	for (size_t i = 0; i < bigs.n && n < max; i++)
		if (!bigs.v[i].gone)
			out[n++] = bigs.v[i].addr;
	return n;
}
