/* RootsSite.pin: a JNI global reference the roots test expects to find. */
#include <jni.h>

JNIEXPORT void JNICALL Java_RootsSite_pin(JNIEnv *env, jclass k, jobject o)
{
	(void)k;
	(*env)->NewGlobalRef(env, o);
}
