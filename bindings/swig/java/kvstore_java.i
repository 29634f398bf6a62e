/* kvstore_java.i - the Java part of the SWIG interface (included by ../kvstore.i under SWIGJAVA).
 *
 * Generated classes land in package org.kvstore.swig: KVStoreLib (the module: one static method
 * per C function), KVStoreLibJNI (natives), ArrayHandle and StoreHandle (the two distinct handle
 * types), and constant interfaces for the C enums. The idiomatic layer (org.kvstore.*) is built
 * on top of them; see TYPEMAPS.md beside this file for who owns and frees what.
 *
 * Error model of the generated layer: every function that returns a KV error code throws
 * instead of returning a negative value. The exception is the generated subclass of
 * org.kvstore.KVStoreException for the code (org.kvstore.KVErrors.create), carrying
 * KVGetLastError()'s message. A Java exception thrown by an updater is rethrown unchanged to
 * the thread that called push. The throw happens in the "ret" typemap, after every "freearg",
 * so no JNI resource (string chars, pinned arrays) is left behind by a failing call.
 */

/* int64_t is `long` on every LP64 platform a JVM binding targets; declaring it so keeps SWIG's
 * casts exact. All int64_t parameters are pointers with their own typemaps below. */
typedef long int64_t;
%include "typemaps.i"
%include "enumtypeunsafe.swg"
%javaconst(1);

/* ------------------------------------------------------------------------------------------ */
/* Library loading                                                                            */
/* ------------------------------------------------------------------------------------------ */

%pragma(java) jniclassclassmodifiers = "public final class"
%pragma(java) jniclasscode = %{
  static {
    String path = System.getProperty("kvstore.jni.path");
    try {
      if (path != null && !path.isEmpty()) {
        System.load(path);
      } else {
        System.loadLibrary("kvstore_java");
      }
    } catch (UnsatisfiedLinkError e) {
      UnsatisfiedLinkError err = new UnsatisfiedLinkError(
          "cannot load the kvstore JNI module (libkvstore_java.so): " + e.getMessage()
          + "; put its directory on -Djava.library.path (or LD_LIBRARY_PATH),"
          + " or set -Dkvstore.jni.path=/abs/path/libkvstore_java.so");
      err.initCause(e);
      throw err;
    }
  }
%}

%pragma(java) moduleclassmodifiers = "public final class"
%pragma(java) modulecode = %{
  private KVStoreLib() {}

  /** Int-key updater as the native trampoline sees it; the handles are borrowed for the call. */
  @FunctionalInterface
  public interface Updater {
    void update(int key, ArrayHandle recv, ArrayHandle stored);

    /** Called once by the registration's free hook, when the store drops this updater. */
    default void release() {}
  }

  /** String-key updater as the native trampoline sees it; the handles are borrowed. */
  @FunctionalInterface
  public interface StrUpdater {
    void update(String key, ArrayHandle recv, ArrayHandle stored);

    /** Called once by the registration's free hook, when the store drops this updater. */
    default void release() {}
  }
%}

/* ------------------------------------------------------------------------------------------ */
/* Handles: two distinct proxy classes over the incomplete structs, never owned by Java        */
/* ------------------------------------------------------------------------------------------ */

%nodefaultctor KVArray_;
%nodefaultdtor KVArray_;
%nodefaultctor KVStore_;
%nodefaultdtor KVStore_;
%rename(ArrayHandle) KVArray_;
%rename(StoreHandle) KVStore_;
/* The proxies are plain pointers: no finalizer, release only through KVArrayFree/KVStoreFree. */
%typemap(javafinalize) KVArray_, KVStore_ ""
%typemap(javadestruct, methodname="delete", methodmodifiers="public synchronized") KVArray_, KVStore_ {
    swigCPtr = 0;
  }
%typemap(javacode) KVArray_, KVStore_ %{
  /** The native address, for diagnostics and identity checks. */
  public long address() {
    return swigCPtr;
  }

  @Override
  public boolean equals(Object o) {
    return o != null && o.getClass() == getClass() && ((($javaclassname) o).swigCPtr == swigCPtr);
  }

  @Override
  public int hashCode() {
    return Long.hashCode(swigCPtr);
  }
%}
/* SWIG's view only: the C declarations stay incomplete. */
struct KVArray_ {};
struct KVStore_ {};

/* ------------------------------------------------------------------------------------------ */
/* Support code compiled into the JNI module                                                  */
/* ------------------------------------------------------------------------------------------ */

%{
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <string>
#include <vector>

#include "kvstore/kvstore.h"

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

/* Binding-side failures (bad Java arguments) carry their own message, kept per thread like the
 * library's KVGetLastError(). */
thread_local std::string kvjava_error;
thread_local bool kvjava_has_error = false;

int kvjava_fail(int code, const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  kvjava_error = buf;
  kvjava_has_error = true;
  return code;
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

/* Turns the result of a fallible call into the Java outcome: nothing on success, otherwise the
 * updater's own exception (KV_ERR_CALLBACK) or the exception class of the code. */
void kvjava_finish(JNIEnv* env, int rc) {
  if (rc >= 0) {
    kvjava_drop_pending(env);
    kvjava_has_error = false;
    return;
  }
  if (kvjava_pending) {
    jobject pending = kvjava_pending;
    kvjava_pending = nullptr;
    if (rc == KV_ERR_CALLBACK && !env->ExceptionCheck()) {
      env->Throw(static_cast<jthrowable>(pending));
      env->DeleteGlobalRef(pending);
      kvjava_has_error = false;
      return;
    }
    env->DeleteGlobalRef(pending);
  }
  if (kvjava_has_error) {
    kvjava_has_error = false;
    kvjava_throw_code(env, rc, kvjava_error.c_str());
  } else {
    kvjava_throw_code(env, rc, KVGetLastError());
  }
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

int kvjava_int_trampoline(int key, KVArrayHandle recv, KVArrayHandle stored, void* user_data) {
  bool attached = false;
  JNIEnv* env = kvjava_env(&attached);
  if (!env || !kvjava_ids.updater_update || !kvjava_ids.array_handle_ctor) return 1;
  int rc = 1;
  if (env->PushLocalFrame(8) == 0) {
    jobject jrecv = kvjava_new_handle(env, recv);
    jobject jstored = jrecv ? kvjava_new_handle(env, stored) : nullptr;
    if (jstored)
      env->CallVoidMethod(static_cast<jobject>(user_data), kvjava_ids.updater_update, (jint)key,
                          jrecv, jstored);
    rc = kvjava_after_call(env, attached);
    if (rc == 0 && (!jrecv || !jstored)) rc = 1;
    env->PopLocalFrame(nullptr);
  } else {
    kvjava_after_call(env, attached); /* parks the pending OutOfMemoryError */
    rc = 1;
  }
  if (attached) kvjava_vm->DetachCurrentThread();
  return rc;
}

int kvjava_str_trampoline(const char* key, KVArrayHandle recv, KVArrayHandle stored,
                          void* user_data) {
  bool attached = false;
  JNIEnv* env = kvjava_env(&attached);
  if (!env || !kvjava_ids.str_updater_update || !kvjava_ids.array_handle_ctor) return 1;
  int rc = 1;
  if (env->PushLocalFrame(8) == 0) {
    jstring jkey = env->NewStringUTF(key ? key : "");
    jobject jrecv = jkey ? kvjava_new_handle(env, recv) : nullptr;
    jobject jstored = jrecv ? kvjava_new_handle(env, stored) : nullptr;
    if (jstored)
      env->CallVoidMethod(static_cast<jobject>(user_data), kvjava_ids.str_updater_update, jkey,
                          jrecv, jstored);
    rc = kvjava_after_call(env, attached);
    if (rc == 0 && !jstored) rc = 1;
    env->PopLocalFrame(nullptr);
  } else {
    kvjava_after_call(env, attached); /* parks the pending OutOfMemoryError */
    rc = 1;
  }
  if (attached) kvjava_vm->DetachCurrentThread();
  return rc;
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

/* Host memory seen through a Java primitive array or a direct NIO buffer. */
struct KVJavaSpan {
  void* ptr = nullptr;
  size_t nbytes = 0;
  jarray array = nullptr; /* set when ptr came from GetPrimitiveArrayCritical */
};

/* Fills `span` from `obj`; on failure records a binding error and returns false. The array
 * case pins with GetPrimitiveArrayCritical: callers must make no JNI call until release. */
bool kvjava_span_acquire(JNIEnv* env, jobject obj, KVJavaSpan* span) {
  if (!obj) {
    kvjava_fail(KV_ERR_NULL_POINTER, "data is null (expected a primitive array or a direct buffer)");
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
      kvjava_fail(KV_ERR_INVALID_ARGUMENT, "unsupported direct buffer class");
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
    kvjava_fail(KV_ERR_INVALID_ARGUMENT,
                "a heap NIO buffer was given; use a direct buffer (ByteBuffer.allocateDirect)");
  } else {
    kvjava_fail(KV_ERR_INVALID_ARGUMENT,
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
  if (!arr) return kvjava_fail(KV_ERR_NULL_POINTER, "%s is null", what);
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

struct KVJavaStrings {
  std::vector<std::string> storage;
  std::vector<const char*> ptrs;
};

int kvjava_strings(JNIEnv* env, jobjectArray arr, const char* what, KVJavaStrings* out) {
  if (!arr) return kvjava_fail(KV_ERR_NULL_POINTER, "%s is null", what);
  jsize n = env->GetArrayLength(arr);
  out->storage.resize((size_t)n);
  out->ptrs.resize((size_t)n);
  for (jsize i = 0; i < n; ++i) {
    jstring s = static_cast<jstring>(env->GetObjectArrayElement(arr, i));
    if (env->ExceptionCheck()) return KV_ERR_INVALID_ARGUMENT;
    if (!s) return kvjava_fail(KV_ERR_NULL_POINTER, "%s[%d] is null", what, (int)i);
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
  if (!arr) return kvjava_fail(KV_ERR_NULL_POINTER, "%s is null", what);
  jsize n = env->GetArrayLength(arr);
  out->resize((size_t)n);
  if (n > 0) env->GetIntArrayRegion(arr, 0, n, reinterpret_cast<jint*>(out->data()));
  return env->ExceptionCheck() ? KV_ERR_INVALID_ARGUMENT : 0;
}

int kvjava_count(const char* call, size_t nkeys, const char* what, size_t nvals) {
  if (nkeys == nvals) return 0;
  return kvjava_fail(KV_ERR_INVALID_ARGUMENT,
                     "%s: %zu keys but %zu %s (the lists must have equal length)", call, nkeys,
                     nvals, what);
}

/* List wrappers with Java-shaped arguments: convert, check that the lengths agree (the C call
 * trusts `num`), call. Pushpull and broadcast take values, then outputs. */
typedef int (*KVJavaIntList)(KVStoreHandle, int, const int*, const KVArrayHandle*);
typedef int (*KVJavaStrList)(KVStoreHandle, int, const char* const*, const KVArrayHandle*);
typedef int (*KVJavaIntListP)(KVStoreHandle, int, const int*, const KVArrayHandle*, int);
typedef int (*KVJavaStrListP)(KVStoreHandle, int, const char* const*, const KVArrayHandle*, int);
typedef int (*KVJavaIntTwo)(KVStoreHandle, int, const int*, const KVArrayHandle*, int,
                            const int*, const KVArrayHandle*, int);
typedef int (*KVJavaStrTwo)(KVStoreHandle, int, const char* const*, const KVArrayHandle*, int,
                            const char* const*, const KVArrayHandle*, int);

template <typename Fn, typename... Rest>
int kvjava_int_list(JNIEnv* env, const char* call, const char* what, Fn fn, KVStoreHandle store,
                    jintArray keys, jobjectArray vals, Rest... rest) {
  std::vector<int> k;
  std::vector<KVArrayHandle> v;
  int rc = kvjava_ints(env, keys, "keys", &k);
  if (rc == 0) rc = kvjava_handles(env, vals, what, &v);
  if (rc == 0) rc = kvjava_count(call, k.size(), what, v.size());
  if (rc != 0) return rc;
  return fn(store, (int)k.size(), k.data(), v.data(), rest...);
}

template <typename Fn, typename... Rest>
int kvjava_str_list(JNIEnv* env, const char* call, const char* what, Fn fn, KVStoreHandle store,
                    jobjectArray keys, jobjectArray vals, Rest... rest) {
  KVJavaStrings k;
  std::vector<KVArrayHandle> v;
  int rc = kvjava_strings(env, keys, "keys", &k);
  if (rc == 0) rc = kvjava_handles(env, vals, what, &v);
  if (rc == 0) rc = kvjava_count(call, k.ptrs.size(), what, v.size());
  if (rc != 0) return rc;
  return fn(store, (int)k.ptrs.size(), k.ptrs.data(), v.data(), rest...);
}

int kvjava_int_two(JNIEnv* env, const char* call, KVJavaIntTwo fn, KVStoreHandle store,
                   jintArray keys, jobjectArray vals, jintArray okeys, jobjectArray outs,
                   int priority) {
  std::vector<int> k, ok;
  std::vector<KVArrayHandle> v, o;
  int rc = kvjava_ints(env, keys, "keys", &k);
  if (rc == 0) rc = kvjava_handles(env, vals, "values", &v);
  if (rc == 0) rc = kvjava_ints(env, okeys, "output keys", &ok);
  if (rc == 0) rc = kvjava_handles(env, outs, "outputs", &o);
  if (rc == 0) rc = kvjava_count(call, k.size(), "values", v.size());
  if (rc == 0) rc = kvjava_count(call, ok.size(), "outputs", o.size());
  if (rc != 0) return rc;
  return fn(store, (int)k.size(), k.data(), v.data(), (int)ok.size(), ok.data(), o.data(),
            priority);
}

int kvjava_str_two(JNIEnv* env, const char* call, KVJavaStrTwo fn, KVStoreHandle store,
                   jobjectArray keys, jobjectArray vals, jobjectArray okeys, jobjectArray outs,
                   int priority) {
  KVJavaStrings k, ok;
  std::vector<KVArrayHandle> v, o;
  int rc = kvjava_strings(env, keys, "keys", &k);
  if (rc == 0) rc = kvjava_handles(env, vals, "values", &v);
  if (rc == 0) rc = kvjava_strings(env, okeys, "output keys", &ok);
  if (rc == 0) rc = kvjava_handles(env, outs, "outputs", &o);
  if (rc == 0) rc = kvjava_count(call, k.ptrs.size(), "values", v.size());
  if (rc == 0) rc = kvjava_count(call, ok.ptrs.size(), "outputs", o.size());
  if (rc != 0) return rc;
  return fn(store, (int)k.ptrs.size(), k.ptrs.data(), v.data(), (int)ok.ptrs.size(),
            ok.ptrs.data(), o.data(), priority);
}

int kvjava_init(JNIEnv* env, KVStoreHandle store, jintArray keys, jobjectArray vals) {
  return kvjava_int_list(env, "KVStoreInit", "values", KVJavaIntList(KVStoreInit), store, keys,
                         vals);
}
int kvjava_init_str(JNIEnv* env, KVStoreHandle store, jobjectArray skeys, jobjectArray vals) {
  return kvjava_str_list(env, "KVStoreInitStr", "values", KVJavaStrList(KVStoreInitStr), store,
                         skeys, vals);
}
int kvjava_push(JNIEnv* env, KVStoreHandle store, jintArray keys, jobjectArray vals,
                int priority) {
  return kvjava_int_list(env, "KVStorePush", "values", KVJavaIntListP(KVStorePush), store, keys,
                         vals, priority);
}
int kvjava_push_str(JNIEnv* env, KVStoreHandle store, jobjectArray skeys, jobjectArray vals,
                    int priority) {
  return kvjava_str_list(env, "KVStorePushStr", "values", KVJavaStrListP(KVStorePushStr), store,
                         skeys, vals, priority);
}
int kvjava_pull(JNIEnv* env, KVStoreHandle store, jintArray keys, jobjectArray outs,
                int priority) {
  return kvjava_int_list(env, "KVStorePull", "outputs", KVJavaIntListP(KVStorePull), store, keys,
                         outs, priority);
}
int kvjava_pull_str(JNIEnv* env, KVStoreHandle store, jobjectArray skeys, jobjectArray outs,
                    int priority) {
  return kvjava_str_list(env, "KVStorePullStr", "outputs", KVJavaStrListP(KVStorePullStr), store,
                         skeys, outs, priority);
}
int kvjava_pushpull(JNIEnv* env, KVStoreHandle store, jintArray keys, jobjectArray vals,
                    jintArray okeys, jobjectArray outs, int priority) {
  return kvjava_int_two(env, "KVStorePushPull", KVStorePushPull, store, keys, vals, okeys, outs,
                        priority);
}
int kvjava_pushpull_str(JNIEnv* env, KVStoreHandle store, jobjectArray skeys, jobjectArray vals,
                        jobjectArray sokeys, jobjectArray outs, int priority) {
  return kvjava_str_two(env, "KVStorePushPullStr", KVStorePushPullStr, store, skeys, vals,
                        sokeys, outs, priority);
}
int kvjava_broadcast(JNIEnv* env, KVStoreHandle store, jintArray keys, jobjectArray vals,
                     jintArray okeys, jobjectArray outs, int priority) {
  return kvjava_int_two(env, "KVStoreBroadcast", KVStoreBroadcast, store, keys, vals, okeys,
                        outs, priority);
}
int kvjava_broadcast_str(JNIEnv* env, KVStoreHandle store, jobjectArray skeys, jobjectArray vals,
                         jobjectArray sokeys, jobjectArray outs, int priority) {
  return kvjava_str_two(env, "KVStoreBroadcastStr", KVStoreBroadcastStr, store, skeys, vals,
                        sokeys, outs, priority);
}

/* Updaters: the store keeps a global ref to the Java object; its free hook deletes it. A null
 * updater restores the default (assign). A refused registration (a distributed worker refuses
 * every updater) never runs the free hook: the ref is deleted here instead, exactly once. */
int kvjava_set_updater(JNIEnv* env, KVStoreHandle store, jobject updater) {
  if (!updater) return KVStoreSetUpdater(store, nullptr, nullptr, nullptr);
  jobject ref = env->NewGlobalRef(updater);
  if (!ref) return kvjava_fail(KV_ERR_OUT_OF_MEMORY, "NewGlobalRef failed for the updater");
  int rc = KVStoreSetUpdater(store, kvjava_int_trampoline, ref, kvjava_release_ref);
  if (rc != 0) env->DeleteGlobalRef(ref); /* on failure the caller keeps user_data */
  return rc;
}
int kvjava_set_str_updater(JNIEnv* env, KVStoreHandle store, jobject str_updater) {
  if (!str_updater) return KVStoreSetStrUpdater(store, nullptr, nullptr, nullptr);
  jobject ref = env->NewGlobalRef(str_updater);
  if (!ref) return kvjava_fail(KV_ERR_OUT_OF_MEMORY, "NewGlobalRef failed for the updater");
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

} /* namespace */

extern "C" JNIEXPORT jint JNICALL JNI_OnLoad(JavaVM* vm, void* /*reserved*/) {
  kvjava_vm = vm;
  JNIEnv* env = nullptr;
  if (vm->GetEnv(reinterpret_cast<void**>(&env), JNI_VERSION_1_8) != JNI_OK) return JNI_ERR;
  kvjava_init_ids(env);
  return JNI_VERSION_1_8;
}
%}

/* ------------------------------------------------------------------------------------------ */
/* Return codes -> exceptions                                                                 */
/* ------------------------------------------------------------------------------------------ */

/* Every int the C API returns is a KV error code, except these five, which return values. */
%typemap(ret) int %{ kvjava_finish(jenv, (int)$1); %}
%typemap(ret) int KVGetVersion, int KVHasFeature, int KVIsWorkerNode, int KVIsServerNode,
              int KVIsSchedulerNode ""

/* The JNIEnv of the call, for the helpers below (no Java parameter). */
%typemap(in, numinputs=0) JNIEnv* env %{ $1 = jenv; %}

/* ------------------------------------------------------------------------------------------ */
/* Scalars returned through pointers: Java holder arrays of length >= 1                       */
/* ------------------------------------------------------------------------------------------ */

%apply int* OUTPUT { int* out_ndim, int* out_dtype, int* out_dev_type, int* out_dev_id,
                     int* out_count, int* out_rank, int* out_size, int* out_number };
%apply long long* OUTPUT { int64_t* out_size };  /* long[] holder */
%apply unsigned long* OUTPUT { size_t* out_nbytes };

/* const char** out_type -> String[] holder; the library keeps the string, Java copies it. */
%typemap(jni) const char** out_type "jobjectArray"
%typemap(jtype) const char** out_type "String[]"
%typemap(jstype) const char** out_type "String[]"
%typemap(javain) const char** out_type "$javainput"
%typemap(in) const char** out_type (const char* temp = 0) %{
  if (!$input || jenv->GetArrayLength($input) < 1) {
    kvjava_fail(KV_ERR_INVALID_ARGUMENT, "$1_name must be an array of length >= 1");
    kvjava_finish(jenv, KV_ERR_INVALID_ARGUMENT);
    return $null;
  }
  $1 = ($1_ltype)&temp;
%}
%typemap(argout) const char** out_type %{
  if (result == 0 && temp$argnum) {
    jstring s$argnum = jenv->NewStringUTF(temp$argnum);
    if (s$argnum) {
      jenv->SetObjectArrayElement($input, 0, s$argnum);
      jenv->DeleteLocalRef(s$argnum);
    }
  }
%}

/* KVArrayHandle* out / KVStoreHandle* out -> ArrayHandle[] / StoreHandle[] holder. The new
 * handle is owned by the caller (free it with KVArrayFree / KVStoreFree). */
%define KVJAVA_HANDLE_OUT(CTYPE, JCLASS)
%typemap(jni) CTYPE* out "jlongArray"
%typemap(jtype) CTYPE* out "long[]"
%typemap(jstype) CTYPE* out "JCLASS[]"
%typemap(javain,
         pre="    if ($javainput == null || $javainput.length < 1)\n"
             "      throw new org.kvstore.KVInvalidArgumentException(\"$javainput must be a JCLASS[] of length >= 1\");\n"
             "    long[] cptr$javainput = new long[1];",
         post="      if (cptr$javainput[0] != 0) $javainput[0] = new JCLASS(cptr$javainput[0], false);")
    CTYPE* out "cptr$javainput"
%typemap(in) CTYPE* out (CTYPE temp = 0) %{ $1 = &temp; %}
%typemap(argout) CTYPE* out %{
  if (result == 0) {
    jlong v$argnum = (jlong)(intptr_t)temp$argnum;
    jenv->SetLongArrayRegion($input, 0, 1, &v$argnum);
  }
%}
%enddef
KVJAVA_HANDLE_OUT(KVArrayHandle, ArrayHandle)
KVJAVA_HANDLE_OUT(KVStoreHandle, StoreHandle)

/* ------------------------------------------------------------------------------------------ */
/* Shapes                                                                                     */
/* ------------------------------------------------------------------------------------------ */

/* (const int64_t* shape, int ndim) <- long[] (null: a scalar, ndim 0). Copied for the call. */
%typemap(jni) (const int64_t* shape, int ndim) "jlongArray"
%typemap(jtype) (const int64_t* shape, int ndim) "long[]"
%typemap(jstype) (const int64_t* shape, int ndim) "long[]"
%typemap(javain) (const int64_t* shape, int ndim) "$javainput"
%typemap(in) (const int64_t* shape, int ndim) (std::vector<int64_t> dims) %{
  $1 = 0;
  $2 = 0;
  if ($input) {
    jsize n$argnum = jenv->GetArrayLength($input);
    dims.resize((size_t)n$argnum + 1);
    if (n$argnum > 0)
      jenv->GetLongArrayRegion($input, 0, n$argnum, reinterpret_cast<jlong*>(dims.data()));
    $1 = dims.data();
    $2 = (int)n$argnum;
  }
%}

/* (int64_t* out_dims, int capacity) <-> long[]: the dims are written into the Java array. */
%typemap(jni) (int64_t* out_dims, int capacity) "jlongArray"
%typemap(jtype) (int64_t* out_dims, int capacity) "long[]"
%typemap(jstype) (int64_t* out_dims, int capacity) "long[]"
%typemap(javain) (int64_t* out_dims, int capacity) "$javainput"
%typemap(in) (int64_t* out_dims, int capacity) (std::vector<int64_t> dims) %{
  $1 = 0;
  $2 = 0;
  if ($input) {
    jsize n$argnum = jenv->GetArrayLength($input);
    dims.resize((size_t)n$argnum + 1);
    $1 = dims.data();
    $2 = (int)n$argnum;
  }
%}
%typemap(argout) (int64_t* out_dims, int capacity) %{
  if (result == 0 && $input && $2 > 0)
    jenv->SetLongArrayRegion($input, 0, (jsize)$2, reinterpret_cast<const jlong*>($1));
%}

/* ------------------------------------------------------------------------------------------ */
/* Host data: a primitive array (pinned for the call) or a direct NIO buffer (its remaining     */
/* elements, from position). The byte count is the Java side's; the library checks it.         */
/* ------------------------------------------------------------------------------------------ */

%define KVJAVA_HOST_SPAN(DATATYPE, RELEASE_MODE)
%typemap(jni) (DATATYPE data, size_t nbytes) "jobject"
%typemap(jtype) (DATATYPE data, size_t nbytes) "Object"
%typemap(jstype) (DATATYPE data, size_t nbytes) "Object"
%typemap(javain) (DATATYPE data, size_t nbytes) "$javainput"
%typemap(in) (DATATYPE data, size_t nbytes) (KVJavaSpan span) %{
  if (!kvjava_span_acquire(jenv, $input, &span)) {
    kvjava_finish(jenv, KV_ERR_INVALID_ARGUMENT);
    return $null;
  }
  $1 = span.ptr;
  $2 = span.nbytes;
%}
%typemap(freearg) (DATATYPE data, size_t nbytes) %{ kvjava_span_release(jenv, &span$argnum, RELEASE_MODE); %}
%enddef
KVJAVA_HOST_SPAN(const void*, JNI_ABORT)
KVJAVA_HOST_SPAN(void*, 0)

/* ------------------------------------------------------------------------------------------ */
/* List calls, updaters and the zero-copy buffer: small C wrappers with Java-shaped arguments  */
/* ------------------------------------------------------------------------------------------ */

%typemap(jni) jintArray keys, jintArray okeys "jintArray"
%typemap(jtype) jintArray keys, jintArray okeys "int[]"
%typemap(jstype) jintArray keys, jintArray okeys "int[]"
%typemap(javain) jintArray keys, jintArray okeys "$javainput"
%typemap(in) jintArray keys, jintArray okeys %{ $1 = $input; %}

%typemap(jni) jobjectArray skeys, jobjectArray sokeys "jobjectArray"
%typemap(jtype) jobjectArray skeys, jobjectArray sokeys "String[]"
%typemap(jstype) jobjectArray skeys, jobjectArray sokeys "String[]"
%typemap(javain) jobjectArray skeys, jobjectArray sokeys "$javainput"
%typemap(in) jobjectArray skeys, jobjectArray sokeys %{ $1 = $input; %}

%typemap(jni) jobjectArray vals, jobjectArray outs "jobjectArray"
%typemap(jtype) jobjectArray vals, jobjectArray outs "ArrayHandle[]"
%typemap(jstype) jobjectArray vals, jobjectArray outs "ArrayHandle[]"
%typemap(javain) jobjectArray vals, jobjectArray outs "$javainput"
%typemap(in) jobjectArray vals, jobjectArray outs %{ $1 = $input; %}

%typemap(jni) jobject updater "jobject"
%typemap(jtype) jobject updater "KVStoreLib.Updater"
%typemap(jstype) jobject updater "KVStoreLib.Updater"
%typemap(javain) jobject updater "$javainput"
%typemap(in) jobject updater %{ $1 = $input; %}
%typemap(jni) jobject str_updater "jobject"
%typemap(jtype) jobject str_updater "KVStoreLib.StrUpdater"
%typemap(jstype) jobject str_updater "KVStoreLib.StrUpdater"
%typemap(javain) jobject str_updater "$javainput"
%typemap(in) jobject str_updater %{ $1 = $input; %}

%typemap(jni) jobject kvjava_array_data_buffer "jobject"
%typemap(jtype) jobject kvjava_array_data_buffer "java.nio.ByteBuffer"
%typemap(jstype) jobject kvjava_array_data_buffer "java.nio.ByteBuffer"
%typemap(javaout) jobject kvjava_array_data_buffer { return $jnicall; }
%typemap(out) jobject kvjava_array_data_buffer %{ $result = $1; %}

%ignore KVArrayGetData;
%ignore KVStoreInit;
%ignore KVStoreInitStr;
%ignore KVStorePush;
%ignore KVStorePushStr;
%ignore KVStorePull;
%ignore KVStorePullStr;
%ignore KVStorePushPull;
%ignore KVStorePushPullStr;
%ignore KVStoreBroadcast;
%ignore KVStoreBroadcastStr;
%ignore KVStoreSetUpdater;
%ignore KVStoreSetStrUpdater;
/* Server processes are started with the kvstore-server program; no Java controller. */
%ignore KVStoreRunServer;

%rename(KVStoreInit) kvjava_init;
%rename(KVStoreInitStr) kvjava_init_str;
%rename(KVStorePush) kvjava_push;
%rename(KVStorePushStr) kvjava_push_str;
%rename(KVStorePull) kvjava_pull;
%rename(KVStorePullStr) kvjava_pull_str;
%rename(KVStorePushPull) kvjava_pushpull;
%rename(KVStorePushPullStr) kvjava_pushpull_str;
%rename(KVStoreBroadcast) kvjava_broadcast;
%rename(KVStoreBroadcastStr) kvjava_broadcast_str;
%rename(KVStoreSetUpdater) kvjava_set_updater;
%rename(KVStoreSetStrUpdater) kvjava_set_str_updater;
%rename(KVArrayGetDataBuffer) kvjava_array_data_buffer;

/* The public headers, then the Java-shaped wrappers declared over their types. %include reads
 * each file once, so kvstore.i's own %include of the headers after this file is a no-op. */
%include "kvstore/kvstore_errors.h"
%include "kvstore/kvstore.h"

int kvjava_init(JNIEnv* env, KVStoreHandle store, jintArray keys, jobjectArray vals);
int kvjava_init_str(JNIEnv* env, KVStoreHandle store, jobjectArray skeys, jobjectArray vals);
int kvjava_push(JNIEnv* env, KVStoreHandle store, jintArray keys, jobjectArray vals, int priority);
int kvjava_push_str(JNIEnv* env, KVStoreHandle store, jobjectArray skeys, jobjectArray vals,
                    int priority);
int kvjava_pull(JNIEnv* env, KVStoreHandle store, jintArray keys, jobjectArray outs, int priority);
int kvjava_pull_str(JNIEnv* env, KVStoreHandle store, jobjectArray skeys, jobjectArray outs,
                    int priority);
int kvjava_pushpull(JNIEnv* env, KVStoreHandle store, jintArray keys, jobjectArray vals,
                    jintArray okeys, jobjectArray outs, int priority);
int kvjava_pushpull_str(JNIEnv* env, KVStoreHandle store, jobjectArray skeys, jobjectArray vals,
                        jobjectArray sokeys, jobjectArray outs, int priority);
int kvjava_broadcast(JNIEnv* env, KVStoreHandle store, jintArray keys, jobjectArray vals,
                     jintArray okeys, jobjectArray outs, int priority);
int kvjava_broadcast_str(JNIEnv* env, KVStoreHandle store, jobjectArray skeys, jobjectArray vals,
                         jobjectArray sokeys, jobjectArray outs, int priority);
int kvjava_set_updater(JNIEnv* env, KVStoreHandle store, jobject updater);
int kvjava_set_str_updater(JNIEnv* env, KVStoreHandle store, jobject str_updater);
jobject kvjava_array_data_buffer(JNIEnv* env, KVArrayHandle array);
