/* Sampled allocations: the SampledObjectAlloc event, ALLOC records, tags
 * for tracking, and the callback budget that raises the sampling
 * interval. */
#ifndef DJX_ALLOC_H
#define DJX_ALLOC_H

#include <jvmti.h>
#include <stddef.h>
#include <stdint.h>

jvmtiError djx_alloc_set_interval(jvmtiEnv *j); /* the configured interval */
void djx_alloc_reset_locked(void);              /* before a session: not disabled, paused or raw */
void djx_alloc_start(void);                     /* session start, before the event is on */
jvmtiError djx_alloc_enable(jvmtiEnv *j);
void djx_alloc_stop(jvmtiEnv *j);          /* a session that failed to start */
void djx_alloc_disable(jvmtiEnv *j);       /* session end: off for good (once, from any thread) */
void djx_alloc_pause(jvmtiEnv *j, int on); /* the loader's 'P' and 'R', on the writer thread */
uint64_t djx_alloc_interval(void);         /* the interval in force */
/* The loader's 'A': allocation stacks walked in-process from now on
 * (unwind.h), GetStackTrace where a walk finds no whole stack. 0, or -1
 * with err: this JVM's code cache cannot be walked. */
int djx_alloc_raw_stacks(char *err, size_t errlen);

/* The SampledObjectAlloc callback's work (agent.c). */
void djx_alloc_sampled(jvmtiEnv *j, JNIEnv *jni, jobject object, jclass klass, jlong size);

#endif
