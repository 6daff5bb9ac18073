/* Names of the hops of holder chains, resolved after the walks with JVMTI:
 * field indices by JVMTI's rule; frames and locals as names.c writes them
 * (the roots' hops are the same text). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "census_state.h"
#include "names.h"

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
	djx_java_name(csig, cname, sizeof cname);
	djx_dealloc(e, csig);
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
			djx_dealloc(e, name);
			if ((v[*n] = strdup(buf)) != NULL)
				(*n)++;
		}
	}
	djx_dealloc(e, f);
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
				djx_dealloc(e, f);
			}
			total += interface_fields(is[x], 1, seen, nseen, depth + 1);
		}
		djx_dealloc(e, is);
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

static void class_name(uint32_t i, char *out, size_t n)
{
	djx_java_name(i < (uint32_t)cs.ncls ? cs.cls[i].sig : NULL, out, n);
}

/* The text of one hop, as the report shows it. */
void census_hop_name(uint64_t h, char *out, size_t n)
{
	char a[256], t[160];
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
			if (cs.names == NULL)
				cs.names = djx_names_new(cs.ec, cs.jni);
			thread_name(r->thread_tag, t, sizeof t);
			if (cs.names != NULL)
				djx_names_frame_root(cs.names, r->method, r->loc, r->slot, HOP_KIND(h) == H_JNILOCAL, t, out, n);
			else
				snprintf(out, n, "stack local (%s)", t);
		}
		return;
	case H_THREADOBJ:
		thread_name(T_THREAD | HOP_A(h), out, n);
		return;
	case H_ROOT:
		snprintf(out, n, "%s", djx_root_kind(HOP_A(h)));
		return;
	case H_EDGE:
		if (HOP_A(h) == NO_CLASS) {
			snprintf(out, n, "(%s)", djx_root_kind(HOP_B(h)));
		} else {
			class_name(HOP_A(h), a, sizeof a);
			snprintf(out, n, "%s (%s)", a, djx_root_kind(HOP_B(h)));
		}
		return;
	default:
		snprintf(out, n, "?");
	}
}
