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
 * ClassLoad/ClassPrepare are enabled for AsyncGetCallTrace (stacks.c): it
 * returns ticks_no_class_load (-1) unless ClassLoad is enabled, and frames
 * of methods without a jmethodID come back as 0 (it never creates one, that
 * would allocate in a signal handler). GetClassMethods creates the
 * jmethodIDs of a class, so ClassPrepare calls it for each new class and
 * the session start for every class already loaded. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "djx.h"
#include <jvmticmlr.h> /* needs jni.h first */

#define RELAXED __ATOMIC_RELAXED

static JNIEnv *current_jni(void)
{
	JNIEnv *jni = NULL;
	if (djx_cfg->vm == NULL || (*djx_cfg->vm)->GetEnv(djx_cfg->vm, (void **)&jni, JNI_VERSION_1_6) != JNI_OK)
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

static void JNICALL on_class_load(jvmtiEnv *j, JNIEnv *jni, jthread t, jclass k)
{
	/* Enabled only so that AsyncGetCallTrace works. */
	(void)j, (void)jni, (void)t, (void)k;
}

static void JNICALL on_class_prepare(jvmtiEnv *j, JNIEnv *jni, jthread t, jclass k)
{
	uint64_t t0 = djx_thread_ns();

	(void)t;
	if (!__atomic_load_n(&djx.detached, __ATOMIC_ACQUIRE) && djx.class_events)
		make_method_ids(j, k);
	if (djx_cfg->opt.types)
		djx_types_prepare(j, jni, k); /* also counted in ns_types */
	__atomic_add_fetch(&djx.ns_code, djx_thread_ns() - t0, RELAXED);
}

struct pcref {
	const PCStackInfo *pc;
};

static int cmp_pc(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t)((const struct pcref *)a)->pc->pc;
	uintptr_t y = (uintptr_t)((const struct pcref *)b)->pc->pc;
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

/* Appends a record that JVMTI callbacks (not signal handlers) produce: when
 * the buffer is full, wakes the writer and waits for it a little. Returns
 * 0 appended, -1 dropped. */
static int emit_wait(JNIEnv *jni, const uint64_t *ids, size_t nids, uint8_t *rec, size_t len)
{
	struct timespec nap = {.tv_nsec = 2000000};

	if (len > DJX_BUF_CAP - DJX_BUF_RESERVE - DJX_HDR_LEN)
		return -1;
	for (int waited = 0;; waited += 2) {
		int rc = djx_emit(jni, ids, nids, rec, len, DJX_REC_HDR);
		if (rc >= 0)
			return rc == 0 ? 0 : -1;
		if (waited >= DJX_CODE_WAIT_MS || djx_writer_stalled())
			return -1; /* a stalled loader must not slow every compile */
		pthread_mutex_lock(&djx.mu);
		djx_kick_locked();
		pthread_mutex_unlock(&djx.mu);
		nanosleep(&nap, NULL);
	}
}

/* Neighbouring pcs mostly share their scopes: skipping an id seen among
 * the last few keeps djx_emit's sort short (it sorted every frame of every
 * pc: a fifth of the callback's time on H2). */
static size_t add_id(uint64_t *ids, size_t n, uint64_t id)
{
	for (size_t k = n > 8 ? n - 8 : 0; k < n; k++)
		if (ids[k] == id)
			return n;
	ids[n] = id;
	return n + 1;
}

static void compiled_load(jvmtiEnv *j, jmethodID method, jint code_size, const void *code_addr,
			  const void *compile_info)
{
	const jvmtiCompiledMethodLoadInlineRecord *ir = inline_info(compile_info);
	struct pcref *order = NULL;
	uint64_t *ids = NULL;
	size_t nids = 0, npos;
	uint32_t npcs = 0, n = 0;
	struct wbuf w;
	size_t start;

	(void)j;
	if (__atomic_load_n(&djx.detached, __ATOMIC_ACQUIRE))
		return;
	if (ir != NULL && ir->numpcs > 0 && ir->pcinfo != NULL)
		n = (uint32_t)ir->numpcs;
	if (n > 0) {
		order = malloc(n * sizeof *order);
		/* The byte cap bounds the frames a record can hold. */
		size_t maxf = (size_t)n * DJX_CODE_MAX_FRAMES;
		if (maxf > DJX_CODE_MAX_BYTES / 16 + DJX_CODE_MAX_FRAMES)
			maxf = DJX_CODE_MAX_BYTES / 16 + DJX_CODE_MAX_FRAMES;
		ids = malloc((maxf + 1) * sizeof *ids);
		if (order == NULL || ids == NULL)
			n = 0; /* out of memory: the CODE goes without its pc map */
		for (uint32_t i = 0; i < n; i++)
			order[i].pc = &ir->pcinfo[i];
		/* HotSpot emits them in pc order already; do not rely on it. */
		if (n > 1)
			qsort(order, n, sizeof *order, cmp_pc);
	}
	if (ids == NULL && (ids = malloc(sizeof *ids)) == NULL)
		goto out;
	ids[nids++] = (uint64_t)(uintptr_t)method;

	wb_init(&w, NULL, 0, 0);
	start = wb_begin(&w, REC_CODE);
	wb_u64(&w, 0); /* time, stamped when appended */
	wb_u64(&w, (uint64_t)(uintptr_t)method);
	wb_u64(&w, (uint64_t)(uintptr_t)code_addr);
	wb_u32(&w, (uint32_t)code_size);
	npos = w.len;
	wb_u32(&w, 0); /* npcs, patched */
	for (uint32_t i = 0; i < n && w.len < DJX_CODE_MAX_BYTES && !w.err; i++) {
		const PCStackInfo *p = order[i].pc;
		jint nf = p->numstackframes;
		if (nf < 0 || p->methods == NULL || p->bcis == NULL)
			nf = 0;
		if (nf > DJX_CODE_MAX_FRAMES)
			nf = DJX_CODE_MAX_FRAMES; /* keeps the innermost ones */
		wb_u64(&w, (uint64_t)(uintptr_t)p->pc);
		wb_u32(&w, (uint32_t)nf);
		for (jint f = 0; f < nf; f++) {
			wb_u64(&w, (uint64_t)(uintptr_t)p->methods[f]);
			wb_u64(&w, (uint64_t)(int64_t)p->bcis[f]);
			nids = add_id(ids, nids, (uint64_t)(uintptr_t)p->methods[f]);
		}
		npcs++;
	}
	if (!w.err)
		put_u32(w.p + npos, npcs);
	wb_end(&w, start);
	if (w.err || emit_wait(current_jni(), ids, nids, w.p, w.len) != 0)
		__atomic_add_fetch(&djx.n_code_dropped, 1, RELAXED);
	else
		__atomic_add_fetch(&djx.n_code_sent, 1, RELAXED);
	wb_free(&w);
out:
	free(order);
	free(ids);
}

/* Fixed-size records only need the lock: these callbacks may come from
 * the ServiceThread or, in JDK 17, while the JVM holds code-cache locks. */
static void append_small(const uint8_t *rec, size_t len)
{
	pthread_mutex_lock(&djx.mu);
	if (!djx.detached) {
		put_u64((uint8_t *)rec + DJX_REC_HDR, djx_now_ns());
		if (djx_append_locked(rec, len, 1) != 0)
			__atomic_add_fetch(&djx.n_dropped, 1, RELAXED);
	}
	pthread_mutex_unlock(&djx.mu);
}

static void JNICALL on_compiled_load(jvmtiEnv *j, jmethodID method, jint code_size, const void *code_addr,
				     jint map_length, const jvmtiAddrLocationMap *map, const void *compile_info)
{
	uint64_t t0 = djx_thread_ns();

	(void)map_length, (void)map;
	compiled_load(j, method, code_size, code_addr, compile_info);
	__atomic_add_fetch(&djx.ns_code, djx_thread_ns() - t0, RELAXED);
}

static void JNICALL on_compiled_unload(jvmtiEnv *j, jmethodID method, const void *code_addr)
{
	uint8_t rec[DJX_REC_HDR + 24];

	(void)j;
	put_rec_hdr(rec, REC_CODE_UNLOAD, 24);
	put_u64(rec + DJX_REC_HDR + 8, (uint64_t)(uintptr_t)method);
	put_u64(rec + DJX_REC_HDR + 16, (uint64_t)(uintptr_t)code_addr);
	append_small(rec, sizeof rec);
}

static void JNICALL on_dynamic_code(jvmtiEnv *j, const char *name, const void *address, jint length)
{
	uint8_t rec[DJX_REC_HDR + 24 + 256];
	size_t n = name ? strlen(name) : 0;

	(void)j;
	if (n > 256)
		n = 256; /* HotSpot's stub names are short */
	put_rec_hdr(rec, REC_STUB, (uint32_t)(24 + n));
	put_u64(rec + DJX_REC_HDR + 8, (uint64_t)(uintptr_t)address);
	put_u32(rec + DJX_REC_HDR + 16, (uint32_t)length);
	put_u32(rec + DJX_REC_HDR + 20, (uint32_t)n);
	if (n)
		memcpy(rec + DJX_REC_HDR + 24, name, n);
	append_small(rec, DJX_REC_HDR + 24 + n);
}

void djx_code_callbacks(jvmtiEventCallbacks *cb)
{
	cb->ClassLoad = on_class_load;
	cb->ClassPrepare = on_class_prepare;
	cb->CompiledMethodLoad = on_compiled_load;
	cb->CompiledMethodUnload = on_compiled_unload;
	cb->DynamicCodeGenerated = on_dynamic_code;
}

void djx_code_caps(jvmtiEnv *j)
{
	jvmtiCapabilities caps;

	if (!djx_cfg->opt.code)
		return;
	memset(&caps, 0, sizeof caps);
	caps.can_generate_compiled_method_load_events = 1;
	djx.code_events = (*j)->AddCapabilities(j, &caps) == JVMTI_ERROR_NONE;
}

static void enable_err(jvmtiEnv *j, jvmtiEvent ev, const char *what, int *ok)
{
	char msg[128];
	jvmtiError e = (*j)->SetEventNotificationMode(j, JVMTI_ENABLE, ev, NULL);

	if (e == JVMTI_ERROR_NONE)
		return;
	*ok = 0;
	snprintf(msg, sizeof msg, "enable %s: error %d", what, (int)e);
	pthread_mutex_lock(&djx.mu);
	djx_error_locked(msg);
	pthread_mutex_unlock(&djx.mu);
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
	int ok = 1;

	if (djx_cfg->opt.stacks) {
		/* ClassPrepare before the preload: no class falls in between. */
		enable_err(j, JVMTI_EVENT_CLASS_LOAD, "ClassLoad (stacks need it)", &ok);
		enable_err(j, JVMTI_EVENT_CLASS_PREPARE, "ClassPrepare (stacks need it)", &ok);
		djx.class_events = 1;
		preload_method_ids(j, jni);
	}
	if (!djx_cfg->opt.code)
		return;
	if (!djx.code_events) {
		pthread_mutex_lock(&djx.mu);
		djx_error_locked("AddCapabilities: no compiled-method events: no CODE records");
		pthread_mutex_unlock(&djx.mu);
	} else {
		enable_err(j, JVMTI_EVENT_COMPILED_METHOD_LOAD, "CompiledMethodLoad", &ok);
		enable_err(j, JVMTI_EVENT_COMPILED_METHOD_UNLOAD, "CompiledMethodUnload", &ok);
	}
	enable_err(j, JVMTI_EVENT_DYNAMIC_CODE_GENERATED, "DynamicCodeGenerated", &ok);
	/* Code generated before now (all of it in attach mode; stubs and the
	 * interpreter in launch mode, whose session starts at VMInit). Code
	 * compiled meanwhile may be reported twice. */
	(*j)->GenerateEvents(j, JVMTI_EVENT_DYNAMIC_CODE_GENERATED);
	if (djx.code_events)
		(*j)->GenerateEvents(j, JVMTI_EVENT_COMPILED_METHOD_LOAD);
}

void djx_code_release(jvmtiEnv *j)
{
	jvmtiCapabilities caps;

	if (djx.class_events) {
		(*j)->SetEventNotificationMode(j, JVMTI_DISABLE, JVMTI_EVENT_CLASS_LOAD, NULL);
		(*j)->SetEventNotificationMode(j, JVMTI_DISABLE, JVMTI_EVENT_CLASS_PREPARE, NULL);
	}
	if (!djx_cfg->opt.code)
		return;
	(*j)->SetEventNotificationMode(j, JVMTI_DISABLE, JVMTI_EVENT_DYNAMIC_CODE_GENERATED, NULL);
	if (djx.code_events) {
		(*j)->SetEventNotificationMode(j, JVMTI_DISABLE, JVMTI_EVENT_COMPILED_METHOD_LOAD, NULL);
		(*j)->SetEventNotificationMode(j, JVMTI_DISABLE, JVMTI_EVENT_COMPILED_METHOD_UNLOAD, NULL);
		memset(&caps, 0, sizeof caps);
		caps.can_generate_compiled_method_load_events = 1;
		(*j)->RelinquishCapabilities(j, &caps);
	}
}
