/* The STATS counters; see stats.h. */
#include "stats.h"

struct djx_stats djx_stats;
