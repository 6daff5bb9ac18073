/* Access stacks: the signal handler that records the interrupted thread's
 * Java stack with AsyncGetCallTrace (ASGCT), and the ring that carries it to
 * the writer thread.
 *
 * The loader's BPF perf_event program calls bpf_send_signal_thread(sig) on
 * the sampled thread right after each sample; the kernel delivers it with
 * si_code SI_KERNEL. The handler stamps CLOCK_MONOTONIC (bpf_ktime_get_ns's
 * clock), the kernel tid and the interrupted pc (ucontext), so that the
 * loader can join the stack to its sample by (tid, time, pc).
 *
 * Everything the handler touches is async-signal-safe: no malloc, no locks,
 * no stdio, no TLS (the library has no __thread variables: the TLS of a
 * dlopen'd library may be allocated with malloc on a thread's first access).
 * The ring is a bounded lock-free MPSC queue (Vyukov's sequence-numbered
 * slots): a handler claims a slot with a CAS on head, lets ASGCT write the
 * frames straight into it and publishes it with a release store of the
 * slot's sequence; the writer thread drains slots in order. A full ring
 * drops the stack (counted). The handler stays installed for the life of
 * the process (the library is never unloaded); once the session is over it
 * ignores our signals, so a late bpf_send_signal_thread can never reach the
 * default action of a real-time signal, which would terminate the JVM. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "config.h"
#include "djx.h"
#include "emit.h"
#include "stacks.h"
#include "stats.h"
#include "writer.h"

/* The handler writes AsyncGetCallTrace's frames straight into a slot of a
 * preallocated ring: 128 slots of 128 frames (about 270 KB, mapped and
 * prefaulted at install). The writer thread drains it at half full,
 * within a few ms; 2048 slots were 4.3 MB of the JVM's RSS (5% of a small
 * heap's footprint). At the default stack interval a busy thread sends
 * 100 stacks/s; full rings drop stacks, counted. */
#define RING_SLOTS 128u /* power of two */

/* AsyncGetCallTrace's ABI (HotSpot forte.cpp); not in any JDK header. */
typedef struct {
	jint lineno; /* bci; -3 for a native method */
	jmethodID method_id;
} asgct_frame;

typedef struct {
	JNIEnv *env_id;
	jint num_frames; /* > 0 frames, or a ticks_* code <= 0 */
	asgct_frame *frames;
} asgct_trace;

typedef void (*asgct_fn)(asgct_trace *trace, jint depth, void *ucontext);

struct slot {
	uint64_t seq; /* == pos: free for pos; == pos + 1: committed at pos */
	uint64_t time, pc;
	uint32_t tid;
	int32_t status;
	asgct_frame frames[DJX_STACK_FRAMES];
};

/* Written before the handler is installed or before active is set, read by
 * the handler afterwards. */
static struct {
	struct slot *ring; /* RING_SLOTS slots, freed by djx_stacks_release */
	uint64_t head;     /* next position to claim (handlers, CAS) */
	uint64_t tail;     /* next position to drain (writer only) */
	asgct_fn asgct;
	JavaVM *vm;
	int active;        /* a session runs: record our signals */
	int kicked;        /* writer already woken for a half-full ring */
	int evfd;          /* closed only once no handler is inside record() */
	int inflight;      /* handlers between their active check and their end */
	int sig;
	struct sigaction prev; /* the action installed before ours */
	/* HotSpot's Thread::current() through its pthread key, as its own
	 * signal handlers read it (Thread::current_or_null_safe): GetEnv goes
	 * through libjvm's general-dynamic TLS (__tls_get_addr), which is not
	 * async-signal-safe. key_found: the key and offset are known (at
	 * install); key_ok: the writer, a plain JavaThread, confirmed them and
	 * gave the vtable. Until then (or on another JVM), GetEnv. */
	int key_found;
	int key_ok;
	pthread_key_t key;
	ptrdiff_t env_off;    /* JNIEnv's offset in a JavaThread */
	const void *jt_vtbl;  /* a plain JavaThread's vtable */
	const void *jni_fns;  /* every JNIEnv's function table */
} stk = {.evfd = -1};

/* Finds HotSpot's thread key from a JavaThread (the caller's, with env):
 * the key whose value lies just below env, the JNIEnv inside it. */
static void find_thread_key(JNIEnv *env)
{
	__atomic_store_n(&stk.key_ok, 0, __ATOMIC_RELEASE);
	stk.key_found = 0;
	for (unsigned k = 0; k < PTHREAD_KEYS_MAX; k++) {
		const char *v = pthread_getspecific((pthread_key_t)k);
		ptrdiff_t off = (const char *)env - v;
		if (v != NULL && off > 0 && off < 4096) {
			stk.key = (pthread_key_t)k;
			stk.env_off = off;
			stk.jni_fns = *(const void *const *)env;
			stk.key_found = 1;
			return;
		}
	}
}

/* The interrupted thread's JNIEnv, NULL on threads that are not plain
 * JavaThreads (GC workers, the VM thread, compiler threads: no Java
 * frames). Only async-signal-safe reads: pthread_getspecific reads the
 * thread's own key array, and a Thread object's first word (its vtable)
 * is always mapped; the env is read only inside a JavaThread. */
static JNIEnv *current_env(void)
{
	JNIEnv *env = NULL;
	const char *v;

	if (!__atomic_load_n(&stk.key_ok, __ATOMIC_ACQUIRE)) {
		if ((*stk.vm)->GetEnv(stk.vm, (void **)&env, JNI_VERSION_1_6) != JNI_OK)
			return NULL;
		return env;
	}
	v = pthread_getspecific(stk.key);
	if (v == NULL || *(const void *const *)v != stk.jt_vtbl)
		return NULL;
	env = (JNIEnv *)(v + stk.env_off);
	return *(const void *const *)env == stk.jni_fns ? env : NULL;
}

#define RELAXED __ATOMIC_RELAXED

static int is_ours(const siginfo_t *si)
{
	if (si == NULL)
		return 0;
	if (si->si_code == SI_KERNEL)
		return 1;
	return si->si_code == SI_QUEUE && si->si_value.sival_int == DJX_STACK_COOKIE;
}

static uint64_t uc_pc(const void *ucv)
{
	const ucontext_t *uc = ucv;
	if (uc == NULL)
		return 0;
#if defined(__x86_64__)
	return (uint64_t)uc->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
	return (uint64_t)uc->uc_mcontext.pc;
#else
	return 0;
#endif
}

/* write(2) on an eventfd is async-signal-safe; the fd is closed only when
 * no handler can reach here (djx_stacks_release), so it cannot have been
 * reused for another file. */
static void kick(void)
{
	uint64_t one = 1;
	if (stk.evfd >= 0 && !__atomic_exchange_n(&stk.kicked, 1, RELAXED)) {
		if (write(stk.evfd, &one, sizeof one) < 0) {
			/* EAGAIN: the counter is already nonzero, the writer will wake. */
		}
	}
}

static void record(void *uc)
{
	struct timespec ts;
	struct slot *s;
	JNIEnv *env = NULL;
	uint64_t pos, t;

	clock_gettime(CLOCK_MONOTONIC, &ts); /* vDSO; async-signal-safe (POSIX) */
	t = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	__atomic_add_fetch(&djx_stats.stack_signals, 1, RELAXED);

	pos = __atomic_load_n(&stk.head, RELAXED);
	for (;;) {
		uint64_t seq;
		s = &stk.ring[pos & (RING_SLOTS - 1)];
		seq = __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE);
		if (seq == pos) {
			if (__atomic_compare_exchange_n(&stk.head, &pos, pos + 1, 1, RELAXED, RELAXED))
				break;
			/* pos now holds the current head: retry there. */
		} else if ((int64_t)(seq - pos) < 0) {
			/* The slot still holds a stack from a lap ago: full. */
			__atomic_add_fetch(&djx_stats.stacks_dropped, 1, RELAXED);
			kick();
			return;
		} else {
			pos = __atomic_load_n(&stk.head, RELAXED);
		}
	}

	s->time = t;
	s->tid = (uint32_t)syscall(SYS_gettid); /* glibc's gettid() caches nothing either */
	s->pc = uc_pc(uc);
	/* ASGCT only on threads with a JNIEnv (JavaThreads): GC workers and
	 * other native threads have no Java stack to walk. */
	if ((env = current_env()) == NULL) {
		s->status = DJX_STACK_NO_ENV;
	} else {
		asgct_trace tr = {.env_id = env, .num_frames = 0, .frames = s->frames};
		stk.asgct(&tr, DJX_STACK_FRAMES, uc);
		s->status = tr.num_frames;
	}
	__atomic_store_n(&s->seq, pos + 1, __ATOMIC_RELEASE);
	if (pos + 1 - __atomic_load_n(&stk.tail, RELAXED) >= RING_SLOTS / 2)
		kick();
	clock_gettime(CLOCK_MONOTONIC, &ts);
	__atomic_add_fetch(&djx_stats.stack_ns, (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec - t, RELAXED);
}

/* Not ours, or no session: hand the signal to whoever had it before us. A
 * default or ignored action is ignored: the default of most signals we
 * could be installed on (real-time ones) terminates the process. */
static void chain(int sig, siginfo_t *si, void *uc)
{
	const struct sigaction *p = &stk.prev;

	if (p->sa_flags & SA_SIGINFO) {
		if (p->sa_sigaction == NULL)
			return;
		__atomic_add_fetch(&djx_stats.signals_chained, 1, RELAXED);
		p->sa_sigaction(sig, si, uc);
		return;
	}
	if (p->sa_handler == SIG_DFL || p->sa_handler == SIG_IGN || p->sa_handler == NULL)
		return;
	__atomic_add_fetch(&djx_stats.signals_chained, 1, RELAXED);
	p->sa_handler(sig);
}

static void on_signal(int sig, siginfo_t *si, void *uc)
{
	int saved = errno;

	if (is_ours(si)) {
		/* Counted before active is read: release waits for the count to
		 * drop to 0 after clearing active, so no handler still uses the
		 * ring or the eventfd it frees. */
		__atomic_add_fetch(&stk.inflight, 1, __ATOMIC_SEQ_CST);
		if (__atomic_load_n(&stk.active, __ATOMIC_SEQ_CST)) {
			record(uc);
			__atomic_sub_fetch(&stk.inflight, 1, __ATOMIC_SEQ_CST);
			errno = saved;
			return;
		}
		__atomic_sub_fetch(&stk.inflight, 1, __ATOMIC_SEQ_CST);
	}
	chain(sig, si, uc);
	errno = saved;
}

/* Signals HotSpot itself handles or that stop or kill the process: the
 * handler must not take them over (chaining SIGSEGV through us would slow
 * every implicit null check and hide ours from HotSpot's own checks). */
static int reserved_signal(int sig)
{
	switch (sig) {
	case SIGSEGV: case SIGBUS: case SIGFPE: case SIGILL: case SIGTRAP:
	case SIGQUIT: case SIGUSR2: case SIGPIPE: case SIGXFSZ:
	case SIGHUP: case SIGINT: case SIGTERM: case SIGKILL: case SIGSTOP:
	case SIGTSTP: case SIGCONT: case SIGTTIN: case SIGTTOU: case SIGCHLD:
		return 1;
	}
	return 0;
}

static asgct_fn find_asgct(void)
{
	void *f = dlsym(RTLD_DEFAULT, "AsyncGetCallTrace");
	if (f == NULL) {
		/* libjvm loaded without RTLD_GLOBAL (an embedding launcher). */
		void *h = dlopen("libjvm.so", RTLD_LAZY | RTLD_NOLOAD);
		if (h != NULL)
			f = dlsym(h, "AsyncGetCallTrace");
	}
	return (asgct_fn)f;
}

int djx_stacks_install(int sig, char *err, size_t errlen)
{
	struct sigaction sa;

	if (reserved_signal(sig) || sig < 1 || sig > SIGRTMAX) {
		snprintf(err, errlen, "stacks=%d: the JVM or the kernel owns this signal: no access stacks "
			 "(use a real-time signal such as %d)", sig, SIGRTMIN + 8);
		return -1;
	}
	/* A later session in the same library finds the last one's handler
	 * still installed (inactive, chaining): kept on its signal, else put
	 * back first. */
	if (stk.sig != 0 && stk.sig != sig)
		djx_stacks_uninstall();
	if (stk.ring != NULL)
		goto install; /* after a failed session, or a handler slow to leave: ring and eventfd stay */
	stk.asgct = find_asgct();
	if (stk.asgct == NULL) {
		snprintf(err, errlen, "AsyncGetCallTrace not found in the JVM: no access stacks");
		return -1;
	}
	/* Prefaulted: the handler never takes a page fault on the ring. */
	stk.ring = mmap(NULL, RING_SLOTS * sizeof(struct slot), PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (stk.ring == MAP_FAILED) {
		stk.ring = NULL;
		djx_stacks_uninstall();
		snprintf(err, errlen, "stacks: mmap ring: %s: no access stacks", strerror(errno));
		return -1;
	}
	for (uint32_t i = 0; i < RING_SLOTS; i++)
		stk.ring[i].seq = i;
install:
	if (stk.evfd < 0)
		stk.evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	stk.vm = djx_cfg->vm;
	{
		/* On the session's thread, a JavaThread, before the handler runs. */
		JNIEnv *env = NULL;
		if ((*stk.vm)->GetEnv(stk.vm, (void **)&env, JNI_VERSION_1_6) == JNI_OK && env != NULL)
			find_thread_key(env);
	}
	if (stk.sig == sig)
		return 0; /* ours already: prev stays the action before ours */
	/* Read the previous action before ours can run: a signal arriving
	 * between the install and a copy-out would see a half-written prev. */
	if (sigaction(sig, NULL, &stk.prev) != 0)
		goto fail;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_signal;
	/* No SA_ONSTACK: ASGCT needs more stack than the small alternate
	 * stacks some native libraries install. No SA_NODEFER: the signal is
	 * blocked while the handler runs, so one thread never nests in it.
	 * SIGSEGV/SIGBUS stay unblocked: HotSpot's SafeFetch, which ASGCT's
	 * frame checks may use, relies on them. */
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (sigaction(sig, &sa, NULL) != 0)
		goto fail;
	stk.sig = sig;
	return 0;
fail:
	snprintf(err, errlen, "stacks: sigaction(%d): %s: no access stacks", sig, strerror(errno));
	/* The ring and eventfd stay: nothing refers to them, and a handler
	 * that was never installed cannot run. */
	return -1;
}

int djx_stacks_key_ok(void)
{
	return stk.key_found;
}

/* On the writer thread once attached (a plain JavaThread, unlike the
 * session's thread on JDK 21+, whose AttachListenerThread is a subclass):
 * checks the key and offset on a second thread and takes the vtable that
 * marks the threads the handler may walk. 0 ok, -1 they do not hold. */
int djx_stacks_confirm(JNIEnv *env)
{
	const char *v;

	if (!stk.key_found || env == NULL)
		return stk.key_found ? -1 : 0;
	v = pthread_getspecific(stk.key);
	if (v == NULL || (const char *)env - v != stk.env_off || *(const void *const *)env != stk.jni_fns)
		return -1;
	stk.jt_vtbl = *(const void *const *)v;
	__atomic_store_n(&stk.key_ok, 1, __ATOMIC_RELEASE);
	return 0;
}

void djx_stacks_start(void)
{
	/* Under the lock, as the session's end stops it: a session torn down
	 * before this runs must not leave the handler recording for good. */
	djx_lock();
	if (stk.sig != 0 && !djx_detached_locked())
		__atomic_store_n(&stk.active, 1, __ATOMIC_RELEASE);
	djx_unlock();
}

/* At a session's end (writer thread, after djx_stacks_stop): frees the
 * ring and closes the eventfd once no handler is inside record(); the
 * inactive handler stays installed and only chains, for the next session
 * in this library to reuse. If a handler does not leave within a second,
 * both are kept instead. */
void djx_stacks_release(void)
{
	struct timespec nap = {.tv_nsec = 1000000};

	if (stk.ring == NULL)
		return;
	__atomic_store_n(&stk.active, 0, __ATOMIC_SEQ_CST);
	for (int i = 0; __atomic_load_n(&stk.inflight, __ATOMIC_SEQ_CST) != 0; i++) {
		if (i >= 1000)
			return;
		nanosleep(&nap, NULL);
	}
	munmap(stk.ring, RING_SLOTS * sizeof(struct slot));
	stk.ring = NULL;
	stk.head = stk.tail = 0;
	if (stk.evfd >= 0)
		close(stk.evfd);
	stk.evfd = -1;
}

/* Puts back the action installed before ours, for a session that failed
 * after the install: nothing of ours stays on the signal. */
void djx_stacks_uninstall(void)
{
	if (stk.sig == 0)
		return;
	__atomic_store_n(&stk.active, 0, __ATOMIC_RELEASE);
	sigaction(stk.sig, &stk.prev, NULL);
	stk.sig = 0;
}

/* Before a session: the handler, inactive, stays installed for it
 * (djx_stacks_install); a ring kept because a handler was slow to leave
 * keeps its positions. */
void djx_stacks_reset_locked(void)
{
	__atomic_store_n(&stk.kicked, 0, RELAXED);
}

void djx_stacks_stop(void)
{
	__atomic_store_n(&stk.active, 0, __ATOMIC_RELEASE);
}

/* The writer thread starts with every signal blocked. A blocked real-time
 * signal stays queued, and queued signals count against the user's
 * RLIMIT_SIGPENDING: BPF signalling the writer whenever it samples it would
 * pile them up until the kernel refuses signals for every thread. So the
 * writer takes ours (it has no Java frames: status 0 or below). */
void djx_stacks_unblock(void)
{
	sigset_t set;

	if (stk.sig == 0)
		return;
	sigemptyset(&set);
	sigaddset(&set, stk.sig);
	pthread_sigmask(SIG_UNBLOCK, &set, NULL);
}

int djx_stacks_evfd(void)
{
	return stk.sig != 0 ? stk.evfd : -1;
}

/* Turns one committed slot into a STACK record (preceded by METHODs). */
static int emit_slot(JNIEnv *jni, const struct slot *s)
{
	jvmtiFrameInfo frames[DJX_STACK_FRAMES];
	struct djx_stack st = {.time = s->time, .pc = s->pc, .tid = s->tid, .status = s->status, .frames = frames};
	int rc;

	st.nframes = s->status > 0 ? s->status : 0;
	if (st.nframes > DJX_STACK_FRAMES)
		st.nframes = DJX_STACK_FRAMES;
	for (int i = 0; i < st.nframes; i++) {
		frames[i].method = s->frames[i].method_id;
		frames[i].location = s->frames[i].lineno;
	}
	rc = djx_emit_stack(jni, &st);
	if (rc == 0)
		__atomic_add_fetch(&djx_stats.stacks_sent, 1, RELAXED);
	return rc;
}

/* Writer thread only. Stops at the first slot a handler has claimed but not
 * yet committed: it follows in a later drain (so a STACK may arrive in the
 * batch after the one whose watermark it precedes). */
int djx_stacks_drain(JNIEnv *jni)
{
	if (stk.ring == NULL)
		return 0;
	__atomic_store_n(&stk.kicked, 0, RELAXED);
	for (;;) {
		uint64_t pos = stk.tail;
		struct slot *s = &stk.ring[pos & (RING_SLOTS - 1)];
		int rc;

		if (__atomic_load_n(&s->seq, __ATOMIC_ACQUIRE) != pos + 1)
			return 0;
		rc = emit_slot(jni, s);
		if (rc < 0)
			return -1; /* keep the slot; the caller flushes and retries */
		__atomic_store_n(&s->seq, pos + RING_SLOTS, __ATOMIC_RELEASE);
		__atomic_store_n(&stk.tail, pos + 1, RELAXED);
		if (rc > 0)
			return 1;
	}
}
