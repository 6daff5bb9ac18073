/* The census's holder walks: FollowReferences in env C, whose tags are
 * the ids of interned reference chains (see census.c). Heap callbacks may
 * not call JNI or JVMTI (but memory): names come later (hopname.c). */
#include <stdlib.h>
#include <string.h>

#include "census_state.h"

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
uint32_t census_intern(uint32_t parent, uint64_t hop)
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
	p = census_intern(0, HOP(H_LOCAL, add_root(info, 0), 0));
	*tag_ptr = (t & T_TARGET) | p;
}

/* Whether tag t names an object only a stack local has reached so far. */
static int local_only(jlong t)
{
	uint32_t p = (uint32_t)(t & T_ID);
	return !(t & (T_CLASS | T_THREAD)) && p != 0 && p <= cs.npaths && HOP_KIND(cs.hop[p]) == H_LOCAL;
}

/* The frame root (cs.roots index) chain p starts at, or NO_CLASS. */
static uint32_t chain_local(uint32_t p)
{
	for (int i = 0; p != 0 && p <= cs.npaths && i <= MAX_DEPTH; i++, p = cs.parent[p])
		if (cs.parent[p] == 0)
			return HOP_KIND(cs.hop[p]) == H_LOCAL && HOP_A(cs.hop[p]) < cs.nroots ? HOP_A(cs.hop[p]) : NO_CLASS;
	return NO_CLASS;
}

/* Whether chain p starts at a local of a frame outside (deeper in the
 * stack than) the frame whose local names the object tagged t, in the
 * same thread. */
static int outer_chain(uint32_t p, jlong t)
{
	uint32_t a = chain_local(p), b = chain_local((uint32_t)(t & T_ID));

	return a != NO_CLASS && b != NO_CLASS && cs.roots[a].thread_tag == cs.roots[b].thread_tag &&
	       cs.roots[a].depth > cs.roots[b].depth;
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
		return census_intern(0, HOP(H_THREADOBJ, rt & T_ID, 0));
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
jint JNICALL census_ref_cb(jvmtiHeapReferenceKind kind, const jvmtiHeapReferenceInfo *info, jlong class_tag,
			   jlong referrer_class_tag, jlong size, jlong *tag_ptr, jlong *referrer_tag_ptr,
			   jint length, void *ud)
{
	uint32_t parent, path, k = class_index(class_tag);
	uint64_t hop;
	jlong t = *tag_ptr;
	int root_local = referrer_tag_ptr == NULL && kind == JVMTI_HEAP_REFERENCE_STACK_LOCAL;

	(void)length;
	(void)ud;
	if ((++cs.calls & 4095) == 0 && census_over())
		return JVMTI_VISIT_ABORT;
	if (cs.walk == 2) {
		/* Only into what the first walk left to the locals. */
		if (t != 0 && referrer_tag_ptr != NULL && local_only(t)) {
			/* A frame's local names what it holds directly, but an
			 * outer frame that reaches it through what it holds owns
			 * it (FFT: transform's dataRI -> [], not transformInPlace's
			 * dataR). HotSpot pops the outer frames' objects first. */
			parent = referrer_path(referrer_tag_ptr, referrer_class_tag);
			if (!outer_chain(parent, t))
				return 0;
			*tag_ptr = (t & T_TARGET) | census_intern(parent, edge_hop(kind, info, referrer_class_tag));
			return leaf(k) ? 0 : JVMTI_VISIT_OBJECTS;
		}
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
	path = census_intern(parent, hop);
	if (t == 0)
		cs.reached++;
	*tag_ptr = ((uint64_t)size >= cs.minsize ? T_TARGET : 0) | path;
	if (root_local)
		return 0; /* the second walk descends, if no heap path does */
	return leaf(k) ? 0 : JVMTI_VISIT_OBJECTS;
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
		djx_dealloc(e, sig);
	}
	djx_dealloc(e, f);
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
int census_prepare_walk(JNIEnv *jni)
{
	jvmtiEnv *e = cs.ec;
	jclass *ks = NULL;
	jthread *ts = NULL;

	if ((*e)->GetLoadedClasses(e, &cs.ncls, &ks) != JVMTI_ERROR_NONE)
		return -1;
	cs.cls = calloc((size_t)cs.ncls + 1, sizeof *cs.cls);
	if (cs.cls == NULL) {
		djx_dealloc(e, ks);
		return -1;
	}
	for (jint i = 0; i < cs.ncls; i++) {
		cs.cls[i].k = ks[i];
		cs.cls[i].refs = -1;
		if ((*e)->GetClassSignature(e, ks[i], &cs.cls[i].sig, NULL) != JVMTI_ERROR_NONE)
			cs.cls[i].sig = NULL;
		(*e)->SetTag(e, ks[i], T_CLASS | i);
	}
	djx_dealloc(e, ks);
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
		djx_dealloc(e, ts);
	} else {
		cs.nthr = 0;
	}
	return 0;
}
