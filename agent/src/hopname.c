/* Names of the hops of holder chains, resolved after the walks with JVMTI:
 * field indices by JVMTI's rule, frames by line, locals by their table
 * where the JVM grants it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "census_state.h"

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
		djx_dealloc(e, lt);
	}
	java_name(csig, cname, sizeof cname);
	/* Names longer than out are cut, never overflow. */
	if ((line >= 0 ? snprintf(out, n, "%s.%s:%d", cname, name ? name : "?", (int)line)
		       : snprintf(out, n, "%s.%s", cname, name ? name : "?")) < 0)
		out[0] = 0;
	djx_dealloc(e, name);
	djx_dealloc(e, csig);
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
		djx_dealloc(e, t[x].name);
		djx_dealloc(e, t[x].signature);
		djx_dealloc(e, t[x].generic_signature);
	}
	djx_dealloc(e, t);
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
void census_hop_name(uint64_t h, char *out, size_t n)
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
