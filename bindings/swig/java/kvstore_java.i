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

  /* The hot push and pull calls with the arrays' addresses (ArrayHandle.address()) instead of
   * ArrayHandle[] (kvstore_jni_support.cc, "Direct entry points"): the same checks, messages
   * and exceptions as KVStoreLib.KVStorePush / KVStorePull; the status is returned. The caller
   * keeps the store and arrays from being freed until the call returns (org.kvstore.KVStore
   * enters them). */
  public final static native int pushInts(long store, int[] keys, long[] arrays, int priority);
  public final static native int pullInts(long store, int[] keys, long[] arrays, int priority);
  public final static native int pushOne(long store, int key, long array, int priority);
  public final static native int pullOne(long store, int key, long array, int priority);
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

/* The typemaps below call the module's hand-written support code (kvstore_jni_support.cc). */
%{
#include "java/kvstore_jni_support.h"
%}

/* ------------------------------------------------------------------------------------------ */
/* Return codes -> exceptions                                                                 */
/* ------------------------------------------------------------------------------------------ */

/* Every int the C API returns is a KV error code, except the values of the catalogue
 * (../kvstore_typemaps.i). */
%typemap(ret) int %{ kvjava_finish(jenv, (int)$1); %}
%typemap(ret) int KVSWIG_VALUE ""

/* The JNIEnv of the call, for the helpers below (no Java parameter). */
%typemap(in, numinputs=0) JNIEnv* env %{ $1 = jenv; %}

/* ------------------------------------------------------------------------------------------ */
/* Scalars returned through pointers: Java holder arrays of length >= 1                       */
/* ------------------------------------------------------------------------------------------ */

%apply int* OUTPUT { int* KVSWIG_OUT_INT };
%apply long long* OUTPUT { int64_t* KVSWIG_OUT_INT64 };  /* long[] holder */
%apply unsigned long* OUTPUT { size_t* KVSWIG_OUT_SIZE };

/* Library-owned strings (KVSWIG_OUT_STRING) -> String[] holder; Java gets a copy. */
%typemap(jni) const char** KVSWIG_OUT_STRING "jobjectArray"
%typemap(jtype) const char** KVSWIG_OUT_STRING "String[]"
%typemap(jstype) const char** KVSWIG_OUT_STRING "String[]"
%typemap(javain) const char** KVSWIG_OUT_STRING "$javainput"
%typemap(in) const char** KVSWIG_OUT_STRING (const char* temp = 0) %{
  if (!$input || jenv->GetArrayLength($input) < 1) {
    kvswig_fail(KV_ERR_INVALID_ARGUMENT, "$1_name must be an array of length >= 1");
    kvjava_finish(jenv, KV_ERR_INVALID_ARGUMENT);
    return $null;
  }
  $1 = ($1_ltype)&temp;
%}
%typemap(argout) const char** KVSWIG_OUT_STRING %{
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
%typemap(jni) CTYPE* KVSWIG_NEW_HANDLE "jlongArray"
%typemap(jtype) CTYPE* KVSWIG_NEW_HANDLE "long[]"
%typemap(jstype) CTYPE* KVSWIG_NEW_HANDLE "JCLASS[]"
%typemap(javain,
         pre="    if ($javainput == null || $javainput.length < 1)\n"
             "      throw new org.kvstore.KVInvalidArgumentException(\"$javainput must be a JCLASS[] of length >= 1\");\n"
             "    long[] cptr$javainput = new long[1];",
         post="      if (cptr$javainput[0] != 0) $javainput[0] = new JCLASS(cptr$javainput[0], false);")
    CTYPE* KVSWIG_NEW_HANDLE "cptr$javainput"
%typemap(in) CTYPE* KVSWIG_NEW_HANDLE (CTYPE temp = 0) %{ $1 = &temp; %}
%typemap(argout) CTYPE* KVSWIG_NEW_HANDLE %{
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

/* Shapes (KVSWIG_SHAPE, KVSWIG_NDIM) <- long[] (null: a scalar, ndim 0), copied for the call. */
%typemap(jni) (const int64_t* KVSWIG_SHAPE, int KVSWIG_NDIM) "jlongArray"
%typemap(jtype) (const int64_t* KVSWIG_SHAPE, int KVSWIG_NDIM) "long[]"
%typemap(jstype) (const int64_t* KVSWIG_SHAPE, int KVSWIG_NDIM) "long[]"
%typemap(javain) (const int64_t* KVSWIG_SHAPE, int KVSWIG_NDIM) "$javainput"
%typemap(in) (const int64_t* KVSWIG_SHAPE, int KVSWIG_NDIM) (std::vector<int64_t> dims) %{
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

/* int64 lists (KVSWIG_INT64_LIST, KVSWIG_INT64_COUNT) <- long[] (null or empty: (NULL, 0)),
 * copied for the call. */
%typemap(jni) (const int64_t* KVSWIG_INT64_LIST, int64_t KVSWIG_INT64_COUNT) "jlongArray"
%typemap(jtype) (const int64_t* KVSWIG_INT64_LIST, int64_t KVSWIG_INT64_COUNT) "long[]"
%typemap(jstype) (const int64_t* KVSWIG_INT64_LIST, int64_t KVSWIG_INT64_COUNT) "long[]"
%typemap(javain) (const int64_t* KVSWIG_INT64_LIST, int64_t KVSWIG_INT64_COUNT) "$javainput"
%typemap(in) (const int64_t* KVSWIG_INT64_LIST, int64_t KVSWIG_INT64_COUNT)
    (std::vector<int64_t> values) %{
  $1 = 0;
  $2 = 0;
  if ($input) {
    jsize n$argnum = jenv->GetArrayLength($input);
    if (n$argnum > 0) {
      values.resize((size_t)n$argnum);
      jenv->GetLongArrayRegion($input, 0, n$argnum, reinterpret_cast<jlong*>(values.data()));
      $1 = values.data();
      $2 = (int64_t)n$argnum;
    }
  }
%}

/* (int64_t* out_ids, int64_t capacity) <-> long[] (capacity: its length; null: 0): the row ids
 * are written into the Java array. */
%typemap(jni) (int64_t* out_ids, int64_t capacity) "jlongArray"
%typemap(jtype) (int64_t* out_ids, int64_t capacity) "long[]"
%typemap(jstype) (int64_t* out_ids, int64_t capacity) "long[]"
%typemap(javain) (int64_t* out_ids, int64_t capacity) "$javainput"
%typemap(in) (int64_t* out_ids, int64_t capacity) (std::vector<int64_t> ids) %{
  $1 = 0;
  $2 = 0;
  if ($input) {
    jsize n$argnum = jenv->GetArrayLength($input);
    ids.resize((size_t)n$argnum + 1);
    $1 = ids.data();
    $2 = (int64_t)n$argnum;
  }
%}
%typemap(argout) (int64_t* out_ids, int64_t capacity) %{
  if (result == 0 && $input && $2 > 0)
    jenv->SetLongArrayRegion($input, 0, (jsize)$2, reinterpret_cast<const jlong*>($1));
%}

/* ------------------------------------------------------------------------------------------ */
/* Host data: a primitive array (pinned for the call) or a direct NIO buffer (its remaining     */
/* elements, from position). The byte count is the Java side's; the library checks it.         */
/* ------------------------------------------------------------------------------------------ */

%define KVJAVA_HOST_SPAN(PARAMS, RELEASE_MODE)
%typemap(jni) PARAMS "jobject"
%typemap(jtype) PARAMS "Object"
%typemap(jstype) PARAMS "Object"
%typemap(javain) PARAMS "$javainput"
%typemap(in) PARAMS (KVJavaSpan span) %{
  if (!kvjava_span_acquire(jenv, $input, &span)) {
    kvjava_finish(jenv, KV_ERR_INVALID_ARGUMENT);
    return $null;
  }
  $1 = span.ptr;
  $2 = span.nbytes;
%}
%typemap(freearg) PARAMS %{ kvjava_span_release(jenv, &span$argnum, RELEASE_MODE); %}
%enddef
KVJAVA_HOST_SPAN((const void* KVSWIG_DATA_IN, size_t KVSWIG_NBYTES), JNI_ABORT)
KVJAVA_HOST_SPAN((void* data, size_t nbytes), 0)

/* ------------------------------------------------------------------------------------------ */
/* List arguments of the shared list calls (../kvstore_lists.h): int[], String[] and          */
/* ArrayHandle[] arrays, copied into C storage for the call; the shim checks the counts.      */
/* ------------------------------------------------------------------------------------------ */

%define KVJAVA_LIST(PARAMS, JNITYPE, JTYPE, STORAGE, CONVERT, COUNT, DATA)
%typemap(jni) PARAMS "JNITYPE"
%typemap(jtype) PARAMS "JTYPE"
%typemap(jstype) PARAMS "JTYPE"
%typemap(javain) PARAMS "$javainput"
%typemap(in) PARAMS (STORAGE list) %{
  if (int rc = CONVERT(jenv, $input, "$2_name", &list)) {
    kvjava_finish(jenv, rc);
    return $null;
  }
  $1 = (int)list.COUNT;
  $2 = ($2_ltype)list.DATA;
%}
%enddef
KVJAVA_LIST((int num, const int* keys), jintArray, int[], std::vector<int>, kvjava_ints,
            size(), data())
KVJAVA_LIST((int num, const char* const* keys), jobjectArray, String[], KVJavaStrings,
            kvjava_strings, ptrs.size(), ptrs.data())
KVJAVA_LIST((int nvals, const KVArrayHandle* vals), jobjectArray, ArrayHandle[],
            std::vector<KVArrayHandle>, kvjava_handles, size(), data())

/* ------------------------------------------------------------------------------------------ */
/* Updaters and the zero-copy buffer: small C++ functions with Java-shaped arguments          */
/* ------------------------------------------------------------------------------------------ */

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
%ignore KVStoreSetUpdater;
%ignore KVStoreSetStrUpdater;
/* Server processes are started with the kvstore-server program; no Java controller. */
%ignore KVStoreRunServer;

%rename(KVStoreSetUpdater) kvjava_set_updater;
%rename(KVStoreSetStrUpdater) kvjava_set_str_updater;
%rename(KVArrayGetDataBuffer) kvjava_array_data_buffer;

/* Strings: SWIG's own String <-> modified UTF-8 conversion, for the call only. */
%apply const char* { const char* KVSWIG_IN_STRING };

/* The shared catalogue applies the typemaps above to the parameters of the C API. */
%include "kvstore_typemaps.i"

/* The public headers, then the Java-shaped wrappers declared over their types. %include reads
 * each file once, so kvstore.i's own %include of the headers after this file is a no-op. */
%include "kvstore/kvstore_errors.h"
%include "kvstore/kvstore.h"

int kvjava_set_updater(JNIEnv* env, KVStoreHandle store, jobject updater);
int kvjava_set_str_updater(JNIEnv* env, KVStoreHandle store, jobject str_updater);
jobject kvjava_array_data_buffer(JNIEnv* env, KVArrayHandle array);
