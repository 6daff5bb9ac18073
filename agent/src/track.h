/* Tracked objects: tags, and a JNI weak reference per object, read after
 * every GC for FREE and RECONCILE. */
#ifndef DJX_TRACK_H
#define DJX_TRACK_H

#include <jni.h>
#include <stddef.h>
#include <stdint.h>

uint64_t djx_track_next_tag(void); /* a new tag, from 1 (any thread) */
uint64_t djx_weak_addr(jweak ref); /* the object's address; 0: cleared (dead) */

/* Lock held. */
int djx_track_add_locked(uint64_t tag, jweak ref, uint64_t addr); /* the table owns ref; -1: out of memory */
size_t djx_track_count_locked(void);
/* How many of tags (sorted) are tracked still: the others were freed. */
size_t djx_track_alive_locked(const uint64_t *tags, size_t n);
int djx_track_pending_locked(void); /* a GC finished since the last scan */
int djx_track_addrs_locked(uint64_t *out, size_t max);

/* Writer thread. */
int djx_track_scan(JNIEnv *jni);     /* FREE and RECONCILE after a GC; -1: connection failed */
void djx_track_release(JNIEnv *jni); /* session end; jni NULL: VM death, references left */
void djx_track_reset_locked(void);   /* before a session, lock held */

#endif
