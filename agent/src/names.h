/* Java names for what JVMTI reports by id: class signatures, frames (a
 * method and a location), locals and heap-root kinds, in the text the
 * census's holder chains and the roots' hops share. A cache holds each
 * method's name and line table, asked once. */
#ifndef DJX_NAMES_H
#define DJX_NAMES_H

#include <jvmti.h>
#include <stddef.h>
#include <stdint.h>

/* "Ljava/util/HashMap$Node;" -> "java.util.HashMap$Node", "[J" -> "long[]". */
void djx_java_name(const char *sig, char *out, size_t n);
/* "JNI global", "monitor", ... for a jvmtiHeapReferenceKind. */
const char *djx_root_kind(uint32_t kind);

struct djx_names; /* methods named so far, for one environment */
struct djx_names *djx_names_new(jvmtiEnv *e, JNIEnv *jni); /* NULL: out of memory */
void djx_names_free(struct djx_names *n);                   /* NULL is fine */
/* "Class.method:line", or "Class.method" without a line (loc < 0). */
void djx_names_frame(struct djx_names *n, jmethodID m, jlocation loc, char *out, size_t len);
/* A frame's root: "Main.main:54 local #5 (thread "main")", "... local
 * data (...)" where the JVM grants the local variable table,
 * "Main.read JNI local (...)" for a native method's handles, or
 * "Main.run compiled code (...)" for a constant of a compiled method's
 * code, which HotSpot reports as a JNI local of its frame; thread is
 * "thread \"main\"". */
int djx_names_native(struct djx_names *n, jmethodID m);
void djx_names_frame_root(struct djx_names *n, jmethodID m, jlocation loc, jint slot, int jni_local,
			  const char *thread, char *out, size_t len);

#endif
