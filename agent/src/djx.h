/* Shared declarations of the djx-bpf JVMTI agent. Everything here has hidden
 * visibility (-fvisibility=hidden), so every copy of the library loaded into
 * one JVM keeps its own state. */
#ifndef DJX_H
#define DJX_H

#include <jvmti.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "mset.h"
#include "util.h"
#include "wbuf.h"

/* Wire format, see agentwire/wire.go. */
#define DJX_MAGIC 0x424A5844u /* "DXJB" as little-endian bytes */
#define DJX_VERSION 1
#define DJX_PROTO 1
#define DJX_HDR_LEN 24
#define DJX_REC_HDR 8

enum {
	REC_HELLO = 1,
	REC_METHOD = 2,
	REC_ALLOC = 3,
	REC_STATS = 4,
	REC_BYE = 5,
	REC_ERROR = 6,
	REC_INTERVAL = 7,
	REC_FREE = 8,
	REC_GC_START = 9,
	REC_GC_FINISH = 10,
	REC_RECONCILE = 11,
	REC_STACK = 12,
	REC_CODE = 13,
	REC_CODE_UNLOAD = 14,
	REC_STUB = 15,
	REC_CENSUS_START = 16,
	REC_CENSUS_PATH = 17,
	REC_CENSUS = 18,
	REC_CENSUS_END = 19,
	REC_TYPES_INFO = 20,
	REC_CLASS = 21,
};

/* Census kinds (CENSUS_START, CENSUS): at attach, and of large objects
 * the sampler missed, after a GC. */
#define DJX_CENSUS_ATTACH 1u
#define DJX_CENSUS_AFTER_GC 2u
/* CENSUS_END status bits (agentwire.CensusStatus). */
#define DJX_CENSUS_OVER_BUDGET 0x1u     /* the heap walk passed the budget: no census */
#define DJX_CENSUS_CANCELLED 0x2u       /* the loader asked to stop */
#define DJX_CENSUS_FAILED 0x4u          /* a JVMTI call failed; see the note */
#define DJX_CENSUS_HOLDERS 0x8u         /* every object got its holder chain */
#define DJX_CENSUS_HOLDERS_SKIPPED 0x10u /* the holder walk would pass the budget */
#define DJX_CENSUS_HOLDERS_PARTIAL 0x20u /* ... it did: objects it had not reached have none */
#define DJX_CENSUS_HOLDERS_FAILED 0x40u
#define DJX_CENSUS_PARTIAL 0x80u /* the heap walk passed the budget: objects past where it stopped are left out */
/* The holder walks' pause per heap object, measured on JDK 17 and 25 with
 * 1M to 50M objects (docs/census.md: 310-620 ns): a walk estimated past
 * the budget is skipped. */
#define DJX_HOLDER_NS 500u
/* Censuses after GCs take at most DJX_RECENSUS_START_NS plus
 * 1/DJX_RECENSUS_SHARE of the session, pauses and the writer's work
 * together. Their pause grows with the whole heap, so a big heap gets them
 * rarely; the first few come at once, when the objects a short profile is
 * after were just allocated. */
#define DJX_RECENSUS_SHARE 400u
#define DJX_RECENSUS_START_NS 20000000ull

#define DJX_MAX_FRAMES 64
#define DJX_MAX_LINES 16384          /* line-table entries per METHOD record */
#define DJX_BUF_CAP (4u << 20)       /* one batch buffer, header included */
#define DJX_BUF_RESERVE 512u         /* tail kept free for STATS and BYE */
#define DJX_BUF_KEEP (256u << 10)    /* resident part of a batch buffer after a flush */
/* Writer flush period. Every wakeup costs the JVM and the loader: at 50 ms
 * the writer took 0.21% of GcHot's CPU, 0.06% at 200 ms. Allocations kick
 * it earlier when the batch is half full, stacks when their ring is. */
#define DJX_FLUSH_NS 200000000ull
#define DJX_MAX_ERRORS 32            /* ERROR records per session */


/* Access stacks (stacks.c). The handler writes AsyncGetCallTrace's frames
 * straight into a slot of a preallocated ring: 128 slots of 128 frames
 * (about 270 KB, allocated once per library copy and never freed, because
 * the handler stays installed after the session). The writer drains it at
 * half full, within a few ms; 2048 slots were 4.3 MB of the JVM's RSS (5%
 * of a small heap's footprint). At the default stack interval a busy
 * thread sends 100 stacks/s; full rings drop stacks, counted. */
#define DJX_RING_SLOTS 128u /* power of two */
#define DJX_STACK_FRAMES 128
#define DJX_STACK_NO_ENV (-100) /* agentwire.StackNoEnv */
/* A signal is ours if the kernel sent it (SI_KERNEL: bpf_send_signal_thread)
 * or if it was queued (SI_QUEUE) with this si_value.sival_int ("DJXS"):
 * tests, and loaders without BPF, signal threads with rt_tgsigqueueinfo. */
#define DJX_STACK_COOKIE 0x534A5844

/* JIT code records (code.c): bounds per CODE record. */
#define DJX_CODE_MAX_FRAMES 64         /* inlining depth kept per PC */
#define DJX_CODE_MAX_BYTES (512u << 10) /* PCs past this are left out */
#define DJX_CODE_WAIT_MS 200           /* wait for buffer space, then drop */

/* Budget window: the callback that completes a window's share of the
 * budget (budget x DJX_BUDGET_NS) doubles the interval if the window took
 * less than DJX_BUDGET_NS. */
#define DJX_BUDGET_NS 250000000ull
#define DJX_MAX_INTERVAL (1ull << 30)



/* Agent_OnAttach's return code when another JVMTI environment holds the
 * heap-sampling capability (it is "always solo" in HotSpot: one environment
 * at a time). The loader maps it to an actionable message. */
#define DJX_RC_SAMPLER_BUSY 98

/* The single instance of this copy of the library. */
struct djx {
	int sock, evfd;

	pthread_mutex_t mu;
	pthread_cond_t donecv; /* CLOCK_MONOTONIC */
	/* Guarded by mu. */
	uint8_t *cur; /* batch being filled; first DJX_HDR_LEN bytes are the header */
	size_t cur_len;
	uint32_t cur_n;
	int kicked;   /* writer already woken for a half-full buffer */
	int detached; /* buffers gone: callbacks must not touch them (atomic reads too) */
	int started;  /* writer thread running */
	int stop;     /* VMDeath asked for the final flush */
	int abort;    /* start failed: writer must exit without sending */
	int done;     /* writer finished */
	uint64_t stop_ns;
	uint32_t errors_sent;
	struct mset methods;

	uint8_t *spare; /* owned by the writer */
	pthread_t writer;

	/* Cumulative counters, updated atomically. */
	uint64_t n_callbacks, n_below, n_dropped, n_stackerr, n_sent;
	int disabled; /* SampledObjectAlloc switched off after detach */
	int paused;   /* writer only: the loader paused allocation sampling ('P') */
	/* The writer asks for a larger heap sampling interval (want) when the
	 * callback rate exceeds the budget; a Java thread applies it (cur). */
	uint64_t want_interval, cur_interval;
	uint64_t win_ns, win_calls; /* the budget window's start (atomic) */

	/* Tracking and GC epochs. */
	int tagging;   /* objects get tags and weak references: GC events acquired (set before events) */
	int gc_events; /* GarbageCollectionStart/Finish acquired */
	const char *cap_err; /* why not, sent as an ERROR after HELLO */
	uint64_t next_tag;   /* atomic; the last tag issued */
	/* Guarded by mu. */
	uint64_t gc_starts, gc_finishes;
	/* Cumulative counters, updated atomically. */
	uint64_t n_frees, n_gcs, n_reconciles, n_reconciled, n_rec_skipped, n_rec_limited, ns_reconcile;

	/* Stacks and JIT code. */
	int code_events;      /* can_generate_compiled_method_load_events acquired */
	int class_events;     /* ClassLoad/ClassPrepare enabled (for ASGCT) */
	const char *stk_err;  /* why the stack handler is off, sent after HELLO */
	/* Cumulative counters, updated atomically (the first three and the
	 * last also from the signal handler: lock-free atomics only). */
	uint64_t n_stack_signals, n_stacks_sent, n_stacks_dropped, n_code_sent, n_code_dropped, n_chained;

	/* Humongous objects without weak references (big.c). */
	uint64_t untag_min;          /* atomic; 0: tag every object */
	uint64_t n_big, n_big_freed; /* atomic counters */

	/* What the agent costs the JVM: ns spent in our callbacks and
	 * signal handler (atomic), and the writer thread's CPU time. */
	uint64_t ns_alloc, ns_stack, ns_code, ns_writer;
	uint64_t cpu0; /* the process's CPU time when the session started */

	/* Weak-reference tracking (track.c) and the census (census.c). */
	uint64_t n_tracked;   /* atomic: objects ever added to the table */
	uint64_t ns_census;   /* atomic: census pauses, ns */
	uint64_t last_gc_end; /* guarded by mu: the latest GarbageCollectionFinish */
	int census_req;       /* guarded by mu: the loader sent 'C' */
	uint64_t last_census; /* writer only: when the last census ended */
	uint64_t recensus_ns; /* writer only: the censuses after GCs, ns */

	/* Data types (types.c). */
	int types_req; /* guarded by mu: the loader sent 'K' */
	uint64_t n_classes_sent, n_classes_dropped, ns_types; /* atomic */
};
extern struct djx djx;

/* agent.c */
void djx_build_method(jvmtiEnv *j, JNIEnv *jni, jmethodID m, struct wbuf *w);
void djx_error_locked(const char *msg);
/* Appends the record rec[0..len) preceded by METHOD records for the ids
 * (any order, duplicates and 0 allowed) not yet described. If time_off is
 * not (size_t)-1 the u64 at rec + time_off is stamped under the lock.
 * Returns 0 appended, 1 the session is over (nothing appended), -1 no room. */
int djx_emit(JNIEnv *jni, const uint64_t *ids, size_t nids, uint8_t *rec, size_t len, size_t time_off);
#define DJX_NO_TIME ((size_t)-1)

/* Appends a FREE record for tag (mu held); 0, or -1 when the buffer is full.
 * The _at form stamps it t: an object found dead after a GC died in it, so
 * FREE carries that GC's end, earlier than records sent since. */
int djx_free_locked(uint64_t tag);
int djx_free_at_locked(uint64_t tag, uint64_t t);

/* big.c: objects tracked without tags (G1 humongous). */
int djx_big_init(void);             /* 0, or -1 when /proc/self/mem is unreadable */
int djx_big_wants(uint64_t size);   /* track an object of this size untagged */
int djx_big_add_locked(uint64_t tag, uint64_t addr, uint64_t size);
int djx_big_check(void);            /* after a GC; -1 if a FREE was dropped */
int djx_big_pending_locked(void);   /* a GC finished since the last check */
void djx_big_reset_locked(void);
size_t djx_big_count_locked(void);
size_t djx_big_addrs_locked(uint64_t *out, size_t max);

/* track.c: objects followed through GCs by JNI weak references. */
uint64_t djx_weak_addr(jweak ref);                 /* 0: cleared (dead) */
int djx_track_add_locked(uint64_t tag, jweak ref, uint64_t addr); /* -1: out of memory */
size_t djx_track_count_locked(void);
int djx_track_pending_locked(void);                /* a GC finished since the last scan */
int djx_track_addrs_locked(uint64_t *out, size_t max);
int djx_track_scan(JNIEnv *jni, int (*flush)(void)); /* FREE and RECONCILE; -1: connection failed */
void djx_track_release(JNIEnv *jni);               /* jni NULL: VM death, references left */

/* census.c: returns 0, or -1 when the connection failed. */
int djx_census(JNIEnv *jni, uint32_t kind, int holders, uint64_t budget_ns, int (*flush)(void));

/* vmstructs.c: HotSpot's vmStructs tables, read in-process. */
int djx_vm_init(char *err, size_t errlen); /* 0, or -1 (not HotSpot) with err */
void *djx_vm_static(const char *type, const char *field); /* a static's address, or NULL */
int djx_vm_offset(const char *type, const char *field, uint64_t *off);
int djx_vm_type_size(const char *type, uint64_t *size);
int djx_vm_flag(const char *name); /* a bool -XX flag: 0, 1, or -1 absent */

/* types.c: data types (option types=1). The writer runs start and resend
 * (0, or -1 when the connection failed); ClassPrepare calls prepare. */
#define DJX_CLASS_MAX_FIELDS 4096 /* per CLASS record, inherited ones included */
int djx_types_start(JNIEnv *jni, int (*flush)(void));
int djx_types_resend(JNIEnv *jni, int (*flush)(void));
void djx_types_prepare(jvmtiEnv *j, JNIEnv *jni, jclass k);
void djx_types_release(jvmtiEnv *j); /* before the GC events go off */
void djx_types_reset_locked(void);   /* teardown */

/* stacks.c */
int djx_stacks_install(int sig, char *err, size_t errlen); /* 0 or -1 */
void djx_stacks_start(void);  /* the handler starts recording */
void djx_stacks_stop(void);   /* the handler goes back to ignoring/chaining */
void djx_stacks_uninstall(void); /* a failed session: the previous action back */
void djx_stacks_release(void);   /* session end: ring and eventfd freed */
int djx_stacks_key_ok(void);     /* HotSpot's thread key was found (at install) */
int djx_stacks_confirm(JNIEnv *env); /* writer, attached: the handler may use the key */
int djx_stacks_evfd(void);    /* eventfd the handler kicks; -1 if none */
void djx_stacks_unblock(void); /* on the writer thread */
int djx_stacks_drain(JNIEnv *jni); /* 0 ring empty, -1 buffer full, 1 session over */

/* code.c */
void djx_code_callbacks(jvmtiEventCallbacks *cb);
void djx_code_caps(jvmtiEnv *j);               /* before the session: capabilities */
void djx_code_start(jvmtiEnv *j, JNIEnv *jni); /* enable events, replay existing code */
void djx_code_release(jvmtiEnv *j);            /* detach: events off, capability back */
int djx_writer_stalled(void); /* the loader has not read for a while: don't wait for space */
void djx_writer_release_if_done(void); /* start_session's last step (writer.c) */

/* writer.c */
int djx_connect(const char *path, char *err, size_t errlen);
int djx_writer_start(void);         /* 0 or errno */
void djx_writer_abort(void);        /* stop a writer whose session failed to start */
void djx_kick_locked(void);         /* wake the writer; mu held */
int djx_append_locked(const uint8_t *p, size_t n, uint32_t nrec); /* 0 or -1 if full */

#endif
