/* JIT code (CODE, CODE_UNLOAD, STUB) and the jmethodIDs of every class,
 * which AsyncGetCallTrace needs (ClassLoad/ClassPrepare). */
#ifndef DJX_CODE_H
#define DJX_CODE_H

#include <jvmti.h>

void djx_code_reset_locked(void);              /* before a session */
void djx_code_caps(jvmtiEnv *j);               /* Agent setup: capabilities */
void djx_code_start(jvmtiEnv *j, JNIEnv *jni); /* session start: events on, existing code replayed */
void djx_code_release(jvmtiEnv *j);            /* session end: events off, capability back */
int djx_code_class_events(void);               /* ClassLoad/ClassPrepare are on for the stacks */

/* The JVMTI callbacks' work (agent.c). */
void djx_code_class_prepare(jvmtiEnv *j, jclass k);
void djx_code_compiled_load(jvmtiEnv *j, jmethodID method, jint code_size, const void *code_addr,
			    const void *compile_info);
void djx_code_unload(jmethodID method, const void *code_addr);
void djx_code_dynamic(const char *name, const void *address, jint length);

#endif
