/* Clocks, logging and small JVMTI helpers. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
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

int djx_cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

void djx_dealloc(jvmtiEnv *j, void *p)
{
	if (p != NULL)
		(*j)->Deallocate(j, (unsigned char *)p);
}

jvmtiEnv *djx_private_env(JavaVM *vm, int lines)
{
	jvmtiCapabilities caps;
	jvmtiEnv *e = NULL;

	if ((*vm)->GetEnv(vm, (void **)&e, JVMTI_VERSION_11) != JNI_OK || e == NULL)
		return NULL;
	memset(&caps, 0, sizeof caps);
	caps.can_tag_objects = 1;
	caps.can_get_line_numbers = lines;
	if ((*e)->AddCapabilities(e, &caps) != JVMTI_ERROR_NONE) {
		(*e)->DisposeEnvironment(e);
		return NULL;
	}
	if (lines) {
		/* Onload-only in HotSpot: in attach mode locals go by slot. */
		memset(&caps, 0, sizeof caps);
		caps.can_access_local_variables = 1;
		(*e)->AddCapabilities(e, &caps);
	}
	return e;
}
