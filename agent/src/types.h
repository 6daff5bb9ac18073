/* Data types (option types=1): TYPES_INFO, then a CLASS record (Klass*,
 * signature, instance field offsets) per loaded class. HotSpot only. */
#ifndef DJX_TYPES_H
#define DJX_TYPES_H

#include <jvmti.h>

/* Writer thread: the first pass, and 'K' (what was not sent yet). 0, or
 * -1 the connection failed. */
int djx_types_start(JNIEnv *jni);
int djx_types_resend(JNIEnv *jni);
void djx_types_prepare(jvmtiEnv *j, JNIEnv *jni, jclass k); /* ClassPrepare */
/* Session end, before the GC events go off; ClassPrepare stays on when
 * the stacks also use it. */
void djx_types_release(jvmtiEnv *j, int keep_class_prepare);
void djx_types_end_locked(void);   /* session end, lock held: the sent sets freed */
/* Session start, lock held: nothing sent, no layout, no refusal told; a
 * refusal itself (the kernel's) stays. */
void djx_types_reset_locked(void);

#endif
