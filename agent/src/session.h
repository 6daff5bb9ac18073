/* The session: its start (connect, HELLO, the writer thread, the events),
 * the writer thread's loop (batches, the loader's commands, the work after
 * GCs) and its end (giving the capabilities back). */
#ifndef DJX_SESSION_H
#define DJX_SESSION_H

#include <jvmti.h>
#include <stddef.h>

/* Connects, queues HELLO, starts the writer thread and enables the events.
 * 0, or -1 with err set and nothing left running. */
int djx_session_start(jvmtiEnv *j, char *err, size_t errlen);
/* Before a second session in this copy of the library (a later attach
 * loads the same one): waits up to a second for the last session's end.
 * 0, the state reset for a new session, or -1 while a session runs. */
int djx_session_reuse(void);
void djx_session_vm_death(void); /* the final flush, waited for up to 2 s */
void djx_session_gc_start(void);
void djx_session_gc_finish(void);

#endif
