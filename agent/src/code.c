/* JIT code and jmethodIDs.
 *
 * CompiledMethodLoad becomes a CODE record: the code range and its pc map
 * from compile_info's JVMTI_CMLR_INLINE_INFO record (HotSpot builds it in
 * create_inline_record, jvmtiExport.cpp: one PCStackInfo per PcDesc with
 * debug info, in PcDesc order; methods[0] is the scope at the pc, i.e. the
 * innermost inlined method, and methods[n-1] the compiled root). METHOD
 * records for every method a CODE names go first. CompiledMethodUnload
 * becomes CODE_UNLOAD and DynamicCodeGenerated STUB.
 *
 * code=0 leaves all three off, and the capability unclaimed; code=2 does
 * so on HotSpot only (its vmStructs found), where the profiler with stacks
 * unwound in BPF reads JIT code from the code cache itself
 * (bpfstack.CodeMap): these records served only its JIT code map, and
 * HotSpot's work to build a CompiledMethodLoad record is about 0.4% of
 * the JVM's CPU on H2. Another JVM keeps them, as the profiler cannot read
 * its code. A CompiledMethodLoad listener also has C1 and C2 record debug
 * information between safepoints (compute_recording_non_safepoints,
 * debugInfoRec.cpp), which names a sampled access by its own line rather
 * than its loop's safepoint: without the records the agent turns
 * DebugNonSafepoints on instead, unless it was set, as async-profiler
 * does, and back off at the session's end if it turned it on.
 *
 * ClassLoad/ClassPrepare are enabled for AsyncGetCallTrace (stacks.c): it
 * returns ticks_no_class_load (-1) unless ClassLoad is enabled, and frames
 * of methods without a jmethodID come back as 0 (it never creates one, that
 * would allocate in a signal handler). GetClassMethods creates the
 * jmethodIDs of a class, so ClassPrepare calls it for each new class and
 * the session start for every class already loaded. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "code.h"
#include "config.h"
#include "emit.h"
#include "stats.h"
#include "vmstructs.h"
#include "writer.h"

static struct {
	int code_events;    /* can_generate_compiled_method_load_events acquired */
	int class_events;   /* ClassLoad/ClassPrepare enabled (for ASGCT) */
	int records;        /* CODE/CODE_UNLOAD/STUB records (code=1; code=2 off HotSpot) */
	int hotspot;        /* vmStructs readable */
	int non_safepoints; /* without records: djx_vm_flag_set's answer for DebugNonSafepoints */
} cd;

int djx_code_class_events(void)
{
	return cd.class_events;
}

static JNIEnv *current_jni(void)
{
	JNIEnv *jni = NULL;
	JavaVM *vm = djx_cfg->vm;

	if (vm == NULL || (*vm)->GetEnv(vm, (void **)&jni, JNI_VERSION_1_6) != JNI_OK)
		return NULL;
	return jni;
}

static void make_method_ids(jvmtiEnv *j, jclass k)
{
	jmethodID *ms = NULL;
	jint n = 0;

	/* CLASS_NOT_PREPARED for classes still loading: their ClassPrepare
	 * comes later. */
	if ((*j)->GetClassMethods(j, k, &n, &ms) == JVMTI_ERROR_NONE && ms != NULL)
		(*j)->Deallocate(j, (unsigned char *)ms);
}

void djx_code_class_prepare(jvmtiEnv *j, jclass k)
{
	if (!djx_detached() && cd.class_events)
		make_method_ids(j, k);
}

static int cmp_pc(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t)(*(const PCStackInfo *const *)a)->pc;
	uintptr_t y = (uintptr_t)(*(const PCStackInfo *const *)b)->pc;
	return x < y ? -1 : x > y;
}

static const jvmtiCompiledMethodLoadInlineRecord *inline_info(const void *compile_info)
{
	const jvmtiCompiledMethodLoadRecordHeader *h = compile_info;
	for (int guard = 0; h != NULL && guard < 64; h = h->next, guard++)
		if (h->kind == JVMTI_CMLR_INLINE_INFO)
			return (const jvmtiCompiledMethodLoadInlineRecord *)h;
	return NULL;
}

void djx_code_compiled_load(jvmtiEnv *j, jmethodID method, jint code_size, const void *code_addr,
			    const void *compile_info)
{
	const jvmtiCompiledMethodLoadInlineRecord *ir = inline_info(compile_info);
	const PCStackInfo **order = NULL;
	struct djx_code c = {.method = method, .start = code_addr, .size = code_size};

	(void)j;
	if (djx_detached())
		return;
	if (ir != NULL && ir->numpcs > 0 && ir->pcinfo != NULL)
		c.npcs = (uint32_t)ir->numpcs;
	if (c.npcs > 0 && (order = malloc(c.npcs * sizeof *order)) == NULL)
		c.npcs = 0; /* out of memory: the CODE goes without its pc map */
	for (uint32_t i = 0; i < c.npcs; i++)
		order[i] = &ir->pcinfo[i];
	/* HotSpot emits them in pc order already; do not rely on it. */
	if (c.npcs > 1)
		qsort(order, c.npcs, sizeof *order, cmp_pc);
	c.pcs = order;
	if (djx_emit_code(current_jni(), &c) != 0)
		djx_count(&djx_stats.code_dropped, 1);
	else
		djx_count(&djx_stats.code_sent, 1);
	free(order);
}

void djx_code_unload(jmethodID method, const void *code_addr)
{
	djx_emit_code_unload(method, code_addr);
}

void djx_code_dynamic(const char *name, const void *address, jint length)
{
	djx_emit_stub(name, address, length);
}

/* Before a session: no capability or event of the last one's counted. */
void djx_code_reset_locked(void)
{
	memset(&cd, 0, sizeof cd);
}

void djx_code_caps(jvmtiEnv *j)
{
	jvmtiCapabilities caps;

	char err[160];

	cd.records = djx_cfg->opt.code;
	if (djx_cfg->opt.code != 1) {
		cd.hotspot = djx_vm_init(err, sizeof err) == 0;
		cd.records = djx_cfg->opt.code == 2 && !cd.hotspot;
	}
	if (!cd.records) {
		/* Before any compilation it should cover: at Agent_OnLoad in
		 * launch mode; code compiled before an attach keeps what it has. */
		if (cd.hotspot)
			cd.non_safepoints = djx_vm_flag_set("DebugNonSafepoints", 1);
		return;
	}
	memset(&caps, 0, sizeof caps);
	caps.can_generate_compiled_method_load_events = 1;
	cd.code_events = (*j)->AddCapabilities(j, &caps) == JVMTI_ERROR_NONE;
}

static void enable_err(jvmtiEnv *j, jvmtiEvent ev, const char *what)
{
	char msg[128];
	jvmtiError e = (*j)->SetEventNotificationMode(j, JVMTI_ENABLE, ev, NULL);

	if (e == JVMTI_ERROR_NONE)
		return;
	snprintf(msg, sizeof msg, "enable %s: error %d", what, (int)e);
	djx_emit_error(msg);
}

/* jmethodIDs for every class loaded so far (ClassPrepare covers later ones). */
static void preload_method_ids(jvmtiEnv *j, JNIEnv *jni)
{
	jclass *ks = NULL;
	jint n = 0;

	if ((*j)->GetLoadedClasses(j, &n, &ks) != JVMTI_ERROR_NONE || ks == NULL)
		return;
	for (jint i = 0; i < n; i++) {
		make_method_ids(j, ks[i]);
		if (jni != NULL)
			(*jni)->DeleteLocalRef(jni, ks[i]);
	}
	(*j)->Deallocate(j, (unsigned char *)ks);
}

void djx_code_start(jvmtiEnv *j, JNIEnv *jni)
{
	if (djx_cfg->opt.stacks) {
		/* ClassPrepare before the preload: no class falls in between. */
		enable_err(j, JVMTI_EVENT_CLASS_LOAD, "ClassLoad (stacks need it)");
		enable_err(j, JVMTI_EVENT_CLASS_PREPARE, "ClassPrepare (stacks need it)");
		cd.class_events = 1;
		preload_method_ids(j, jni);
	}
	if (!cd.records) {
		if (cd.hotspot && cd.non_safepoints < 0)
			djx_emit_error("DebugNonSafepoints not found in the flag table: compiled code's lines at safepoints only");
		return;
	}
	if (!cd.code_events) {
		djx_emit_error("AddCapabilities: no compiled-method events: no CODE records");
	} else {
		enable_err(j, JVMTI_EVENT_COMPILED_METHOD_LOAD, "CompiledMethodLoad");
		enable_err(j, JVMTI_EVENT_COMPILED_METHOD_UNLOAD, "CompiledMethodUnload");
	}
	enable_err(j, JVMTI_EVENT_DYNAMIC_CODE_GENERATED, "DynamicCodeGenerated");
	/* Code generated before now (all of it in attach mode; stubs and the
	 * interpreter in launch mode, whose session starts at VMInit). Code
	 * compiled meanwhile may be reported twice. */
	(*j)->GenerateEvents(j, JVMTI_EVENT_DYNAMIC_CODE_GENERATED);
	if (cd.code_events)
		(*j)->GenerateEvents(j, JVMTI_EVENT_COMPILED_METHOD_LOAD);
}

void djx_code_release(jvmtiEnv *j)
{
	jvmtiCapabilities caps;

	if (cd.class_events) {
		(*j)->SetEventNotificationMode(j, JVMTI_DISABLE, JVMTI_EVENT_CLASS_LOAD, NULL);
		(*j)->SetEventNotificationMode(j, JVMTI_DISABLE, JVMTI_EVENT_CLASS_PREPARE, NULL);
	}
	if (!cd.records) {
		if (cd.non_safepoints == 2 && djx_vm_flag_set("DebugNonSafepoints", 0) == 2)
			cd.non_safepoints = 1;
		return;
	}
	(*j)->SetEventNotificationMode(j, JVMTI_DISABLE, JVMTI_EVENT_DYNAMIC_CODE_GENERATED, NULL);
	if (cd.code_events) {
		(*j)->SetEventNotificationMode(j, JVMTI_DISABLE, JVMTI_EVENT_COMPILED_METHOD_LOAD, NULL);
		(*j)->SetEventNotificationMode(j, JVMTI_DISABLE, JVMTI_EVENT_COMPILED_METHOD_UNLOAD, NULL);
		memset(&caps, 0, sizeof caps);
		caps.can_generate_compiled_method_load_events = 1;
		(*j)->RelinquishCapabilities(j, &caps);
	}
}
