/* GC epochs and the GC events. GarbageCollectionStart and Finish run in a
 * restricted context (inside the pause): no JNI, no JVMTI but raw monitors
 * and memory. They only count and append a fixed-size record under the
 * session lock, which no thread holds across a JVM call. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "emit.h"
#include "epoch.h"
#include "stats.h"
#include "util.h"
#include "writer.h"

static struct {
	int events;          /* GarbageCollectionStart/Finish acquired and, after start, enabled */
	const char *cap_err; /* why not, sent as an ERROR after HELLO */
	/* Under the session lock. */
	uint64_t starts, finishes;
	uint64_t last_end; /* the latest GarbageCollectionFinish */
} ep;

/* GC events are optional: without them profiling still works, with no
 * frees or moves (the failure is sent as an ERROR after HELLO). HotSpot
 * offers them in every phase, so failures are not expected. Deaths and
 * moves are followed with JNI weak references, which need no capability. */
void djx_epoch_caps(jvmtiEnv *j)
{
	jvmtiCapabilities caps;

	memset(&caps, 0, sizeof caps);
	caps.can_generate_garbage_collection_events = 1;
	ep.cap_err = NULL;
	ep.events = (*j)->AddCapabilities(j, &caps) == JVMTI_ERROR_NONE;
	if (!ep.events)
		ep.cap_err = "AddCapabilities: no GC events: no frees or moves";
}

const char *djx_epoch_cap_err(void)
{
	return ep.cap_err;
}

int djx_epoch_events(void)
{
	return ep.events;
}

void djx_epoch_disable(jvmtiEnv *j)
{
	(*j)->SetEventNotificationMode(j, JVMTI_DISABLE, JVMTI_EVENT_GARBAGE_COLLECTION_START, NULL);
	(*j)->SetEventNotificationMode(j, JVMTI_DISABLE, JVMTI_EVENT_GARBAGE_COLLECTION_FINISH, NULL);
}

/* A failure turns tracking off and is reported; profiling goes on without it. */
void djx_epoch_enable(jvmtiEnv *j)
{
	char msg[96];
	jvmtiError e;

	if (!ep.events)
		return;
	e = (*j)->SetEventNotificationMode(j, JVMTI_ENABLE, JVMTI_EVENT_GARBAGE_COLLECTION_START, NULL);
	if (e == JVMTI_ERROR_NONE)
		e = (*j)->SetEventNotificationMode(j, JVMTI_ENABLE, JVMTI_EVENT_GARBAGE_COLLECTION_FINISH, NULL);
	if (e != JVMTI_ERROR_NONE) {
		(*j)->SetEventNotificationMode(j, JVMTI_DISABLE, JVMTI_EVENT_GARBAGE_COLLECTION_START, NULL);
		ep.events = 0;
		snprintf(msg, sizeof msg, "enable GC events: error %d: no GC epochs, frees or moves", (int)e);
		djx_emit_error(msg);
	}
}

void djx_epoch_release(jvmtiEnv *j, jvmtiCapabilities *caps)
{
	if (!ep.events)
		return;
	djx_epoch_disable(j);
	caps->can_generate_garbage_collection_events = 1;
}

void djx_epoch_start_locked(void)
{
	/* Before any object moves: a scan that read addresses before this sees
	 * the count change and discards them. */
	ep.starts++;
	if (!djx_detached_locked())
		djx_emit_gc_locked(0);
}

void djx_epoch_finish_locked(void)
{
	/* A finish without its start (events enabled inside a GC) would
	 * leave the counts apart, no epoch idle again. */
	if (ep.finishes == ep.starts)
		return;
	ep.finishes++;
	if (!djx_detached_locked()) {
		djx_count(&djx_stats.gcs, 1);
		djx_emit_gc_locked(1);
	}
	ep.last_end = djx_now_ns(); /* not before GC_FINISH's own time */
}

void djx_epoch_reset_locked(void)
{
	ep.starts = ep.finishes = ep.last_end = 0;
}

uint64_t djx_epoch_starts_locked(void)
{
	return ep.starts;
}

uint64_t djx_epoch_finishes_locked(void)
{
	return ep.finishes;
}

int djx_epoch_idle_locked(void)
{
	return ep.starts == ep.finishes;
}

uint64_t djx_epoch_last_end_locked(void)
{
	return ep.last_end;
}

int djx_epoch_begin(uint64_t *s)
{
	int idle;

	djx_lock();
	*s = ep.starts;
	idle = ep.starts == ep.finishes && !djx_detached_locked();
	djx_unlock();
	return idle ? 0 : -1;
}

/* Longer than any pause seen (a full GC of a large heap takes seconds):
 * past it the counts are taken to be wrong, and the session must still
 * end when the loader says so. */
#define GC_WAIT_NS 20000000000ull

int djx_epoch_nap(uint64_t *since)
{
	struct timespec ts = {0, 1000000};
	uint64_t now = djx_now_ns();

	if (*since == 0)
		*since = now;
	if (now - *since > GC_WAIT_NS || djx_writer_quit_pending())
		return -1;
	nanosleep(&ts, NULL);
	return 0;
}

int djx_epoch_same(uint64_t s)
{
	int same;

	djx_lock();
	same = ep.starts == s && !djx_detached_locked();
	djx_unlock();
	return same;
}
