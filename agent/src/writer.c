/* Socket and writer thread. Allocating threads only append to a buffer
 * under djx.mu, and all socket I/O happens here. The writer is attached to
 * the VM as a daemon thread, so it can call JNI and JVMTI: it scans the
 * tracked objects after GCs, runs the census, and gives the capabilities
 * back on detach. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "djx.h"

#define STOP_DEADLINE_NS 1500000000ull /* VMDeath waits 2 s for the final flush */
#define SEND_SLOW_NS 100000000ull      /* callbacks stop waiting for buffer space */
#define SEND_STALL_NS 5000000000ull    /* the session ends */

int djx_connect(const char *path, char *err, size_t errlen)
{
	struct sockaddr_un sa;
	struct timeval tv = {.tv_sec = 2};
	size_t n = strlen(path);
	int fd, fl;

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
	return fd;
}

void djx_kick_locked(void)
{
	uint64_t one = 1;
	if (djx.evfd >= 0 && !djx.kicked) {
		djx.kicked = 1;
		if (write(djx.evfd, &one, sizeof one) < 0) {
			/* EAGAIN: the counter is already nonzero, the writer will wake. */
		}
	}
}

int djx_append_locked(const uint8_t *p, size_t n, uint32_t nrec)
{
	if (djx.cur == NULL || djx.cur_len + n > DJX_BUF_CAP - DJX_BUF_RESERVE)
		return -1;
	memcpy(djx.cur + djx.cur_len, p, n);
	djx.cur_len += n;
	djx.cur_n += nrec;
	if (djx.cur_len > DJX_BUF_CAP / 2)
		djx_kick_locked();
	return 0;
}

static int stop_expired(void)
{
	int expired;
	pthread_mutex_lock(&djx.mu);
	expired = djx.stop && djx_now_ns() - djx.stop_ns > STOP_DEADLINE_NS;
	pthread_mutex_unlock(&djx.mu);
	return expired;
}

static int send_stalled; /* send_all has waited on the loader past SEND_SLOW_NS */

int djx_writer_stalled(void)
{
	return __atomic_load_n(&send_stalled, __ATOMIC_RELAXED);
}

/* Sends all of p or fails; a half-sent batch would corrupt the stream, so
 * the only way out of a stalled peer is giving up the connection. A loader
 * that reads nothing for SEND_STALL_NS (stopped, or its stderr blocked) is
 * given up: the JVM must not wait on it. */
static int send_all(const uint8_t *p, size_t n)
{
	uint64_t since = djx_now_ns();

	while (n > 0) {
		struct pollfd pf = {.fd = djx.sock, .events = POLLOUT};
		ssize_t w = send(djx.sock, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
		uint64_t now;
		if (w > 0) {
			p += w;
			n -= (size_t)w;
			since = djx_now_ns();
			__atomic_store_n(&send_stalled, 0, __ATOMIC_RELAXED);
			continue;
		}
		now = djx_now_ns();
		if (now - since > SEND_SLOW_NS)
			__atomic_store_n(&send_stalled, 1, __ATOMIC_RELAXED);
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

static inline uint64_t ld(uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}

/* A big batch (the attach-time replay of JIT code fills megabytes) leaves
 * its pages resident for the rest of the session: 8 MB of the JVM's RSS for
 * two buffers. Give back all but the first DJX_BUF_KEEP bytes; the pages
 * come back zeroed on the next big batch. */
static void trim(uint8_t *b, size_t used)
{
	uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t lo = ((uintptr_t)b + DJX_BUF_KEEP + pg - 1) & ~(pg - 1);
	uintptr_t hi = ((uintptr_t)b + used + pg - 1) & ~(pg - 1);
	uintptr_t end = ((uintptr_t)b + DJX_BUF_CAP) & ~(pg - 1); /* our pages only */

	if (hi > end)
		hi = end;
	if (hi > lo)
		madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

/* Cuts the current batch (adding STATS, and BYE if bye != NULL) and sends it. */
static int flush(const char *bye)
{
	struct wbuf w;
	uint8_t *b;
	uint32_t n;
	uint64_t wm;
	size_t start;
	int rc;

	pthread_mutex_lock(&djx.mu);
	if (djx.detached || djx.cur == NULL) {
		pthread_mutex_unlock(&djx.mu);
		return -1;
	}
	b = djx.cur;
	/* The reserve at the tail always fits STATS and BYE. */
	wb_init(&w, b, DJX_BUF_CAP, 1);
	w.len = djx.cur_len;
	n = djx.cur_n;
	start = wb_begin(&w, REC_STATS);
	wb_u64(&w, ld(&djx.n_callbacks));
	wb_u64(&w, ld(&djx.n_below));
	wb_u64(&w, ld(&djx.n_dropped));
	wb_u64(&w, ld(&djx.n_stackerr));
	wb_u64(&w, ld(&djx.n_sent));
	wb_u64(&w, ld(&djx.n_frees));
	wb_u64(&w, ld(&djx.n_gcs));
	wb_u64(&w, ld(&djx.n_reconciles));
	wb_u64(&w, ld(&djx.n_reconciled));
	wb_u64(&w, ld(&djx.n_rec_skipped));
	wb_u64(&w, ld(&djx.n_rec_limited));
	wb_u64(&w, ld(&djx.ns_reconcile));
	wb_u64(&w, ld(&djx.n_stack_signals));
	wb_u64(&w, ld(&djx.n_stacks_sent));
	wb_u64(&w, ld(&djx.n_stacks_dropped));
	wb_u64(&w, ld(&djx.n_code_sent));
	wb_u64(&w, ld(&djx.n_code_dropped));
	wb_u64(&w, ld(&djx.n_chained));
	wb_u64(&w, ld(&djx.n_big));
	wb_u64(&w, ld(&djx.n_big_freed));
	wb_u64(&w, ld(&djx.ns_alloc));
	wb_u64(&w, ld(&djx.ns_stack));
	wb_u64(&w, ld(&djx.ns_code));
	/* The writer thread is created per session: its clock is ours alone. */
	wb_u64(&w, djx_thread_ns());
	wb_u64(&w, djx_cpu_ns(CLOCK_PROCESS_CPUTIME_ID) - djx.cpu0);
	wb_u64(&w, ld(&djx.n_tracked));
	wb_u64(&w, djx_track_count_locked());
	wb_u64(&w, ld(&djx.ns_census));
	wb_u64(&w, ld(&djx.n_classes_sent));
	wb_u64(&w, ld(&djx.n_classes_dropped));
	wb_u64(&w, ld(&djx.ns_types));
	wb_end(&w, start);
	n++;
	if (bye) {
		start = wb_begin(&w, REC_BYE);
		wb_str(&w, bye);
		wb_end(&w, start);
		n++;
	}
	/* Records take their timestamp under mu, so every record stamped at or
	 * before wm is in this batch or an earlier one. */
	wm = djx_now_ns();
	djx.cur = djx.spare;
	djx.cur_len = DJX_HDR_LEN;
	djx.cur_n = 0;
	djx.kicked = 0;
	djx.spare = NULL;
	pthread_mutex_unlock(&djx.mu);

	put_u32(b, DJX_MAGIC);
	b[4] = DJX_VERSION;
	b[5] = 0;
	b[6] = b[7] = 0; /* flags */
	put_u32(b + 8, (uint32_t)(w.len - DJX_HDR_LEN));
	put_u32(b + 12, n);
	put_u64(b + 16, wm);
	rc = w.err ? -1 : send_all(b, w.len);
	if (w.len > DJX_BUF_KEEP)
		trim(b, w.len);
	djx.spare = b;
	return rc;
}

static void drain(void)
{
	uint8_t junk[256];
	/* Unread input makes close() report ECONNRESET to the peer instead of EOF. */
	while (recv(djx.sock, junk, sizeof junk, MSG_DONTWAIT) > 0)
		;
}

static void teardown(void)
{
	/* First: from here on the signal handler ignores (or chains) our
	 * signals; it never touches the batch buffers anyway. Under mu, with
	 * detached: djx_stacks_start checks it there. */
	pthread_mutex_lock(&djx.mu);
	djx_stacks_stop();
	__atomic_store_n(&djx.detached, 1, __ATOMIC_RELEASE);
	free(djx.cur);
	djx.cur = NULL;
	mset_free(&djx.methods);
	djx_types_reset_locked();
	djx_big_reset_locked();
	__atomic_store_n(&djx.untag_min, 0, __ATOMIC_RELAXED);
	close(djx.evfd); /* kicks happen under mu and check evfd */
	djx.evfd = -1;
	pthread_mutex_unlock(&djx.mu);
}

/* The socket closes last: the loader exits at its EOF, and a profile started
 * right after must find the heap-sampling capability free. */
static void hang_up(void)
{
	free(djx.spare);
	djx.spare = NULL;
	djx_stacks_release();
	drain();
	close(djx.sock);
	djx.sock = -1;

	pthread_mutex_lock(&djx.mu);
	djx.done = 1;
	pthread_cond_broadcast(&djx.donecv);
	pthread_mutex_unlock(&djx.mu);
}

/* Gives the heap-sampling capability back so that a later profile (or
 * another agent) can take it: HotSpot lets one environment hold it at a
 * time. Also switches off the GC events and gives their capability back.
 * Callbacks still in flight find djx.detached set. Needs a thread attached
 * to the VM. */
static void release_sampling(void)
{
	jvmtiCapabilities caps;
	jvmtiEnv *j = djx_cfg->jvmti;

	if (djx_cfg->opt.types)
		djx_types_release(j); /* first: it reads oops while the GC events count */
	if (!__atomic_exchange_n(&djx.disabled, 1, __ATOMIC_ACQ_REL))
		(*j)->SetEventNotificationMode(j, JVMTI_DISABLE, JVMTI_EVENT_SAMPLED_OBJECT_ALLOC, NULL);
	memset(&caps, 0, sizeof caps);
	caps.can_generate_sampled_object_alloc_events = 1;
	if (djx.gc_events) {
		(*j)->SetEventNotificationMode(j, JVMTI_DISABLE, JVMTI_EVENT_GARBAGE_COLLECTION_START, NULL);
		(*j)->SetEventNotificationMode(j, JVMTI_DISABLE, JVMTI_EVENT_GARBAGE_COLLECTION_FINISH, NULL);
		caps.can_generate_garbage_collection_events = 1;
	}
	(*j)->RelinquishCapabilities(j, &caps);
	djx_code_release(j);
}

/* 'P' pauses allocation sampling, 'R' resumes it (the loader's --control
 * disable/enable): while paused the JVM pays nothing for it, and objects
 * allocated meanwhile are not tracked. Tags, frees, GC events and JIT
 * records go on, so that tracked objects stay right. The writer is attached,
 * so it may switch the event itself. */
static void set_paused(int on)
{
	jvmtiEnv *j = djx_cfg->jvmti;

	if (on == djx.paused || __atomic_load_n(&djx.disabled, __ATOMIC_ACQUIRE))
		return;
	if ((*j)->SetEventNotificationMode(j, on ? JVMTI_DISABLE : JVMTI_ENABLE,
					   JVMTI_EVENT_SAMPLED_OBJECT_ALLOC, NULL) == JVMTI_ERROR_NONE)
		djx.paused = on;
}

/* Commands from the loader (agentwire.Command*), possibly split across reads:
 * 'Q' asks for the last batch and detach; 'H' and a u64 (little-endian)
 * track objects of at least that many bytes without weak references
 * (big.c); 'P' and 'R' pause and resume allocation sampling (only when
 * attached); 'C' runs the census; 'K' sends the classes not sent yet
 * (types=1). Other bytes are ignored. Returns 1 when
 * a 'Q' came. */
struct cmdbuf {
	uint8_t b[9];
	size_t n;
};

static int on_input(struct cmdbuf *c, const uint8_t *in, size_t len, int attached)
{
	int quit = 0;

	for (size_t i = 0; i < len; i++) {
		if (c->n == 0) {
			if (in[i] == 'Q')
				quit = 1;
			else if ((in[i] == 'P' || in[i] == 'R') && attached)
				set_paused(in[i] == 'P');
			else if (in[i] == 'H')
				c->b[c->n++] = in[i];
			else if (in[i] == 'C' && attached && djx_cfg->opt.census != 0) {
				pthread_mutex_lock(&djx.mu);
				djx.census_req = 1;
				pthread_mutex_unlock(&djx.mu);
			} else if (in[i] == 'K' && attached && djx_cfg->opt.types) {
				pthread_mutex_lock(&djx.mu);
				djx.types_req = 1;
				pthread_mutex_unlock(&djx.mu);
			}
			continue;
		}
		c->b[c->n++] = in[i];
		if (c->n == sizeof c->b) {
			uint64_t v = 0;
			for (int k = 8; k >= 1; k--)
				v = v << 8 | c->b[k];
			if (djx_big_init() == 0)
				__atomic_store_n(&djx.untag_min, v, __ATOMIC_RELAXED);
			c->n = 0;
		}
	}
	return quit;
}

/* Moves the handler's stacks into the batch, flushing when it fills.
 * Returns -1 if the connection failed. */
static int drain_stacks(JNIEnv *env)
{
	/* Bounded: the ring holds at most 128 stacks of ~2 KiB, a batch 4 MiB. */
	for (int i = 0; i < 8; i++) {
		if (djx_stacks_drain(env) >= 0)
			return 0;
		if (flush(NULL) != 0)
			return -1;
	}
	return 0;
}

static int flush_batch(void)
{
	return flush(NULL);
}

/* The heap's used bytes, from java.lang.Runtime; 0 if unknown. The writer
 * is a Java thread in native: the calls run Java code, never a pause. */
static uint64_t heap_used(JNIEnv *env)
{
	static jclass rt_class;
	static jmethodID get, total, free_;
	jobject rt;
	jlong t, f;

	if (rt_class == NULL) {
		jclass c = (*env)->FindClass(env, "java/lang/Runtime");
		if (c != NULL) {
			get = (*env)->GetStaticMethodID(env, c, "getRuntime", "()Ljava/lang/Runtime;");
			total = (*env)->GetMethodID(env, c, "totalMemory", "()J");
			free_ = (*env)->GetMethodID(env, c, "freeMemory", "()J");
			if (get != NULL && total != NULL && free_ != NULL)
				rt_class = (*env)->NewGlobalRef(env, c);
			(*env)->DeleteLocalRef(env, c);
		}
		if (rt_class == NULL) {
			(*env)->ExceptionClear(env);
			return 0;
		}
	}
	rt = (*env)->CallStaticObjectMethod(env, rt_class, get);
	if (rt == NULL || (*env)->ExceptionCheck(env)) {
		(*env)->ExceptionClear(env);
		return 0;
	}
	t = (*env)->CallLongMethod(env, rt, total);
	f = (*env)->CallLongMethod(env, rt, free_);
	(*env)->DeleteLocalRef(env, rt);
	if ((*env)->ExceptionCheck(env)) {
		(*env)->ExceptionClear(env);
		return 0;
	}
	return t > f ? (uint64_t)(t - f) : 0;
}

/* The last census after a GC: its cost (pause and writer work) and the
 * heap's used bytes then. Writer only. */
static uint64_t recensus_cost, recensus_heap;

/* A census of large objects after a GC, when the allocation budget has
 * raised the sampling interval so far that an object of min size would be
 * missed more than one time in ten (p = 1 - e^(-s/I) < 0.9, I > s/2.3).
 * At most once per recensus_ms, within the time share of djx.h, counting
 * the one it would start: its cost grows with the heap (H2's second one
 * took 53-75 ms, past the share, after its heap had grown). */
static int recensus_due(JNIEnv *env, uint64_t since, uint64_t *used)
{
	uint64_t now = djx_now_ns(), iv = __atomic_load_n(&djx.cur_interval, __ATOMIC_RELAXED), next = 0;

	*used = 0;
	if (djx_cfg->opt.recensus_ms == 0 || djx_cfg->opt.census == 0 || iv * 23 < djx_cfg->opt.minsize * 10)
		return 0;
	if (now - djx.last_census < djx_cfg->opt.recensus_ms * 1000000ull)
		return 0;
	*used = heap_used(env);
	if (recensus_heap != 0 && *used != 0)
		next = (uint64_t)((double)recensus_cost * (double)*used / (double)recensus_heap);
	return djx.recensus_ns + next <= DJX_RECENSUS_START_NS + (now - since) / DJX_RECENSUS_SHARE;
}

static int census(JNIEnv *env, uint32_t kind, uint64_t used)
{
	uint64_t before = __atomic_load_n(&djx.ns_census, __ATOMIC_RELAXED), cpu = djx_thread_ns();
	int rc = djx_census(env, kind, kind == DJX_CENSUS_ATTACH && djx_cfg->opt.census == 2,
			    djx_cfg->opt.census_budget_us * 1000ull, flush_batch);

	djx.last_census = djx_now_ns();
	/* Its cost is the pause and this thread's work on what it found,
	 * which on a heap of many large objects is more than the pause. */
	if (kind == DJX_CENSUS_AFTER_GC) {
		recensus_cost = __atomic_load_n(&djx.ns_census, __ATOMIC_RELAXED) - before +
				(djx_thread_ns() - cpu);
		recensus_heap = used;
		djx.recensus_ns += recensus_cost;
	}
	return rc;
}

static void *writer_main(void *arg)
{
	uint64_t last = djx_now_ns(), since = last, gcs_seen = 0;
	struct cmdbuf cmd = {.n = 0};
	JNIEnv *env = NULL;
	int attached = 0, vmdeath = 0, types_started = 0;
	(void)arg;
	/* Named, so that top -H and perf tell the agent's own CPU apart. */
	prctl(PR_SET_NAME, "djx-bpf writer", 0, 0, 0);
	djx_stacks_unblock();
	/* Attached as a daemon so that detach can call JVMTI (which refuses
	 * unattached threads); in native code it never holds up a safepoint. */
	if (djx_cfg->vm != NULL) {
		JavaVMAttachArgs a = {JNI_VERSION_1_6, "djx-bpf agent", NULL};
		attached = (*djx_cfg->vm)->AttachCurrentThreadAsDaemon(djx_cfg->vm, (void **)&env, &a) == JNI_OK;
	}
	if (attached && djx_stacks_confirm(env) != 0) {
		pthread_mutex_lock(&djx.mu);
		djx_error_locked("stacks: HotSpot's thread key does not hold on the writer thread: the handler asks GetEnv");
		pthread_mutex_unlock(&djx.mu);
	}
	for (;;) {
		struct pollfd pf[3] = {
			{.fd = djx.sock, .events = POLLIN},
			{.fd = djx.evfd, .events = POLLIN},
			{.fd = djx_stacks_evfd(), .events = POLLIN}, /* -1: ignored */
		};
		const char *bye = NULL;
		int stop, kicked, abort_, r, creq, kreq;
		uint64_t now, gcs, used;

		r = poll(pf, 3, (int)(DJX_FLUSH_NS / 1000000));
		if (r < 0 && errno != EINTR)
			break;
		for (int k = 1; k < 3 && r > 0; k++) {
			uint64_t v;
			if ((pf[k].revents & POLLIN) && read(pf[k].fd, &v, sizeof v) < 0) {
				/* EAGAIN: nothing pending */
			}
		}
		if (r > 0 && (pf[0].revents & (POLLIN | POLLHUP | POLLERR))) {
			uint8_t in[64];
			ssize_t got = recv(djx.sock, in, sizeof in, MSG_DONTWAIT);
			if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR))
				break; /* the loader closed the socket: detach */
			if (got > 0 && on_input(&cmd, in, (size_t)got, attached))
				bye = "detach";
		}
		pthread_mutex_lock(&djx.mu);
		stop = djx.stop;
		kicked = djx.kicked;
		abort_ = djx.abort;
		creq = djx.census_req;
		djx.census_req = 0;
		kreq = djx.types_req;
		djx.types_req = 0;
		gcs = djx.gc_finishes;
		pthread_mutex_unlock(&djx.mu);
		if (abort_)
			break;
		if (stop) {
			bye = "vmdeath";
			vmdeath = 1;
		}
		/* Stacks the signal handler left in its ring, before the cut. */
		if (attached && drain_stacks(env) != 0)
			break;
		now = djx_now_ns();
		if (bye || kicked || now - last >= DJX_FLUSH_NS) {
			if (flush(bye) != 0 || bye)
				break;
			last = now;
		}
		if (attached && djx_track_scan(env, flush_batch) != 0)
			break;
		djx_big_check(); /* a dropped FREE is counted like any drop */
		if (attached && creq && census(env, DJX_CENSUS_ATTACH, 0) != 0)
			break;
		/* Types: the first pass, after HELLO is out, dumps every class. */
		if (attached && djx_cfg->opt.types && !types_started) {
			types_started = 1;
			if (djx_types_start(env, flush_batch) != 0)
				break;
		} else if (attached && kreq && djx_types_resend(env, flush_batch) != 0) {
			break;
		}
		if (attached && gcs != gcs_seen && recensus_due(env, since, &used) &&
		    census(env, DJX_CENSUS_AFTER_GC, used) != 0)
			break;
		gcs_seen = gcs;
	}
	teardown();
	djx_track_release(attached && !vmdeath ? env : NULL);
	/* At VM death the VM is going away: no JVMTI, no detach (it could
	 * block on the final safepoint). */
	if (attached && !vmdeath)
		release_sampling();
	hang_up();
	if (attached && !vmdeath)
		(*djx_cfg->vm)->DetachCurrentThread(djx_cfg->vm);
	return NULL;
}

/* start_session enables events and the stack handler after the writer
 * starts; a writer that tore the session down meanwhile (the loader went
 * away at once) released them before they were on, so they would stay on
 * for good. start_session calls this last: it switches them off again. */
void djx_writer_release_if_done(void)
{
	int done;

	pthread_mutex_lock(&djx.mu);
	done = djx.detached;
	pthread_mutex_unlock(&djx.mu);
	if (done) {
		djx_stacks_stop();
		release_sampling();
	}
}

int djx_writer_start(void)
{
	pthread_attr_t attr;
	sigset_t all, old;
	int rc;

	/* The JVM's signals (SIGQUIT, profiling signals, ...) belong to its own
	 * threads; this thread inherits a fully blocked mask. */
	__atomic_store_n(&send_stalled, 0, __ATOMIC_RELAXED);
	sigfillset(&all);
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	rc = pthread_create(&djx.writer, &attr, writer_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	if (rc == 0) {
		pthread_mutex_lock(&djx.mu);
		djx.started = 1;
		pthread_mutex_unlock(&djx.mu);
	}
	return rc;
}

void djx_writer_abort(void)
{
	pthread_mutex_lock(&djx.mu);
	djx.abort = 1;
	pthread_mutex_unlock(&djx.mu);
	pthread_join(djx.writer, NULL); /* bounded: the writer polls every DJX_FLUSH_NS */
}
