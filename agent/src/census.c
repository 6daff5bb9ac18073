/* The census: objects that existed before the profile, named by what holds
 * them.
 *
 * Phase 1, pauses: IterateThroughHeap in a private environment (env T)
 * tags every object of at least minsize with its group's tag, so that one
 * GetObjectsWithTags call per group returns them in O(tagged): HotSpot
 * compares each tag-map entry with each requested tag. A pass that reaches
 * the pause budget stops; the next, after the application ran as long,
 * skips what is tagged and goes on, as long as passes make progress; what
 * they tagged is kept (a partial census).
 * Phase 2, pauses (holders.c): FollowReferences from the GC roots in a
 * second private environment (env C), whose tags are reference-chain ids.
 * Phase 3, no pause: the targets come back as local references; each gets a
 * JNI weak reference (track.c), a CENSUS record, and its chain as
 * CENSUS_PATH records. Both environments are then disposed, which drops
 * their tags at once.
 * Heap callbacks may not call JNI or JVMTI (but memory): names are resolved
 * after the walks (hopname.c). docs/census.md has the whole design. */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "big.h"
#include "census.h"
#include "census_state.h"
#include "config.h"
#include "djx.h"
#include "emit.h"
#include "epoch.h"
#include "stats.h"
#include "track.h"
#include "util.h"
#include "writer.h"

/* The holder walks' pause per heap object, measured on JDK 17 and 25 with
 * 1M to 50M objects (docs/census.md: 310-620 ns): a walk estimated past
 * the budget is skipped. */
#define HOLDER_NS 500u
/* Censuses after GCs take at most RECENSUS_START_NS plus 1/RECENSUS_SHARE
 * of the session, pauses and the writer's work together. Their pause
 * grows with the whole heap, so a big heap gets them rarely; the first few
 * come at once, when the objects a short profile is after were just
 * allocated. */
#define RECENSUS_SHARE 400u
#define RECENSUS_START_NS 20000000ull
/* A census after a GC that found nothing new, or whose new objects had
 * mostly died by the time the next one is due (a quarter or fewer tracked
 * still), doubles the least time to the next, up to RECENSUS_BACKOFF times
 * recensus_ms; one whose finds lived resets it. On a churning heap the
 * censuses found only objects about to die (docs/census.md). */
#define RECENSUS_BACKOFF 8u

/* The tags of the objects the last census after a GC tracked (ascending:
 * tags are handed out in order), and how many of them are humongous ones,
 * which are not in the tracking table and count as alive. Writer thread
 * and the census's emit (lock held). */
static struct {
	uint64_t *tags;
	size_t n, cap, big;
} fresh;

static void fresh_add(uint64_t tag, int big)
{
	if (big) {
		fresh.big++;
		return;
	}
	if (fresh.n == fresh.cap) {
		size_t cap = fresh.cap ? 2 * fresh.cap : 1024;
		uint64_t *v = realloc(fresh.tags, cap * sizeof *v);
		if (v == NULL)
			return; /* not judged by it: counts as dead, a later census comes */
		fresh.tags = v;
		fresh.cap = cap;
	}
	fresh.tags[fresh.n++] = tag;
}

/* Phase 1. */
static jint JNICALL iter_cb(jlong class_tag, jlong size, jlong *tag_ptr, jint length, void *ud)
{
	(void)class_tag;
	(void)length;
	(void)ud;
	if ((++cs.calls & 1023) == 0 && census_over())
		return JVMTI_VISIT_ABORT;
	cs.heap_objects++;
	cs.heap_bytes += (uint64_t)size;
	if (*tag_ptr != 0)
		return 0; /* tagged by an earlier pass */
	/* After a GC the heap iteration also sees garbage, which the local
	 * references of phase 3 would keep alive a GC longer: harmless but for
	 * G1's humongous objects, which then wait for a marking cycle. */
	if ((uint64_t)size >= cs.minsize && !(cs.kind == DJX_CENSUS_AFTER_GC && djx_big_wants((uint64_t)size))) {
		*tag_ptr = (jlong)(1 + cs.targets / GROUP);
		cs.targets++;
	}
	return 0;
}

/* CENSUS_PATH records for every chain a target uses, parents first (a
 * parent's id is always lower than its children's). */
static int emit_paths(void)
{
	char text[768];
	int rc = 0;

	for (size_t id = cs.npaths; id >= 1; id--)
		if (cs.used[id] && cs.parent[id] != 0)
			cs.used[cs.parent[id]] = 1;
	for (size_t id = 1; id <= cs.npaths && rc == 0; id++) {
		if (!cs.used[id])
			continue;
		if (id == PATH_UNKNOWN)
			snprintf(text, sizeof text, "?");
		else
			census_hop_name(cs.hop[id], text, sizeof text);
		rc = djx_emit_census_path_flushing((uint32_t)id, cs.parent[id], text);
	}
	return rc;
}

/* The type of a target: from the class table where the class was tagged. */
static void target_type(jobject o, struct target *t)
{
	jclass k = (*cs.jni)->GetObjectClass(cs.jni, o);
	jlong tag = 0;

	t->cls = -1;
	t->sig = NULL;
	if (k == NULL)
		return;
	if (cs.ec != NULL && (*cs.ec)->GetTag(cs.ec, k, &tag) == JVMTI_ERROR_NONE && (tag & T_CLASS) &&
	    (tag & T_ID) < cs.ncls && cs.cls[tag & T_ID].sig != NULL)
		t->cls = (int32_t)(tag & T_ID);
	else {
		char *sig = NULL;
		if ((*cs.et)->GetClassSignature(cs.et, k, &sig, NULL) == JVMTI_ERROR_NONE && sig != NULL)
			t->sig = strdup(sig);
		djx_dealloc(cs.et, sig);
	}
	(*cs.jni)->DeleteLocalRef(cs.jni, k);
}

/* Addresses of the objects already tracked, sorted, for a census after a
 * GC; rebuilt under the lock whenever a GC has happened since. */
static struct {
	uint64_t *v;
	size_t n;
	uint64_t epoch;
	int valid;
} seen;

static int tracked_refresh_locked(void)
{
	size_t n;

	if (seen.valid && seen.epoch == djx_epoch_starts_locked())
		return 0;
	n = djx_track_count_locked() + djx_big_count_locked();
	free(seen.v);
	seen.v = malloc((n + 1) * sizeof *seen.v);
	seen.valid = 0;
	if (seen.v == NULL)
		return -1;
	seen.n = (size_t)djx_track_addrs_locked(seen.v, n);
	seen.n += djx_big_addrs_locked(seen.v + seen.n, n - seen.n);
	qsort(seen.v, seen.n, sizeof *seen.v, djx_cmp_u64);
	seen.epoch = djx_epoch_starts_locked();
	seen.valid = 1;
	return 0;
}

static int tracked(uint64_t addr)
{
	return bsearch(&addr, seen.v, seen.n, sizeof *seen.v, djx_cmp_u64) != NULL;
}

/* Tracks the targets [*i, end) and appends their CENSUS records; lock
 * held, no GC in progress (the addresses are read now). */
static void emit_chunk_locked(struct target *tv, size_t *i, size_t end, uint64_t when, int dedupe,
			      uint64_t *objects, uint64_t *bytes)
{
	for (; *i < end; (*i)++) {
		struct target *t = &tv[*i];
		struct djx_census_obj o = {.time = when, .size = t->size, .path = t->path, .kind = cs.kind};
		o.addr = djx_weak_addr(t->ref);
		if (o.addr == 0 || (dedupe && tracked(o.addr)))
			continue; /* died since: its reference is deleted later */
		o.tag = djx_track_next_tag();
		if (djx_big_wants(t->size)) {
			if (djx_big_add_locked(o.tag, o.addr, t->size) != 0)
				continue;
		} else if (djx_track_add_locked(o.tag, t->ref, o.addr) != 0) {
			continue;
		} else {
			t->ref = NULL; /* the tracking table owns it now */
		}
		o.type = t->cls >= 0 ? cs.cls[t->cls].sig : t->sig;
		if (cs.kind == DJX_CENSUS_AFTER_GC)
			fresh_add(o.tag, djx_big_wants(t->size));
		djx_emit_census_locked(&o);
		(*objects)++;
		*bytes += t->size;
	}
}

/* Phase 3: weak references for the targets, then their CENSUS records,
 * a chunk per lock hold with no GC in progress. Returns 0, or -1 when the
 * connection failed. */
static int emit_targets(struct target *tv, size_t n, uint64_t t_begin, uint64_t *objects, uint64_t *bytes)
{
	int dedupe = cs.kind != DJX_CENSUS_ATTACH;
	uint64_t gc_since = 0;
	size_t i = 0;
	int rc = 0;

	while (i < n && rc == 0) {
		size_t end = i + EMIT_CHUNK < n ? i + EMIT_CHUNK : n;
		uint64_t when;
		int gc;
		djx_lock();
		if (djx_detached_locked()) {
			djx_unlock();
			break;
		}
		gc = !djx_epoch_idle_locked();
		if (gc || !djx_room_locked(EMIT_ROOM)) {
			djx_unlock();
			if (gc) {
				if (djx_epoch_nap(&gc_since) != 0)
					break;
			} else if (djx_flush(NULL) != 0) {
				rc = -1;
			}
			continue;
		}
		gc_since = 0;
		if (dedupe && tracked_refresh_locked() != 0)
			dedupe = 0; /* out of memory: the loader drops duplicates */
		/* The addresses hold from the last GC on (or the census start). */
		when = djx_epoch_last_end_locked() > t_begin ? djx_epoch_last_end_locked() : t_begin;
		emit_chunk_locked(tv, &i, end, when, dedupe, objects, bytes);
		djx_unlock();
	}
	return rc;
}

static void free_state(void)
{
	jvmtiEnv *e = cs.ec;

	for (jint i = 0; i < cs.ncls && cs.cls != NULL; i++) {
		if (e != NULL)
			djx_dealloc(e, cs.cls[i].sig);
		for (int f = 0; f < cs.cls[i].nfields; f++)
			free(cs.cls[i].fields[f]);
		free(cs.cls[i].fields);
	}
	for (jint i = 0; i < cs.nthr && cs.tnames != NULL; i++)
		if (e != NULL)
			djx_dealloc(e, cs.tnames[i]);
	djx_names_free(cs.names);
	free(cs.cls);
	free(cs.tnames);
	free(cs.roots);
	free(cs.parent);
	free(cs.hop);
	free(cs.depth);
	free(cs.used);
	free(cs.hpar);
	free(cs.hval);
	free(cs.hhop);
	free(seen.v);
	memset(&seen, 0, sizeof seen);
}


/* One object GetObjectsWithTags returned for group g: into *tg, counted
 * in *ntv, or left out. No DeleteLocalRef: HotSpot hands a deleted slot to
 * the next local reference made, and the objects after this one were seen
 * to change under their handles; PopLocalFrame frees them all. */
static void take_target(jobject o, jlong g, uint32_t status, struct target *tg, size_t *ntv, uint64_t *unreached)
{
	JNIEnv *jni = cs.jni;
	jlong size = 0, ctag = 0, ttag = 0;

	tg->path = 0;
	/* GetObjectsWithTags was seen to return the odd object that bears no
	 * such tag (JDK 17 and 25, Parallel and G1): check each. */
	if ((*cs.et)->GetTag(cs.et, o, &ttag) != JVMTI_ERROR_NONE || ttag != g) {
		cs.strays++;
		return;
	}
	if (cs.ec != NULL && (*cs.ec)->GetTag(cs.ec, o, &ctag) == JVMTI_ERROR_NONE && (ctag & T_TARGET))
		tg->path = (uint32_t)(ctag & T_ID);
	if (tg->path == 0 && (status & DJX_CENSUS_HOLDERS)) {
		/* Garbage the heap iteration saw (its memory may hold another
		 * object by now), or held by a native frame only. */
		(*unreached)++;
		return;
	}
	if ((*cs.et)->GetObjectSize(cs.et, o, &size) != JVMTI_ERROR_NONE ||
	    (tg->ref = (*jni)->NewWeakGlobalRef(jni, o)) == NULL)
		return;
	tg->size = (uint64_t)size;
	target_type(o, tg);
	if ((uint64_t)size < cs.minsize && !(tg->cls >= 0 && strcmp(cs.cls[tg->cls].sig, "Ljava/lang/Class;") == 0)) {
		/* Without holders nothing proves it live: a garbage object's
		 * memory that holds a smaller one now. */
		(*jni)->DeleteWeakGlobalRef(jni, tg->ref);
		free(tg->sig);
		tg->ref = NULL;
		tg->sig = NULL;
		cs.strays++;
		return;
	}
	if (tg->path != 0 && tg->path <= cs.npaths)
		cs.used[tg->path] = 1;
	(*ntv)++;
}

/* One census's outcome and costs, for its CENSUS_END. */
struct run {
	uint32_t status;
	char note[200];
	uint64_t t_begin, t_iter, t_max, t_hold, t_emit;
	uint64_t objects, bytes, unreached, passes;
};

/* Phase 1: tags the targets, in passes of at most budget_ns. 0 go on, 1
 * the census ends (the status says why), -1 the connection failed. */
static int walk_heap(uint64_t budget_ns, struct run *r)
{
	jvmtiHeapCallbacks cb;

	memset(&cb, 0, sizeof cb);
	cb.heap_iteration_callback = iter_cb;
	for (;;) {
		uint64_t before = cs.targets, t = djx_now_ns(), dt;
		jvmtiError e;
		cs.aborted = 0;
		cs.heap_objects = cs.heap_bytes = 0;
		cs.deadline = budget_ns ? t + budget_ns : 0;
		e = (*cs.et)->IterateThroughHeap(cs.et, 0, NULL, &cb, NULL);
		dt = djx_now_ns() - t;
		r->t_iter += dt;
		r->t_max = dt > r->t_max ? dt : r->t_max;
		r->passes++;
		if (e != JVMTI_ERROR_NONE || cs.cancelled) {
			r->status |= cs.cancelled ? DJX_CENSUS_CANCELLED : DJX_CENSUS_FAILED;
			if (e != JVMTI_ERROR_NONE)
				snprintf(r->note, sizeof r->note, "IterateThroughHeap: error %d", (int)e);
			return 1;
		}
		if (!cs.aborted)
			return 0;
		/* A pass costs ~50 ns an object, ~400 more a target it tags: a
		 * pass that tagged little stopped for the heap's size, and the
		 * next would stop at the same place. The pause is paid: what it
		 * tagged is kept, and a holder walk, which costs several times a
		 * heap walk per object, is not tried. */
		if ((cs.targets - before) * 400 < budget_ns / 4 || r->passes >= MAX_PASSES) {
			if (cs.targets == 0) {
				r->status |= DJX_CENSUS_OVER_BUDGET;
				return 1;
			}
			r->status |= DJX_CENSUS_PARTIAL;
			return 0;
		}
		/* The application runs as long as the pause took; the records
		 * it made meanwhile go out. */
		struct timespec ts = {(time_t)(dt / 1000000000u), (long)(dt % 1000000000u)};
		nanosleep(&ts, NULL);
		if (djx_flush(NULL) != 0)
			return -1;
	}
}

/* Phase 2: its pause grows with the objects it reaches, at about
 * HOLDER_NS each (measured, docs/census.md). The heap walk counted garbage
 * too, often most of the heap: the walk is skipped only when even a
 * quarter of the heap would not fit the budget, and otherwise stops at
 * it. 0 go on, 1 the census ends (cancelled). */
static int walk_holders(JNIEnv *jni, uint64_t budget_ns, struct run *r)
{
	jvmtiHeapCallbacks cb;
	jvmtiError e;
	uint64_t t;

	if ((r->status & DJX_CENSUS_PARTIAL) || (budget_ns != 0 && cs.heap_objects * HOLDER_NS > 4 * budget_ns)) {
		r->status |= DJX_CENSUS_HOLDERS_SKIPPED;
		return 0;
	}
	if ((cs.ec = djx_private_env(djx_cfg->vm, 1)) == NULL || census_prepare_walk(jni) != 0) {
		r->status |= DJX_CENSUS_HOLDERS_FAILED;
		return 0;
	}
	memset(&cb, 0, sizeof cb);
	cb.heap_reference_callback = census_ref_cb;
	cs.calls = 0;
	census_intern(0, HOP(H_UNKNOWN, 0, 0)); /* PATH_UNKNOWN */
	t = djx_now_ns();
	cs.deadline = budget_ns ? t + budget_ns : 0;
	cs.walk = 1;
	e = (*cs.ec)->FollowReferences(cs.ec, 0, NULL, NULL, &cb, NULL);
	if (e == JVMTI_ERROR_NONE && !cs.aborted && !cs.cancelled) {
		cs.walk = 2;
		cs.cur_class = -1;
		e = (*cs.ec)->FollowReferences(cs.ec, 0, NULL, NULL, &cb, NULL);
	}
	r->t_hold = djx_now_ns() - t;
	r->t_max = r->t_hold > r->t_max ? r->t_hold : r->t_max;
	if (cs.cancelled) {
		r->status |= DJX_CENSUS_CANCELLED;
		return 1;
	}
	if (e != JVMTI_ERROR_NONE)
		r->status |= DJX_CENSUS_HOLDERS_FAILED;
	else if (cs.aborted || cs.oom)
		r->status |= DJX_CENSUS_HOLDERS_PARTIAL;
	else
		r->status |= DJX_CENSUS_HOLDERS;
	return 0;
}

/* The tagged objects back from env T, a group per local frame, into tv
 * with a weak reference each. 0, or 1 the census ends (failed). */
static int collect_targets(JNIEnv *jni, struct target *tv, size_t *ntv, struct run *r)
{
	for (jlong g = 1; g <= (jlong)((cs.targets + GROUP - 1) / GROUP); g++) {
		jobject *objs = NULL;
		jint cnt = 0;
		jvmtiError e;
		if ((*jni)->PushLocalFrame(jni, 64) != 0) {
			(*jni)->ExceptionClear(jni);
			r->status |= DJX_CENSUS_FAILED;
			return 1;
		}
		e = (*cs.et)->GetObjectsWithTags(cs.et, 1, &g, &cnt, &objs, NULL);
		if (e != JVMTI_ERROR_NONE) {
			r->status |= DJX_CENSUS_FAILED;
			snprintf(r->note, sizeof r->note, "GetObjectsWithTags: error %d", (int)e);
		}
		for (jint i = 0; e == JVMTI_ERROR_NONE && i < cnt && *ntv < cs.targets; i++)
			take_target(objs[i], g, r->status, &tv[*ntv], ntv, &r->unreached);
		djx_dealloc(cs.et, objs);
		(*jni)->PopLocalFrame(jni, NULL);
		if (e != JVMTI_ERROR_NONE)
			return 1;
	}
	return 0;
}

/* Phase 3, no pause: the targets, their paths and their CENSUS records.
 * 0, 1 the census ends (failed), -1 the connection failed. */
static int send_targets(JNIEnv *jni, struct target **tvp, size_t *ntv, struct run *r)
{
	uint64_t t = djx_now_ns();
	int rc;

	*tvp = calloc((size_t)cs.targets + 1, sizeof **tvp);
	cs.used = calloc(cs.npaths + 2, 1);
	if (*tvp == NULL || cs.used == NULL) {
		r->status |= DJX_CENSUS_FAILED;
		snprintf(r->note, sizeof r->note, "out of memory for %llu objects", (unsigned long long)cs.targets);
		return 1;
	}
	if (collect_targets(jni, *tvp, ntv, r) != 0)
		return 1;
	/* Env T's tags have served: dispose it before the records go out. */
	(*cs.et)->DisposeEnvironment(cs.et);
	cs.et = NULL;
	rc = emit_paths() < 0 || emit_targets(*tvp, *ntv, r->t_begin, &r->objects, &r->bytes) < 0 ? -1 : 0;
	r->t_emit = djx_now_ns() - t;
	return rc;
}

static int send_end(const struct run *r)
{
	struct djx_census_end e = {
		.kind = cs.kind, .status = r->status, .objects = r->objects, .bytes = r->bytes,
		.heap_objects = cs.heap_objects, .heap_bytes = cs.heap_bytes, .heap_walk_ns = r->t_iter,
		.holder_walk_ns = r->t_hold, .emit_ns = r->t_emit, .paths = cs.npaths, .reached = cs.reached,
		.unreachable = r->unreached, .unplaced = cs.unplaced + cs.capped, .strays = cs.strays,
		.passes = r->passes, .pause_max_ns = r->t_max, .note = r->note,
	};
	return djx_emit_census_end_flushing(&e) < 0 ? -1 : 0;
}

/* One census: CENSUS_START, its phases, CENSUS_END. 0, or -1 the
 * connection failed; *pause is the time the JVM stood still. */
static int census(JNIEnv *jni, uint32_t kind, int holders, uint64_t budget_ns, uint64_t *pause)
{
	struct target *tv = NULL;
	size_t ntv = 0;
	struct run r;
	int end;

	memset(&r, 0, sizeof r);
	memset(&cs, 0, sizeof cs);
	*pause = 0;
	cs.jni = jni;
	cs.kind = kind;
	cs.minsize = djx_cfg->opt.minsize ? djx_cfg->opt.minsize : 1;
	r.t_begin = djx_now_ns();
	if (djx_emit_census_start_flushing(kind, r.t_begin) < 0 || djx_flush(NULL) != 0)
		return -1;
	cs.et = djx_private_env(djx_cfg->vm, 0);
	if (cs.et == NULL) {
		r.status |= DJX_CENSUS_FAILED;
		snprintf(r.note, sizeof r.note, "no JVMTI environment with can_tag_objects for the heap walk");
		end = 1;
	} else {
		end = walk_heap(budget_ns, &r);
	}
	if (end == 0 && holders && kind == DJX_CENSUS_ATTACH)
		end = walk_holders(jni, budget_ns, &r);
	if (end == 0 && djx_flush(NULL) != 0)
		end = -1;
	if (end == 0)
		end = send_targets(jni, &tv, &ntv, &r);

	for (size_t i = 0; i < ntv; i++) {
		if (tv[i].ref != NULL)
			(*jni)->DeleteWeakGlobalRef(jni, tv[i].ref);
		free(tv[i].sig);
	}
	free(tv);
	if (end >= 0)
		end = send_end(&r);
	free_state();
	if (cs.ec != NULL)
		(*cs.ec)->DisposeEnvironment(cs.ec);
	if (cs.et != NULL)
		(*cs.et)->DisposeEnvironment(cs.et);
	/* The walks' tables and HotSpot's tag maps were megabytes of malloc:
	 * give the JVM's RSS back what they took. */
	malloc_trim(0);
	*pause = r.t_iter + r.t_hold;
	djx_count(&djx_stats.census_ns, *pause);
	return end < 0 ? -1 : 0;
}

/* The heap's used bytes, from java.lang.Runtime; 0 if unknown. The writer
 * is a Java thread in native: the calls run Java code, never a pause. */
static uint64_t heap_used(JNIEnv *env)
{
	static jclass rt_class;
	static jmethodID get, total, free_;
	jobject rt;
	jlong t, f;

	if (rt_class == NULL) {
		jclass c = (*env)->FindClass(env, "java/lang/Runtime");
		if (c != NULL) {
			get = (*env)->GetStaticMethodID(env, c, "getRuntime", "()Ljava/lang/Runtime;");
			total = (*env)->GetMethodID(env, c, "totalMemory", "()J");
			free_ = (*env)->GetMethodID(env, c, "freeMemory", "()J");
			if (get != NULL && total != NULL && free_ != NULL)
				rt_class = (*env)->NewGlobalRef(env, c);
			(*env)->DeleteLocalRef(env, c);
		}
		if (rt_class == NULL) {
			(*env)->ExceptionClear(env);
			return 0;
		}
	}
	rt = (*env)->CallStaticObjectMethod(env, rt_class, get);
	if (rt == NULL || (*env)->ExceptionCheck(env)) {
		(*env)->ExceptionClear(env);
		return 0;
	}
	t = (*env)->CallLongMethod(env, rt, total);
	f = (*env)->CallLongMethod(env, rt, free_);
	(*env)->DeleteLocalRef(env, rt);
	if ((*env)->ExceptionCheck(env)) {
		(*env)->ExceptionClear(env);
		return 0;
	}
	return t > f ? (uint64_t)(t - f) : 0;
}

/* When the last census ended; for the censuses after GCs, their cost
 * (pause and writer work) so far, and the last one's cost and the heap's
 * used bytes then. Writer thread only. */
static struct {
	uint64_t last, spent, cost, heap;
	uint64_t gap;    /* least time to the next census after a GC (0: recensus_ms) */
	int ran, judged; /* one ran; the last one's finds were judged by their survival */
} sched;

/* Judges the last census after a GC by how many of its new objects are
 * tracked still, once, and sets the least time to the next. */
static void judge_last(uint64_t base)
{
	size_t found = fresh.n + fresh.big, alive = 0;

	if (sched.judged || !sched.ran)
		return;
	sched.judged = 1;
	if (found > 0) {
		djx_lock();
		alive = djx_track_alive_locked(fresh.tags, fresh.n) + fresh.big;
		djx_unlock();
	}
	if (4 * alive <= found) {
		uint64_t g = 2 * (sched.gap ? sched.gap : base);
		sched.gap = g < RECENSUS_BACKOFF * base ? g : RECENSUS_BACKOFF * base;
	} else {
		sched.gap = base;
	}
}

/* A census of large objects after a GC, when the allocation budget has
 * raised the sampling interval so far that an object of min size would be
 * missed more than one time in ten (p = 1 - e^(-s/I) < 0.9, I > s/2.3).
 * At most once per recensus_ms, within the time share above, counting the
 * one it would start: its cost grows with the heap (H2's second one took
 * 53-75 ms, past the share, after its heap had grown). */
static int recensus_due(JNIEnv *env, uint64_t since, uint64_t *used)
{
	const struct djx_options *o = &djx_cfg->opt;
	uint64_t now = djx_now_ns(), iv = djx_alloc_interval(), next = 0;

	*used = 0;
	if (o->recensus_ms == 0 || o->census == 0 || iv * 23 < o->minsize * 10)
		return 0;
	if (now - sched.last < o->recensus_ms * 1000000ull)
		return 0;
	judge_last(o->recensus_ms * 1000000ull);
	if (sched.gap != 0 && now - sched.last < sched.gap)
		return 0;
	*used = heap_used(env);
	if (sched.heap != 0 && *used != 0)
		next = (uint64_t)((double)sched.cost * (double)*used / (double)sched.heap);
	return sched.spent + next <= RECENSUS_START_NS + (now - since) / RECENSUS_SHARE;
}

static int run(JNIEnv *env, uint32_t kind, uint64_t used)
{
	uint64_t pause, cpu = djx_thread_ns();
	int rc;

	if (kind == DJX_CENSUS_AFTER_GC) {
		fresh.n = fresh.big = 0;
		sched.ran = 1;
		sched.judged = 0;
	}
	rc = census(env, kind, kind == DJX_CENSUS_ATTACH && djx_cfg->opt.census == 2,
		    djx_cfg->opt.census_budget_us * 1000ull, &pause);
	sched.last = djx_now_ns();
	/* Its cost is the pause and this thread's work on what it found,
	 * which on a heap of many large objects is more than the pause. */
	if (kind == DJX_CENSUS_AFTER_GC) {
		sched.cost = pause + (djx_thread_ns() - cpu);
		sched.heap = used;
		sched.spent += sched.cost;
	}
	return rc;
}

int djx_census_run(JNIEnv *jni)
{
	return run(jni, DJX_CENSUS_ATTACH, 0);
}

int djx_census_after_gc(JNIEnv *jni, uint64_t since)
{
	uint64_t used;

	return recensus_due(jni, since, &used) ? run(jni, DJX_CENSUS_AFTER_GC, used) : 0;
}

void djx_census_reset_locked(void)
{
	memset(&sched, 0, sizeof sched);
	fresh.n = fresh.big = 0;
	seen.valid = 0;
}
