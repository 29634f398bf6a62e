/* kvstore_jni_support.cc - callbacks, error translation and argument conversion of the JNI
 * module; see kvstore_jni_support.h for the protocols. */
#include "kvstore_jni_support.h"

#include <stdint.h>
#include <string.h>

#include "kvstore_lists.h"

namespace {

JavaVM* kvjava_vm = nullptr;

/* Global refs to classes and member ids, looked up once in JNI_OnLoad (on a thread whose
 * class loader sees the jar) so that callbacks on any thread can use them. */
struct KVJavaIds {
  jclass array_handle = nullptr;
  jmethodID array_handle_ctor = nullptr;
  jfieldID array_handle_cptr = nullptr;
  jclass updater = nullptr;
  jmethodID updater_update = nullptr;
  jmethodID updater_release = nullptr;
  jclass str_updater = nullptr;
  jmethodID str_updater_update = nullptr;
  jmethodID str_updater_release = nullptr;
  jclass errors = nullptr;
  jmethodID errors_create = nullptr;
  jclass runtime_exception = nullptr;
  jclass buffer = nullptr;
  jmethodID buffer_position = nullptr;
  jmethodID buffer_remaining = nullptr;
  jclass byte_buffer = nullptr;
  jclass buffers[6] = {};      /* Short, Char, Int, Float, Long, Double buffers */
  jclass prim_arrays[6] = {};  /* byte[], short[], int[], float[], long[], double[] */
} kvjava_ids;

const char* const kvjava_buffer_names[6] = {"java/nio/ShortBuffer", "java/nio/CharBuffer",
                                            "java/nio/IntBuffer",   "java/nio/FloatBuffer",
                                            "java/nio/LongBuffer",  "java/nio/DoubleBuffer"};
const size_t kvjava_buffer_sizes[6] = {2, 2, 4, 4, 8, 8};
const char* const kvjava_array_names[6] = {"[B", "[S", "[I", "[F", "[J", "[D"};
const size_t kvjava_array_sizes[6] = {1, 2, 4, 4, 8, 8};

jclass kvjava_global_class(JNIEnv* env, const char* name) {
  jclass local = env->FindClass(name);
  if (!local) {
    env->ExceptionClear();
    return nullptr;
  }
  jclass global = static_cast<jclass>(env->NewGlobalRef(local));
  env->DeleteLocalRef(local);
  return global;
}

jmethodID kvjava_method(JNIEnv* env, jclass cls, const char* name, const char* sig,
                        bool is_static) {
  if (!cls) return nullptr;
  jmethodID id = is_static ? env->GetStaticMethodID(cls, name, sig)
                           : env->GetMethodID(cls, name, sig);
  if (!id) env->ExceptionClear();
  return id;
}

void kvjava_init_ids(JNIEnv* env) {
  KVJavaIds& ids = kvjava_ids;
  ids.array_handle = kvjava_global_class(env, "org/kvstore/swig/ArrayHandle");
  ids.array_handle_ctor = kvjava_method(env, ids.array_handle, "<init>", "(JZ)V", false);
  if (ids.array_handle) {
    ids.array_handle_cptr = env->GetFieldID(ids.array_handle, "swigCPtr", "J");
    if (!ids.array_handle_cptr) env->ExceptionClear();
  }
  ids.updater = kvjava_global_class(env, "org/kvstore/swig/KVStoreLib$Updater");
  ids.updater_update =
      kvjava_method(env, ids.updater, "update",
                    "(ILorg/kvstore/swig/ArrayHandle;Lorg/kvstore/swig/ArrayHandle;)V", false);
  ids.updater_release = kvjava_method(env, ids.updater, "release", "()V", false);
  ids.str_updater = kvjava_global_class(env, "org/kvstore/swig/KVStoreLib$StrUpdater");
  ids.str_updater_release = kvjava_method(env, ids.str_updater, "release", "()V", false);
  ids.str_updater_update = kvjava_method(
      env, ids.str_updater, "update",
      "(Ljava/lang/String;Lorg/kvstore/swig/ArrayHandle;Lorg/kvstore/swig/ArrayHandle;)V", false);
  ids.errors = kvjava_global_class(env, "org/kvstore/KVErrors");
  ids.errors_create = kvjava_method(env, ids.errors, "create",
                                    "(ILjava/lang/String;)Lorg/kvstore/KVStoreException;", true);
  ids.runtime_exception = kvjava_global_class(env, "java/lang/RuntimeException");
  ids.buffer = kvjava_global_class(env, "java/nio/Buffer");
  ids.buffer_position = kvjava_method(env, ids.buffer, "position", "()I", false);
  ids.buffer_remaining = kvjava_method(env, ids.buffer, "remaining", "()I", false);
  ids.byte_buffer = kvjava_global_class(env, "java/nio/ByteBuffer");
  for (int i = 0; i < 6; ++i) {
    ids.buffers[i] = kvjava_global_class(env, kvjava_buffer_names[i]);
    ids.prim_arrays[i] = kvjava_global_class(env, kvjava_array_names[i]);
  }
}

/* The exception an updater threw on this thread, waiting to be rethrown by the push wrapper. */
thread_local jobject kvjava_pending = nullptr;

void kvjava_drop_pending(JNIEnv* env) {
  if (kvjava_pending) {
    env->DeleteGlobalRef(kvjava_pending);
    kvjava_pending = nullptr;
  }
}

void kvjava_throw_code(JNIEnv* env, int code, const char* message) {
  if (env->ExceptionCheck()) return; /* a JNI call already raised something more precise */
  jstring jmsg = env->NewStringUTF(message ? message : "");
  if (!jmsg) return; /* OutOfMemoryError pending */
  if (kvjava_ids.errors_create) {
    jobject ex = env->CallStaticObjectMethod(kvjava_ids.errors, kvjava_ids.errors_create,
                                             (jint)code, jmsg);
    if (ex && !env->ExceptionCheck()) {
      env->Throw(static_cast<jthrowable>(ex));
      env->DeleteLocalRef(ex);
      env->DeleteLocalRef(jmsg);
      return;
    }
    if (ex) env->DeleteLocalRef(ex);
    if (env->ExceptionCheck()) {
      env->DeleteLocalRef(jmsg);
      return;
    }
  }
  env->DeleteLocalRef(jmsg);
  if (kvjava_ids.runtime_exception) env->ThrowNew(kvjava_ids.runtime_exception, message);
}

/* JNIEnv of the calling thread, attaching it (as a daemon) when the library calls back on a
 * thread the JVM does not know; *attached tells the caller to detach afterwards. */
JNIEnv* kvjava_env(bool* attached) {
  *attached = false;
  if (!kvjava_vm) return nullptr;
  JNIEnv* env = nullptr;
  jint st = kvjava_vm->GetEnv(reinterpret_cast<void**>(&env), JNI_VERSION_1_8);
  if (st == JNI_OK) return env;
  if (st != JNI_EDETACHED) return nullptr;
  JavaVMAttachArgs args;
  args.version = JNI_VERSION_1_8;
  args.name = const_cast<char*>("kvstore-callback");
  args.group = nullptr;
  if (kvjava_vm->AttachCurrentThreadAsDaemon(reinterpret_cast<void**>(&env), &args) != JNI_OK)
    return nullptr;
  *attached = true;
  return env;
}

jobject kvjava_new_handle(JNIEnv* env, KVArrayHandle h) {
  return env->NewObject(kvjava_ids.array_handle, kvjava_ids.array_handle_ctor,
                        (jlong)(intptr_t)h, (jboolean)JNI_FALSE);
}

/* After the Java updater returned: 0, or 1 with its exception parked for the push caller (or
 * reported, when the callback ran on a thread that did not call push). */
int kvjava_after_call(JNIEnv* env, bool attached) {
  jthrowable ex = env->ExceptionOccurred();
  if (!ex) return 0;
  env->ExceptionClear();
  if (attached) {
    /* Nobody on this thread can receive it; the push fails with KV_ERR_CALLBACK. */
    env->DeleteLocalRef(ex);
    return 1;
  }
  kvjava_drop_pending(env);
  kvjava_pending = env->NewGlobalRef(ex);
  env->DeleteLocalRef(ex);
  return 1;
}

/* One updater call: the calling thread's JNIEnv (attaching the thread if the JVM does not know
 * it), a local frame for the call's references, then `call(env)`, which makes the Java call and
 * returns false when it could not build its arguments (an exception is then pending). Returns
 * the trampoline status: 0, or 1 when the call did not happen or threw (see after_call). */
template <typename Call>
int kvjava_run_updater(jmethodID method, Call call) {
  if (!method || !kvjava_ids.array_handle_ctor) return 1;
  bool attached = false;
  JNIEnv* env = kvjava_env(&attached);
  if (!env) return 1;
  int rc = 1;
  if (env->PushLocalFrame(8) == 0) {
    bool called = call(env);
    rc = kvjava_after_call(env, attached);
    if (!called) rc = 1;
    env->PopLocalFrame(nullptr);
  } else {
    kvjava_after_call(env, attached); /* parks the pending OutOfMemoryError */
  }
  if (attached) kvjava_vm->DetachCurrentThread();
  return rc;
}

int kvjava_int_trampoline(int key, KVArrayHandle recv, KVArrayHandle stored, void* user_data) {
  return kvjava_run_updater(kvjava_ids.updater_update, [&](JNIEnv* env) {
    jobject jrecv = kvjava_new_handle(env, recv);
    jobject jstored = jrecv ? kvjava_new_handle(env, stored) : nullptr;
    if (!jstored) return false;
    env->CallVoidMethod(static_cast<jobject>(user_data), kvjava_ids.updater_update, (jint)key,
                        jrecv, jstored);
    return true;
  });
}

int kvjava_str_trampoline(const char* key, KVArrayHandle recv, KVArrayHandle stored,
                          void* user_data) {
  return kvjava_run_updater(kvjava_ids.str_updater_update, [&](JNIEnv* env) {
    jstring jkey = env->NewStringUTF(key ? key : "");
    jobject jrecv = jkey ? kvjava_new_handle(env, recv) : nullptr;
    jobject jstored = jrecv ? kvjava_new_handle(env, stored) : nullptr;
    if (!jstored) return false;
    env->CallVoidMethod(static_cast<jobject>(user_data), kvjava_ids.str_updater_update, jkey,
                        jrecv, jstored);
    return true;
  });
}

/* KVFreeFn of every registration: tells the updater (release()), then drops the global ref;
 * possibly on a library thread. An exception from release() is discarded: nobody could catch
 * it here. */
void kvjava_release_ref(void* user_data) {
  if (!user_data) return;
  bool attached = false;
  JNIEnv* env = kvjava_env(&attached);
  if (!env) return; /* the VM is gone: nothing left to release */
  jobject obj = static_cast<jobject>(user_data);
  /* Keep an exception that is already pending (free hooks can run inside a failing call). */
  jthrowable earlier = env->ExceptionOccurred();
  if (earlier) env->ExceptionClear();
  if (kvjava_ids.updater_release && env->IsInstanceOf(obj, kvjava_ids.updater))
    env->CallVoidMethod(obj, kvjava_ids.updater_release);
  else if (kvjava_ids.str_updater_release && env->IsInstanceOf(obj, kvjava_ids.str_updater))
    env->CallVoidMethod(obj, kvjava_ids.str_updater_release);
  if (env->ExceptionCheck()) env->ExceptionClear();
  if (earlier) {
    env->Throw(earlier);
    env->DeleteLocalRef(earlier);
  }
  env->DeleteGlobalRef(obj);
  if (attached) kvjava_vm->DetachCurrentThread();
}

} /* namespace */

/* Turns the result of a fallible call into the Java outcome: nothing on success, otherwise the
 * updater's own exception (KV_ERR_CALLBACK) or the exception class of the code. */
void kvjava_finish(JNIEnv* env, int rc) {
  if (rc >= 0) {
    kvjava_drop_pending(env);
    kvswig_clear_error();
    return;
  }
  if (kvjava_pending) {
    jobject pending = kvjava_pending;
    kvjava_pending = nullptr;
    if (rc == KV_ERR_CALLBACK && !env->ExceptionCheck()) {
      env->Throw(static_cast<jthrowable>(pending));
      env->DeleteGlobalRef(pending);
      kvswig_clear_error();
      return;
    }
    env->DeleteGlobalRef(pending);
  }
  const char* binding_error = kvswig_take_error();
  kvjava_throw_code(env, rc, binding_error ? binding_error : KVGetLastError());
}

/* Fills `span` from `obj`; on failure records a binding error and returns false. The array
 * case pins with GetPrimitiveArrayCritical: callers must make no JNI call until release. */
bool kvjava_span_acquire(JNIEnv* env, jobject obj, KVJavaSpan* span) {
  if (!obj) {
    kvswig_fail(KV_ERR_NULL_POINTER, "data is null (expected a primitive array or a direct buffer)");
    return false;
  }
  void* addr = env->GetDirectBufferAddress(obj);
  if (addr) {
    size_t elem = 0;
    if (kvjava_ids.byte_buffer && env->IsInstanceOf(obj, kvjava_ids.byte_buffer)) elem = 1;
    for (int i = 0; elem == 0 && i < 6; ++i)
      if (kvjava_ids.buffers[i] && env->IsInstanceOf(obj, kvjava_ids.buffers[i]))
        elem = kvjava_buffer_sizes[i];
    if (elem == 0 || !kvjava_ids.buffer_position) {
      kvswig_fail(KV_ERR_INVALID_ARGUMENT, "unsupported direct buffer class");
      return false;
    }
    jint pos = env->CallIntMethod(obj, kvjava_ids.buffer_position);
    if (env->ExceptionCheck()) return false;
    jint rem = env->CallIntMethod(obj, kvjava_ids.buffer_remaining);
    if (env->ExceptionCheck()) return false;
    span->ptr = static_cast<char*>(addr) + (size_t)pos * elem;
    span->nbytes = (size_t)rem * elem;
    return true;
  }
  for (int i = 0; i < 6; ++i) {
    if (kvjava_ids.prim_arrays[i] && env->IsInstanceOf(obj, kvjava_ids.prim_arrays[i])) {
      jarray arr = static_cast<jarray>(obj);
      size_t n = (size_t)env->GetArrayLength(arr);
      span->nbytes = n * kvjava_array_sizes[i];
      span->ptr = env->GetPrimitiveArrayCritical(arr, nullptr);
      if (!span->ptr) return false; /* OutOfMemoryError pending */
      span->array = arr;
      return true;
    }
  }
  if (kvjava_ids.buffer && env->IsInstanceOf(obj, kvjava_ids.buffer)) {
    kvswig_fail(KV_ERR_INVALID_ARGUMENT,
                "a heap NIO buffer was given; use a direct buffer (ByteBuffer.allocateDirect)");
  } else {
    kvswig_fail(KV_ERR_INVALID_ARGUMENT,
                "data must be byte[], short[], int[], float[], long[], double[] or a direct buffer");
  }
  return false;
}

void kvjava_span_release(JNIEnv* env, KVJavaSpan* span, jint mode) {
  if (span->array) {
    env->ReleasePrimitiveArrayCritical(span->array, span->ptr, mode);
    span->array = nullptr;
  }
}

/* Java arrays of handles / keys for the list calls: 0, or the code of a recorded binding
 * error (a pending Java exception also yields a non-zero code; it takes precedence). */
int kvjava_handles(JNIEnv* env, jobjectArray arr, const char* what,
                   std::vector<KVArrayHandle>* out) {
  if (!arr) return kvswig_fail(KV_ERR_NULL_POINTER, "%s is null", what);
  jsize n = env->GetArrayLength(arr);
  out->assign((size_t)n, nullptr);
  for (jsize i = 0; i < n; ++i) {
    jobject h = env->GetObjectArrayElement(arr, i);
    if (env->ExceptionCheck()) return KV_ERR_INVALID_ARGUMENT;
    if (h) {
      (*out)[(size_t)i] =
          (KVArrayHandle)(intptr_t)env->GetLongField(h, kvjava_ids.array_handle_cptr);
      env->DeleteLocalRef(h);
    }
  }
  return 0;
}

int kvjava_strings(JNIEnv* env, jobjectArray arr, const char* what, KVJavaStrings* out) {
  if (!arr) return kvswig_fail(KV_ERR_NULL_POINTER, "%s is null", what);
  jsize n = env->GetArrayLength(arr);
  out->storage.resize((size_t)n);
  out->ptrs.resize((size_t)n);
  for (jsize i = 0; i < n; ++i) {
    jstring s = static_cast<jstring>(env->GetObjectArrayElement(arr, i));
    if (env->ExceptionCheck()) return KV_ERR_INVALID_ARGUMENT;
    if (!s) return kvswig_fail(KV_ERR_NULL_POINTER, "%s[%d] is null", what, (int)i);
    const char* chars = env->GetStringUTFChars(s, nullptr);
    if (!chars) return KV_ERR_OUT_OF_MEMORY;
    out->storage[(size_t)i] = chars;
    env->ReleaseStringUTFChars(s, chars);
    env->DeleteLocalRef(s);
  }
  for (jsize i = 0; i < n; ++i) out->ptrs[(size_t)i] = out->storage[(size_t)i].c_str();
  return 0;
}

int kvjava_ints(JNIEnv* env, jintArray arr, const char* what, std::vector<int>* out) {
  if (!arr) return kvswig_fail(KV_ERR_NULL_POINTER, "%s is null", what);
  jsize n = env->GetArrayLength(arr);
  out->resize((size_t)n);
  if (n > 0) env->GetIntArrayRegion(arr, 0, n, reinterpret_cast<jint*>(out->data()));
  return env->ExceptionCheck() ? KV_ERR_INVALID_ARGUMENT : 0;
}

/* Updaters: the store keeps a global ref to the Java object; its free hook deletes it. A null
 * updater restores the default (assign). A refused registration (a distributed worker refuses
 * every updater) never runs the free hook: the ref is deleted here instead, exactly once. */
int kvjava_set_updater(JNIEnv* env, KVStoreHandle store, jobject updater) {
  if (!updater) return KVStoreSetUpdater(store, nullptr, nullptr, nullptr);
  jobject ref = env->NewGlobalRef(updater);
  if (!ref) return kvswig_fail(KV_ERR_OUT_OF_MEMORY, "NewGlobalRef failed for the updater");
  int rc = KVStoreSetUpdater(store, kvjava_int_trampoline, ref, kvjava_release_ref);
  if (rc != 0) env->DeleteGlobalRef(ref); /* on failure the caller keeps user_data */
  return rc;
}
int kvjava_set_str_updater(JNIEnv* env, KVStoreHandle store, jobject str_updater) {
  if (!str_updater) return KVStoreSetStrUpdater(store, nullptr, nullptr, nullptr);
  jobject ref = env->NewGlobalRef(str_updater);
  if (!ref) return kvswig_fail(KV_ERR_OUT_OF_MEMORY, "NewGlobalRef failed for the updater");
  int rc = KVStoreSetStrUpdater(store, kvjava_str_trampoline, ref, kvjava_release_ref);
  if (rc != 0) env->DeleteGlobalRef(ref);
  return rc;
}

/* A direct ByteBuffer over the array's own memory (CPU arrays): no copy. Valid until the array
 * is freed: NDArray.asByteBuffer() keeps the array alive while the buffer is reachable, and sets
 * the byte order (native). */
jobject kvjava_array_data_buffer(JNIEnv* env, KVArrayHandle array) {
  void* data = nullptr;
  size_t nbytes = 0;
  int rc = KVArrayGetData(array, &data);
  if (rc == 0) rc = KVArrayGetNBytes(array, &nbytes);
  if (rc != 0) {
    kvjava_finish(env, rc);
    return nullptr;
  }
  static char empty;
  return env->NewDirectByteBuffer(nbytes ? data : &empty, (jlong)nbytes);
}

extern "C" JNIEXPORT jint JNICALL JNI_OnLoad(JavaVM* vm, void* /*reserved*/) {
  kvjava_vm = vm;
  JNIEnv* env = nullptr;
  if (vm->GetEnv(reinterpret_cast<void**>(&env), JNI_VERSION_1_8) != JNI_OK) return JNI_ERR;
  kvjava_init_ids(env);
  return JNI_VERSION_1_8;
}

/* Direct entry points of the hot push and pull calls (KVStoreLibJNI.pushInts, pullInts,
 * pushOne, pullOne; declared in kvstore_java.i's jniclasscode). The generated wrappers take
 * ArrayHandle[] and read each element's address with three JNI calls, into vectors allocated per
 * call; these take the addresses as a long[] (or one long) that org.kvstore.KVStore filled while
 * it entered the arrays, copy keys and addresses with one region copy each (on the stack for up
 * to KVJAVA_STACK_KEYS keys), and go through the same count-checking shims, so their checks and
 * messages are the generated wrappers'. No array is pinned across the library call: an updater
 * may call into Java from inside it. The status is returned and, when negative, thrown. */
namespace {

constexpr jsize KVJAVA_STACK_KEYS = 256;

using KVJavaListCall = int (*)(KVStoreHandle, int, const int*, int, const KVArrayHandle*, int);

using KVJavaOneCall = int (*)(KVStoreHandle, int, const int*, const KVArrayHandle*, int);

// One key and one array: the library's own call, which checks the handles itself.
jint kvjava_one_call(JNIEnv* env, KVJavaOneCall call, jlong store, jint key, jlong array,
                     jint priority) {
  const int k = (int)key;
  const KVArrayHandle a = reinterpret_cast<KVArrayHandle>(array);
  const int rc = call(reinterpret_cast<KVStoreHandle>(store), 1, &k, &a, (int)priority);
  kvjava_finish(env, rc);
  return rc;
}

jint kvjava_list_call(JNIEnv* env, KVJavaListCall call, jlong store, jintArray keys,
                      jlongArray arrays, jint priority) {
  int rc = 0;
  if (!keys) {
    rc = kvswig_fail(KV_ERR_NULL_POINTER, "keys is null");
  } else if (!arrays) {
    rc = kvswig_fail(KV_ERR_NULL_POINTER, "vals is null");
  }
  if (rc) {
    kvjava_finish(env, rc);
    return rc;
  }
  const jsize nk = env->GetArrayLength(keys);
  const jsize na = env->GetArrayLength(arrays);
  static_assert(sizeof(jint) == sizeof(int) && sizeof(jlong) == sizeof(KVArrayHandle),
                "keys and addresses are copied as they are");
  jint kbuf[KVJAVA_STACK_KEYS];
  jlong abuf[KVJAVA_STACK_KEYS];
  std::vector<jint> kheap;
  std::vector<jlong> aheap;
  jint* k = kbuf;
  jlong* a = abuf;
  if (nk > KVJAVA_STACK_KEYS) {
    kheap.resize((size_t)nk);
    k = kheap.data();
  }
  if (na > KVJAVA_STACK_KEYS) {
    aheap.resize((size_t)na);
    a = aheap.data();
  }
  if (nk > 0) env->GetIntArrayRegion(keys, 0, nk, k);
  if (na > 0) env->GetLongArrayRegion(arrays, 0, na, a);
  rc = call(reinterpret_cast<KVStoreHandle>(store), (int)nk, reinterpret_cast<const int*>(k),
            (int)na, reinterpret_cast<const KVArrayHandle*>(a), (int)priority);
  kvjava_finish(env, rc);
  return rc;
}

}  // namespace

extern "C" JNIEXPORT jint JNICALL Java_org_kvstore_swig_KVStoreLibJNI_pushInts(
    JNIEnv* env, jclass, jlong store, jintArray keys, jlongArray arrays, jint priority) {
  return kvjava_list_call(env, kvswig_push, store, keys, arrays, priority);
}

extern "C" JNIEXPORT jint JNICALL Java_org_kvstore_swig_KVStoreLibJNI_pullInts(
    JNIEnv* env, jclass, jlong store, jintArray keys, jlongArray arrays, jint priority) {
  return kvjava_list_call(env, kvswig_pull, store, keys, arrays, priority);
}

extern "C" JNIEXPORT jint JNICALL Java_org_kvstore_swig_KVStoreLibJNI_pushOne(
    JNIEnv* env, jclass, jlong store, jint key, jlong array, jint priority) {
  return kvjava_one_call(env, KVStorePush, store, key, array, priority);
}

extern "C" JNIEXPORT jint JNICALL Java_org_kvstore_swig_KVStoreLibJNI_pullOne(
    JNIEnv* env, jclass, jlong store, jint key, jlong array, jint priority) {
  return kvjava_one_call(env, KVStorePull, store, key, array, priority);
}
