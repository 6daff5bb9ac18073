/* The emitter: every record but STATS and BYE (writer.c) is built here,
 * from what a feature module gathered, and appended to the writer's batch.
 * A record that names methods (ALLOC, STACK, CODE) follows METHOD records
 * for those the loader has not seen yet.
 *
 * How a call appends:
 * - _locked: the caller holds the session lock, to append in the same hold
 *   as its own state changes; no room drops the record.
 * - plain: takes the lock; no room drops the record. Callbacks use these,
 *   and never wait on the writer thread (CODE waits a little).
 * - _flushing: writer thread only; a full batch is sent and the append
 *   retried once. 0, 1 the session is over, -1 the connection failed. */
#ifndef DJX_EMIT_H
#define DJX_EMIT_H

#include <jvmti.h>
#include <jvmticmlr.h> /* after jni.h */
#include <stddef.h>
#include <stdint.h>

#include "unwind.h"
#include "wbuf.h"

/* HELLO, the session's first record, before the writer thread runs. */
void djx_emit_hello(const char *vm_name, const char *vm_version, int stack_signal);

/* ERROR, at most 32 per session (the last one says so). */
void djx_emit_error_locked(const char *msg);
void djx_emit_error(const char *msg);

void djx_emit_interval(uint64_t interval); /* INTERVAL, stamped now */
int djx_emit_free_locked(uint64_t tag, uint64_t time); /* FREE: 0, or -1 dropped (counted) */
void djx_emit_gc_locked(int finish);                    /* GC_START or GC_FINISH, stamped now */
void djx_emit_reconcile_locked(const uint64_t *moves, uint32_t n); /* n {tag, addr} pairs */

/* ALLOC, in steps around the caller's own work: prepare outside the lock
 * (it builds the METHODs the frames need, and the record), then under it
 * djx_emit_methods_locked and, if that found room, djx_emit_alloc_locked;
 * djx_pending_free in any case. */
struct djx_alloc {
	uint64_t size;
	uint32_t tid;
	jint nframes;
	const jvmtiFrameInfo *frames; /* innermost first */
	const char *type;             /* the class's signature; NULL: unknown */
};
#define DJX_PENDING_IDS 128
struct djx_pending { /* on the caller's stack; what grows goes to the heap */
	uint64_t small_ids[DJX_PENDING_IDS];
	size_t small_off[DJX_PENDING_IDS + 1];
	uint64_t *ids; /* methods to describe, 0: described meanwhile */
	size_t *off;   /* METHOD k is w.p[off[k], off[k + 1]) */
	size_t n;
	size_t rec; /* the record's offset in w, after the METHODs */
	uint8_t mem[4096];
	struct wbuf w;
};
int djx_emit_alloc_prepare(struct djx_pending *p, JNIEnv *jni, const struct djx_alloc *a); /* 0, 1 session over, -1 out of memory */
/* ALLOC_RAW: an ALLOC whose frames the agent walked itself (unwind.h),
 * named by the loader from the JVM's memory: no METHODs. The same steps. */
int djx_emit_alloc_raw_prepare(struct djx_pending *p, const struct djx_alloc *a, const struct djx_raw_frame *frames,
			       int nframes, uint32_t end); /* 0, -1 out of memory */
int djx_emit_methods_locked(struct djx_pending *p); /* 0 appended with room for the record, -1 no room */
void djx_emit_alloc_locked(struct djx_pending *p, uint64_t time, uint64_t addr, uint64_t tag);
void djx_pending_free(struct djx_pending *p);

/* STACK: 0, 1 the session is over, -1 no room (the writer thread flushes
 * and retries). */
struct djx_stack {
	uint64_t time, pc;
	uint32_t tid;
	int32_t status;  /* AsyncGetCallTrace's: frames (> 0) or a ticks_* code */
	int nframes;
	const jvmtiFrameInfo *frames; /* location: the bci; -3 native */
};
int djx_emit_stack(JNIEnv *jni, const struct djx_stack *s);

/* CODE: a full batch makes the caller kick the writer thread and wait up
 * to 200 ms, unless the loader stalls. 0, or -1 dropped. */
struct djx_code {
	jmethodID method;
	const void *start;
	jint size;
	uint32_t npcs;
	const PCStackInfo *const *pcs; /* sorted by pc */
};
int djx_emit_code(JNIEnv *jni, const struct djx_code *c);
void djx_emit_code_unload(jmethodID method, const void *start);
void djx_emit_stub(const char *name, const void *start, jint size);

/* The census (writer thread). */
int djx_emit_census_start_flushing(uint32_t kind, uint64_t time);
int djx_emit_census_path_flushing(uint32_t id, uint32_t parent, const char *hop);
struct djx_census_obj {
	uint64_t time, addr, size, tag;
	uint32_t path, kind;
	const char *type;
};
int djx_emit_census_locked(const struct djx_census_obj *o); /* 0, or -1 no room */
struct djx_census_end {
	uint32_t kind, status;
	uint64_t objects, bytes, heap_objects, heap_bytes, heap_walk_ns, holder_walk_ns, emit_ns;
	uint64_t paths, reached, unreachable, unplaced, strays, passes, pause_max_ns;
	const char *note;
};
int djx_emit_census_end_flushing(const struct djx_census_end *e); /* stamped now */

/* Data types. */
struct djx_types_info {
	int ok, fields, statics;
	char reason[200];
	uint64_t oop_base, kbase;
	uint32_t oop_shift, oop_bytes, kshift, kbytes;
	uint32_t kmark; /* compact headers: the narrow klass's shift in the mark word; else 0 */
};
void djx_emit_types_info(const struct djx_types_info *in); /* no room: dropped (counted) */
struct djx_field {
	uint32_t off;
	const char *name, *sig;
};
struct djx_class {
	uint64_t klass;
	uint32_t narrow; /* the compressed klass word; 0: none */
	const char *sig;
	size_t nfields;
	const struct djx_field *fields; /* instance fields, by offset */
	size_t nstatics;
	const struct djx_field *statics; /* by offset in the class's mirror */
};
/* CLASS, stamped when appended; flushing only on the writer thread. 0
 * sent, 1 dropped (out of memory), -1 no room or the session is over. */
int djx_emit_class(const struct djx_class *c, int flushing);

/* The heap's roots (writer thread). */
struct djx_root {
	uint64_t addr;
	uint32_t kind, rank, reach; /* kind: a jvmtiHeapReferenceKind */
	const char *hop;
};
int djx_emit_root_locked(const struct djx_root *r); /* stamped now; 0, 1 out of memory, -1 no room */
struct djx_roots_end {
	uint64_t roots, follow_ns, tags_ns;
	uint32_t status;
	const char *note;
	uint64_t refs, objects, threads, gone, tags_max_ns, emit_ns;
};
int djx_emit_roots_end_flushing(const struct djx_roots_end *e); /* stamped now */

void djx_emit_end_locked(void);   /* session end: forget the methods described */
void djx_emit_reset_locked(void); /* session start: that, and no error sent yet */

#endif
