/* Data types (option types=1): the loader names a sampled heap
 * access by the klass word in the accessed object's header and the offset
 * of the access, so the agent tells it every loaded class's Klass*, JVM
 * signature and instance field layout (CLASS records), after a TYPES_INFO
 * that says whether it can and how the JVM encodes oops and klass words.
 *
 * HotSpot only. The Klass* is the word at java_lang_Class::_klass_offset in
 * the class's mirror (vmStructs); a field's offset is its instance jfieldID
 * >> 2 (jfieldIDWorkaround::to_instance_jfieldID in product builds). Both
 * are checked against a byte[], a java.lang.Integer and a java.lang.Long
 * before anything is sent (self_check). A static jfieldID is a JNIid*,
 * whose _offset (vmStructs) is the static's offset in the class's mirror:
 * checked on Boolean.TRUE and FALSE, so that a heap walker reading a
 * mirror's static slots from outside the JVM can name them.
 *
 * Classes loaded at the start go from the writer (GetLoadedClasses, array
 * classes included); later ones from ClassPrepare, which never waits for
 * buffer space (a dropped one is not marked sent); 'K' from the loader
 * sends what was not sent yet, e.g. array classes, which have no event. */
#define _GNU_SOURCE /* process_vm_readv */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "djx.h"
#include "emit.h"
#include "epoch.h"
#include "mset.h"
#include "stats.h"
#include "types.h"
#include "util.h"
#include "vmstructs.h"
#include "writer.h"
#include "zaddr.h"

#define RELAXED __ATOMIC_RELAXED

static struct {
	int on;       /* atomic: CLASS records may be built */
	int fields;   /* instance field offsets from jfieldIDs hold */
	int statics;  /* static offsets in mirrors from JNIids hold */
	uint64_t jni_holder, jni_off; /* JNIid::_holder and _offset */
	int events;   /* ClassPrepare enabled by us */
	int inflight; /* atomic: ClassPrepare callbacks reading oops */
	int klass_off;
	uint64_t java_mirror; /* ZGC: Klass::_java_mirror + OopHandle::_obj */
	uint32_t kbytes, kshift;
	uint64_t kbase;
	struct mset sent; /* under the session lock: (klass, signature) keys sent */
	/* Under the session lock: klass words sent. A resend skips them without
	 * asking their signatures, most of its cost; a klass word reused after
	 * an unloading is described again by its ClassPrepare. */
	struct mset sent_klass;
} ty;

/* Raw oop reads (a local handle's slot, the words of the object it holds)
 * are trusted only between two reads of the GC counters showing that no
 * stop-the-world GC ran or started meanwhile (djx_epoch_begin and
 * djx_epoch_same): HotSpot posts GarbageCollectionStart in the pause before
 * any object moves. Shenandoah moves objects concurrently but keeps the
 * old copies whole until every handle points at the new ones. ZGC's
 * handles hold colored references, decoded (zaddr.c); a mirror read
 * through one must point back from its Klass (klasses_of). The local
 * references keep the objects alive. */
static uintptr_t oop_of(jobject h)
{
	uint64_t v = h ? djx_z_decode(__atomic_load_n((uintptr_t *)h, RELAXED)) : 0;
	return v == 1 ? 0 : (uintptr_t)v;
}

/* The errno of a process_vm_readv on ourselves that failed other than
 * with EFAULT (EPERM or ENOSYS from a container's seccomp filter), 0
 * while none did; atomic. It turns the types off for good: plain loads
 * instead could fault the JVM on memory a GC uncommitted meanwhile. */
static int refused;
static int refusal_told; /* atomic: this session's ERROR sent */

/* out[i] = the u64 at addr[i], 0 when unreadable or addr[i] is 0.
 * process_vm_readv on ourselves: memory a GC uncommitted meanwhile reads
 * as an error instead of faulting. 0, or -1 (every word 0) once the call
 * is refused: ty.on goes off with it. */
static int read_words(const uintptr_t *addr, size_t n, uint64_t *out)
{
	struct iovec loc[256], rem[256];
	size_t idx[256];
	static pid_t self; /* glibc's getpid() is a system call each time */

	if (self == 0)
		self = getpid();

	memset(out, 0, n * sizeof *out);
	if (__atomic_load_n(&refused, RELAXED) != 0)
		return -1;
	for (size_t i = 0; i < n;) {
		size_t m = 0, next = i, done;
		ssize_t got;
		/* The remote iovecs are one stream that fills the local ones in
		 * order: an empty one would shift every word after it. */
		for (; next < n && m < 256; next++) {
			if (addr[next] == 0)
				continue;
			idx[m] = next;
			loc[m] = (struct iovec){&out[next], 8};
			rem[m] = (struct iovec){(void *)addr[next], 8};
			m++;
		}
		if (m == 0)
			break;
		got = process_vm_readv(self, loc, m, rem, m, 0);
		if (got < 0 && errno != EFAULT) {
			int none = 0;
			__atomic_compare_exchange_n(&refused, &none, errno ? errno : EPERM, 0, RELAXED, RELAXED);
			__atomic_store_n(&ty.on, 0, __ATOMIC_SEQ_CST);
			memset(out, 0, n * sizeof *out);
			return -1;
		}
		/* Whole words read; the one after them failed. */
		done = got > 0 ? (size_t)got / 8 : 0;
		if (done < m) {
			out[idx[done]] = 0; /* maybe half read */
			i = idx[done] + 1;
		} else {
			i = next;
		}
	}
	return 0;
}

/* Why the types are off after a refusal, in buf. */
static void refusal_text(char *buf, size_t len)
{
	int e = __atomic_load_n(&refused, RELAXED);
	char num[24];
	const char *name = num;

	if (e == EPERM)
		name = "EPERM";
	else if (e == ENOSYS)
		name = "ENOSYS";
	else
		snprintf(num, sizeof num, "errno %d", e);
	snprintf(buf, len, "process_vm_readv on the JVM itself refused (%s; a seccomp filter?): "
		 "no data types, rather than plain loads that could fault the JVM", name);
}

/* Sends the refusal as an ERROR, once a session; never under the lock. */
static void tell_refusal(void)
{
	char msg[200];

	if (__atomic_load_n(&refused, RELAXED) == 0 || __atomic_exchange_n(&refusal_told, 1, RELAXED))
		return;
	refusal_text(msg, sizeof msg);
	djx_emit_error(msg);
}

static uint64_t read_word(uintptr_t addr)
{
	uint64_t v;
	read_words(&addr, 1, &v);
	return v;
}

/* ZGC relocates concurrently: a mirror whose handle was not yet healed
 * may be read where it was, after its page was reused. out[i] stays only
 * where the Klass's own mirror handle decodes to the address read, the
 * mirror's + klass_off in addr[i]; addr is scratch. 0, or -1 as read_words. */
static int points_back(uintptr_t *addr, size_t n, uint64_t *out)
{
	uint64_t *w = malloc(n * sizeof *w);
	uintptr_t *at = malloc(n * sizeof *at);
	int rc = -1;

	if (w == NULL || at == NULL)
		goto out;
	for (size_t i = 0; i < n; i++)
		at[i] = out[i] ? (uintptr_t)out[i] + ty.java_mirror : 0;
	if (read_words(at, n, w) != 0) /* the OopHandles' oop* */
		goto out;
	for (size_t i = 0; i < n; i++)
		at[i] = (uintptr_t)w[i];
	if (read_words(at, n, w) != 0) /* the mirrors' colored references */
		goto out;
	for (size_t i = 0; i < n; i++)
		if (out[i] != 0 && djx_z_decode(w[i]) + (uintptr_t)ty.klass_off != addr[i])
			out[i] = 0;
	rc = 0;
out:
	free(w);
	free(at);
	return rc;
}

/* Reads out[i], the Klass* of ks[i] (the word at the mirror's klass
 * offset), for i < n, in one read within one GC epoch; -1 if GCs kept
 * getting in the way (~20 ms). */
static int klasses_of(const jclass *ks, size_t n, uint64_t *out)
{
	struct timespec nap = {.tv_nsec = 1000000};
	uintptr_t *addr = malloc((n + 1) * sizeof *addr);
	int rc = -1;

	for (int tries = 0; tries < 20 && addr != NULL; tries++) {
		uint64_t s;
		if (djx_epoch_begin(&s) == 0) {
			for (size_t i = 0; i < n; i++) {
				uintptr_t m = oop_of(ks[i]);
				addr[i] = m ? m + (uintptr_t)ty.klass_off : 0;
			}
			if (read_words(addr, n, out) != 0 || (djx_z_on() && points_back(addr, n, out) != 0))
				break;
			if (djx_epoch_same(s)) {
				rc = 0;
				break;
			}
		}
		if (djx_detached())
			break;
		nanosleep(&nap, NULL);
	}
	free(addr);
	return rc;
}

static uint64_t mirror_klass(jclass k)
{
	uintptr_t m = oop_of(k);
	return m ? read_word(m + (uintptr_t)ty.klass_off) : 0;
}

static uint64_t key_of(uint64_t klass, const char *sig)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (const char *p = sig ? sig : ""; *p; p++)
		h = (h ^ (uint8_t)*p) * 0x100000001b3ull;
	h ^= klass * 0x9e3779b97f4a7c15ull;
	return h ? h : 1;
}

/* HotSpot's compressed oops and klass pointers: JDK 17 names them
 * _narrow_oop._base, newer JDKs _base. */
static void *static_either(const char *type, const char *a, const char *b)
{
	void *p = djx_vm_static(type, a);
	return p ? p : djx_vm_static(type, b);
}

static jclass find(jvmtiEnv *j, jclass *ks, char **sigs, jint n, const char *sig)
{
	(void)j;
	for (jint i = 0; i < n; i++)
		if (sigs[i] != NULL && strcmp(sigs[i], sig) == 0)
			return ks[i];
	return NULL;
}

static jfieldID instance_field(jvmtiEnv *j, jclass k, const char *want)
{
	jfieldID *fs = NULL, got = NULL;
	jint n = 0;

	if (k == NULL || (*j)->GetClassFields(j, k, &n, &fs) != JVMTI_ERROR_NONE)
		return NULL;
	for (jint i = 0; i < n && got == NULL; i++) {
		char *name = NULL;
		jint mods = 0;
		if ((*j)->GetFieldModifiers(j, k, fs[i], &mods) == JVMTI_ERROR_NONE && !(mods & 0x0008) &&
		    (*j)->GetFieldName(j, k, fs[i], &name, NULL, NULL) == JVMTI_ERROR_NONE && strcmp(name, want) == 0)
			got = fs[i];
		djx_dealloc(j, name);
	}
	djx_dealloc(j, fs);
	return got;
}

/* Offsets in instance jfieldIDs: (offset << 2) | instance bit (2). */
static int fid_offset(jfieldID f, uint32_t *off)
{
	intptr_t v = (intptr_t)f;

	if ((v & 3) != 2 || v < 0 || (v >> 2) > 0x7fffffff)
		return -1;
	*off = (uint32_t)(v >> 2);
	return 0;
}

/* The self-check: what the agent would send must match what the JVM
 * really does, or nothing is sent. It guards the vmStructs names and
 * types, the klass word's place and width in an object header (absent at
 * +8 with compact object headers), the compressed klass decoding, and the
 * jfieldID encoding of field offsets. */
/* box_fields_hold: every prepared box class has its value field where the
 * layout rule puts it, decoded from its jfieldID; at least one is prepared. */
static int box_fields_hold(jvmtiEnv *j, jclass *ks, char **sigs, jint n, uint32_t hdr)
{
	static const struct {
		const char *sig;
		int wide;
	} boxes[] = {{"Ljava/lang/Integer;", 0}, {"Ljava/lang/Long;", 1}, {"Ljava/lang/Short;", 0},
		     {"Ljava/lang/Byte;", 0}, {"Ljava/lang/Character;", 0}, {"Ljava/lang/Boolean;", 0},
		     {"Ljava/lang/Float;", 0}, {"Ljava/lang/Double;", 1}};
	int checked = 0;

	for (size_t i = 0; i < sizeof boxes / sizeof boxes[0]; i++) {
		jclass k = find(j, ks, sigs, n, boxes[i].sig);
		jint st = 0;
		jfieldID f;
		uint32_t off;
		if (k == NULL || (*j)->GetClassStatus(j, k, &st) != JVMTI_ERROR_NONE || !(st & JVMTI_CLASS_STATUS_PREPARED))
			continue;
		f = instance_field(j, k, "value");
		if (f == NULL || fid_offset(f, &off) != 0 || off != (boxes[i].wide ? (hdr + 7) & ~7u : hdr))
			return 0;
		checked++;
	}
	return checked > 0;
}

/* A static jfieldID's JNIid: its holder's Klass* and the static's offset
 * in the holder's mirror; -1 when f is no JNIid or its offset is absurd. */
static int jniid_of(jfieldID f, uint64_t *holder, uint32_t *off)
{
	uintptr_t a[2];
	uint64_t w[2];

	if (f == NULL || ((uintptr_t)f & 3) != 0)
		return -1; /* an instance jfieldID, or a debug build's */
	a[0] = (uintptr_t)f + ty.jni_holder;
	a[1] = (uintptr_t)f + ty.jni_off;
	read_words(a, 2, w);
	*holder = w[0];
	*off = (uint32_t)w[1]; /* the int at _offset: the word's low half */
	return *holder != 0 && *off >= 8 && *off < (1u << 24) ? 0 : -1;
}

static jfieldID static_field(jvmtiEnv *j, jclass k, const char *want)
{
	jfieldID *fs = NULL, got = NULL;
	jint n = 0;

	if ((*j)->GetClassFields(j, k, &n, &fs) != JVMTI_ERROR_NONE)
		return NULL;
	for (jint i = 0; i < n && got == NULL; i++) {
		char *name = NULL;
		jint mods = 0;
		if ((*j)->GetFieldModifiers(j, k, fs[i], &mods) == JVMTI_ERROR_NONE && (mods & 0x0008) &&
		    (*j)->GetFieldName(j, k, fs[i], &name, NULL, NULL) == JVMTI_ERROR_NONE && strcmp(name, want) == 0)
			got = fs[i];
		djx_dealloc(j, name);
	}
	djx_dealloc(j, fs);
	return got;
}

/* Whether the reference at the mirror of k + off, decoded as in says,
 * is the object v, and the mirror's Klass* is holder: read in one GC
 * epoch; 0 no, 1 yes, -1 GCs kept getting in the way. */
static int slot_holds(jclass k, uint32_t off, jobject v, uint64_t holder, const struct djx_types_info *in)
{
	struct timespec nap = {.tv_nsec = 1000000};

	for (int tries = 0; tries < 20; tries++) {
		uint64_t s, raw, want, kl, got;
		uintptr_t m;
		if (djx_epoch_begin(&s) != 0) {
			nanosleep(&nap, NULL);
			continue;
		}
		m = oop_of(k);
		raw = m ? read_word(m + off) : 0;
		kl = m ? read_word(m + (uintptr_t)ty.klass_off) : 0;
		want = oop_of(v);
		if (!djx_epoch_same(s))
			continue;
		got = in->oop_bytes == 4 ? ((uint32_t)raw ? in->oop_base + ((uint64_t)(uint32_t)raw << in->oop_shift) : 0)
					 : djx_z_decode(raw);
		return m != 0 && want != 0 && got == want && kl == holder;
	}
	return -1;
}

/* The statics' self-check: NULL when static offsets hold, else why not.
 * JVMTI's and JNI's static jfieldIDs must be the same JNIid, whose
 * holder is Boolean's Klass* and whose offset in Boolean's mirror holds
 * the reference GetStaticObjectField returns. */
static const char *statics_hold(jvmtiEnv *j, JNIEnv *jni, jclass *ks, char **sigs, jint n,
				const struct djx_types_info *in)
{
	static const char *const names[] = {"TRUE", "FALSE"};
	jclass bk = find(j, ks, sigs, n, "Ljava/lang/Boolean;");
	const char *why = NULL;
	uint32_t offs[2] = {0, 0};
	jint st = 0;

	if (djx_vm_offset("JNIid", "_holder", &ty.jni_holder) != 0 || djx_vm_offset("JNIid", "_offset", &ty.jni_off) != 0)
		return "vmStructs: no JNIid::_holder or _offset: no static fields";
	if (bk == NULL || (*j)->GetClassStatus(j, bk, &st) != JVMTI_ERROR_NONE || !(st & JVMTI_CLASS_STATUS_INITIALIZED))
		return "self-check: java.lang.Boolean not initialized: no static fields";
	for (int i = 0; i < 2 && why == NULL; i++) {
		jfieldID f = static_field(j, bk, names[i]);
		jfieldID g = (*jni)->GetStaticFieldID(jni, bk, names[i], "Ljava/lang/Boolean;");
		jobject v = NULL;
		uint64_t holder;
		int held;
		if ((*jni)->ExceptionCheck(jni))
			(*jni)->ExceptionClear(jni);
		if (f == NULL || f != g || jniid_of(f, &holder, &offs[i]) != 0) {
			why = "self-check: static jfieldIDs are not JNIids: no static fields";
			break;
		}
		v = (*jni)->GetStaticObjectField(jni, bk, g);
		held = slot_holds(bk, offs[i], v, holder, in);
		if (held != 1)
			why = held < 0 ? "self-check: GCs kept moving Boolean's mirror: no static fields"
				       : "self-check: Boolean.TRUE is not at its mirror + JNIid::_offset: no static fields";
		if (v != NULL)
			(*jni)->DeleteLocalRef(jni, v);
	}
	if (why == NULL && offs[0] == offs[1])
		why = "self-check: Boolean.TRUE and FALSE at one offset: no static fields";
	return why;
}

/* The JVM's layout from vmStructs: the mirror's klass offset, the
 * compressed oops and klass encodings. 0, or -1 with in->reason. */
static int vm_layout(jclass bk, struct djx_types_info *in)
{
	const int *koff = djx_vm_static("java_lang_Class", "_klass_offset");
	const uint64_t *ob = static_either("CompressedOops", "_base", "_narrow_oop._base");
	const int *os = static_either("CompressedOops", "_shift", "_narrow_oop._shift");
	const uint64_t *kb = static_either("CompressedKlassPointers", "_base", "_narrow_klass._base");
	const int *ksh = static_either("CompressedKlassPointers", "_shift", "_narrow_klass._shift");
	int coops = djx_vm_flag("UseCompressedOops");

	if (koff == NULL || ob == NULL || os == NULL || kb == NULL || ksh == NULL) {
		snprintf(in->reason, sizeof in->reason, "vmStructs: java_lang_Class::_klass_offset or the compressed oops/klass bases not found");
		return -1;
	}
	/* Shenandoah evacuates objects while the JVM runs, but leaves the old
	 * copy whole (only its mark word forwards) until its region is freed,
	 * after every handle was updated: a mirror read through a handle
	 * holds the right Klass* either way. ZGC's handles hold colored
	 * references (zaddr.c), and its mirrors must point back. */
	if (djx_z_init(in->reason, sizeof in->reason) != 0)
		return -1;
	if (djx_z_on()) {
		uint64_t jm, ho = 0;
		if (djx_vm_offset("Klass", "_java_mirror", &jm) != 0) {
			snprintf(in->reason, sizeof in->reason, "vmStructs: no Klass::_java_mirror: ZGC's mirrors not checked");
			return -1;
		}
		djx_vm_offset("OopHandle", "_obj", &ho); /* absent: at 0 */
		ty.java_mirror = jm + ho;
	}
	if (!djx_epoch_events()) {
		snprintf(in->reason, sizeof in->reason, "no GC events: the agent cannot read class mirrors safely");
		return -1;
	}
	if (*koff <= 0 || *koff > 4096 || bk == NULL) {
		snprintf(in->reason, sizeof in->reason, "java_lang_Class::_klass_offset %d or [B unusable", *koff);
		return -1;
	}
	ty.klass_off = *koff;
	in->oop_bytes = coops == 0 ? 8 : 4;
	in->oop_base = coops == 0 ? 0 : *ob;
	in->oop_shift = coops == 0 ? 0 : (uint32_t)*os;
	in->kbase = *kb;
	in->kshift = (uint32_t)*ksh;
	return 0;
}

/* The klass word's width in an object header: 4 or 8 bytes, found by
 * decoding a byte[]'s (and an Integer's) header word both ways and
 * comparing with their mirrors' Klass*; 0 when neither matches. With
 * compact object headers (in->kmark set) the narrow klass is the mark
 * word's top bits: 4 when they decode to the Klass*, else 0. */
static uint32_t klass_width(jvmtiEnv *j, JNIEnv *jni, jclass bk, jclass ik, const struct djx_types_info *in)
{
	int ccp = djx_vm_flag("UseCompressedClassPointers");
	uintptr_t at = in->kmark ? 0 : 8; /* where the word holding the klass is */
	jobject arr = NULL, box = NULL;
	uint32_t kbytes = 0;
	jint st = 0;

	arr = (*jni)->NewByteArray(jni, 16);
	/* AllocObject runs no constructor; an uninitialized class would run
	 * its <clinit>, so only an initialized Integer is used. */
	if (ik != NULL && (*j)->GetClassStatus(j, ik, &st) == JVMTI_ERROR_NONE && (st & JVMTI_CLASS_STATUS_INITIALIZED))
		box = (*jni)->AllocObject(jni, ik);
	if ((*jni)->ExceptionCheck(jni))
		(*jni)->ExceptionClear(jni);
	for (int tries = 0; tries < 20 && arr != NULL; tries++) {
		uint64_t s, kB, kI = 0, wB, wI = 0;
		uint32_t nB, nI = 0;
		int n4, n8;
		if (djx_epoch_begin(&s) != 0) {
			struct timespec nap = {.tv_nsec = 1000000};
			nanosleep(&nap, NULL);
			continue;
		}
		kB = mirror_klass(bk);
		wB = read_word(oop_of(arr) + at);
		nB = in->kmark ? (uint32_t)(wB >> in->kmark) : (uint32_t)wB;
		if (box != NULL) {
			kI = mirror_klass(ik);
			wI = read_word(oop_of(box) + at);
			nI = in->kmark ? (uint32_t)(wI >> in->kmark) : (uint32_t)wI;
		}
		if (!djx_epoch_same(s))
			continue;
		if (in->kmark) {
			/* Forwarded marks (lock bits 11) hold no klass. */
			if ((wB & 3) != 3 && (box == NULL || (wI & 3) != 3) && kB != 0 &&
			    in->kbase + ((uint64_t)nB << in->kshift) == kB &&
			    (box == NULL || in->kbase + ((uint64_t)nI << in->kshift) == kI))
				kbytes = 4;
			break;
		}
		n4 = kB != 0 && in->kbase + ((uint64_t)nB << in->kshift) == kB &&
		     (box == NULL || in->kbase + ((uint64_t)nI << in->kshift) == kI);
		n8 = kB != 0 && wB == kB && (box == NULL || wI == kI);
		/* Try the width the flag says first: a low Klass* could match both. */
		if (ccp == 0 ? n8 : n4)
			kbytes = ccp == 0 ? 8 : 4;
		else if (ccp == 0 ? n4 : n8)
			kbytes = ccp == 0 ? 4 : 8;
		break;
	}
	if (arr != NULL)
		(*jni)->DeleteLocalRef(jni, arr);
	if (box != NULL)
		(*jni)->DeleteLocalRef(jni, box);
	return kbytes;
}

static void self_check(jvmtiEnv *j, JNIEnv *jni, jclass *ks, char **sigs, jint n, struct djx_types_info *in)
{
	int compact = djx_vm_flag("UseCompactObjectHeaders");
	jclass bk = find(j, ks, sigs, n, "[B"), ik = find(j, ks, sigs, n, "Ljava/lang/Integer;");
	const char *why;
	uint32_t hdr;

	if (vm_layout(bk, in) != 0)
		return;
	if (compact == 1) {
		/* The narrow klass is the mark word's top bits, from
		 * markWord::klass_shift (42 in JDK 24 and 25). */
		uint64_t ks = 0;
		if (djx_vm_long_const("markWord::klass_shift", &ks) != 0 || ks < 32 || ks > 62) {
			snprintf(in->reason, sizeof in->reason,
				 "vmStructs: UseCompactObjectHeaders without a usable markWord::klass_shift");
			return;
		}
		in->kmark = (uint32_t)ks;
	}
	in->kbytes = klass_width(j, jni, bk, ik, in);
	if (in->kbytes == 0) {
		snprintf(in->reason, sizeof in->reason, "self-check: the %s is not the class mirror's Klass*",
			 in->kmark ? "mark word's narrow klass (UseCompactObjectHeaders)" : "word at object+8");
		in->kmark = 0;
		return;
	}
	if (in->kbytes == 8)
		in->kbase = in->kshift = 0; /* JDK 25 leaves them unset (-1) */
	in->ok = 1;
	/* Each box class's one instance field, value, follows the header (an
	 * 8-byte one aligned to 8). Boxes are loaded at VM start but linked on
	 * first use: check those already prepared, and need one. */
	hdr = in->kmark ? 8 : in->kbytes == 4 ? 12 : 16;
	if (box_fields_hold(j, ks, sigs, n, hdr))
		in->fields = 1;
	else
		snprintf(in->reason, sizeof in->reason, "self-check: jfieldIDs do not hold field offsets: class names only, no fields");
	why = statics_hold(j, jni, ks, sigs, n, in);
	if (why == NULL) {
		in->statics = 1;
	} else {
		size_t l = strlen(in->reason);
		snprintf(in->reason + l, sizeof in->reason - l, "%s%s", l ? "; " : "", why);
	}
}

static int cmp_fld(const void *a, const void *b)
{
	uint32_t x = ((const struct djx_field *)a)->off, y = ((const struct djx_field *)b)->off;
	return x < y ? -1 : x > y;
}

/* A growing list of fields; the names are JVMTI's, for the owner to
 * deallocate. */
struct flist {
	struct djx_field *v;
	size_t n, cap;
};

/* Appends field f of c at off; -1 out of memory. */
static int add_field(jvmtiEnv *j, jclass c, jfieldID f, uint32_t off, struct flist *l)
{
	char *name = NULL, *sig = NULL;

	if ((*j)->GetFieldName(j, c, f, &name, &sig, NULL) != JVMTI_ERROR_NONE)
		return 0;
	if (l->n == l->cap) {
		size_t nc = l->cap ? l->cap * 2 : 16;
		struct djx_field *p = realloc(l->v, nc * sizeof *p);
		if (p == NULL) {
			djx_dealloc(j, name);
			djx_dealloc(j, sig);
			return -1;
		}
		l->v = p;
		l->cap = nc;
	}
	l->v[l->n++] = (struct djx_field){off, name, sig};
	return 0;
}

static void free_fields(jvmtiEnv *j, struct flist *l)
{
	for (size_t i = 0; i < l->n; i++) {
		djx_dealloc(j, (char *)l->v[i].name);
		djx_dealloc(j, (char *)l->v[i].sig);
	}
	free(l->v);
}

/* Adds the instance fields among c's ids to l. An instance jfieldID is
 * its offset, encoded (fid_offset), and a static one its JNIid*: the
 * self-check proved the encoding, so no GetFieldModifiers (HotSpot finds
 * the field by a linear search of its class's fields). */
static void instance_fields(jvmtiEnv *j, jclass c, const jfieldID *ids, jint nids, struct flist *l)
{
	for (jint i = 0; i < nids && l->n < DJX_CLASS_MAX_FIELDS; i++) {
		uint32_t off;
		if (fid_offset(ids[i], &off) != 0)
			continue;
		if (add_field(j, c, ids[i], off, l) != 0)
			break;
	}
}

/* Adds c's instance fields to l; -1 when c is not prepared. */
static int class_fields(jvmtiEnv *j, jclass c, struct flist *l)
{
	jfieldID *ids = NULL;
	jint nids = 0;

	if ((*j)->GetClassFields(j, c, &nids, &ids) != JVMTI_ERROR_NONE)
		return -1;
	instance_fields(j, c, ids, nids, l);
	djx_dealloc(j, ids);
	return 0;
}

/* What send_class needs of k itself: its fields (one GetClassFields for
 * instance fields and statics) and the words of its statics' JNIids (the
 * holder's Klass* and the offset in its mirror), read in one go, with the
 * klass word when k was just prepared. */
struct own {
	jfieldID *ids;
	jint nids;
	uintptr_t *a; /* 2 per id: its JNIid's _holder and _offset; 0s for the others */
	uint64_t *w;  /* w[0]: k's klass word (when read with them); w[1 + i]: the word at a[i] */
};

/* Fills o for k: 0, or -1 when k is not prepared or memory ran out. */
static int own_fields(jvmtiEnv *j, jclass k, const char *sig, struct own *o)
{
	*o = (struct own){NULL, 0, NULL, NULL};
	if (sig[0] != '[' && (ty.fields || ty.statics) &&
	    (*j)->GetClassFields(j, k, &o->nids, &o->ids) != JVMTI_ERROR_NONE)
		return -1;
	o->a = calloc(2 * (size_t)o->nids + 1, sizeof *o->a);
	o->w = calloc(2 * (size_t)o->nids + 2, sizeof *o->w);
	if (o->a == NULL || o->w == NULL)
		return -1;
	for (jint i = 0; i < o->nids && ty.statics; i++) {
		if (o->ids[i] != NULL && ((uintptr_t)o->ids[i] & 3) == 0) {
			o->a[2 * i] = (uintptr_t)o->ids[i] + ty.jni_holder;
			o->a[2 * i + 1] = (uintptr_t)o->ids[i] + ty.jni_off;
		}
	}
	return 0;
}

/* out[i] = the word at a[i] (0 at 0): words of static jfieldIDs' JNIids,
 * which live in the C heap as long as their class. Plain loads: only with
 * ty.statics, i.e. once the self-check found static jfieldIDs to be
 * JNIids. (A process_vm_readv of them cost ClassPrepare most of its time.) */
static void jniid_words(const uintptr_t *a, size_t n, uint64_t *out)
{
	for (size_t i = 0; i < n; i++)
		out[i] = a[i] != 0 && ty.statics ? *(const volatile uint64_t *)a[i] : 0;
}

static void own_free(jvmtiEnv *j, struct own *o)
{
	djx_dealloc(j, o->ids);
	free(o->a);
	free(o->w);
}

/* Adds the statics k declares to l, at their offsets in k's mirror. A
 * JNIid that does not name klass as its holder is left out. */
static void class_statics(jvmtiEnv *j, jclass k, uint64_t klass, const struct own *o, struct flist *l)
{
	for (jint i = 0; i < o->nids && l->n < DJX_CLASS_MAX_FIELDS; i++) {
		uint32_t off = (uint32_t)o->w[2 * i + 2];
		if (o->a[2 * i] == 0 || o->w[2 * i + 1] != klass || off < 8 || off >= (1u << 24))
			continue;
		if (add_field(j, k, o->ids[i], off, l) != 0)
			break;
	}
}

/* Sends the CLASS record of k (signature sig, Klass* klass, own fields
 * o), flushing only on the writer thread: djx_emit_class's 0, 1 or -1. */
static int send_class(jvmtiEnv *j, JNIEnv *jni, jclass k, const char *sig, uint64_t klass, const struct own *o,
		      int flushing)
{
	struct flist fs = {NULL, 0, 0}, st = {NULL, 0, 0};
	uint64_t nk = 0;
	jboolean iface = 0;
	int rc;

	if (ty.fields && sig[0] != '[' && (*j)->IsInterface(j, k, &iface) == JVMTI_ERROR_NONE && !iface) {
		jclass c = (*jni)->GetSuperclass(jni, k);
		instance_fields(j, k, o->ids, o->nids, &fs);
		while (c != NULL) {
			jclass up;
			class_fields(j, c, &fs);
			up = (*jni)->GetSuperclass(jni, c);
			(*jni)->DeleteLocalRef(jni, c);
			c = up;
		}
		if (fs.n > 1)
			qsort(fs.v, fs.n, sizeof *fs.v, cmp_fld);
	}
	/* Interfaces have statics too; a class's own only, in its own mirror. */
	if (ty.statics && sig[0] != '[')
		class_statics(j, k, klass, o, &st);
	if (st.n > 1)
		qsort(st.v, st.n, sizeof *st.v, cmp_fld);
	if (ty.kbytes == 4 && klass >= ty.kbase && ((klass - ty.kbase) >> ty.kshift) <= 0xffffffffull)
		nk = (klass - ty.kbase) >> ty.kshift;
	{
		struct djx_class c = {.klass = klass, .narrow = (uint32_t)nk, .sig = sig, .nfields = fs.n, .fields = fs.v,
				      .nstatics = st.n, .statics = st.v};
		rc = djx_emit_class(&c, flushing);
	}
	free_fields(j, &fs);
	free_fields(j, &st);
	return rc;
}

/* send_class for the writer: reads k's own fields first. 2 when k is not
 * prepared yet (its ClassPrepare comes later). */
static int send_listed(jvmtiEnv *j, JNIEnv *jni, jclass k, const char *sig, uint64_t klass)
{
	struct own o;
	int rc = 2;

	if (own_fields(j, k, sig, &o) == 0) {
		if (o.nids > 0)
			jniid_words(o.a, 2 * (size_t)o.nids, o.w + 1);
		rc = send_class(j, jni, k, sig, klass, &o, 1);
	}
	own_free(j, &o);
	return rc;
}

/* Whether key is in set s, one of ty's sent sets. */
static int sent_in(const struct mset *s, uint64_t key)
{
	int has;

	djx_lock();
	has = mset_has(s, key);
	djx_unlock();
	return has;
}

static void mark_sent(uint64_t key, uint64_t klass)
{
	djx_lock();
	if (!djx_detached_locked()) {
		mset_add(&ty.sent, key); /* on OOM it is just resent */
		mset_add(&ty.sent_klass, klass);
	}
	djx_unlock();
}

/* Loaded classes and their signatures; frees with free_loaded. */
struct loaded {
	jclass *ks;
	char **sigs;
	jint n;
};

static int get_loaded(jvmtiEnv *j, struct loaded *l, int sigs)
{
	l->ks = NULL;
	l->n = 0;
	l->sigs = NULL;
	if ((*j)->GetLoadedClasses(j, &l->n, &l->ks) != JVMTI_ERROR_NONE || l->ks == NULL)
		return -1;
	l->sigs = calloc((size_t)l->n + 1, sizeof *l->sigs);
	if (l->sigs == NULL)
		return -1;
	for (jint i = 0; i < l->n && sigs; i++)
		if ((*j)->GetClassSignature(j, l->ks[i], &l->sigs[i], NULL) != JVMTI_ERROR_NONE)
			l->sigs[i] = NULL;
	return 0;
}

static void free_loaded(jvmtiEnv *j, JNIEnv *jni, struct loaded *l)
{
	for (jint i = 0; i < l->n; i++) {
		if (l->sigs != NULL)
			djx_dealloc(j, l->sigs[i]);
		if (l->ks != NULL)
			(*jni)->DeleteLocalRef(jni, l->ks[i]);
	}
	free(l->sigs);
	djx_dealloc(j, l->ks);
}

/* Sends a CLASS for every loaded class not sent yet; -1 session over. */
static int send_unsent(JNIEnv *jni)
{
	jvmtiEnv *j = djx_cfg->jvmti;
	struct loaded l;
	uint64_t *kl = NULL;
	int rc = 0;

	if (get_loaded(j, &l, 0) != 0 || (kl = malloc(((size_t)l.n + 1) * sizeof *kl)) == NULL ||
	    klasses_of(l.ks, (size_t)l.n, kl) != 0)
		goto out;
	for (jint i = 0; i < l.n && rc == 0; i++) {
		uint64_t key;
		int sent;
		if (kl[i] == 0 || sent_in(&ty.sent_klass, kl[i]) ||
		    (*j)->GetClassSignature(j, l.ks[i], &l.sigs[i], NULL) != JVMTI_ERROR_NONE || l.sigs[i] == NULL ||
		    sent_in(&ty.sent, key = key_of(kl[i], l.sigs[i])))
			continue;
		sent = send_listed(j, jni, l.ks[i], l.sigs[i], kl[i]);
		if (sent == 0) {
			mark_sent(key, kl[i]);
			djx_count(&djx_stats.classes_sent, 1);
		} else if (sent == 1) {
			djx_count(&djx_stats.classes_dropped, 1);
		} else if (sent < 0) {
			rc = -1;
		}
	}
out:
	free(kl);
	free_loaded(j, jni, &l);
	return rc;
}

/* Whether process_vm_readv reads our own memory, tried on a word of ours. */
static int self_readable(void)
{
	uintptr_t a = (uintptr_t)&ty.kbase;
	uint64_t v;

	return read_words(&a, 1, &v) == 0;
}

int djx_types_start(JNIEnv *jni)
{
	jvmtiEnv *j = djx_cfg->jvmti;
	struct djx_types_info in;
	struct loaded l;
	uint64_t t0 = djx_now_ns();
	jvmtiError e;
	int rc;

	memset(&in, 0, sizeof in);
	if (!self_readable()) {
		refusal_text(in.reason, sizeof in.reason);
		__atomic_store_n(&refusal_told, 1, RELAXED); /* TYPES_INFO says it */
	} else if (djx_vm_init(in.reason, sizeof in.reason) == 0) {
		if (get_loaded(j, &l, 1) == 0)
			self_check(j, jni, l.ks, l.sigs, l.n, &in);
		else
			snprintf(in.reason, sizeof in.reason, "GetLoadedClasses failed");
		free_loaded(j, jni, &l);
	}
	ty.kbase = in.kbase;
	ty.kshift = in.kshift;
	ty.kbytes = in.kbytes;
	ty.fields = in.fields;
	if (in.ok) {
		/* Before the dump: no class falls in between. */
		e = (*j)->SetEventNotificationMode(j, JVMTI_ENABLE, JVMTI_EVENT_CLASS_PREPARE, NULL);
		if (e != JVMTI_ERROR_NONE) {
			in.ok = in.fields = in.statics = 0;
			snprintf(in.reason, sizeof in.reason, "enable ClassPrepare: error %d", (int)e);
		} else {
			ty.events = 1;
		}
	}
	ty.statics = in.statics;
	djx_emit_types_info(&in);
	if (!in.ok)
		return 0;
	__atomic_store_n(&ty.on, 1, __ATOMIC_RELEASE);
	rc = send_unsent(jni);
	tell_refusal();
	djx_count(&djx_stats.types_ns, djx_now_ns() - t0);
	return rc;
}

int djx_types_resend(JNIEnv *jni)
{
	uint64_t t0 = djx_now_ns();
	int rc;

	if (!__atomic_load_n(&ty.on, __ATOMIC_ACQUIRE))
		return 0;
	rc = send_unsent(jni);
	tell_refusal();
	djx_count(&djx_stats.types_ns, djx_now_ns() - t0);
	return rc;
}

/* ClassPrepare: builds the record on this Java thread and appends it
 * without waiting; a full buffer drops it (unmarked: 'K' sends it later). */
void djx_types_prepare(jvmtiEnv *j, JNIEnv *jni, jclass k)
{
	uint64_t t0 = djx_now_ns(), klass = 0;
	struct own o = {NULL, 0, NULL, NULL};
	char *sig = NULL;
	int sent;

	__atomic_add_fetch(&ty.inflight, 1, __ATOMIC_SEQ_CST);
	if (!__atomic_load_n(&ty.on, __ATOMIC_SEQ_CST) || jni == NULL)
		goto out;
	/* The klass word is read safely (a GC may move the mirror), the
	 * statics' JNIids plainly (jniid_words). */
	if ((*j)->GetClassSignature(j, k, &sig, NULL) != JVMTI_ERROR_NONE || sig == NULL ||
	    own_fields(j, k, sig, &o) != 0 || klasses_of(&k, 1, o.w) != 0 || (klass = o.w[0]) == 0)
		goto out;
	jniid_words(o.a, 2 * (size_t)o.nids, o.w + 1);
	sent = send_class(j, jni, k, sig, klass, &o, 0);
	if (sent == 0) {
		mark_sent(key_of(klass, sig), klass);
		djx_count(&djx_stats.classes_sent, 1);
	} else {
		djx_count(&djx_stats.classes_dropped, 1);
	}
out:
	own_free(j, &o);
	djx_dealloc(j, sig);
	tell_refusal();
	djx_count(&djx_stats.types_ns, djx_now_ns() - t0);
	__atomic_sub_fetch(&ty.inflight, 1, __ATOMIC_ACQ_REL);
}

/* Session end, on the writer before the GC events go off: no callback may
 * still be reading oops when the GC counters stop moving. */
void djx_types_release(jvmtiEnv *j, int keep_class_prepare)
{
	struct timespec nap = {.tv_nsec = 1000000};

	__atomic_store_n(&ty.on, 0, __ATOMIC_SEQ_CST);
	if (ty.events && !keep_class_prepare)
		(*j)->SetEventNotificationMode(j, JVMTI_DISABLE, JVMTI_EVENT_CLASS_PREPARE, NULL);
	ty.events = 0;
	for (int i = 0; i < 1000 && __atomic_load_n(&ty.inflight, __ATOMIC_SEQ_CST) > 0; i++)
		nanosleep(&nap, NULL);
}

void djx_types_end_locked(void)
{
	mset_free(&ty.sent);
	mset_free(&ty.sent_klass);
}

/* ClassPrepare callbacks may still run (the stacks keep the event on);
 * they find ty.on off. inflight is theirs to count down. */
void djx_types_reset_locked(void)
{
	djx_types_end_locked();
	__atomic_store_n(&ty.on, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&refusal_told, 0, RELAXED);
	ty.fields = ty.statics = ty.events = 0;
	ty.jni_holder = ty.jni_off = 0;
	ty.klass_off = 0;
	ty.java_mirror = 0;
	ty.kbytes = ty.kshift = 0;
	ty.kbase = 0;
}
