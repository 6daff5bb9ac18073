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
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "census.h"

struct census cs;

int census_over(void)
{
	if (cs.deadline != 0 && djx_now_ns() > cs.deadline) {
		cs.aborted = 1;
		return 1;
	}
	/* The loader asked to stop (Ctrl-C) or went away: peek, the writer
	 * reads the command later. */
	if (djx.sock >= 0) {
		char b[64];
		ssize_t n = recv(djx.sock, b, sizeof b, MSG_PEEK | MSG_DONTWAIT);
		if (n == 0 || (n > 0 && memchr(b, 'Q', (size_t)n) != NULL)) {
			cs.cancelled = 1;
			return 1;
		}
	}
	return 0;
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

/* Appends rec to the batch under mu, flushing once when it lacks room.
 * Returns 0, 1 session over, -1 connection failed. */
static int append_rec(const uint8_t *p, size_t len, int (*flush)(void))
{
	for (int attempt = 0;; attempt++) {
		int rc;
		pthread_mutex_lock(&djx.mu);
		rc = djx.detached ? 1 : djx_append_locked(p, len, 1) == 0 ? 0 : 2;
		pthread_mutex_unlock(&djx.mu);
		if (rc != 2)
			return rc;
		if (attempt > 0 || flush() != 0)
			return -1;
	}
}

/* CENSUS_PATH records for every chain a target uses, parents first (a
 * parent's id is always lower than its children's). */
static int emit_paths(int (*flush)(void))
{
	uint8_t mem[1024];
	char text[768];
	struct wbuf w;
	int rc = 0;

	for (size_t id = cs.npaths; id >= 1; id--)
		if (cs.used[id] && cs.parent[id] != 0)
			cs.used[cs.parent[id]] = 1;
	for (size_t id = 1; id <= cs.npaths && rc == 0; id++) {
		size_t start;
		if (!cs.used[id])
			continue;
		if (id == PATH_UNKNOWN)
			snprintf(text, sizeof text, "?");
		else
			census_hop_name(cs.hop[id], text, sizeof text);
		wb_init(&w, mem, sizeof mem, 1);
		start = wb_begin(&w, REC_CENSUS_PATH);
		wb_u32(&w, (uint32_t)id);
		wb_u32(&w, cs.parent[id]);
		wb_str(&w, text);
		wb_end(&w, start);
		if (!w.err)
			rc = append_rec(w.p, w.len, flush);
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
 * GC; rebuilt under mu whenever a GC has happened since. */
static struct {
	uint64_t *v;
	size_t n;
	uint64_t epoch;
	int valid;
} seen;

static int cmp_addr(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static int tracked_refresh_locked(void)
{
	size_t n;

	if (seen.valid && seen.epoch == djx.gc_starts)
		return 0;
	n = djx_track_count_locked() + djx_big_count_locked();
	free(seen.v);
	seen.v = malloc((n + 1) * sizeof *seen.v);
	seen.valid = 0;
	if (seen.v == NULL)
		return -1;
	seen.n = (size_t)djx_track_addrs_locked(seen.v, n);
	seen.n += djx_big_addrs_locked(seen.v + seen.n, n - seen.n);
	qsort(seen.v, seen.n, sizeof *seen.v, cmp_addr);
	seen.epoch = djx.gc_starts;
	seen.valid = 1;
	return 0;
}

static int tracked(uint64_t addr)
{
	return bsearch(&addr, seen.v, seen.n, sizeof *seen.v, cmp_addr) != NULL;
}

/* Phase 3: weak references for the targets, then their CENSUS records,
 * a chunk per lock hold with no GC in progress (the addresses are read
 * then). Returns 0, or -1 when the connection failed. */
static int emit_targets(struct target *tv, size_t n, uint32_t kind, uint64_t t_begin, int (*flush)(void),
			uint64_t *objects, uint64_t *bytes)
{
	int dedupe = kind != DJX_CENSUS_ATTACH;
	uint8_t *mem = malloc(EMIT_ROOM);
	struct wbuf w;
	size_t i = 0;
	int rc = 0;

	if (mem == NULL)
		return 0;
	while (i < n && rc == 0) {
		size_t end = i + EMIT_CHUNK < n ? i + EMIT_CHUNK : n, start;
		uint32_t nrec = 0;
		int wait = 0;
		wb_init(&w, mem, EMIT_ROOM, 0);
		pthread_mutex_lock(&djx.mu);
		if (djx.detached) {
			pthread_mutex_unlock(&djx.mu);
			break;
		}
		if (djx.gc_starts != djx.gc_finishes || djx.cur == NULL ||
		    djx.cur_len + EMIT_ROOM > DJX_BUF_CAP - DJX_BUF_RESERVE) {
			wait = djx.gc_starts != djx.gc_finishes;
			pthread_mutex_unlock(&djx.mu);
			if (wait) {
				struct timespec ts = {0, 1000000};
				nanosleep(&ts, NULL);
			} else if (flush() != 0) {
				rc = -1;
			}
			continue;
		}
		if (dedupe && tracked_refresh_locked() != 0)
			dedupe = 0; /* out of memory: the loader drops duplicates */
		/* The addresses hold from the last GC on (or the census start). */
		uint64_t when = djx.last_gc_end > t_begin ? djx.last_gc_end : t_begin;
		for (; i < end; i++) {
			struct target *t = &tv[i];
			uint64_t addr = djx_weak_addr(t->ref), tag;
			if (addr == 0 || (dedupe && tracked(addr)))
				continue; /* died since: its reference is deleted below */
			tag = __atomic_add_fetch(&djx.next_tag, 1, __ATOMIC_RELAXED);
			if (djx_big_wants(t->size)) {
				if (djx_big_add_locked(tag, addr, t->size) != 0)
					continue;
			} else if (djx_track_add_locked(tag, t->ref, addr) != 0) {
				continue;
			} else {
				t->ref = NULL; /* the tracking table owns it now */
			}
			start = wb_begin(&w, REC_CENSUS);
			wb_u64(&w, when);
			wb_u64(&w, addr);
			wb_u64(&w, t->size);
			wb_u64(&w, tag);
			wb_u32(&w, t->path);
			wb_u32(&w, kind);
			if (t->cls >= 0) {
				wb_str(&w, cs.cls[t->cls].sig);
			} else {
				wb_str(&w, t->sig);
			}
			wb_end(&w, start);
			nrec++;
			(*objects)++;
			*bytes += t->size;
		}
		if (!w.err && nrec > 0)
			djx_append_locked(w.p, w.len, nrec);
		pthread_mutex_unlock(&djx.mu);
		wb_free(&w);
	}
	free(mem);
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

static jvmtiEnv *private_env(int lines)
{
	jvmtiCapabilities caps;
	jvmtiEnv *e = NULL;

	if ((*djx_cfg->vm)->GetEnv(djx_cfg->vm, (void **)&e, JVMTI_VERSION_11) != JNI_OK || e == NULL)
		return NULL;
	memset(&caps, 0, sizeof caps);
	caps.can_tag_objects = 1;
	caps.can_get_line_numbers = lines;
	if ((*e)->AddCapabilities(e, &caps) != JVMTI_ERROR_NONE) {
		(*e)->DisposeEnvironment(e);
		return NULL;
	}
	if (lines) {
		/* Onload-only in HotSpot: in attach mode locals go by slot. */
		memset(&caps, 0, sizeof caps);
		caps.can_access_local_variables = 1;
		(*e)->AddCapabilities(e, &caps);
	}
	return e;
}

static int append_start(uint32_t kind, uint64_t t, int (*flush)(void))
{
	uint8_t mem[64];
	struct wbuf w;
	size_t start;

	wb_init(&w, mem, sizeof mem, 1);
	start = wb_begin(&w, REC_CENSUS_START);
	wb_u64(&w, t);
	wb_u32(&w, kind);
	wb_end(&w, start);
	return append_rec(w.p, w.len, flush);
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

int djx_census(JNIEnv *jni, uint32_t kind, int holders, uint64_t budget_ns, int (*flush)(void))
{
	jvmtiHeapCallbacks cb;
	uint64_t t_begin = djx_now_ns(), t, t_iter = 0, t_max = 0, t_hold = 0, t_emit = 0, objects = 0, bytes = 0,
		 unreached = 0, passes = 0;
	uint32_t status = 0;
	char note[200] = "";
	jint cnt = 0;
	jobject *objs = NULL;
	struct target *tv = NULL;
	size_t ntv = 0;
	int rc = 0, framed = 0;
	jvmtiError e;

	memset(&cs, 0, sizeof cs);
	cs.jni = jni;
	cs.kind = kind;
	cs.minsize = djx_cfg->opt.minsize ? djx_cfg->opt.minsize : 1;
	if (append_start(kind, t_begin, flush) < 0 || flush() != 0)
		return -1;
	cs.et = private_env(0);
	if (cs.et == NULL) {
		status |= DJX_CENSUS_FAILED;
		snprintf(note, sizeof note, "no JVMTI environment with can_tag_objects for the heap walk");
		goto end;
	}

	/* Phase 1. */
	memset(&cb, 0, sizeof cb);
	cb.heap_iteration_callback = iter_cb;
	for (;;) {
		uint64_t before = cs.targets, dt;
		cs.aborted = 0;
		cs.heap_objects = cs.heap_bytes = 0;
		t = djx_now_ns();
		cs.deadline = budget_ns ? t + budget_ns : 0;
		e = (*cs.et)->IterateThroughHeap(cs.et, 0, NULL, &cb, NULL);
		dt = djx_now_ns() - t;
		t_iter += dt;
		t_max = dt > t_max ? dt : t_max;
		passes++;
		if (e != JVMTI_ERROR_NONE || cs.cancelled) {
			status |= cs.cancelled ? DJX_CENSUS_CANCELLED : DJX_CENSUS_FAILED;
			if (e != JVMTI_ERROR_NONE)
				snprintf(note, sizeof note, "IterateThroughHeap: error %d", (int)e);
			goto end;
		}
		if (!cs.aborted)
			break;
		/* A pass costs ~50 ns an object, ~400 more a target it tags: a
		 * pass that tagged little stopped for the heap's size, and the
		 * next would stop at the same place. The pause is paid: what it
		 * tagged is kept, and a holder walk, which costs several times a
		 * heap walk per object, is not tried. */
		if ((cs.targets - before) * 400 < budget_ns / 4 || passes >= MAX_PASSES) {
			if (cs.targets == 0) {
				status |= DJX_CENSUS_OVER_BUDGET;
				goto end;
			}
			status |= DJX_CENSUS_PARTIAL;
			break;
		}
		/* The application runs as long as the pause took; the records
		 * it made meanwhile go out. */
		struct timespec ts = {(time_t)(dt / 1000000000u), (long)(dt % 1000000000u)};
		nanosleep(&ts, NULL);
		if (flush() != 0) {
			rc = -1;
			goto end;
		}
	}

	/* Phase 2: its pause grows with the objects it reaches, at about
	 * DJX_HOLDER_NS each (measured, docs/census.md). The heap walk counted
	 * garbage too, often most of the heap: the walk is skipped only when
	 * even a quarter of the heap would not fit the budget, and otherwise
	 * stops at it. */
	if (holders && kind == DJX_CENSUS_ATTACH) {
		if ((status & DJX_CENSUS_PARTIAL) || (budget_ns != 0 && cs.heap_objects * DJX_HOLDER_NS > 4 * budget_ns)) {
			status |= DJX_CENSUS_HOLDERS_SKIPPED;
		} else if ((cs.ec = private_env(1)) == NULL || census_prepare_walk(jni) != 0) {
			status |= DJX_CENSUS_HOLDERS_FAILED;
		} else {
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
			t_hold = djx_now_ns() - t;
			t_max = t_hold > t_max ? t_hold : t_max;
			if (cs.cancelled) {
				status |= DJX_CENSUS_CANCELLED;
				goto end;
			}
			if (e != JVMTI_ERROR_NONE)
				status |= DJX_CENSUS_HOLDERS_FAILED;
			else if (cs.aborted || cs.oom)
				status |= DJX_CENSUS_HOLDERS_PARTIAL;
			else
				status |= DJX_CENSUS_HOLDERS;
		}
	}
	if (flush() != 0) {
		rc = -1;
		goto end;
	}

	/* Phase 3. */
	t = djx_now_ns();
	tv = calloc((size_t)cs.targets + 1, sizeof *tv);
	cs.used = calloc(cs.npaths + 2, 1);
	if (tv == NULL || cs.used == NULL) {
		status |= DJX_CENSUS_FAILED;
		snprintf(note, sizeof note, "out of memory for %llu objects", (unsigned long long)cs.targets);
		goto end;
	}
	for (jlong g = 1; g <= (jlong)((cs.targets + GROUP - 1) / GROUP); g++) {
		if ((*jni)->PushLocalFrame(jni, 64) != 0) {
			(*jni)->ExceptionClear(jni);
			status |= DJX_CENSUS_FAILED;
			goto end;
		}
		framed = 1;
		e = (*cs.et)->GetObjectsWithTags(cs.et, 1, &g, &cnt, &objs, NULL);
		if (e != JVMTI_ERROR_NONE) {
			status |= DJX_CENSUS_FAILED;
			snprintf(note, sizeof note, "GetObjectsWithTags: error %d", (int)e);
			goto end;
		}
		for (jint i = 0; i < cnt && ntv < cs.targets; i++)
			take_target(objs[i], g, status, &tv[ntv], &ntv, &unreached);
		djx_dealloc(cs.et, objs);
		objs = NULL;
		(*jni)->PopLocalFrame(jni, NULL);
		framed = 0;
	}
	/* Env T's tags have served: dispose it before the records go out. */
	(*cs.et)->DisposeEnvironment(cs.et);
	cs.et = NULL;
	if (emit_paths(flush) < 0 || emit_targets(tv, ntv, kind, t_begin, flush, &objects, &bytes) < 0)
		rc = -1;
	t_emit = djx_now_ns() - t;

end:
	if (objs != NULL)
		djx_dealloc(cs.et, objs);
	if (framed)
		(*jni)->PopLocalFrame(jni, NULL);
	for (size_t i = 0; i < ntv; i++) {
		if (tv[i].ref != NULL)
			(*jni)->DeleteWeakGlobalRef(jni, tv[i].ref);
		if (tv[i].sig != NULL)
			free(tv[i].sig);
	}
	free(tv);
	if (rc == 0) {
		uint8_t mem[512];
		struct wbuf w;
		size_t start;
		wb_init(&w, mem, sizeof mem, 1);
		start = wb_begin(&w, REC_CENSUS_END);
		wb_u64(&w, djx_now_ns());
		wb_u32(&w, kind);
		wb_u32(&w, status);
		wb_u64(&w, objects);
		wb_u64(&w, bytes);
		wb_u64(&w, cs.heap_objects);
		wb_u64(&w, cs.heap_bytes);
		wb_u64(&w, t_iter);
		wb_u64(&w, t_hold);
		wb_u64(&w, t_emit);
		wb_u64(&w, cs.npaths);
		wb_u64(&w, cs.reached);
		wb_u64(&w, unreached);
		wb_u64(&w, cs.unplaced + cs.capped);
		wb_str(&w, note);
		wb_u64(&w, cs.strays);
		wb_u64(&w, passes);
		wb_u64(&w, t_max);
		wb_end(&w, start);
		if (!w.err)
			rc = append_rec(w.p, w.len, flush) < 0 ? -1 : 0;
	}
	free_state();
	if (cs.ec != NULL)
		(*cs.ec)->DisposeEnvironment(cs.ec);
	if (cs.et != NULL)
		(*cs.et)->DisposeEnvironment(cs.et);
	/* The walks' tables and HotSpot's tag maps were megabytes of malloc:
	 * give the JVM's RSS back what they took. */
	malloc_trim(0);
	__atomic_add_fetch(&djx.ns_census, t_iter + t_hold, __ATOMIC_RELAXED);
	return rc;
}
