/* The counters each STATS record carries, in its order (agentwire's STATS).
 * Modules only add to them, with djx_count: relaxed atomics, lock-free,
 * because the signal handler counts too. Only the writer reads them. */
#ifndef DJX_STATS_H
#define DJX_STATS_H

#include <stdint.h>

struct djx_stats {
	uint64_t callbacks, below_minsize, dropped, stack_errors, allocs_sent;
	uint64_t frees, gcs, reconciles, reconciled, reconcile_skipped;
	uint64_t reconcile_limited; /* stays 0: the scan has no cap */
	uint64_t reconcile_ns;
	uint64_t stack_signals, stacks_sent, stacks_dropped, code_sent, code_dropped, signals_chained;
	uint64_t untagged, untagged_freed; /* humongous objects tracked without weak references */
	uint64_t alloc_ns, stack_ns, code_ns; /* the JVM's threads' time in our callbacks and handler */
	uint64_t tracked;
	uint64_t tracked_live; /* a level, not a sum: stored under the session lock */
	uint64_t census_ns;
	uint64_t classes_sent, classes_dropped, types_ns;
	uint64_t raw_stacks, raw_fallbacks; /* allocation stacks walked in-process, and walks that asked JVMTI instead */
};
extern struct djx_stats djx_stats;

static inline uint64_t djx_count(uint64_t *c, uint64_t n)
{
	return __atomic_add_fetch(c, n, __ATOMIC_RELAXED);
}

#endif
