/* The batch writer: the socket, the batch buffers and the session lock.
 * The emitter (emit.c) appends records to the current batch under the
 * lock; the writer thread (session.c) cuts the batch with djx_flush, which
 * adds STATS (from djx_stats) and BYE, and sends it. All socket I/O is
 * here. */
#ifndef DJX_WRITER_H
#define DJX_WRITER_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "djx.h"

/* The tail of a batch kept free for STATS and BYE, and the most records
 * one batch can hold. */
#define DJX_BUF_RESERVE 512u
#define DJX_BATCH_ROOM (DJX_BUF_CAP - DJX_BUF_RESERVE - DJX_HDR_LEN)

/* The session lock guards the batch and whatever a module marks "under
 * the lock". No thread holds it across a JVM call or for longer than a
 * copy or a short table walk: GarbageCollectionStart takes it inside the
 * pause, before anything moves. */
void djx_lock(void);
void djx_unlock(void);
int djx_cond_timedwait_locked(pthread_cond_t *cv, const struct timespec *deadline);

/* Session start: connect (0, or -1 with err), then the buffers and the
 * eventfd (0 or -1). djx_writer_close undoes both for a start that failed. */
int djx_writer_connect(const char *path, char *err, size_t errlen);
int djx_writer_buffers(void);
void djx_writer_reset_locked(void); /* before a session: not kicked, stopping or stalled */
void djx_writer_close(void);

/* Lock held. */
int djx_room_locked(size_t need); /* need more bytes fit the batch (never once detached) */
uint8_t *djx_claim_locked(size_t n, uint32_t nrec); /* n bytes of nrec records, or NULL: no room */
int djx_append_locked(const uint8_t *p, size_t n, uint32_t nrec); /* 0, or -1 no room */
void djx_kick_locked(void);  /* wake the writer thread */
int djx_kicked_locked(void); /* woken since the last cut */
int djx_detached_locked(void); /* the session is over: no batch any more */
void djx_writer_stopping_locked(uint64_t now); /* VMDeath: sends give up soon after now */
void djx_writer_detach_locked(void); /* session end: buffers and eventfd gone */

int djx_detached(void);       /* any thread, without the lock (acquire) */
int djx_writer_stalled(void); /* any thread: the loader has not read for a while */

/* Writer thread only. */
int djx_flush(const char *bye); /* cut and send the batch: 0, or -1 the connection failed */
int djx_writer_fd(void);        /* the socket, for poll */
int djx_writer_evfd(void);      /* kicked when the batch is half full; -1 once detached */
ssize_t djx_writer_recv(uint8_t *in, size_t n); /* recv(2), nonblocking */
int djx_writer_quit_pending(void); /* the loader sent 'Q' or closed: peeks, consumes nothing */
void djx_writer_hang_up(void);  /* last: the spare buffer freed, input drained, socket closed */

#endif
