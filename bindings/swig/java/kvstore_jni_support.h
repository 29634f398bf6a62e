/* kvstore_jni_support.h - the hand-written half of the JNI module (libkvstore_java.so).
 *
 * kvstore_java.i holds the typemaps; everything they call lives in kvstore_jni_support.cc,
 * compiled as an ordinary source of the module. Protocols:
 *
 * Errors. A call that failed ends in kvjava_finish(env, rc), run by the "ret" typemap after
 * every "freearg": it throws the updater's own exception (rc KV_ERR_CALLBACK), else the
 * org.kvstore.KVStoreException subclass of rc carrying the binding's message (kvswig_fail,
 * see ../kvstore_lists.h) or else KVGetLastError(). A typemap that fails before the call
 * records a binding error, calls kvjava_finish and returns.
 *
 * Callbacks. Updaters are registered with a JNI global ref as user_data; the trampolines run
 * the Java object on whatever thread the library calls them (attaching it as a daemon if the
 * JVM does not know it) and park a thrown exception for the push wrapper to rethrow. The free
 * hook calls release() and deletes the global ref, exactly once.
 *
 * Class and member ids are looked up once in JNI_OnLoad (defined in the .cc), on a thread
 * whose class loader sees the jar.
 */
#ifndef KVSTORE_JNI_SUPPORT_H_
#define KVSTORE_JNI_SUPPORT_H_

#include <jni.h>
#include <stddef.h>

#include <string>
#include <vector>

#include "kvstore/kvstore.h"

/* Turns the status of a fallible call into the Java outcome: nothing for rc >= 0, otherwise a
 * pending Java exception (see the file comment). */
void kvjava_finish(JNIEnv* env, int rc);

/* Host memory seen through a Java primitive array or a direct NIO buffer. */
struct KVJavaSpan {
  void* ptr = nullptr;
  size_t nbytes = 0;
  jarray array = nullptr; /* set when ptr came from GetPrimitiveArrayCritical */
};

/* Fills `span` from `obj` (byte[] ... double[], or a direct buffer from its position); on
 * failure records a binding error (or leaves a Java exception pending) and returns false. An
 * array is pinned with GetPrimitiveArrayCritical: make no JNI call until kvjava_span_release,
 * whose `mode` is that of ReleasePrimitiveArrayCritical (JNI_ABORT for input data). */
bool kvjava_span_acquire(JNIEnv* env, jobject obj, KVJavaSpan* span);
void kvjava_span_release(JNIEnv* env, KVJavaSpan* span, jint mode);

/* List arguments (see ../kvstore_lists.h): each copies a Java array into C storage that lives
 * for the call and returns 0, or a non-zero code with a binding error recorded or a Java
 * exception pending. A null array is KV_ERR_NULL_POINTER; a null handle element becomes NULL
 * (the library reports it); a null string element is KV_ERR_NULL_POINTER. */
int kvjava_ints(JNIEnv* env, jintArray arr, const char* what, std::vector<int>* out);
int kvjava_handles(JNIEnv* env, jobjectArray arr, const char* what,
                   std::vector<KVArrayHandle>* out);

struct KVJavaStrings {
  std::vector<std::string> storage; /* modified-UTF-8 copies */
  std::vector<const char*> ptrs;    /* into storage, what the C call gets */
};
int kvjava_strings(JNIEnv* env, jobjectArray arr, const char* what, KVJavaStrings* out);

/* KVStoreSetUpdater / KVStoreSetStrUpdater with a KVStoreLib.Updater / StrUpdater (null: the
 * default). The store holds a global ref to the object until its free hook runs; a refused
 * registration never runs the hook, so the ref is deleted here instead. */
int kvjava_set_updater(JNIEnv* env, KVStoreHandle store, jobject updater);
int kvjava_set_str_updater(JNIEnv* env, KVStoreHandle store, jobject str_updater);

/* A direct ByteBuffer over a CPU array's own memory (no copy), valid until the array is freed;
 * NULL with a Java exception pending on failure. */
jobject kvjava_array_data_buffer(JNIEnv* env, KVArrayHandle array);

#endif /* KVSTORE_JNI_SUPPORT_H_ */
