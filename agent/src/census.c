/* The census: objects that existed before the profile, named by what holds
 * them.
 *
 * Phase 1, pauses: IterateThroughHeap in a private environment (env T)
 * tags every object of at least minsize with its group's tag, so that one
 * GetObjectsWithTags call per group returns them in O(tagged): HotSpot
 * compares each tag-map entry with each requested tag. A pass that reaches
 * the pause budget stops; the next, after the application ran as long,
 * skips what is tagged and goes on, as long as passes make progress.
 * Phase 2, a pause (holders): FollowReferences from the GC roots in a
 * second private environment (env C). An object's tag there is the id of
 * the reference chain that first reached it, interned as (parent, hop);
 * targets get the chain id with T_TARGET. A referrer's tag is cleared when
 * its first edge is reported (HotSpot reports all edges of one referrer in
 * a row, and marks visits itself), so the tag map stays near the size of
 * the frontier instead of the heap.
 * Phase 3, no pause: the targets come back as local references; each gets a
 * JNI weak reference (track.c), a CENSUS record, and its chain as
 * CENSUS_PATH records. Both environments are then disposed, which drops
 * their tags at once.
 * Heap callbacks may not call JNI or JVMTI (but memory): names are resolved
 * after the walks. */
#include <malloc.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "djx.h"

#define T_CLASS (1ll << 62)
#define T_THREAD (1ll << 61)
#define T_TARGET (1ll << 60)
#define T_ID ((1ll << 40) - 1)
/* Env T: census objects in groups of GROUP, tagged 1, 2, ...: one
 * GetObjectsWithTags per group holds the tag-map lock (and so holds off
 * safepoints) for one group's worth of handles, not for all of them. */
#define GROUP 65536
/* Passes stop when one completes; in an allocation-heavy program new
 * garbage keeps every pass busy, so they are few. */
#define MAX_PASSES 8

#define MAX_PATHS (1u << 22)
#define MAX_DEPTH 48
#define PATH_UNKNOWN 1 /* a referrer the walk could not place */
#define EMIT_CHUNK 1024u
#define EMIT_ROOM (EMIT_CHUNK * 640u) /* a chunk's records at most */

enum { H_FIELD = 1, H_STATIC, H_ELEM, H_LOCAL, H_JNILOCAL, H_ROOT, H_THREADOBJ, H_EDGE, H_UNKNOWN };
#define HOP(kind, a, b) ((uint64_t)(kind) << 56 | ((uint64_t)(a) & 0xfffffff) << 28 | ((uint64_t)(b) & 0xfffffff))
#define HOP_KIND(h) ((int)((h) >> 56))
#define HOP_A(h) ((uint32_t)(((h) >> 28) & 0xfffffff))
#define HOP_B(h) ((uint32_t)((h) & 0xfffffff))
#define NO_CLASS 0xfffffffu

struct cclass {
	char *sig;  /* JVMTI-allocated */
	int refs;   /* instances may hold references; -1 not computed */
	int iface;
	jclass k;   /* local reference in the census frame */
	char **fields; /* hop names by field index, built on demand */
	int nfields;
};

struct croot {
	jlong thread_tag;
	jmethodID method;
	jlocation loc;
	jint slot, depth;
};

struct target {
	jweak ref;
	uint64_t size;
	uint32_t path;
	int32_t cls; /* class index, or -1: sig holds the type */
	char *sig;   /* malloc'ed, when cls < 0 */
};

static struct {
	jvmtiEnv *et, *ec; /* the two private environments */
	JNIEnv *jni;
	uint32_t kind;
	uint64_t minsize, deadline, calls;
	int aborted, cancelled, oom;
	/* Classes and threads (env C tags). */
	struct cclass *cls;
	jint ncls;
	char **tnames;
	jint nthr;
	/* Roots with a frame (stack and JNI locals). */
	struct croot *roots;
	size_t nroots, caproots;
	/* Chains: id >= 1; parent 0 ends a chain. */
	uint32_t *parent;
	uint64_t *hop;
	uint8_t *depth, *used;
	size_t npaths, cappaths;
	/* (parent, hop) -> id, including collapsed cycles. */
	uint32_t *hpar, *hval;
	uint64_t *hhop;
	size_t hcap, hn;
	int walk; /* 1: heap paths, 2: what only locals reach */
	/* The referrer whose edges are being reported. */
	uint32_t cur_path;
	jlong cur_class;
	/* Counters. */
	uint64_t heap_objects, heap_bytes, targets, target_bytes, reached, unplaced, capped, strays;
} cs;

static int over(void)
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
	if ((++cs.calls & 1023) == 0 && over())
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
		cs.target_bytes += (uint64_t)size;
	}
	return 0;
}

static size_t hslot(uint32_t parent, uint64_t hop, size_t cap)
{
	uint64_t h = hop * 0x9e3779b97f4a7c15ull ^ parent * 0xff51afd7ed558ccdull;
	h ^= h >> 29;
	return (size_t)h & (cap - 1);
}

static int hgrow(void)
{
	size_t cap = cs.hcap ? cs.hcap * 2 : 1u << 14;
	uint32_t *par = calloc(cap, sizeof *par), *val = calloc(cap, sizeof *val);
	uint64_t *hop = calloc(cap, sizeof *hop);

	if (par == NULL || val == NULL || hop == NULL) {
		free(par);
		free(val);
		free(hop);
		return -1;
	}
	for (size_t i = 0; i < cs.hcap; i++) {
		size_t j;
		if (cs.hval[i] == 0)
			continue;
		for (j = hslot(cs.hpar[i], cs.hhop[i], cap); val[j] != 0; j = (j + 1) & (cap - 1))
			;
		par[j] = cs.hpar[i];
		hop[j] = cs.hhop[i];
		val[j] = cs.hval[i];
	}
	free(cs.hpar);
	free(cs.hval);
	free(cs.hhop);
	cs.hpar = par;
	cs.hval = val;
	cs.hhop = hop;
	cs.hcap = cap;
	return 0;
}

static int pgrow(void)
{
	size_t cap = cs.cappaths ? cs.cappaths * 2 : 1u << 12;
	uint32_t *par = realloc(cs.parent, cap * sizeof *par);
	if (par == NULL)
		return -1;
	cs.parent = par;
	uint64_t *hop = realloc(cs.hop, cap * sizeof *hop);
	if (hop == NULL)
		return -1;
	cs.hop = hop;
	uint8_t *dep = realloc(cs.depth, cap);
	if (dep == NULL)
		return -1;
	cs.depth = dep;
	cs.cappaths = cap;
	return 0;
}

/* The chain parent + hop. A hop already on the chain closes a cycle
 * (linked lists, trees): the chain goes back to where it first took it. */
static uint32_t intern(uint32_t parent, uint64_t hop)
{
	size_t i;
	uint32_t id, a;

	if (cs.hn * 2 >= cs.hcap && hgrow() != 0) {
		cs.oom = 1;
		return parent ? parent : PATH_UNKNOWN;
	}
	for (i = hslot(parent, hop, cs.hcap); cs.hval[i] != 0; i = (i + 1) & (cs.hcap - 1))
		if (cs.hpar[i] == parent && cs.hhop[i] == hop)
			return cs.hval[i];
	id = 0;
	for (a = parent; a != 0; a = cs.parent[a])
		if (cs.hop[a] == hop) {
			id = a;
			break;
		}
	if (id == 0 && parent != 0 && cs.depth[parent] >= MAX_DEPTH)
		id = parent;
	if (id == 0) {
		if (cs.npaths + 1 >= MAX_PATHS || (cs.npaths + 1 >= cs.cappaths && pgrow() != 0)) {
			cs.capped++;
			return parent ? parent : PATH_UNKNOWN;
		}
		id = (uint32_t)++cs.npaths;
		cs.parent[id] = parent;
		cs.hop[id] = hop;
		cs.depth[id] = parent ? cs.depth[parent] + 1 : 1;
	}
	cs.hpar[i] = parent;
	cs.hhop[i] = hop;
	cs.hval[i] = id;
	cs.hn++;
	return id;
}

static uint32_t add_root(const jvmtiHeapReferenceInfo *info, int jni)
{
	struct croot *r;

	if (cs.nroots == cs.caproots) {
		size_t cap = cs.caproots ? cs.caproots * 2 : 256;
		struct croot *v = realloc(cs.roots, cap * sizeof *v);
		if (v == NULL || cap > 0xffffff)
			return NO_CLASS;
		cs.roots = v;
		cs.caproots = cap;
	}
	r = &cs.roots[cs.nroots];
	if (jni) {
		r->thread_tag = info->jni_local.thread_tag;
		r->method = info->jni_local.method;
		r->depth = info->jni_local.depth;
		r->loc = -1;
		r->slot = -1;
	} else {
		r->thread_tag = info->stack_local.thread_tag;
		r->method = info->stack_local.method;
		r->depth = info->stack_local.depth;
		r->loc = info->stack_local.location;
		r->slot = info->stack_local.slot;
	}
	return (uint32_t)cs.nroots++;
}

static uint32_t class_index(jlong class_tag)
{
	return (class_tag & T_CLASS) ? (uint32_t)(class_tag & T_ID) : NO_CLASS;
}

static uint64_t edge_hop(jvmtiHeapReferenceKind kind, const jvmtiHeapReferenceInfo *info, jlong referrer_class_tag)
{
	switch (kind) {
	case JVMTI_HEAP_REFERENCE_FIELD:
		return HOP(H_FIELD, class_index(referrer_class_tag), info->field.index);
	case JVMTI_HEAP_REFERENCE_ARRAY_ELEMENT:
		return HOP(H_ELEM, 0, 0);
	default:
		return HOP(H_EDGE, NO_CLASS, kind);
	}
}

/* An object held by locals of several frames of one thread is named by the
 * outermost: the caller that owns it, not the helper it was passed to.
 * HotSpot reports every stack root before it visits any object. */
static void outer_local(const jvmtiHeapReferenceInfo *info, jlong *tag_ptr)
{
	jlong t = *tag_ptr;
	uint32_t p = (uint32_t)(t & T_ID), r;

	if ((t & (T_CLASS | T_THREAD)) || p == 0 || p > cs.npaths || HOP_KIND(cs.hop[p]) != H_LOCAL)
		return;
	r = HOP_A(cs.hop[p]);
	if (r >= cs.nroots || cs.roots[r].thread_tag != info->stack_local.thread_tag ||
	    cs.roots[r].depth >= info->stack_local.depth)
		return;
	p = intern(0, HOP(H_LOCAL, add_root(info, 0), 0));
	*tag_ptr = (t & T_TARGET) | p;
}

/* Whether tag t names an object only a stack local has reached so far. */
static int local_only(jlong t)
{
	uint32_t p = (uint32_t)(t & T_ID);
	return !(t & (T_CLASS | T_THREAD)) && p != 0 && p <= cs.npaths && HOP_KIND(cs.hop[p]) == H_LOCAL;
}

static int leaf(uint32_t k)
{
	return k != NO_CLASS && cs.cls[k].refs == 0;
}

/* The holder chain of the referrer, for an edge out of it. */
static uint32_t referrer_path(jlong *referrer_tag_ptr, jlong referrer_class_tag)
{
	jlong rt = *referrer_tag_ptr;

	if (rt & T_THREAD) {
		cs.cur_class = -1;
		return intern(0, HOP(H_THREADOBJ, rt & T_ID, 0));
	}
	if (rt & T_TARGET) {
		cs.cur_class = -1;
		return (uint32_t)(rt & T_ID);
	}
	if (rt != 0) {
		/* The first edge of this referrer: its tag has done its job. */
		*referrer_tag_ptr = 0;
		cs.cur_path = (uint32_t)rt;
		cs.cur_class = referrer_class_tag;
		return (uint32_t)rt;
	}
	if (referrer_class_tag == cs.cur_class)
		return cs.cur_path;
	cs.unplaced++;
	return PATH_UNKNOWN;
}

/* Phase 2, two walks, one call per reference. Stack locals are roots that
 * HotSpot reports before it visits any object, but what a method's
 * parameter holds is most often held for good by a field: the first walk
 * only marks what locals reach and names objects by the heap paths from
 * the other roots; the second descends from what only locals reach. */
static jint JNICALL ref_cb(jvmtiHeapReferenceKind kind, const jvmtiHeapReferenceInfo *info, jlong class_tag,
			   jlong referrer_class_tag, jlong size, jlong *tag_ptr, jlong *referrer_tag_ptr,
			   jint length, void *ud)
{
	uint32_t parent, path, k = class_index(class_tag);
	uint64_t hop;
	jlong t = *tag_ptr;
	int root_local = referrer_tag_ptr == NULL && kind == JVMTI_HEAP_REFERENCE_STACK_LOCAL;

	(void)length;
	(void)ud;
	if ((++cs.calls & 4095) == 0 && over())
		return JVMTI_VISIT_ABORT;
	if (cs.walk == 2) {
		/* Only into what the first walk left to the locals. */
		if (t != 0)
			return root_local && local_only(t) && !leaf(k) ? JVMTI_VISIT_OBJECTS : 0;
		if (root_local)
			return 0; /* a local the first walk did not see: born since */
	} else if (t != 0) {
		if (root_local) {
			outer_local(info, tag_ptr);
			return 0;
		}
		if (referrer_tag_ptr == NULL || !local_only(t))
			return JVMTI_VISIT_OBJECTS; /* reached before (or a class, a thread) */
		/* A heap path to what a local holds: it names the object. */
	}
	if (referrer_tag_ptr == NULL) {
		parent = 0;
		switch (kind) {
		case JVMTI_HEAP_REFERENCE_STACK_LOCAL:
			hop = HOP(H_LOCAL, add_root(info, 0), 0);
			break;
		case JVMTI_HEAP_REFERENCE_JNI_LOCAL:
			/* A native frame's handles hold what it was passed for a
			 * moment; the object's lasting holder names it better. */
			return 0;
		default:
			hop = HOP(H_ROOT, kind, 0);
		}
	} else if (*referrer_tag_ptr & T_CLASS) {
		jlong rt = *referrer_tag_ptr;
		parent = 0;
		hop = kind == JVMTI_HEAP_REFERENCE_STATIC_FIELD ? HOP(H_STATIC, rt & T_ID, info->field.index)
								: HOP(H_EDGE, rt & T_ID, kind);
		cs.cur_class = -1;
	} else {
		parent = referrer_path(referrer_tag_ptr, referrer_class_tag);
		hop = edge_hop(kind, info, referrer_class_tag);
	}
	if ((uint64_t)size < cs.minsize && leaf(k))
		return 0; /* a small leaf: nothing to name, nothing inside */
	path = intern(parent, hop);
	if (t == 0)
		cs.reached++;
	*tag_ptr = ((uint64_t)size >= cs.minsize ? T_TARGET : 0) | path;
	if (root_local)
		return 0; /* the second walk descends, if no heap path does */
	return leaf(k) ? 0 : JVMTI_VISIT_OBJECTS;
}

static void dealloc(jvmtiEnv *j, void *p)
{
	if (p != NULL)
		(*j)->Deallocate(j, (unsigned char *)p);
}

/* Whether instances of class i may hold references. */
static int class_refs(jint i, int depth)
{
	struct cclass *c = &cs.cls[i];
	jvmtiEnv *e = cs.ec;
	jfieldID *f = NULL;
	jint nf = 0, st = 0;
	jclass sup;
	int refs = 0;

	if (c->refs >= 0)
		return c->refs;
	if (c->sig == NULL || c->sig[0] == '[') {
		c->refs = c->sig == NULL || c->sig[1] == 'L' || c->sig[1] == '[';
		return c->refs;
	}
	c->refs = 1; /* until known; also for cycles and errors */
	if (depth > 64 || (*e)->GetClassStatus(e, c->k, &st) != JVMTI_ERROR_NONE || !(st & JVMTI_CLASS_STATUS_PREPARED) ||
	    (*e)->GetClassFields(e, c->k, &nf, &f) != JVMTI_ERROR_NONE)
		return 1;
	for (jint x = 0; x < nf && !refs; x++) {
		char *sig = NULL;
		jint mod = 0;
		if ((*e)->GetFieldModifiers(e, c->k, f[x], &mod) == JVMTI_ERROR_NONE && (mod & 0x0008))
			continue; /* static */
		if ((*e)->GetFieldName(e, c->k, f[x], NULL, &sig, NULL) != JVMTI_ERROR_NONE)
			refs = 1;
		else
			refs = sig[0] == 'L' || sig[0] == '[';
		dealloc(e, sig);
	}
	dealloc(e, f);
	if (!refs && (sup = (*cs.jni)->GetSuperclass(cs.jni, c->k)) != NULL) {
		jlong t = 0;
		if ((*e)->GetTag(e, sup, &t) == JVMTI_ERROR_NONE && (t & T_CLASS))
			refs = class_refs((jint)(t & T_ID), depth + 1);
		else
			refs = 1;
	}
	c->refs = refs;
	return refs;
}

/* Tags every loaded class and live thread in env C, so that the walk can
 * tell them from objects and name them. */
static int prepare_walk(JNIEnv *jni)
{
	jvmtiEnv *e = cs.ec;
	jclass *ks = NULL;
	jthread *ts = NULL;

	if ((*e)->GetLoadedClasses(e, &cs.ncls, &ks) != JVMTI_ERROR_NONE)
		return -1;
	cs.cls = calloc((size_t)cs.ncls + 1, sizeof *cs.cls);
	if (cs.cls == NULL) {
		dealloc(e, ks);
		return -1;
	}
	for (jint i = 0; i < cs.ncls; i++) {
		cs.cls[i].k = ks[i];
		cs.cls[i].refs = -1;
		if ((*e)->GetClassSignature(e, ks[i], &cs.cls[i].sig, NULL) != JVMTI_ERROR_NONE)
			cs.cls[i].sig = NULL;
		(*e)->SetTag(e, ks[i], T_CLASS | i);
	}
	dealloc(e, ks);
	for (jint i = 0; i < cs.ncls; i++) {
		jint mod = 0;
		class_refs(i, 0);
		if ((*e)->GetClassModifiers(e, cs.cls[i].k, &mod) == JVMTI_ERROR_NONE)
			cs.cls[i].iface = (mod & 0x0200) != 0;
	}
	if ((*e)->GetAllThreads(e, &cs.nthr, &ts) == JVMTI_ERROR_NONE) {
		cs.tnames = calloc((size_t)cs.nthr + 1, sizeof *cs.tnames);
		for (jint i = 0; i < cs.nthr && cs.tnames != NULL; i++) {
			jvmtiThreadInfo ti;
			memset(&ti, 0, sizeof ti);
			if ((*e)->GetThreadInfo(e, ts[i], &ti) == JVMTI_ERROR_NONE) {
				cs.tnames[i] = ti.name;
				if (ti.thread_group)
					(*jni)->DeleteLocalRef(jni, ti.thread_group);
				if (ti.context_class_loader)
					(*jni)->DeleteLocalRef(jni, ti.context_class_loader);
			}
			(*e)->SetTag(e, ts[i], T_THREAD | i);
			(*jni)->DeleteLocalRef(jni, ts[i]);
		}
		dealloc(e, ts);
	} else {
		cs.nthr = 0;
	}
	return 0;
}

/* "Ljava/util/HashMap$Node;" -> "java.util.HashMap$Node", "[J" -> "long[]". */
static void java_name(const char *sig, char *out, size_t n)
{
	static const char *prim[] = {"B", "byte", "C", "char", "D", "double", "F", "float", "I", "int",
				     "J", "long", "S", "short", "Z", "boolean", "V", "void"};
	int dims = 0;
	size_t len = 0;

	if (sig == NULL) {
		snprintf(out, n, "?");
		return;
	}
	while (sig[dims] == '[')
		dims++;
	sig += dims;
	if (sig[0] == 'L') {
		for (sig++; *sig && *sig != ';' && len + 1 < n; sig++)
			out[len++] = *sig == '/' ? '.' : *sig;
		out[len] = 0;
	} else {
		snprintf(out, n, "%s", sig);
		for (size_t i = 0; i < sizeof prim / sizeof *prim; i += 2)
			if (strcmp(sig, prim[i]) == 0)
				snprintf(out, n, "%s", prim[i + 1]);
		len = strlen(out);
	}
	while (dims-- > 0 && len + 3 < n) {
		memcpy(out + len, "[]", 3);
		len += 2;
	}
}

/* Appends "Declaring.name" for each field of k, and before them of its
 * superclasses (java.lang.Object's first), to list: the order of JVMTI's
 * field indices after the interfaces' fields. Interfaces list their own
 * fields only. */
static void chain_fields(jclass k, int iface, char ***list, int *n, int depth)
{
	jvmtiEnv *e = cs.ec;
	jfieldID *f = NULL;
	jint nf = 0;
	jclass sup = NULL;
	char *csig = NULL, cname[256];

	if (depth > 64)
		return;
	if (!iface && (sup = (*cs.jni)->GetSuperclass(cs.jni, k)) != NULL) {
		chain_fields(sup, 0, list, n, depth + 1);
		(*cs.jni)->DeleteLocalRef(cs.jni, sup);
	}
	if ((*e)->GetClassSignature(e, k, &csig, NULL) != JVMTI_ERROR_NONE)
		return;
	java_name(csig, cname, sizeof cname);
	dealloc(e, csig);
	if ((*e)->GetClassFields(e, k, &nf, &f) != JVMTI_ERROR_NONE)
		return;
	char **v = realloc(*list, (size_t)(*n + nf + 1) * sizeof *v);
	if (v != NULL) {
		*list = v;
		for (jint x = 0; x < nf; x++) {
			char *name = NULL, buf[512];
			if ((*e)->GetFieldName(e, k, f[x], &name, NULL, NULL) != JVMTI_ERROR_NONE)
				name = NULL;
			snprintf(buf, sizeof buf, "%s.%s", cname, name ? name : "?");
			dealloc(e, name);
			if ((v[*n] = strdup(buf)) != NULL)
				(*n)++;
		}
	}
	dealloc(e, f);
}

/* The fields of every interface k implements (directly, through its
 * superclasses or through superinterfaces), each interface counted once. */
static int interface_fields(jclass k, int iface, jclass *seen, int *nseen, int depth)
{
	jvmtiEnv *e = cs.ec;
	JNIEnv *jni = cs.jni;
	jint ni = 0, nf = 0;
	jclass *is = NULL, sup = NULL;
	jfieldID *f = NULL;
	int total = 0;

	if (depth > 64)
		return 0;
	if ((*e)->GetImplementedInterfaces(e, k, &ni, &is) == JVMTI_ERROR_NONE) {
		for (jint x = 0; x < ni; x++) {
			int dup = 0;
			for (int y = 0; y < *nseen && !dup; y++)
				dup = (*jni)->IsSameObject(jni, seen[y], is[x]);
			if (dup || *nseen >= 256)
				continue;
			seen[(*nseen)++] = is[x];
			if ((*e)->GetClassFields(e, is[x], &nf, &f) == JVMTI_ERROR_NONE) {
				total += nf;
				dealloc(e, f);
			}
			total += interface_fields(is[x], 1, seen, nseen, depth + 1);
		}
		dealloc(e, is);
	}
	if (!iface && (sup = (*cs.jni)->GetSuperclass(cs.jni, k)) != NULL)
		total += interface_fields(sup, 0, seen, nseen, depth + 1);
	return total;
}

/* The name of field idx of class i, per JVMTI's field index rule (the
 * interfaces' fields first, then the classes' from java.lang.Object down). */
static const char *field_name(uint32_t i, uint32_t idx)
{
	struct cclass *c;
	jclass seen[256];
	int nseen = 0, skip;

	if (i >= (uint32_t)cs.ncls)
		return NULL;
	c = &cs.cls[i];
	if (c->fields == NULL && c->nfields == 0) {
		skip = interface_fields(c->k, c->iface, seen, &nseen, 0);
		c->nfields = 0;
		char **list = NULL;
		int n = 0;
		/* The interfaces' fields are placeholders: no hop names them. */
		list = calloc((size_t)skip + 1, sizeof *list);
		if (list != NULL)
			n = skip;
		chain_fields(c->k, c->iface, &list, &n, 0);
		c->fields = list;
		c->nfields = n > 0 ? n : -1;
	}
	if (c->fields == NULL || (int)idx >= c->nfields)
		return NULL;
	return c->fields[idx];
}

static const char *thread_name(jlong tag, char *buf, size_t n)
{
	jlong i = tag & T_ID;
	if ((tag & T_THREAD) && i < cs.nthr && cs.tnames != NULL && cs.tnames[i] != NULL)
		snprintf(buf, n, "thread \"%s\"", cs.tnames[i]);
	else
		snprintf(buf, n, "thread ?");
	return buf;
}

/* "Class.method:line". */
static void frame_name(jmethodID m, jlocation loc, char *out, size_t n)
{
	jvmtiEnv *e = cs.ec;
	char *name = NULL, *csig = NULL, cname[256];
	jclass k = NULL;
	jvmtiLineNumberEntry *lt = NULL;
	jint nl = 0, line = -1;

	if ((*e)->GetMethodName(e, m, &name, NULL, NULL) != JVMTI_ERROR_NONE)
		name = NULL;
	if ((*e)->GetMethodDeclaringClass(e, m, &k) == JVMTI_ERROR_NONE && k != NULL) {
		if ((*e)->GetClassSignature(e, k, &csig, NULL) != JVMTI_ERROR_NONE)
			csig = NULL;
		(*cs.jni)->DeleteLocalRef(cs.jni, k);
	}
	if (loc >= 0 && (*e)->GetLineNumberTable(e, m, &nl, &lt) == JVMTI_ERROR_NONE) {
		for (jint x = 0; x < nl; x++)
			if (lt[x].start_location <= loc)
				line = lt[x].line_number;
		dealloc(e, lt);
	}
	java_name(csig, cname, sizeof cname);
	/* Names longer than out are cut, never overflow. */
	if ((line >= 0 ? snprintf(out, n, "%s.%s:%d", cname, name ? name : "?", (int)line)
		       : snprintf(out, n, "%s.%s", cname, name ? name : "?")) < 0)
		out[0] = 0;
	dealloc(e, name);
	dealloc(e, csig);
}

/* The local variable's name, where the class has a LocalVariableTable and
 * the JVM lets us read it (can_access_local_variables). */
static const char *local_name(jmethodID m, jlocation loc, jint slot, char *out, size_t n)
{
	jvmtiEnv *e = cs.ec;
	jvmtiLocalVariableEntry *t = NULL;
	jint nt = 0;
	const char *r = NULL;

	if ((*e)->GetLocalVariableTable(e, m, &nt, &t) != JVMTI_ERROR_NONE)
		return NULL;
	for (jint x = 0; x < nt; x++) {
		if (t[x].slot == slot && t[x].start_location <= loc && loc <= t[x].start_location + t[x].length && !r) {
			snprintf(out, n, "%s", t[x].name);
			r = out;
		}
		dealloc(e, t[x].name);
		dealloc(e, t[x].signature);
		dealloc(e, t[x].generic_signature);
	}
	dealloc(e, t);
	return r;
}

static const char *root_kind(uint32_t kind)
{
	switch (kind) {
	case JVMTI_HEAP_REFERENCE_JNI_GLOBAL: return "JNI global";
	case JVMTI_HEAP_REFERENCE_SYSTEM_CLASS: return "system class";
	case JVMTI_HEAP_REFERENCE_MONITOR: return "monitor";
	case JVMTI_HEAP_REFERENCE_THREAD: return "thread";
	case JVMTI_HEAP_REFERENCE_CLASS: return "class";
	case JVMTI_HEAP_REFERENCE_CLASS_LOADER: return "class loader";
	case JVMTI_HEAP_REFERENCE_SIGNERS: return "signers";
	case JVMTI_HEAP_REFERENCE_PROTECTION_DOMAIN: return "protection domain";
	case JVMTI_HEAP_REFERENCE_INTERFACE: return "interface";
	case JVMTI_HEAP_REFERENCE_CONSTANT_POOL: return "constant pool";
	case JVMTI_HEAP_REFERENCE_SUPERCLASS: return "superclass";
	default: return "VM root";
	}
}

static void class_name(uint32_t i, char *out, size_t n)
{
	java_name(i < (uint32_t)cs.ncls ? cs.cls[i].sig : NULL, out, n);
}

/* The text of one hop, as the report shows it. */
static void hop_name(uint64_t h, char *out, size_t n)
{
	char a[256], b[256], t[160];
	const char *f;

	switch (HOP_KIND(h)) {
	case H_FIELD:
		if ((f = field_name(HOP_A(h), HOP_B(h))) != NULL) {
			snprintf(out, n, "%s", f);
		} else {
			class_name(HOP_A(h), a, sizeof a);
			snprintf(out, n, "%s.<field %u>", a, HOP_B(h));
		}
		return;
	case H_STATIC:
		if ((f = field_name(HOP_A(h), HOP_B(h))) != NULL) {
			snprintf(out, n, "%s (static)", f);
		} else {
			class_name(HOP_A(h), a, sizeof a);
			snprintf(out, n, "%s.<static field %u> (static)", a, HOP_B(h));
		}
		return;
	case H_ELEM:
		snprintf(out, n, "[]");
		return;
	case H_LOCAL:
	case H_JNILOCAL:
		if (HOP_A(h) >= cs.nroots) {
			snprintf(out, n, "stack local");
			return;
		}
		{
			struct croot *r = &cs.roots[HOP_A(h)];
			frame_name(r->method, r->loc, a, sizeof a);
			thread_name(r->thread_tag, t, sizeof t);
			if (HOP_KIND(h) == H_JNILOCAL)
				snprintf(out, n, "%s JNI local (%s)", a, t);
			else if (local_name(r->method, r->loc, r->slot, b, sizeof b) != NULL)
				snprintf(out, n, "%s local %s (%s)", a, b, t);
			else
				snprintf(out, n, "%s local #%d (%s)", a, (int)r->slot, t);
		}
		return;
	case H_THREADOBJ:
		thread_name(T_THREAD | HOP_A(h), out, n);
		return;
	case H_ROOT:
		snprintf(out, n, "%s", root_kind(HOP_A(h)));
		return;
	case H_EDGE:
		if (HOP_A(h) == NO_CLASS) {
			snprintf(out, n, "(%s)", root_kind(HOP_B(h)));
		} else {
			class_name(HOP_A(h), a, sizeof a);
			snprintf(out, n, "%s (%s)", a, root_kind(HOP_B(h)));
		}
		return;
	default:
		snprintf(out, n, "?");
	}
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
			hop_name(cs.hop[id], text, sizeof text);
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
		dealloc(cs.et, sig);
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
			dealloc(e, cs.cls[i].sig);
		for (int f = 0; f < cs.cls[i].nfields; f++)
			free(cs.cls[i].fields[f]);
		free(cs.cls[i].fields);
	}
	for (jint i = 0; i < cs.nthr && cs.tnames != NULL; i++)
		if (e != NULL)
			dealloc(e, cs.tnames[i]);
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

	if ((*djx.vm)->GetEnv(djx.vm, (void **)&e, JVMTI_VERSION_11) != JNI_OK || e == NULL)
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
	cs.minsize = djx.opt.minsize ? djx.opt.minsize : 1;
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
		 * next would stop at the same place. */
		if ((cs.targets - before) * 400 < budget_ns / 4 || passes >= MAX_PASSES) {
			status |= DJX_CENSUS_OVER_BUDGET;
			goto end;
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
		if (budget_ns != 0 && cs.heap_objects * DJX_HOLDER_NS > 4 * budget_ns) {
			status |= DJX_CENSUS_HOLDERS_SKIPPED;
		} else if ((cs.ec = private_env(1)) == NULL || prepare_walk(jni) != 0) {
			status |= DJX_CENSUS_HOLDERS_FAILED;
		} else {
			memset(&cb, 0, sizeof cb);
			cb.heap_reference_callback = ref_cb;
			cs.calls = 0;
			intern(0, HOP(H_UNKNOWN, 0, 0)); /* PATH_UNKNOWN */
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
		dealloc(cs.et, objs);
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
		dealloc(cs.et, objs);
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
