/* GC epochs: GarbageCollectionStart/Finish, counted under the session
 * lock, and the GC events' capability that tracking (tags, FREE,
 * RECONCILE) needs. Raw reads of object memory (weak-reference slots,
 * mirrors, headers) are trusted only within one epoch: between a finish
 * and the next start nothing moves. */
#ifndef DJX_EPOCH_H
#define DJX_EPOCH_H

#include <jvmti.h>
#include <stdint.h>

void djx_epoch_caps(jvmtiEnv *j);    /* Agent setup: ask for the capability */
const char *djx_epoch_cap_err(void); /* why it was refused; NULL: granted */
int djx_epoch_events(void);          /* GC events on: objects get tags */
void djx_epoch_enable(jvmtiEnv *j);  /* session start; a failure turns tracking off, with an ERROR */
void djx_epoch_disable(jvmtiEnv *j); /* a session that failed to start */
/* Session end: events off, and their capability added to caps for the
 * caller's RelinquishCapabilities. */
void djx_epoch_release(jvmtiEnv *j, jvmtiCapabilities *caps);

/* The GC callbacks (session.c), lock held: count every GC, attached or
 * not (a session torn down inside a pause must not strand a start
 * without its finish), and append GC_START or GC_FINISH while attached. */
void djx_epoch_start_locked(void);
void djx_epoch_finish_locked(void);
/* Before a session starts, GC events off: no GC counted yet. */
void djx_epoch_reset_locked(void);

/* Lock held. */
uint64_t djx_epoch_starts_locked(void);   /* GCs started: the epoch */
uint64_t djx_epoch_finishes_locked(void); /* GCs finished */
int djx_epoch_idle_locked(void);          /* no GC in progress */
uint64_t djx_epoch_last_end_locked(void); /* when the latest GC finished */

/* Take the lock: begin is 0 (the epoch in *s) when no GC runs and the
 * session is on; same is whether *s still holds. */
int djx_epoch_begin(uint64_t *s);
int djx_epoch_same(uint64_t s);
/* The writer thread waiting out a GC: naps 1 ms; -1 when it should stop
 * waiting (the loader quit or went away, or a GC seems never to end).
 * *since: 0 before the first nap. */
int djx_epoch_nap(uint64_t *since);

#endif
