/* The census's state, shared by census.c (which drives it), holders.c
 * (which walks the references) and hopname.c (which names what the walk
 * found). Private to them: the rest of the agent uses census.h. */
#ifndef DJX_CENSUS_STATE_H
#define DJX_CENSUS_STATE_H

#include <jvmti.h>
#include <stddef.h>
#include <stdint.h>

#include "names.h"
#include "util.h"

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
#define EMIT_ROOM (EMIT_CHUNK * 640u) /* a chunk's records, unless their types are long */

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

struct census {
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
	struct djx_names *names; /* frames named so far (hopname.c) */
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
	uint64_t heap_objects, heap_bytes, targets, reached, unplaced, capped, strays;
};
extern struct census cs; /* census_state.c */

int census_over(void); /* the pause budget passed, or the loader asked to stop */

/* holders.c */
uint32_t census_intern(uint32_t parent, uint64_t hop);
jint JNICALL census_ref_cb(jvmtiHeapReferenceKind kind, const jvmtiHeapReferenceInfo *info, jlong class_tag,
			   jlong referrer_class_tag, jlong size, jlong *tag_ptr, jlong *referrer_tag_ptr,
			   jint length, void *ud);
int census_prepare_walk(JNIEnv *jni); /* tags classes and threads in env C */

/* hopname.c */
void census_hop_name(uint64_t h, char *out, size_t n);

#endif
