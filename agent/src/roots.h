/* The heap's roots for a walker outside the JVM (command 'G'): every
 * object a thread's frame, a JNI handle, a monitor or the VM holds, with
 * the frame that holds it, from one short pause. Writer thread only. */
#ifndef DJX_ROOTS_H
#define DJX_ROOTS_H

#include <jni.h>

/* ROOT records, then ROOTS_END. 0, or -1 the connection failed. */
int djx_roots_run(JNIEnv *jni);

#endif
