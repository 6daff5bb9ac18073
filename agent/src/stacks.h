/* Access stacks: the signal handler that records a thread's Java stack
 * with AsyncGetCallTrace into a lock-free ring, and the ring's drain. */
#ifndef DJX_STACKS_H
#define DJX_STACKS_H

#include <jni.h>
#include <stddef.h>

/* Session start (session.c), on the session's thread. */
int djx_stacks_install(int sig, char *err, size_t errlen); /* 0, or -1 with err */
int djx_stacks_key_ok(void);     /* HotSpot's thread key was found (at install) */
void djx_stacks_start(void);     /* the handler starts recording */
void djx_stacks_uninstall(void); /* a failed session: the previous action back */

/* Session end: stop under the session lock, then release (writer thread). */
void djx_stacks_stop(void);    /* the handler goes back to ignoring/chaining */
void djx_stacks_reset_locked(void); /* before a session */
void djx_stacks_release(void); /* ring and eventfd freed */

/* The writer thread. */
void djx_stacks_unblock(void);       /* take our signal on this thread too */
int djx_stacks_confirm(JNIEnv *env); /* attached: the handler may use the key; 0, or -1 */
int djx_stacks_evfd(void);           /* eventfd the handler kicks; -1 if none */
int djx_stacks_drain(JNIEnv *jni);   /* 0 ring empty, -1 batch full, 1 session over */

#endif
