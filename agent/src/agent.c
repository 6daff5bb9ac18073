/* JVMTI entry points and callbacks of the djx-bpf agent.
 *
 * Agent_OnLoad (-agentpath:libdjxagent.so=OPTIONS) starts the session at
 * VMInit; Agent_OnAttach starts it at once (session.c). The callbacks only
 * dispatch: sampled allocations to alloc.c, GC events to session.c, class
 * and JIT code events to code.c and types.c. Calls go one way, from here
 * down: feature modules, then the emitter (emit.c), then the writer
 * (writer.c). */
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "code.h"
#include "config.h"
#include "djx.h"
#include "epoch.h"
#include "session.h"
#include "stats.h"
#include "types.h"
#include "util.h"

static void JNICALL on_vm_init(jvmtiEnv *j, JNIEnv *jni, jthread thread)
{
	char err[256];

	(void)jni;
	(void)thread;
	(*j)->SetEventNotificationMode(j, JVMTI_DISABLE, JVMTI_EVENT_VM_INIT, NULL);
	if (djx_session_start(j, err, sizeof err) != 0)
		djx_log("%s (profiling disabled)", err);
}

static void JNICALL on_vm_death(jvmtiEnv *j, JNIEnv *jni)
{
	(void)j;
	(void)jni;
	djx_session_vm_death();
}

static void JNICALL on_sampled_alloc(jvmtiEnv *j, JNIEnv *jni, jthread thread, jobject object,
				     jclass klass, jlong size)
{
	/* Wall time: a callback is seldom descheduled, and the thread's CPU
	 * clock is a system call that cost more than a dropped sample. */
	uint64_t t0 = djx_now_ns();

	(void)thread;
	djx_alloc_sampled(j, jni, object, klass, size);
	djx_count(&djx_stats.alloc_ns, djx_now_ns() - t0);
}

/* GarbageCollectionStart and GarbageCollectionFinish run in a restricted
 * context (inside the GC pause): no JNI, no JVMTI but raw monitors and
 * memory. What they call only takes the session lock and appends a
 * fixed-size record. */
static void JNICALL on_gc_start(jvmtiEnv *j)
{
	(void)j;
	djx_session_gc_start();
}

static void JNICALL on_gc_finish(jvmtiEnv *j)
{
	(void)j;
	djx_session_gc_finish();
}

static void JNICALL on_class_load(jvmtiEnv *j, JNIEnv *jni, jthread t, jclass k)
{
	/* Enabled only so that AsyncGetCallTrace works (code.c). */
	(void)j, (void)jni, (void)t, (void)k;
}

static void JNICALL on_class_prepare(jvmtiEnv *j, JNIEnv *jni, jthread t, jclass k)
{
	/* The thread's CPU time: a class's layout takes tens of us, in which
	 * the thread may be descheduled (wall time overstated it against
	 * perf), and the clock's two system calls are a few percent of it. */
	uint64_t t0 = djx_thread_ns();

	(void)t;
	djx_code_class_prepare(j, k);
	if (djx_cfg->opt.types)
		djx_types_prepare(j, jni, k); /* also counted in types_ns */
	djx_count(&djx_stats.code_ns, djx_thread_ns() - t0);
}

static void JNICALL on_compiled_load(jvmtiEnv *j, jmethodID method, jint code_size, const void *code_addr,
				     jint map_length, const jvmtiAddrLocationMap *map, const void *compile_info)
{
	uint64_t t0 = djx_now_ns(); /* wall time, as on_sampled_alloc */

	(void)map_length, (void)map;
	djx_code_compiled_load(j, method, code_size, code_addr, compile_info);
	djx_count(&djx_stats.code_ns, djx_now_ns() - t0);
}

static void JNICALL on_compiled_unload(jvmtiEnv *j, jmethodID method, const void *code_addr)
{
	(void)j;
	djx_code_unload(method, code_addr);
}

static void JNICALL on_dynamic_code(jvmtiEnv *j, const char *name, const void *address, jint length)
{
	(void)j;
	djx_code_dynamic(name, address, length);
}

/* Gets an env with the capabilities and callbacks, the last session's
 * when this library ran one (its capabilities were given back at its
 * end); 0 or -1 with err set, or DJX_RC_SAMPLER_BUSY, the env disposed. */
static int setup_env(JavaVM *vm, char *err, size_t errlen)
{
	jvmtiCapabilities caps;
	jvmtiEventCallbacks cb;
	jvmtiEnv *j = djx_cfg->jvmti;
	jvmtiError e;

	/* SampledObjectAlloc needs JVMTI 11. */
	if (j == NULL && ((*vm)->GetEnv(vm, (void **)&j, JVMTI_VERSION_11) != JNI_OK || j == NULL)) {
		snprintf(err, errlen, "JVMTI 11 not available (JDK 11 or newer needed)");
		return -1;
	}
	memset(&caps, 0, sizeof caps);
	caps.can_generate_sampled_object_alloc_events = 1;
	caps.can_get_line_numbers = 1;
	caps.can_get_source_file_name = 1;
	e = (*j)->AddCapabilities(j, &caps);
	if (e == JVMTI_ERROR_NONE) {
		djx_epoch_caps(j);
		djx_code_caps(j);
	}
	if (e == JVMTI_ERROR_NOT_AVAILABLE) {
		snprintf(err, errlen, "heap sampling is in use by another agent (another djx-bpf profile?)");
		(*j)->DisposeEnvironment(j);
		djx_config_set_env(vm, NULL);
		return DJX_RC_SAMPLER_BUSY;
	}
	if (e != JVMTI_ERROR_NONE) {
		snprintf(err, errlen, "AddCapabilities: error %d", (int)e);
		goto fail;
	}
	memset(&cb, 0, sizeof cb);
	cb.VMInit = on_vm_init;
	cb.VMDeath = on_vm_death;
	cb.SampledObjectAlloc = on_sampled_alloc;
	cb.GarbageCollectionStart = on_gc_start;
	cb.GarbageCollectionFinish = on_gc_finish;
	cb.ClassLoad = on_class_load;
	cb.ClassPrepare = on_class_prepare;
	cb.CompiledMethodLoad = on_compiled_load;
	cb.CompiledMethodUnload = on_compiled_unload;
	cb.DynamicCodeGenerated = on_dynamic_code;
	e = (*j)->SetEventCallbacks(j, &cb, (jint)sizeof cb);
	if (e != JVMTI_ERROR_NONE) {
		snprintf(err, errlen, "SetEventCallbacks: error %d", (int)e);
		goto fail;
	}
	djx_config_set_env(vm, j);
	return 0;
fail:
	(*j)->DisposeEnvironment(j);
	djx_config_set_env(vm, NULL);
	return -1;
}

JNIEXPORT jint JNICALL Agent_OnLoad(JavaVM *vm, char *options, void *reserved)
{
	char err[256];
	jvmtiEnv *j;
	jvmtiError e;

	(void)reserved;
	/* Bad options are a caller bug: fail the launch loudly. */
	if (djx_config_parse(options, "launch", err, sizeof err) != 0) {
		djx_log("%s", err);
		return JNI_ERR;
	}
	if (setup_env(vm, err, sizeof err) != 0) {
		djx_log("%s (profiling disabled)", err);
		return JNI_OK;
	}
	/* Set now so that threads created later draw their first sample point
	 * with this interval. */
	j = djx_cfg->jvmti;
	e = djx_alloc_set_interval(j);
	if (e == JVMTI_ERROR_NONE)
		e = (*j)->SetEventNotificationMode(j, JVMTI_ENABLE, JVMTI_EVENT_VM_INIT, NULL);
	if (e != JVMTI_ERROR_NONE) {
		snprintf(err, sizeof err, "error %d", (int)e);
		djx_log("setup: %s (profiling disabled)", err);
	}
	return JNI_OK;
}

JNIEXPORT jint JNICALL Agent_OnAttach(JavaVM *vm, char *options, void *reserved)
{
	char err[256];
	int rc;

	(void)reserved;
	/* HotSpot calls Agent_OnAttach again on each load of the same library
	 * (the loader keeps one per JVM): a new session once the last ended. */
	if (djx_session_reuse() != 0) {
		djx_log("a profile of this JVM is running already");
		return DJX_RC_SAMPLER_BUSY;
	}
	if (djx_config_parse(options, "attach", err, sizeof err) != 0) {
		djx_log("%s", err);
		return JNI_ERR;
	}
	rc = setup_env(vm, err, sizeof err);
	if (rc != 0) {
		djx_log("%s", err);
		return rc == DJX_RC_SAMPLER_BUSY ? rc : JNI_ERR;
	}
	if (djx_session_start(djx_cfg->jvmti, err, sizeof err) != 0) {
		djx_log("%s", err);
		(*djx_cfg->jvmti)->DisposeEnvironment(djx_cfg->jvmti);
		djx_config_set_env(vm, NULL);
		return JNI_ERR;
	}
	return JNI_OK;
}
