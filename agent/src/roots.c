/* The heap's roots for a heap walker outside the JVM (command 'G').
 *
 * The walker reads the heap with process_vm_readv and finds the statics
 * itself, through the class mirrors; what it cannot see from outside are
 * the threads' frames and the JNI handles. FollowReferences in a private
 * environment, with a callback that returns 0 for every root
 * (JVMTI_VISIT_OBJECTS never set), makes HotSpot report the roots and
 * visit no object: the pause grows with the threads' stacks and the
 * handles, not with the heap (before JDK 21, only because the walk is
 * aborted at the VM's own roots: see stop_at_vm).
 *
 * Each object a root holds is tagged with its object id, and the roots
 * that reach it are chained to it; the one that names it is chosen after
 * the walk: a lasting holder (JNI global, thread, VM) before a frame, a
 * frame before a monitor, a monitor before a compiled method's constant,
 * and of several frames the outermost, which owns what it passed down to
 * the others. GetObjectsWithTags brings the
 * objects back, and their addresses are read under the session lock with
 * no GC in progress, as the census reads its objects'. Disposing the
 * environment drops the tags. Heap callbacks may not call JNI or JVMTI
 * (but memory): names come after the walk (names.c), in the text of the
 * census's hops. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "djx.h"
#include "emit.h"
#include "epoch.h"
#include "names.h"
#include "roots.h"
#include "util.h"
#include "vmstructs.h"
#include "writer.h"
#include "zaddr.h"

#define T_THREAD (1ll << 61) /* a thread object: its index in rs.tobj */
#define T_SELF (1ll << 60)   /* the agent's own writer thread */
#define T_ID ((1ll << 40) - 1)
/* Root references kept (40 bytes each); a pass past it stops there. */
#define MAX_ROOTS (1u << 21)
/* HotSpot's GetObjectsWithTags compares every tag-map entry with every
 * requested tag, holding the tag map (and so off safepoints): tags go in
 * chunks, so that each call stays short. */
#define TAG_CHUNK 512
#define EMIT_CHUNK 512u
#define EMIT_ROOM (EMIT_CHUNK * 1024u) /* a chunk's ROOT records: a hop is cut at 1023 bytes */

struct rroot {
	jlong thread_tag;
	jmethodID method;
	jlocation loc;
	jint slot, depth;
	uint32_t kind;
	uint32_t next; /* the next root reaching the same object; 0: none */
};

struct robj {
	uint32_t head;   /* its roots, latest first */
	uint32_t reach;  /* how many roots reached it */
	uint32_t best;   /* the root that names it */
	uint32_t rank;
	uint32_t thread; /* a thread object: its index + 1 */
	jobject ref;     /* a local reference once collected */
	char *hop;
};

static struct {
	jvmtiEnv *e;
	JNIEnv *jni;
	struct rroot *r; /* r[0] unused */
	size_t nr, capr;
	struct robj *o; /* o[0] unused */
	size_t no, capo;
	/* Threads: GetAllThreads's first, tagged T_THREAD | index; the
	 * walk adds those started since. */
	jthread *thr;
	char **tnames;
	jint nthr;
	uint32_t *tobj; /* thread index -> its object id (0: none yet) */
	size_t ntobj, captobj;
	int capped, oom;
	/* Before JDK 21 the heap walk ends by restoring the mark word of
	 * every object in the heap (ObjectMarker::done), unless a callback
	 * aborted it while it collected roots: the pass then stops at the VM's
	 * own roots, which HotSpot reports last. */
	int stop_at_vm;
	int vm_cut; /* it did */
	struct djx_names *names;
} rs;

/* What one pass found and cost, for ROOTS_END. */
struct rrun {
	uint32_t status;
	char note[200];
	uint64_t follow_ns, tags_ns, tags_max_ns, emit_ns, sent, gone;
	uint64_t refs, objects, threads;
};

static int grow(void **v, size_t *cap, size_t need, size_t size)
{
	size_t c = *cap ? *cap : 256;
	void *p;

	if (need <= *cap)
		return 0;
	while (c < need)
		c *= 2;
	p = realloc(*v, c * size);
	if (p == NULL)
		return -1;
	memset((char *)p + *cap * size, 0, (c - *cap) * size);
	*v = p;
	*cap = c;
	return 0;
}

static uint32_t new_obj(void)
{
	if (rs.no == 0)
		rs.no = 1; /* id 0 is no object */
	if (rs.no > 0x7fffffffu || grow((void **)&rs.o, &rs.capo, rs.no + 1, sizeof *rs.o) != 0)
		return 0;
	return (uint32_t)rs.no++;
}

/* The object id of thread index i (0: out of memory). */
static uint32_t thread_obj_at(size_t i)
{
	if (rs.tobj[i] == 0 && (rs.tobj[i] = new_obj()) != 0)
		rs.o[rs.tobj[i]].thread = (uint32_t)i + 1;
	return rs.tobj[i];
}

/* A thread's object. One started since GetAllThreads gets a thread tag
 * now: HotSpot reads it for the thread's frames after this callback. */
static uint32_t thread_obj(jlong *tag_ptr)
{
	jlong t = *tag_ptr;
	size_t i;

	if (t & T_THREAD)
		return (size_t)(t & T_ID) < rs.ntobj ? thread_obj_at((size_t)(t & T_ID)) : 0;
	if (grow((void **)&rs.tobj, &rs.captobj, rs.ntobj + 1, sizeof *rs.tobj) != 0)
		return 0;
	i = rs.ntobj++;
	if (t != 0 && (uint64_t)(t & T_ID) < rs.no) { /* a frame of another thread held it first */
		rs.tobj[i] = (uint32_t)(t & T_ID);
		rs.o[rs.tobj[i]].thread = (uint32_t)i + 1;
	}
	*tag_ptr = T_THREAD | (jlong)i;
	return thread_obj_at(i);
}

static uint32_t obj_of(jlong *tag_ptr)
{
	jlong t = *tag_ptr;
	uint32_t o;

	if (t & T_THREAD)
		return (size_t)(t & T_ID) < rs.ntobj ? thread_obj_at((size_t)(t & T_ID)) : 0;
	if (t != 0)
		return (uint64_t)(t & T_ID) < rs.no ? (uint32_t)(t & T_ID) : 0;
	if ((o = new_obj()) != 0)
		*tag_ptr = o;
	return o;
}

/* One root: kept, its object tagged. Returns 0 always (no object is
 * visited), or JVMTI_VISIT_ABORT past MAX_ROOTS or out of memory. */
static jint JNICALL root_cb(jvmtiHeapReferenceKind kind, const jvmtiHeapReferenceInfo *info, jlong class_tag,
			    jlong referrer_class_tag, jlong size, jlong *tag_ptr, jlong *referrer_tag_ptr,
			    jint length, void *ud)
{
	struct rroot *r;
	jlong tt = 0;
	uint32_t o;

	(void)class_tag, (void)referrer_class_tag, (void)size, (void)length, (void)ud;
	if (referrer_tag_ptr != NULL)
		return 0; /* an edge: none comes, as nothing is visited */
	switch (kind) {
	case JVMTI_HEAP_REFERENCE_STACK_LOCAL:
		tt = info->stack_local.thread_tag;
		break;
	case JVMTI_HEAP_REFERENCE_JNI_LOCAL:
		tt = info->jni_local.thread_tag;
		break;
	case JVMTI_HEAP_REFERENCE_JNI_GLOBAL:
	case JVMTI_HEAP_REFERENCE_MONITOR:
	case JVMTI_HEAP_REFERENCE_THREAD:
	case JVMTI_HEAP_REFERENCE_OTHER:
		break;
	default:
		return 0; /* system classes: the walker finds the classes itself */
	}
	if (tt == T_SELF || *tag_ptr == T_SELF)
		return 0; /* the agent's own thread, and what it holds for this pass */
	if (rs.nr + 1 >= MAX_ROOTS) {
		rs.capped = 1;
		return JVMTI_VISIT_ABORT;
	}
	o = kind == JVMTI_HEAP_REFERENCE_THREAD ? thread_obj(tag_ptr) : obj_of(tag_ptr);
	if (rs.nr == 0)
		rs.nr = 1; /* root 0 ends a chain */
	if (o == 0 || grow((void **)&rs.r, &rs.capr, rs.nr + 1, sizeof *rs.r) != 0) {
		rs.oom = 1;
		return JVMTI_VISIT_ABORT;
	}
	r = &rs.r[rs.nr];
	memset(r, 0, sizeof *r);
	r->kind = (uint32_t)kind;
	r->thread_tag = tt;
	if (kind == JVMTI_HEAP_REFERENCE_STACK_LOCAL) {
		r->method = info->stack_local.method;
		r->depth = info->stack_local.depth;
		r->loc = info->stack_local.location;
		r->slot = info->stack_local.slot;
	} else if (kind == JVMTI_HEAP_REFERENCE_JNI_LOCAL) {
		r->method = info->jni_local.method;
		r->depth = info->jni_local.depth;
		r->loc = -1;
		r->slot = -1;
	}
	r->next = rs.o[o].head;
	rs.o[o].head = (uint32_t)rs.nr;
	rs.o[o].reach++;
	rs.nr++;
	if (kind == JVMTI_HEAP_REFERENCE_OTHER && rs.stop_at_vm) {
		rs.vm_cut = 1;
		return JVMTI_VISIT_ABORT; /* the first VM root, kept; the heap not touched */
	}
	return 0;
}

static int frame_kind(uint32_t kind)
{
	return kind == JVMTI_HEAP_REFERENCE_STACK_LOCAL || kind == JVMTI_HEAP_REFERENCE_JNI_LOCAL;
}

/* The thread index a frame's root belongs to, or rs.ntobj: unknown. */
static size_t thread_of(const struct rroot *r)
{
	return (r->thread_tag & T_THREAD) && (size_t)(r->thread_tag & T_ID) < rs.ntobj ? (size_t)(r->thread_tag & T_ID)
										       : rs.ntobj;
}

/* A JNI local of a method that is not native: a constant of its
 * compiled code (HotSpot reports an nmethod's oops so). */
static int code_constant(const struct rroot *r)
{
	return r->kind == JVMTI_HEAP_REFERENCE_JNI_LOCAL && r->method != NULL && !djx_names_native(rs.names, r->method);
}

/* Lasting holders name first, then frames, then monitors (an object
 * locked is most often in a frame's local too), then compiled code's
 * constants, which no frame of the program holds. */
static int holder_class(const struct rroot *r)
{
	if (code_constant(r))
		return 3;
	return frame_kind(r->kind) ? 1 : r->kind == JVMTI_HEAP_REFERENCE_MONITOR ? 2 : 0;
}

/* Chooses each object's naming root and its rank: for a frame's root,
 * its frame's place from its thread's outermost frame that holds a
 * root (0); 0 for the other kinds. -1 out of memory. */
static int choose(void)
{
	jint *maxd = calloc(rs.ntobj + 1, sizeof *maxd);

	if (maxd == NULL)
		return -1;
	for (size_t i = 1; i < rs.nr; i++)
		if (frame_kind(rs.r[i].kind) && rs.r[i].depth > maxd[thread_of(&rs.r[i])])
			maxd[thread_of(&rs.r[i])] = rs.r[i].depth;
	for (size_t o = 1; o < rs.no; o++) {
		struct robj *ob = &rs.o[o];
		uint32_t best = 0, brank = 0;
		for (uint32_t i = ob->head; i != 0; i = rs.r[i].next) {
			const struct rroot *r = &rs.r[i], *b = &rs.r[best];
			uint32_t rank = frame_kind(r->kind) ? (uint32_t)(maxd[thread_of(r)] - r->depth) : 0;
			int c = best == 0 ? -1 : holder_class(r) - holder_class(b);
			if (c == 0)
				c = rank < brank ? -1 : rank > brank;
			if (c == 0 && r->kind != b->kind)
				c = r->kind == JVMTI_HEAP_REFERENCE_STACK_LOCAL ? -1 : 1;
			if (c < 0 || (c == 0 && i < best)) {
				best = i;
				brank = rank;
			}
		}
		ob->best = best;
		ob->rank = brank;
	}
	free(maxd);
	return 0;
}

/* Threads tagged in env e, with their names; the agent's own thread
 * tagged T_SELF. */
static int tag_threads(void)
{
	jvmtiEnv *e = rs.e;
	jthread self = NULL;

	if ((*e)->GetAllThreads(e, &rs.nthr, &rs.thr) != JVMTI_ERROR_NONE)
		return -1;
	rs.tnames = calloc((size_t)rs.nthr + 1, sizeof *rs.tnames);
	if (rs.tnames == NULL || grow((void **)&rs.tobj, &rs.captobj, (size_t)rs.nthr + 1, sizeof *rs.tobj) != 0)
		return -1;
	rs.ntobj = (size_t)rs.nthr;
	for (jint i = 0; i < rs.nthr; i++) {
		jvmtiThreadInfo ti;
		memset(&ti, 0, sizeof ti);
		if ((*e)->GetThreadInfo(e, rs.thr[i], &ti) == JVMTI_ERROR_NONE) {
			rs.tnames[i] = ti.name;
			if (ti.thread_group)
				(*rs.jni)->DeleteLocalRef(rs.jni, ti.thread_group);
			if (ti.context_class_loader)
				(*rs.jni)->DeleteLocalRef(rs.jni, ti.context_class_loader);
		}
		(*e)->SetTag(e, rs.thr[i], T_THREAD | i);
	}
	if ((*e)->GetCurrentThread(e, &self) == JVMTI_ERROR_NONE && self != NULL) {
		(*e)->SetTag(e, self, T_SELF);
		(*rs.jni)->DeleteLocalRef(rs.jni, self);
	}
	return 0;
}

/* The objects back from their tags, in chunks; thread objects from
 * GetAllThreads are at hand. 0, or -1 with the note set. */
static int collect(struct rrun *run)
{
	jlong *tags = malloc(TAG_CHUNK * sizeof *tags);
	jvmtiError err = JVMTI_ERROR_NONE;
	size_t o = 1;

	if (tags == NULL) {
		snprintf(run->note, sizeof run->note, "out of memory");
		return -1;
	}
	while (o < rs.no && err == JVMTI_ERROR_NONE) {
		jint nt = 0, cnt = 0;
		jobject *objs = NULL;
		jlong *got = NULL;
		uint64_t t;
		for (; o < rs.no && nt < TAG_CHUNK; o++) {
			struct robj *ob = &rs.o[o];
			size_t ti = ob->thread - 1;
			if (ob->thread != 0 && ti < (size_t)rs.nthr)
				ob->ref = rs.thr[ti];
			else
				tags[nt++] = ob->thread != 0 ? (T_THREAD | (jlong)ti) : (jlong)o;
		}
		if (nt == 0)
			break;
		t = djx_now_ns();
		err = (*rs.e)->GetObjectsWithTags(rs.e, nt, tags, &cnt, &objs, &got);
		t = djx_now_ns() - t;
		run->tags_ns += t;
		run->tags_max_ns = t > run->tags_max_ns ? t : run->tags_max_ns;
		for (jint i = 0; err == JVMTI_ERROR_NONE && i < cnt; i++) {
			jlong g = got[i];
			size_t id = (g & T_THREAD) ? ((size_t)(g & T_ID) < rs.ntobj ? rs.tobj[g & T_ID] : 0) : (size_t)(g & T_ID);
			if (id != 0 && id < rs.no && rs.o[id].ref == NULL)
				rs.o[id].ref = objs[i];
			/* Out of the tag map: the next calls compare fewer entries. */
			(*rs.e)->SetTag(rs.e, objs[i], 0);
		}
		djx_dealloc(rs.e, objs);
		djx_dealloc(rs.e, got);
	}
	free(tags);
	if (err != JVMTI_ERROR_NONE) {
		snprintf(run->note, sizeof run->note, "GetObjectsWithTags: error %d", (int)err);
		return -1;
	}
	return 0;
}

/* Each collected object's hop text, by its naming root. */
static void name_roots(void)
{
	struct djx_names *nm = rs.names;
	char hop[1024], thread[160];

	for (size_t o = 1; o < rs.no; o++) {
		struct robj *ob = &rs.o[o];
		const struct rroot *r = &rs.r[ob->best];
		size_t ti = thread_of(r);
		if (ob->ref == NULL || ob->best == 0)
			continue;
		if (ob->thread != 0 && r->kind == JVMTI_HEAP_REFERENCE_THREAD)
			ti = ob->thread - 1;
		if (ti < (size_t)rs.nthr && rs.tnames[ti] != NULL)
			snprintf(thread, sizeof thread, "thread \"%s\"", rs.tnames[ti]);
		else
			snprintf(thread, sizeof thread, "thread ?");
		if (frame_kind(r->kind) && nm != NULL)
			djx_names_frame_root(nm, r->method, r->loc, r->slot, r->kind == JVMTI_HEAP_REFERENCE_JNI_LOCAL, thread,
					     hop, sizeof hop);
		else if (r->kind == JVMTI_HEAP_REFERENCE_THREAD)
			snprintf(hop, sizeof hop, "%s", thread);
		else
			snprintf(hop, sizeof hop, "%s", frame_kind(r->kind) ? "stack local" : djx_root_kind(r->kind));
		ob->hop = strdup(hop);
	}
}

/* The object a local reference holds: its handle's slot (the low bits
 * of a handle are its kind). Lock held, no GC in progress. */
static uint64_t ref_addr(jobject ref)
{
	uint64_t a = djx_z_decode((uint64_t)(uintptr_t)*(void *volatile *)((uintptr_t)ref & ~(uintptr_t)3));
	return a == 1 ? 0 : a;
}

/* ROOT records, a chunk per lock hold with no GC in progress. 0, or -1
 * the connection failed. */
static int emit_roots(struct rrun *run)
{
	uint64_t gc_since = 0;
	size_t o = 1;

	while (o < rs.no) {
		size_t end = o + EMIT_CHUNK < rs.no ? o + EMIT_CHUNK : rs.no;
		int gc, full = 0;
		djx_lock();
		if (djx_detached_locked()) {
			djx_unlock();
			return 0;
		}
		gc = !djx_epoch_idle_locked();
		if (gc || !djx_room_locked(EMIT_ROOM)) {
			djx_unlock();
			if (gc) {
				if (djx_epoch_nap(&gc_since) != 0)
					return 0;
			} else if (djx_flush(NULL) != 0) {
				return -1;
			}
			continue;
		}
		gc_since = 0;
		for (; o < end && !full; o++) {
			struct robj *ob = &rs.o[o];
			struct djx_root r = {.kind = rs.r[ob->best].kind, .rank = ob->rank, .reach = ob->reach, .hop = ob->hop};
			if (ob->ref == NULL || ob->hop == NULL)
				continue;
			r.addr = ref_addr(ob->ref);
			if (r.addr == 0)
				continue;
			switch (djx_emit_root_locked(&r)) {
			case 0:
				run->sent++;
				break;
			case -1:
				full = 1; /* flush, and this one again */
				break;
			}
		}
		if (full)
			o--;
		djx_unlock();
		if (full && djx_flush(NULL) != 0)
			return -1;
	}
	return 0;
}

/* Why raw reads of object addresses cannot be trusted here, or NULL. */
static const char *unsafe_reason(void)
{
	static char err[160];

	if (djx_vm_init(err, sizeof err) != 0)
		return "not HotSpot: object addresses not read";
	/* Shenandoah's evacuated objects stay readable at the old address
	 * (forwarded in the mark word, which the heap walk follows) until
	 * their region is freed; ZGC's handles hold colored references,
	 * decoded (zaddr.c); one not yet healed after a relocation is the
	 * walk's to forward. */
	if (djx_z_init(err, sizeof err) != 0)
		return err;
	if (!djx_epoch_events())
		return "no GC events: addresses cannot be read safely";
	return NULL;
}

/* Whether the JVM's heap walk restores mark words over the whole heap at
 * its end (JDK 17 does; JDK 21 marks in a side bitmap), by its version. */
static int restores_marks(jvmtiEnv *e)
{
	char *v = NULL;
	int major = 0;

	if ((*e)->GetSystemProperty(e, "java.vm.specification.version", &v) == JVMTI_ERROR_NONE && v != NULL)
		major = strncmp(v, "1.", 2) == 0 ? 8 : atoi(v);
	djx_dealloc(e, v);
	return major < 21;
}


/* The walk, the objects and their records; status and note in run.
 * 0, or -1 the connection failed. */
static int pass(struct rrun *run)
{
	jvmtiHeapCallbacks cb;
	const char *why = unsafe_reason();
	jvmtiError err;
	uint64_t t;
	int rc = 0;

	if (why != NULL) {
		run->status |= DJX_ROOTS_REFUSED;
		snprintf(run->note, sizeof run->note, "%s", why);
		return 0;
	}
	if ((rs.e = djx_private_env(djx_cfg->vm, 1)) == NULL || tag_threads() != 0) {
		run->status |= DJX_ROOTS_FAILED;
		snprintf(run->note, sizeof run->note, rs.e == NULL ? "no JVMTI environment with can_tag_objects" : "GetAllThreads failed");
		return 0;
	}
	memset(&cb, 0, sizeof cb);
	cb.heap_reference_callback = root_cb;
	rs.stop_at_vm = restores_marks(rs.e);
	t = djx_now_ns();
	err = (*rs.e)->FollowReferences(rs.e, 0, NULL, NULL, &cb, NULL);
	run->follow_ns = djx_now_ns() - t;
	if (rs.vm_cut) {
		run->status |= DJX_ROOTS_NO_VM;
		snprintf(run->note, sizeof run->note,
			 "the VM's own roots left out but the first: before JDK 21 collecting them all makes the walk touch every object");
	}
	if (err != JVMTI_ERROR_NONE || rs.oom) {
		run->status |= DJX_ROOTS_FAILED;
		snprintf(run->note, sizeof run->note, rs.oom ? "out of memory for the roots" : "FollowReferences: error %d", (int)err);
		return 0;
	}
	run->refs = rs.nr ? rs.nr - 1 : 0;
	run->objects = rs.no ? rs.no - 1 : 0;
	run->threads = rs.ntobj;
	if (rs.capped) {
		run->status |= DJX_ROOTS_CAPPED;
		snprintf(run->note, sizeof run->note, "more than %u roots: the pass kept the first", MAX_ROOTS);
	}
	if (djx_flush(NULL) != 0)
		return -1;
	if ((rs.names = djx_names_new(rs.e, rs.jni)) == NULL || choose() != 0) {
		run->status |= DJX_ROOTS_FAILED;
		snprintf(run->note, sizeof run->note, "out of memory for the roots");
		return 0;
	}
	if ((*rs.jni)->PushLocalFrame(rs.jni, 64) != 0) {
		(*rs.jni)->ExceptionClear(rs.jni);
		run->status |= DJX_ROOTS_FAILED;
		snprintf(run->note, sizeof run->note, "PushLocalFrame failed");
		return 0;
	}
	if (collect(run) != 0) {
		run->status |= DJX_ROOTS_FAILED;
	} else {
		t = djx_now_ns();
		name_roots();
		for (size_t o = 1; o < rs.no; o++)
			run->gone += rs.o[o].ref == NULL;
		rc = emit_roots(run);
		run->emit_ns = djx_now_ns() - t;
	}
	(*rs.jni)->PopLocalFrame(rs.jni, NULL);
	return rc;
}

static void release(void)
{
	for (size_t o = 1; o < rs.no; o++)
		free(rs.o[o].hop);
	for (jint i = 0; i < rs.nthr; i++) {
		djx_dealloc(rs.e, rs.tnames ? rs.tnames[i] : NULL);
		(*rs.jni)->DeleteLocalRef(rs.jni, rs.thr[i]);
	}
	djx_dealloc(rs.e, rs.thr);
	free(rs.tnames);
	free(rs.r);
	free(rs.o);
	free(rs.tobj);
	djx_names_free(rs.names);
	/* Its tags go with it, at once. */
	if (rs.e != NULL)
		(*rs.e)->DisposeEnvironment(rs.e);
	memset(&rs, 0, sizeof rs);
}

int djx_roots_run(JNIEnv *jni)
{
	struct rrun run;
	int rc;

	memset(&run, 0, sizeof run);
	memset(&rs, 0, sizeof rs);
	rs.jni = jni;
	rc = pass(&run);
	release();
	if (rc == 0) {
		struct djx_roots_end e = {.roots = run.sent, .follow_ns = run.follow_ns, .tags_ns = run.tags_ns,
					  .status = run.status, .note = run.note, .refs = run.refs, .objects = run.objects,
					  .threads = run.threads, .gone = run.gone, .tags_max_ns = run.tags_max_ns,
					  .emit_ns = run.emit_ns};
		rc = djx_emit_roots_end_flushing(&e) < 0 ? -1 : 0;
	}
	return rc;
}
