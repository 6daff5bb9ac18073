/* Clocks, logging and small JVMTI helpers. */
#include <stdarg.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util.h"

uint64_t djx_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t djx_cpu_ns(clockid_t clock)
{
	struct timespec ts;

	if (clock_gettime(clock, &ts) != 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* No __thread in this library: dlopen'ing one with a TLS segment sends
 * every thread's next dynamic TLS access (libjvm's Thread::current() too)
 * down glibc's allocating slow path, which a signal handler interrupting it
 * corrupts (docs/design.md). embed_test.go checks there is none. */
uint32_t djx_tid(void)
{
	return (uint32_t)syscall(SYS_gettid);
}

/* Written at once, so that it does not interleave with the JVM's output. */
void djx_log(const char *fmt, ...)
{
	char line[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	fprintf(stderr, DJX_LOG "%s\n", line);
}

void djx_dealloc(jvmtiEnv *j, void *p)
{
	if (p != NULL)
		(*j)->Deallocate(j, (unsigned char *)p);
}
