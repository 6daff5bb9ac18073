/* Java names for what JVMTI reports by id (names.h). The cache keys
 * methods by jmethodID: a walk names many roots of the same few methods,
 * and each name costs several JVMTI calls. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "names.h"
#include "util.h"

struct mname {
	jmethodID m;  /* NULL: a free slot */
	char *qual;   /* "Class.method", malloc'ed */
	jvmtiLineNumberEntry *lines; /* malloc'ed */
	jint nlines;  /* -1: no table */
	int native;
};

struct djx_names {
	jvmtiEnv *e;
	JNIEnv *jni;
	struct mname *v;
	size_t n, cap; /* cap a power of two */
};

void djx_java_name(const char *sig, char *out, size_t n)
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

const char *djx_root_kind(uint32_t kind)
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

struct djx_names *djx_names_new(jvmtiEnv *e, JNIEnv *jni)
{
	struct djx_names *n = calloc(1, sizeof *n);

	if (n != NULL) {
		n->e = e;
		n->jni = jni;
	}
	return n;
}

void djx_names_free(struct djx_names *n)
{
	if (n == NULL)
		return;
	for (size_t i = 0; i < n->cap; i++) {
		free(n->v[i].qual);
		free(n->v[i].lines);
	}
	free(n->v);
	free(n);
}

static size_t mslot(jmethodID m, size_t cap)
{
	uint64_t h = (uint64_t)(uintptr_t)m * 0x9e3779b97f4a7c15ull;
	return (size_t)(h >> 20) & (cap - 1);
}

static int mgrow(struct djx_names *n)
{
	size_t cap = n->cap ? n->cap * 2 : 256;
	struct mname *v = calloc(cap, sizeof *v);

	if (v == NULL)
		return -1;
	for (size_t i = 0; i < n->cap; i++) {
		size_t j;
		if (n->v[i].m == NULL)
			continue;
		for (j = mslot(n->v[i].m, cap); v[j].m != NULL; j = (j + 1) & (cap - 1))
			;
		v[j] = n->v[i];
	}
	free(n->v);
	n->v = v;
	n->cap = cap;
	return 0;
}

/* Fills mn for m: "Class.method", the line table, whether it is native. */
static void describe(struct djx_names *n, jmethodID m, struct mname *mn)
{
	jvmtiEnv *e = n->e;
	char *name = NULL, *csig = NULL, cname[256], buf[512];
	jvmtiLineNumberEntry *lt = NULL;
	jclass k = NULL;
	jint nl = 0, mods = 0;

	if ((*e)->GetMethodName(e, m, &name, NULL, NULL) != JVMTI_ERROR_NONE)
		name = NULL;
	mn->native = (*e)->GetMethodModifiers(e, m, &mods) == JVMTI_ERROR_NONE && (mods & 0x0100);
	if ((*e)->GetMethodDeclaringClass(e, m, &k) == JVMTI_ERROR_NONE && k != NULL) {
		if ((*e)->GetClassSignature(e, k, &csig, NULL) != JVMTI_ERROR_NONE)
			csig = NULL;
		(*n->jni)->DeleteLocalRef(n->jni, k);
	}
	djx_java_name(csig, cname, sizeof cname);
	/* Names longer than buf are cut, never overflow. */
	if (snprintf(buf, sizeof buf, "%s.%s", cname, name ? name : "?") < 0)
		buf[0] = 0;
	mn->m = m;
	mn->qual = strdup(buf);
	mn->nlines = -1;
	if ((*e)->GetLineNumberTable(e, m, &nl, &lt) == JVMTI_ERROR_NONE) {
		mn->lines = malloc(((size_t)nl + 1) * sizeof *lt);
		if (mn->lines != NULL) {
			memcpy(mn->lines, lt, (size_t)nl * sizeof *lt);
			mn->nlines = nl;
		}
		djx_dealloc(e, lt);
	}
	djx_dealloc(e, name);
	djx_dealloc(e, csig);
}

/* m's entry; a stack entry the caller frees when the cache is full. */
static struct mname *method(struct djx_names *n, jmethodID m, struct mname *spare)
{
	size_t i;

	if (n->n * 2 >= n->cap && mgrow(n) != 0) {
		memset(spare, 0, sizeof *spare);
		describe(n, m, spare);
		return spare;
	}
	for (i = mslot(m, n->cap); n->v[i].m != NULL; i = (i + 1) & (n->cap - 1))
		if (n->v[i].m == m)
			return &n->v[i];
	describe(n, m, &n->v[i]);
	n->n++;
	return &n->v[i];
}

void djx_names_frame(struct djx_names *n, jmethodID m, jlocation loc, char *out, size_t len)
{
	struct mname spare, *mn = method(n, m, &spare);
	jint line = -1;

	for (jint x = 0; loc >= 0 && x < mn->nlines; x++)
		if (mn->lines[x].start_location <= loc)
			line = mn->lines[x].line_number;
	if ((line >= 0 ? snprintf(out, len, "%s:%d", mn->qual ? mn->qual : "?", (int)line)
		       : snprintf(out, len, "%s", mn->qual ? mn->qual : "?")) < 0)
		out[0] = 0;
	if (mn == &spare) {
		free(spare.qual);
		free(spare.lines);
	}
}

int djx_names_native(struct djx_names *n, jmethodID m)
{
	struct mname spare, *mn = method(n, m, &spare);
	int native = mn->native;

	if (mn == &spare) {
		free(spare.qual);
		free(spare.lines);
	}
	return native;
}

/* The local variable's name, where the class has a LocalVariableTable and
 * the JVM lets us read it (can_access_local_variables). */
static const char *local_name(jvmtiEnv *e, jmethodID m, jlocation loc, jint slot, char *out, size_t n)
{
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

void djx_names_frame_root(struct djx_names *n, jmethodID m, jlocation loc, jint slot, int jni_local,
			  const char *thread, char *out, size_t len)
{
	char a[512], b[256];

	if (m == NULL) {
		/* Handles of a thread without Java frames (attached native code). */
		snprintf(out, len, "JNI local (%s)", thread);
		return;
	}
	djx_names_frame(n, m, jni_local ? -1 : loc, a, sizeof a);
	if (jni_local && !djx_names_native(n, m))
		snprintf(out, len, "%s compiled code (%s)", a, thread);
	else if (jni_local)
		snprintf(out, len, "%s JNI local (%s)", a, thread);
	else if (local_name(n->e, m, loc, slot, b, sizeof b) != NULL)
		snprintf(out, len, "%s local %s (%s)", a, b, thread);
	else
		snprintf(out, len, "%s local #%d (%s)", a, (int)slot, thread);
}
