/* The wire format the agent speaks (sources/agentwire/wire.go documents it;
 * agentwire's tests check these constants), and the limits on what its
 * records carry. Everything in the library has hidden visibility
 * (-fvisibility=hidden), so every copy loaded into one JVM keeps its own
 * state. */
#ifndef DJX_H
#define DJX_H

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
	REC_ROOT = 22,
	REC_ROOTS_END = 23,
	REC_ALLOC_RAW = 24,
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

/* ROOTS_END status bits (agentwire.RootsStatus); 0: every root sent. */
#define DJX_ROOTS_FAILED 0x1u  /* a JVMTI call failed or memory ran out; see the note */
#define DJX_ROOTS_CAPPED 0x2u  /* more roots than a pass keeps: the first ones */
#define DJX_ROOTS_REFUSED 0x4u /* this JVM's object addresses cannot be read safely: none sent */
#define DJX_ROOTS_NO_VM 0x8u   /* the VM's own roots left out but the first (JDK < 21: see roots.c) */

#define DJX_STACK_NO_ENV (-100) /* STACK status: a thread without a JNIEnv (agentwire.StackNoEnv) */
/* A signal is the stack handler's if the kernel sent it (SI_KERNEL:
 * bpf_send_signal_thread) or if it was queued (SI_QUEUE) with this
 * si_value.sival_int ("DJXS"): tests, and loaders without BPF, signal
 * threads with rt_tgsigqueueinfo. */
#define DJX_STACK_COOKIE 0x534A5844

/* Agent_OnAttach's return code when another JVMTI environment holds the
 * heap-sampling capability (it is "always solo" in HotSpot: one environment
 * at a time). The loader maps it to an actionable message. */
#define DJX_RC_SAMPLER_BUSY 98

/* Limits on what records carry; agentwire's Reader keeps at least these. */
#define DJX_MAX_FRAMES 64            /* ALLOC frames */
#define DJX_STACK_FRAMES 128         /* STACK frames */
#define DJX_MAX_LINES 16384          /* line-table entries per METHOD record */
#define DJX_CLASS_MAX_FIELDS 4096    /* per CLASS record, inherited ones included */
#define DJX_BUF_CAP (4u << 20)       /* one batch, header included */

#endif
