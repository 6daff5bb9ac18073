/* Clocks, logging and small JVMTI helpers every module may use. */
#ifndef DJX_UTIL_H
#define DJX_UTIL_H

#include <jvmti.h>
#include <stdint.h>
#include <time.h>

#define DJX_LOG "djx-bpf agent: "

uint64_t djx_now_ns(void);             /* CLOCK_MONOTONIC, bpf_ktime_get_ns's clock */
uint64_t djx_cpu_ns(clockid_t clock);  /* CLOCK_PROCESS/THREAD_CPUTIME_ID; 0 on error */
/* The calling thread's CPU time: callbacks' costs are counted in it, as
 * wall time also counts the time the thread waited for a CPU. */
static inline uint64_t djx_thread_ns(void)
{
	return djx_cpu_ns(CLOCK_THREAD_CPUTIME_ID);
}
uint32_t djx_tid(void); /* the kernel's id of the calling thread */
/* One line on stderr, prefixed with DJX_LOG. */
__attribute__((format(printf, 1, 2))) void djx_log(const char *fmt, ...);
void djx_dealloc(jvmtiEnv *j, void *p); /* JVMTI Deallocate; p may be NULL */
int djx_cmp_u64(const void *a, const void *b); /* qsort and bsearch of uint64_t, ascending */
/* A JVMTI environment of its own for a heap walk (tags, and with lines
 * the frames' line numbers and, at start-up only, local names); NULL
 * when the JVM refuses one. Its tags go with DisposeEnvironment. */
jvmtiEnv *djx_private_env(JavaVM *vm, int lines);

#endif
