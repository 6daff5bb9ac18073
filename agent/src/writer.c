/* The batch writer: the socket, the two batch buffers and the session
 * lock. Threads append records to the current batch under the lock (through
 * the emitter); the writer thread cuts it, adds STATS and BYE, and sends
 * it. All socket I/O happens here. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "djx.h"
#include "stats.h"
#include "util.h"
#include "wbuf.h"
#include "writer.h"

#define BUF_KEEP (256u << 10)           /* resident part of a batch buffer after a flush */
#define TRIM_AFTER 10                   /* small batches in a row before a buffer is trimmed */
#define STOP_DEADLINE_NS 1500000000ull /* VMDeath waits 2 s for the final flush */
#define SEND_SLOW_NS 100000000ull      /* callbacks stop waiting for buffer space */
#define SEND_STALL_NS 5000000000ull    /* the session ends */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static struct {
	int sock, evfd;
	/* Under mu. */
	uint8_t *cur; /* batch being filled; first DJX_HDR_LEN bytes are the header */
	size_t cur_len;
	uint32_t cur_n;
	int kicked;       /* writer thread already woken for a half-full buffer */
	int detached;     /* buffers gone: callbacks must not touch them (atomic reads too) */
	uint64_t stop_ns; /* when VMDeath asked for the final flush; 0: it did not */
	/* Writer thread only. */
	uint8_t *spare;
	struct {
		uint8_t *b;
		size_t dirty; /* bytes written since its last trim */
	} dirt[2];
	unsigned small; /* batches in a row of at most BUF_KEEP */
	uint64_t cpu0;  /* the process's CPU time when the session started */
	int stalled;   /* atomic: send_all has waited on the loader past SEND_SLOW_NS */
} wr = {.sock = -1, .evfd = -1};

void djx_lock(void)
{
	pthread_mutex_lock(&mu);
}

void djx_unlock(void)
{
	pthread_mutex_unlock(&mu);
}

int djx_cond_timedwait_locked(pthread_cond_t *cv, const struct timespec *deadline)
{
	return pthread_cond_timedwait(cv, &mu, deadline);
}

int djx_writer_connect(const char *path, char *err, size_t errlen)
{
	struct sockaddr_un sa;
	struct timeval tv = {.tv_sec = 2};
	size_t n = strlen(path);
	int fd, fl;

	wr.cpu0 = djx_cpu_ns(CLOCK_PROCESS_CPUTIME_ID);
	memset(&sa, 0, sizeof sa);
	sa.sun_family = AF_UNIX;
	if (n >= sizeof sa.sun_path) {
		snprintf(err, errlen, "socket path too long: %s", path);
		return -1;
	}
	memcpy(sa.sun_path, path, n);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	/* A unix connect blocks only while the listener's backlog is full;
	 * SO_SNDTIMEO bounds that wait. The socket is nonblocking afterwards. */
	if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) != 0 ||
	    connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
		snprintf(err, errlen, "connect %s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0) {
		snprintf(err, errlen, "fcntl: %s", strerror(errno));
		close(fd);
		return -1;
	}
	wr.sock = fd;
	return 0;
}

int djx_writer_buffers(void)
{
	wr.evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	wr.cur = malloc(DJX_BUF_CAP);
	wr.spare = malloc(DJX_BUF_CAP);
	wr.cur_len = DJX_HDR_LEN;
	wr.cur_n = 0;
	memset(wr.dirt, 0, sizeof wr.dirt);
	wr.small = 0;
	if (wr.evfd < 0 || wr.cur == NULL || wr.spare == NULL)
		return -1;
	/* After a session in the same library: callbacks append again, now
	 * that the buffers exist. */
	djx_lock();
	__atomic_store_n(&wr.detached, 0, __ATOMIC_RELEASE);
	djx_unlock();
	return 0;
}

/* Before a session; detached stays set until the buffers exist. */
void djx_writer_reset_locked(void)
{
	wr.kicked = 0;
	wr.stop_ns = 0;
	__atomic_store_n(&wr.stalled, 0, __ATOMIC_RELAXED);
}

void djx_writer_close(void)
{
	free(wr.cur);
	free(wr.spare);
	wr.cur = wr.spare = NULL;
	if (wr.evfd >= 0)
		close(wr.evfd);
	wr.evfd = -1;
	if (wr.sock >= 0)
		close(wr.sock);
	wr.sock = -1;
}

void djx_kick_locked(void)
{
	uint64_t one = 1;
	if (wr.evfd >= 0 && !wr.kicked) {
		wr.kicked = 1;
		if (write(wr.evfd, &one, sizeof one) < 0) {
			/* EAGAIN: the counter is already nonzero, the writer will wake. */
		}
	}
}

int djx_kicked_locked(void)
{
	return wr.kicked;
}

int djx_room_locked(size_t need)
{
	return wr.cur != NULL && wr.cur_len + need <= DJX_BUF_CAP - DJX_BUF_RESERVE;
}

uint8_t *djx_claim_locked(size_t n, uint32_t nrec)
{
	uint8_t *p;

	if (!djx_room_locked(n))
		return NULL;
	p = wr.cur + wr.cur_len;
	wr.cur_len += n;
	wr.cur_n += nrec;
	if (wr.cur_len > DJX_BUF_CAP / 2)
		djx_kick_locked();
	return p;
}

int djx_append_locked(const uint8_t *p, size_t n, uint32_t nrec)
{
	uint8_t *to = djx_claim_locked(n, nrec);

	if (to == NULL)
		return -1;
	memcpy(to, p, n);
	return 0;
}

int djx_detached_locked(void)
{
	return wr.detached;
}

int djx_detached(void)
{
	return __atomic_load_n(&wr.detached, __ATOMIC_ACQUIRE);
}

void djx_writer_stopping_locked(uint64_t now)
{
	wr.stop_ns = now;
}

static int stop_expired(void)
{
	int expired;
	pthread_mutex_lock(&mu);
	expired = wr.stop_ns != 0 && djx_now_ns() - wr.stop_ns > STOP_DEADLINE_NS;
	pthread_mutex_unlock(&mu);
	return expired;
}

int djx_writer_stalled(void)
{
	return __atomic_load_n(&wr.stalled, __ATOMIC_RELAXED);
}

/* Sends all of p or fails; a half-sent batch would corrupt the stream, so
 * the only way out of a stalled peer is giving up the connection. A loader
 * that reads nothing for SEND_STALL_NS (stopped, or its stderr blocked) is
 * given up: the JVM must not wait on it. */
static int send_all(const uint8_t *p, size_t n)
{
	uint64_t since = djx_now_ns();

	while (n > 0) {
		struct pollfd pf = {.fd = wr.sock, .events = POLLOUT};
		ssize_t w = send(wr.sock, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
		uint64_t now;
		if (w > 0) {
			p += w;
			n -= (size_t)w;
			since = djx_now_ns();
			__atomic_store_n(&wr.stalled, 0, __ATOMIC_RELAXED);
			continue;
		}
		now = djx_now_ns();
		if (now - since > SEND_SLOW_NS)
			__atomic_store_n(&wr.stalled, 1, __ATOMIC_RELAXED);
		if (now - since > SEND_STALL_NS)
			return -1;
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
			return -1;
		if (poll(&pf, 1, 50) > 0 && (pf.revents & (POLLERR | POLLHUP)))
			return -1;
		if (stop_expired())
			return -1;
	}
	return 0;
}

static inline uint64_t ld(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}

/* A big batch (the attach-time replay of JIT code fills megabytes) leaves
 * its pages resident for the rest of the session: 8 MB of the JVM's RSS for
 * two buffers. Give back all but the first BUF_KEEP bytes; the pages come
 * back zeroed on the next big batch. */
static void trim(uint8_t *b, size_t used)
{
	uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t lo = ((uintptr_t)b + BUF_KEEP + pg - 1) & ~(pg - 1);
	uintptr_t hi = ((uintptr_t)b + used + pg - 1) & ~(pg - 1);
	uintptr_t end = ((uintptr_t)b + DJX_BUF_CAP) & ~(pg - 1); /* our pages only */

	if (hi > end)
		hi = end;
	if (hi > lo)
		madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

/* Trims buffer b once TRIM_AFTER small batches followed its big one: each
 * madvise and the faults that refill its pages cost TLB shootdowns, dear in
 * a VM, and big batches come in runs (class dumps, censuses). Writer only. */
static void after_send(uint8_t *b, size_t len)
{
	int i = wr.dirt[0].b == b ? 0 : wr.dirt[1].b == b ? 1 : wr.dirt[0].b == NULL ? 0 : 1;

	wr.dirt[i].b = b;
	if (len > wr.dirt[i].dirty)
		wr.dirt[i].dirty = len;
	wr.small = len > BUF_KEEP ? 0 : wr.small + 1;
	if (wr.small >= TRIM_AFTER && wr.dirt[i].dirty > BUF_KEEP) {
		trim(b, wr.dirt[i].dirty);
		wr.dirt[i].dirty = BUF_KEEP;
	}
}

/* STATS, from djx_stats and the clocks; mu held. */
static void put_stats(struct wbuf *w)
{
	const struct djx_stats *s = &djx_stats;
	size_t start = wb_begin(w, REC_STATS);

	wb_u64(w, ld(&s->callbacks));
	wb_u64(w, ld(&s->below_minsize));
	wb_u64(w, ld(&s->dropped));
	wb_u64(w, ld(&s->stack_errors));
	wb_u64(w, ld(&s->allocs_sent));
	wb_u64(w, ld(&s->frees));
	wb_u64(w, ld(&s->gcs));
	wb_u64(w, ld(&s->reconciles));
	wb_u64(w, ld(&s->reconciled));
	wb_u64(w, ld(&s->reconcile_skipped));
	wb_u64(w, ld(&s->reconcile_limited));
	wb_u64(w, ld(&s->reconcile_ns));
	wb_u64(w, ld(&s->stack_signals));
	wb_u64(w, ld(&s->stacks_sent));
	wb_u64(w, ld(&s->stacks_dropped));
	wb_u64(w, ld(&s->code_sent));
	wb_u64(w, ld(&s->code_dropped));
	wb_u64(w, ld(&s->signals_chained));
	wb_u64(w, ld(&s->untagged));
	wb_u64(w, ld(&s->untagged_freed));
	wb_u64(w, ld(&s->alloc_ns));
	wb_u64(w, ld(&s->stack_ns));
	wb_u64(w, ld(&s->code_ns));
	/* The writer thread is created per session: its clock is ours alone. */
	wb_u64(w, djx_thread_ns());
	wb_u64(w, djx_cpu_ns(CLOCK_PROCESS_CPUTIME_ID) - wr.cpu0);
	wb_u64(w, ld(&s->tracked));
	wb_u64(w, ld(&s->tracked_live));
	wb_u64(w, ld(&s->census_ns));
	wb_u64(w, ld(&s->classes_sent));
	wb_u64(w, ld(&s->classes_dropped));
	wb_u64(w, ld(&s->types_ns));
	wb_u64(w, ld(&s->raw_stacks));
	wb_u64(w, ld(&s->raw_fallbacks));
	wb_end(w, start);
}

static void put_batch_hdr(uint8_t *b, size_t len, uint32_t nrec, uint64_t watermark)
{
	put_u32(b, DJX_MAGIC);
	b[4] = DJX_VERSION;
	b[5] = 0;
	b[6] = b[7] = 0; /* flags */
	put_u32(b + 8, (uint32_t)(len - DJX_HDR_LEN));
	put_u32(b + 12, nrec);
	put_u64(b + 16, watermark);
}

/* Cuts the current batch (adding STATS, and BYE if bye != NULL) and sends it. */
int djx_flush(const char *bye)
{
	struct wbuf w;
	uint8_t *b;
	uint32_t n;
	uint64_t wm;
	size_t start;
	int rc;

	pthread_mutex_lock(&mu);
	if (wr.detached || wr.cur == NULL) {
		pthread_mutex_unlock(&mu);
		return -1;
	}
	b = wr.cur;
	/* The reserve at the tail always fits STATS and BYE. */
	wb_init(&w, b, DJX_BUF_CAP, 1);
	w.len = wr.cur_len;
	n = wr.cur_n + 1;
	put_stats(&w);
	if (bye) {
		start = wb_begin(&w, REC_BYE);
		wb_str(&w, bye);
		wb_end(&w, start);
		n++;
	}
	/* Records take their timestamp under mu, so every record stamped at or
	 * before wm is in this batch or an earlier one. */
	wm = djx_now_ns();
	wr.cur = wr.spare;
	wr.cur_len = DJX_HDR_LEN;
	wr.cur_n = 0;
	wr.kicked = 0;
	wr.spare = NULL;
	pthread_mutex_unlock(&mu);

	put_batch_hdr(b, w.len, n, wm);
	rc = w.err ? -1 : send_all(b, w.len);
	after_send(b, w.len);
	wr.spare = b;
	return rc;
}

int djx_writer_fd(void)
{
	return wr.sock;
}

int djx_writer_evfd(void)
{
	return wr.evfd;
}

ssize_t djx_writer_recv(uint8_t *in, size_t n)
{
	return recv(wr.sock, in, n, MSG_DONTWAIT);
}

/* Peeks, so that the writer thread still reads the command afterwards. */
int djx_writer_quit_pending(void)
{
	char b[64];
	ssize_t n;

	if (wr.sock < 0)
		return 0;
	n = recv(wr.sock, b, sizeof b, MSG_PEEK | MSG_DONTWAIT);
	return n == 0 || (n > 0 && memchr(b, 'Q', (size_t)n) != NULL);
}

void djx_writer_detach_locked(void)
{
	__atomic_store_n(&wr.detached, 1, __ATOMIC_RELEASE);
	free(wr.cur);
	wr.cur = NULL;
	close(wr.evfd); /* kicks happen under mu and check evfd */
	wr.evfd = -1;
}

/* The socket closes last: the loader exits at its EOF, and a profile started
 * right after must find the heap-sampling capability free. */
void djx_writer_hang_up(void)
{
	uint8_t junk[256];

	free(wr.spare);
	wr.spare = NULL;
	/* Unread input makes close() report ECONNRESET to the peer instead of EOF. */
	while (recv(wr.sock, junk, sizeof junk, MSG_DONTWAIT) > 0)
		;
	close(wr.sock);
	wr.sock = -1;
}
