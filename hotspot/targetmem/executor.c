/* The executor task runs no libc code: it has no TLS of its own (clone
 * without CLONE_SETTLS), so errno and the stack protector's canary would be
 * another thread's. Hence raw system calls and -fno-stack-protector. */
#define _GNU_SOURCE
#include <sched.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <linux/futex.h>
#include <unistd.h>
#include <errno.h>

#include "executor.h"

#define GUARD_SIZE 4096UL
#define STACK_SIZE (64UL << 10)
#define BLOCK_SIZE ((sizeof(struct djx_exec) + 4095) & ~4095UL)
#define MAP_SIZE (GUARD_SIZE + STACK_SIZE + BLOCK_SIZE + DJX_EX_STAGE)

static inline long raw6(long n, long a, long b, long c, long d, long e, long f)
{
#if defined(__x86_64__)
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	long ret;
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return ret;
#elif defined(__aarch64__)
	register long x8 __asm__("x8") = n;
	register long x0 __asm__("x0") = a;
	register long x1 __asm__("x1") = b;
	register long x2 __asm__("x2") = c;
	register long x3 __asm__("x3") = d;
	register long x4 __asm__("x4") = e;
	register long x5 __asm__("x5") = f;
	__asm__ volatile("svc 0"
			 : "+r"(x0)
			 : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
			 : "memory");
	return x0;
#else
#error "executor: raw system calls for x86_64 and aarch64 only"
#endif
}

static void wake(uint32_t *w)
{
	raw6(SYS_futex, (long)w, FUTEX_WAKE_PRIVATE, 1, 0, 0, 0);
}

static long run(struct djx_exec *e)
{
	int64_t *a = e->arg;

	switch (e->op) {
	case DJX_OP_READV:
		return raw6(SYS_process_vm_readv, a[0], a[1], a[2], a[3], a[4], 0);
	case DJX_OP_OPENAT:
		return raw6(SYS_openat, a[0], a[1], a[2], 0, 0, 0);
	case DJX_OP_PREAD:
		return raw6(SYS_pread64, a[0], a[1], a[2], a[3], 0, 0);
	case DJX_OP_FSTAT:
		return raw6(SYS_fstat, a[0], a[1], 0, 0, 0, 0);
	case DJX_OP_CLOSE:
		return raw6(SYS_close, a[0], 0, 0, 0, 0, 0);
	case DJX_OP_OPENAT2:
		return raw6(SYS_openat2, a[0], a[1], a[2], a[3], 0, 0);
	}
	return -EINVAL;
}

/* serve waits for requests (futex on state, 200 ms at a time to notice
 * djx-bpf's exit), runs them and hands the result back; it exits after
 * idle_ms without one, when djx-bpf has exited, or when abandoned. */
static int serve(void *arg)
{
	struct djx_exec *e = arg;
	long idle = 0;

	if (!e->files)
		raw6(SYS_close_range, 0, ~0U, 0, 0, 0, 0);

	for (;;) {
		uint32_t st = __atomic_load_n(&e->state, __ATOMIC_SEQ_CST);
		if (st == DJX_EX_REQ) {
			long r = run(e);
			uint32_t want = DJX_EX_REQ;
			e->ret = r;
			if (!__atomic_compare_exchange_n(&e->state, &want, DJX_EX_DONE, 0,
							 __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
				/* Abandoned: nobody will take the fd. */
				if ((e->op == DJX_OP_OPENAT || e->op == DJX_OP_OPENAT2) && r >= 0)
					raw6(SYS_close, r, 0, 0, 0, 0, 0);
				raw6(SYS_exit, 0, 0, 0, 0, 0, 0);
			}
			wake(&e->state);
			idle = 0;
			continue;
		}
		if (st == DJX_EX_ABANDONED)
			raw6(SYS_exit, 0, 0, 0, 0, 0, 0);
		if (st == DJX_EX_IDLE && idle >= e->idle_ms) {
			uint32_t want = DJX_EX_IDLE;
			if (__atomic_compare_exchange_n(&e->state, &want, DJX_EX_EXIT, 0,
							__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
				raw6(SYS_exit, 0, 0, 0, 0, 0, 0);
			continue;
		}
		struct timespec ts = {0, 200 * 1000 * 1000};
		long r = raw6(SYS_futex, (long)&e->state, FUTEX_WAIT_PRIVATE, st, (long)&ts, 0, 0);
		if (r == -ETIMEDOUT) {
			idle += 200;
			/* Reparented: djx-bpf has exited. */
			if (raw6(SYS_getppid, 0, 0, 0, 0, 0, 0) != e->parent)
				raw6(SYS_exit, 0, 0, 0, 0, 0, 0);
		}
	}
	return 0;
}

/* The block sits above the stack, which grows down onto a guard page;
 * the staging buffer follows the block. */
struct djx_exec *djx_exec_new(void)
{
	char *p = mmap(NULL, MAP_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	if (mprotect(p, GUARD_SIZE, PROT_NONE) != 0) {
		munmap(p, MAP_SIZE);
		return NULL;
	}
	struct djx_exec *e = (struct djx_exec *)(p + GUARD_SIZE + STACK_SIZE);
	e->stage = (unsigned char *)e + BLOCK_SIZE;
	return e;
}

void djx_exec_free(struct djx_exec *e)
{
	munmap((char *)e - STACK_SIZE - GUARD_SIZE, MAP_SIZE);
}

int djx_exec_start(struct djx_exec *e, int files)
{
	sigset_t all, old;
	char *stack_top = (char *)e;
	int pid, err;

	e->parent = getpid();
	e->files = files;
	e->state = DJX_EX_IDLE;
	/* The task inherits this thread's mask: with every signal blocked,
	 * Go's handlers (copied, not shared: no CLONE_SIGHAND) never run on
	 * it. No CLONE_THREAD and exit signal 0: a process of its own, which
	 * a system call stuck in D state cannot keep djx-bpf from exiting. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pid = clone(serve, stack_top, CLONE_VM | CLONE_FS | (files ? CLONE_FILES : 0), e);
	err = errno;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return pid < 0 ? -err : pid;
}
