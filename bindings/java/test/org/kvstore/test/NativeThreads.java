package org.kvstore.test;

/** Test helper (libkvstore_java_testhelper.so): C API calls from a thread the JVM never saw. */
final class NativeThreads {
  static {
    System.loadLibrary("kvstore_java_testhelper");
  }

  private NativeThreads() {}

  /** KVStorePush(store, {key}, {array}) on a new native thread; returns the C result. */
  static native int push(long store, int key, long array);

  /** KVStoreFree(store) on a new native thread; returns the C result. */
  static native int free(long store);
}
