/* The session. Agent_OnAttach, or VMInit after Agent_OnLoad, starts it on
 * a Java thread: connect, HELLO, the writer thread, then the events. The
 * writer thread, attached to the VM as a daemon so that it can call JNI
 * and JVMTI, sends a batch every DJX_FLUSH_NS or when kicked, reads the
 * loader's commands, and after GCs scans the tracked objects (track.c),
 * checks the humongous ones (big.c) and may run a census; it ends the
 * session on 'Q', when the loader goes away, or at VM death. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "big.h"
#include "census.h"
#include "code.h"
#include "config.h"
#include "emit.h"
#include "epoch.h"
#include "roots.h"
#include "session.h"
#include "stacks.h"
#include "stats.h"
#include "track.h"
#include "types.h"
#include "util.h"
#include "writer.h"
#include "zaddr.h"

/* Writer flush period. Every wakeup costs the JVM and the loader: at 50 ms
 * the writer took 0.21% of GcHot's CPU, 0.06% at 200 ms. Allocations kick
 * it earlier when the batch is half full, stacks when their ring is. */
#define FLUSH_NS 200000000ull

static struct {
	pthread_t thread;
	pthread_cond_t donecv; /* CLOCK_MONOTONIC */
	/* Under the session lock. */
	int started; /* writer thread running */
	int stop;    /* VMDeath asked for the final flush */
	int abort;   /* start failed: the writer thread exits without sending */
	int done;    /* writer thread finished */
} ss;

void djx_session_gc_start(void)
{
	djx_lock();
	djx_epoch_start_locked();
	djx_unlock();
}

void djx_session_gc_finish(void)
{
	djx_lock();
	djx_epoch_finish_locked();
	if (!djx_detached_locked()) {
		/* The writer scans the tracked objects and checks the humongous ones. */
		if (djx_track_pending_locked() || djx_big_pending_locked() || djx_cfg->opt.recensus_ms != 0)
			djx_kick_locked();
	}
	djx_unlock();
}

void djx_session_vm_death(void)
{
	struct timespec dl;

	djx_lock();
	if (ss.started && !ss.done) {
		ss.stop = 1;
		djx_writer_stopping_locked(djx_now_ns());
		djx_kick_locked();
		clock_gettime(CLOCK_MONOTONIC, &dl);
		dl.tv_sec += 2;
		while (!ss.done)
			if (djx_cond_timedwait_locked(&ss.donecv, &dl) == ETIMEDOUT)
				break;
	}
	djx_unlock();
}

/* Every module's session state back to a fresh library's: the one place
 * a module is reset. The last session's events are off; ClassPrepare may
 * stay on for the stacks and the signal handler stays installed, both
 * inactive. What describes the JVM itself (vmStructs, ZGC's masks, the
 * code heaps, the process_vm_readv refusal) is kept. */
static void reset_modules_locked(void)
{
	memset(&djx_stats, 0, sizeof djx_stats);
	djx_epoch_reset_locked();
	djx_writer_reset_locked();
	djx_emit_reset_locked();
	djx_alloc_reset_locked();
	djx_code_reset_locked();
	djx_types_reset_locked();
	djx_track_reset_locked();
	djx_big_reset_locked();
	djx_census_reset_locked();
	djx_stacks_reset_locked();
}

int djx_session_reuse(void)
{
	struct timespec dl, torn;
	int busy;

	djx_lock();
	clock_gettime(CLOCK_MONOTONIC, &dl);
	torn = dl;
	/* A writer notices a loader gone within a flush period; once it tore
	 * the session down it still gives the capabilities back and hangs up,
	 * JVMTI calls that wait on safepoints, seconds under a GC storm. */
	dl.tv_sec += 1;
	torn.tv_sec += 10;
	while (ss.started && !ss.done) {
		int detached = djx_detached_locked();
		if (djx_cond_timedwait_locked(&ss.donecv, detached ? &torn : &dl) == ETIMEDOUT &&
		    (detached || !djx_detached_locked()))
			break;
	}
	busy = ss.started && !ss.done;
	if (!busy) {
		if (ss.started)
			pthread_cond_destroy(&ss.donecv);
		memset(&ss, 0, sizeof ss);
		reset_modules_locked();
	}
	djx_unlock();
	return busy ? -1 : 0;
}

/* Gives the heap-sampling capability back so that a later profile (or
 * another agent) can take it: HotSpot lets one environment hold it at a
 * time. Also switches off the GC events and gives their capability back.
 * Callbacks still in flight find the session detached. Needs a thread
 * attached to the VM. */
static void release_sampling(void)
{
	jvmtiCapabilities caps;
	jvmtiEnv *j = djx_cfg->jvmti;

	if (djx_cfg->opt.types)
		djx_types_release(j, djx_code_class_events()); /* first: it reads oops while the GC events count */
	djx_alloc_disable(j);
	memset(&caps, 0, sizeof caps);
	caps.can_generate_sampled_object_alloc_events = 1;
	djx_epoch_release(j, &caps);
	(*j)->RelinquishCapabilities(j, &caps);
	djx_code_release(j);
}

static void teardown(void)
{
	/* First: from here on the signal handler ignores (or chains) our
	 * signals; it never touches the batch buffers anyway. Under the lock,
	 * with the detach: djx_stacks_start checks it there. */
	djx_lock();
	djx_stacks_stop();
	djx_writer_detach_locked();
	djx_emit_end_locked();
	djx_types_end_locked();
	djx_big_end_locked();
	djx_unlock();
}

static void hang_up(void)
{
	djx_stacks_release();
	djx_writer_hang_up();
	djx_lock();
	ss.done = 1;
	pthread_cond_broadcast(&ss.donecv);
	djx_unlock();
}

/* The writer thread's state. */
struct loop {
	JNIEnv *env;
	int attached, vmdeath, types_started;
	int census_req, types_req, roots_req; /* the loader sent 'C', 'K', 'G' */
	uint64_t last;     /* the last flush */
	uint64_t since;    /* the session's start */
	uint64_t gcs_seen; /* GCs finished at the last round */
	uint8_t cmd[9];    /* a command split across reads */
	size_t ncmd;
};

/* The loader's 'A': an ERROR says why the stacks stay JVMTI's. */
static void raw_stacks(void)
{
	char err[200], msg[256];

	if (djx_alloc_raw_stacks(err, sizeof err) != 0) {
		snprintf(msg, sizeof msg, "allocation stacks stay GetStackTrace's: %s", err);
		djx_emit_error(msg);
	}
}

/* Commands from the loader (agentwire.Command*), possibly split across
 * reads: 'Q' asks for the last batch and detach; 'H' and a u64
 * (little-endian) track objects of at least that many bytes without weak
 * references (big.c); 'P' and 'R' pause and resume allocation sampling
 * (only when attached); 'C' runs the census; 'K' sends the classes not
 * sent yet (types=1); 'G' sends the heap's roots (roots.c); 'A' has
 * sampled allocations walk their own stacks (unwind.h: the loader names
 * them from the JVM's memory). Other bytes are ignored. Returns 1 when a
 * 'Q' came. */
static int on_input(struct loop *l, const uint8_t *in, size_t len)
{
	int quit = 0;

	for (size_t i = 0; i < len; i++) {
		if (l->ncmd == 0) {
			if (in[i] == 'Q')
				quit = 1;
			else if ((in[i] == 'P' || in[i] == 'R') && l->attached)
				djx_alloc_pause(djx_cfg->jvmti, in[i] == 'P');
			else if (in[i] == 'H')
				l->cmd[l->ncmd++] = in[i];
			else if (in[i] == 'C' && l->attached && djx_cfg->opt.census != 0)
				l->census_req = 1;
			else if (in[i] == 'K' && l->attached && djx_cfg->opt.types)
				l->types_req = 1;
			else if (in[i] == 'G' && l->attached)
				l->roots_req = 1;
			else if (in[i] == 'A' && l->attached)
				raw_stacks();
			continue;
		}
		l->cmd[l->ncmd++] = in[i];
		if (l->ncmd == sizeof l->cmd) {
			uint64_t v = 0;
			for (int k = 8; k >= 1; k--)
				v = v << 8 | l->cmd[k];
			djx_big_enable(v);
			l->ncmd = 0;
		}
	}
	return quit;
}

/* Waits for input, a kick or the flush period, and reads the loader's
 * commands; *bye becomes "detach" on 'Q'. -1 when the loader closed the
 * socket or poll failed: the session ends. */
static int wait_input(struct loop *l, const char **bye)
{
	struct pollfd pf[3] = {
		{.fd = djx_writer_fd(), .events = POLLIN},
		{.fd = djx_writer_evfd(), .events = POLLIN},
		{.fd = djx_stacks_evfd(), .events = POLLIN}, /* -1: ignored */
	};
	int r = poll(pf, 3, (int)(FLUSH_NS / 1000000));

	if (r < 0 && errno != EINTR)
		return -1;
	for (int k = 1; k < 3 && r > 0; k++) {
		uint64_t v;
		if ((pf[k].revents & POLLIN) && read(pf[k].fd, &v, sizeof v) < 0) {
			/* EAGAIN: nothing pending */
		}
	}
	if (r > 0 && (pf[0].revents & (POLLIN | POLLHUP | POLLERR))) {
		uint8_t in[64];
		ssize_t got = djx_writer_recv(in, sizeof in);
		if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR))
			return -1; /* the loader closed the socket: detach */
		if (got > 0 && on_input(l, in, (size_t)got))
			*bye = "detach";
	}
	return 0;
}

/* Moves the handler's stacks into the batch, flushing when it fills.
 * Returns -1 if the connection failed. */
static int drain_stacks(JNIEnv *env)
{
	/* Bounded: the ring holds at most 128 stacks of ~2 KiB, a batch 4 MiB. */
	for (int i = 0; i < 8; i++) {
		if (djx_stacks_drain(env) >= 0)
			return 0;
		if (djx_flush(NULL) != 0)
			return -1;
	}
	return 0;
}

/* What the writer thread does after the batch: the scan after GCs, the
 * census and the types. 0, or -1 the connection failed. */
static int work(struct loop *l, uint64_t gcs)
{
	int gced = gcs != l->gcs_seen, creq = l->census_req, kreq = l->types_req, rreq = l->roots_req;

	l->gcs_seen = gcs;
	l->census_req = l->types_req = l->roots_req = 0;
	if (l->attached && djx_track_scan(l->env) != 0)
		return -1;
	djx_big_check(); /* a dropped FREE is counted like any drop */
	if (!l->attached)
		return 0;
	if (creq && djx_census_run(l->env) != 0)
		return -1;
	if (rreq && djx_roots_run(l->env) != 0)
		return -1;
	/* Types: the first pass, after HELLO is out, dumps every class. */
	if (djx_cfg->opt.types && !l->types_started) {
		l->types_started = 1;
		if (djx_types_start(l->env) != 0)
			return -1;
	} else if (kreq && djx_types_resend(l->env) != 0) {
		return -1;
	}
	if (gced && djx_census_after_gc(l->env, l->since) != 0)
		return -1;
	return 0;
}

/* One round of the writer thread: 0 go on, -1 the session ends. */
static int round_once(struct loop *l)
{
	const char *bye = NULL;
	int stop, kicked, abort_;
	uint64_t now, gcs;

	if (wait_input(l, &bye) != 0)
		return -1;
	djx_lock();
	stop = ss.stop;
	kicked = djx_kicked_locked();
	abort_ = ss.abort;
	gcs = djx_epoch_finishes_locked();
	djx_unlock();
	if (abort_)
		return -1;
	if (stop) {
		bye = "vmdeath";
		l->vmdeath = 1;
	}
	/* Stacks the signal handler left in its ring, before the cut. */
	if (l->attached && drain_stacks(l->env) != 0)
		return -1;
	now = djx_now_ns();
	if (bye || kicked || now - l->last >= FLUSH_NS) {
		if (djx_flush(bye) != 0 || bye)
			return -1;
		l->last = now;
	}
	return work(l, gcs);
}

static void *writer_main(void *arg)
{
	struct loop l = {.env = NULL};
	JavaVM *vm = djx_cfg->vm;

	(void)arg;
	l.last = l.since = djx_now_ns();
	/* Named, so that top -H and perf tell the agent's own CPU apart. */
	prctl(PR_SET_NAME, "djx-bpf writer", 0, 0, 0);
	djx_stacks_unblock();
	/* Attached as a daemon so that detach can call JVMTI (which refuses
	 * unattached threads); in native code it never holds up a safepoint. */
	if (vm != NULL) {
		JavaVMAttachArgs a = {JNI_VERSION_1_6, "djx-bpf agent", NULL};
		l.attached = (*vm)->AttachCurrentThreadAsDaemon(vm, (void **)&l.env, &a) == JNI_OK;
	}
	if (l.attached && djx_stacks_confirm(l.env) != 0)
		djx_emit_error("stacks: HotSpot's thread key does not hold on the writer thread: the handler asks GetEnv");
	while (round_once(&l) == 0)
		;
	teardown();
	djx_track_release(l.attached && !l.vmdeath ? l.env : NULL);
	/* At VM death the VM is going away: no JVMTI, no detach (it could
	 * block on the final safepoint). */
	if (l.attached && !l.vmdeath)
		release_sampling();
	hang_up();
	if (l.attached && !l.vmdeath)
		(*vm)->DetachCurrentThread(vm);
	return NULL;
}

static int start_thread(void)
{
	pthread_attr_t attr;
	sigset_t all, old;
	int rc;

	/* The JVM's signals (SIGQUIT, profiling signals, ...) belong to its own
	 * threads; this thread inherits a fully blocked mask. */
	sigfillset(&all);
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	rc = pthread_create(&ss.thread, &attr, writer_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	if (rc == 0) {
		djx_lock();
		ss.started = 1;
		djx_unlock();
	}
	return rc;
}

/* Stops a writer thread whose session failed to start; it frees the
 * buffers and closes the fds. */
static void abort_thread(void)
{
	djx_lock();
	ss.abort = 1;
	djx_unlock();
	pthread_join(ss.thread, NULL); /* bounded: the writer polls every FLUSH_NS */
}

/* The session start enables events and the stack handler after the
 * writer thread starts; a writer thread that tore the session down
 * meanwhile (the loader went away at once) released them before they were
 * on, so they would stay on for good. The start calls this last: it
 * switches them off again. */
static void release_if_done(void)
{
	int done;

	djx_lock();
	done = djx_detached_locked();
	djx_unlock();
	if (done) {
		djx_stacks_stop();
		release_sampling();
	}
}

static char *sysprop(jvmtiEnv *j, const char *name)
{
	char *v = NULL;
	if ((*j)->GetSystemProperty(j, name, &v) != JVMTI_ERROR_NONE)
		return NULL;
	return v;
}

/* Connects and sets up the buffers; on failure nothing is left open. */
static int open_session(jvmtiEnv *j, char *err, size_t errlen)
{
	pthread_condattr_t ca;
	jvmtiError e;
	int rc;

	if (djx_writer_connect(djx_cfg->opt.sock, err, errlen) != 0)
		return -1;
	if (djx_cfg->mode[0] == 'a') {
		/* Launch mode set it in Agent_OnLoad, before any thread exists.
		 * Attach mode: threads sample once more at the old interval. */
		e = djx_alloc_set_interval(j);
		if (e != JVMTI_ERROR_NONE) {
			snprintf(err, errlen, "SetHeapSamplingInterval: error %d", (int)e);
			djx_writer_close();
			return -1;
		}
	}
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	rc = pthread_cond_init(&ss.donecv, &ca);
	pthread_condattr_destroy(&ca);
	if (djx_writer_buffers() != 0 || rc != 0) {
		snprintf(err, errlen, "out of resources");
		djx_writer_close();
		return -1;
	}
	return 0;
}

/* HELLO, then ERRORs for what this session lacks. */
static void send_hello(jvmtiEnv *j, int stack_signal, const char *stk_err)
{
	char *vmname = sysprop(j, "java.vm.name"), *vmver = sysprop(j, "java.vm.version");

	djx_emit_hello(vmname, vmver, stack_signal);
	djx_dealloc(j, vmname);
	djx_dealloc(j, vmver);
	djx_lock();
	if (djx_epoch_cap_err() != NULL)
		djx_emit_error_locked(djx_epoch_cap_err());
	if (djx_cfg->opt.stacks != 0 && stack_signal == 0)
		djx_emit_error_locked(stk_err);
	if (stack_signal != 0 && !djx_stacks_key_ok())
		djx_emit_error_locked("stacks: HotSpot's thread key not found: the handler asks GetEnv, which is not async-signal-safe");
	if (djx_cfg->opt.reconcile && !djx_epoch_events())
		djx_emit_error_locked("reconcile=1 needs GC events: reconciliation off");
	djx_unlock();
}

/* VMDeath, the GC events, then SampledObjectAlloc; on failure all off again. */
static int enable_events(jvmtiEnv *j, char *err, size_t errlen)
{
	jvmtiError e = (*j)->SetEventNotificationMode(j, JVMTI_ENABLE, JVMTI_EVENT_VM_DEATH, NULL);

	if (e == JVMTI_ERROR_NONE) {
		/* Before SampledObjectAlloc, which reads whether objects get tags. */
		djx_epoch_enable(j);
		e = djx_alloc_enable(j);
	}
	if (e == JVMTI_ERROR_NONE)
		return 0;
	snprintf(err, errlen, "enable events: error %d", (int)e);
	djx_alloc_stop(j);
	djx_epoch_disable(j);
	(*j)->SetEventNotificationMode(j, JVMTI_DISABLE, JVMTI_EVENT_VM_DEATH, NULL);
	return -1;
}

int djx_session_start(jvmtiEnv *j, char *err, size_t errlen)
{
	char stk_err[160];
	int stack_signal = 0, rc;
	JNIEnv *jni = NULL;
	char zerr[120];

	/* The tracked objects' weak references hold ZGC's colored references:
	 * their rescans decode them (zaddr.c). Unknown layouts pass them raw. */
	(void)djx_z_init(zerr, sizeof zerr);
	djx_alloc_start();
	if (open_session(j, err, errlen) != 0)
		return -1;
	/* Before HELLO, which says whether the handler is in place. Every
	 * failure below takes it off again: HotSpot may unload a library whose
	 * Agent_OnAttach failed (JDK-8252657). */
	if (djx_cfg->opt.stacks != 0 && djx_stacks_install(djx_cfg->opt.stacks, stk_err, sizeof stk_err) == 0)
		stack_signal = djx_cfg->opt.stacks;
	send_hello(j, stack_signal, stk_err);
	rc = start_thread();
	if (rc != 0) {
		snprintf(err, errlen, "pthread_create: %s", strerror(rc));
		djx_stacks_uninstall();
		djx_writer_close();
		return -1;
	}
	if (enable_events(j, err, errlen) != 0) {
		abort_thread();         /* the writer thread frees buffers and closes the fds */
		djx_stacks_uninstall(); /* the library may be unloaded: no handler of ours stays */
		return -1;
	}
	/* Class events (jmethodIDs for ASGCT) and JIT code records; failures
	 * are reported as ERROR records, profiling goes on without them. */
	if ((*djx_cfg->vm)->GetEnv(djx_cfg->vm, (void **)&jni, JNI_VERSION_1_6) != JNI_OK)
		jni = NULL;
	djx_code_start(j, jni);
	if (stack_signal != 0)
		djx_stacks_start();
	release_if_done();
	pthread_detach(ss.thread);
	return 0;
}
