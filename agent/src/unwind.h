/* The calling thread's Java stack, walked in-process from HotSpot's own
 * structures (the code cache's segment map and blob headers, read through
 * vmStructs) instead of JVMTI GetStackTrace: for sampled allocations. The
 * frames are raw, as the BPF unwinder writes them (bpf/hotspot_unwind.h);
 * the loader names them from the JVM's memory. */
#ifndef DJX_UNWIND_H
#define DJX_UNWIND_H

#include <stddef.h>
#include <stdint.h>

/* Frame kinds in the low bits of blob (enum unwind_kind). */
#define DJX_UW_SIZED 1u /* a blob with a fixed frame: a = pc, b = its compile id */
#define DJX_UW_FP 2u    /* an rbp-linked blob: a = the interpreter's Method* slot, b = its bcp slot */

/* Why a walk ended (enum unwind_end). */
#define DJX_UW_END_DEPTH 0u
#define DJX_UW_END_ENTRY 1u  /* a Java frame returned into native code: complete */
#define DJX_UW_END_NO_JAVA 2u
#define DJX_UW_END_READ 3u   /* a word outside the thread's stack or the code heap */
#define DJX_UW_END_SEGMAP 4u
#define DJX_UW_END_FRAME 5u
/* A virtual thread's lower frames are frozen in its StackChunk (the return
 * barrier): the caller asks JVMTI, which reads them. */
#define DJX_UW_END_FROZEN 16u

struct djx_raw_frame {
	uint64_t blob; /* blob start | kind */
	uint64_t a, b;
};

/* Reads the code cache's layout; 0, or -1 with err (not HotSpot, a layout
 * this walk does not know). Once the VM is initialised. */
int djx_unwind_init(char *err, size_t errlen);
int djx_unwind_ready(void);

/* Walks the calling thread's frames from the caller's: up to max Java-side
 * frames into out. Returns how many, with *end; 0 when there were none. A
 * virtual thread's (env: the thread's JNIEnv, or NULL) end at its entry. */
int djx_unwind_self(struct djx_raw_frame *out, int max, uint32_t *end, const void *env);

#endif
