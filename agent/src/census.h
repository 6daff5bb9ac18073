/* The census of objects that existed before the profile (docs/census.md):
 * on the loader's 'C' (option census=1|2), and of large objects after GCs
 * (option recensus=MS). Writer thread only. */
#ifndef DJX_CENSUS_H
#define DJX_CENSUS_H

#include <jni.h>
#include <stdint.h>

/* 'C': a census of all objects of at least minsize, with their holders
 * when census=2. 0, or -1 the connection failed. */
int djx_census_run(JNIEnv *jni);
/* After a GC: a census of large objects, when due (see census.c). since is
 * when the session started. 0, or -1 the connection failed. */
int djx_census_after_gc(JNIEnv *jni, uint64_t since);
/* Before a new session in the same library: no census ran yet. */
void djx_census_reset_locked(void);

#endif
