// Test helper: calls the C API from a thread the JVM has never seen, so that the Java tests
// can check the trampoline's attach/detach path and the free hook on a foreign thread.
// Loaded only by org.kvstore.test.NativeThreads; not part of the binding.
#include <jni.h>
#include <stdint.h>

#include <thread>

#include "kvstore/kvstore.h"

extern "C" {

JNIEXPORT jint JNICALL Java_org_kvstore_test_NativeThreads_push(JNIEnv*, jclass, jlong store,
                                                                  jint key, jlong array) {
  int rc = 0;
  std::thread t([&] {
    const int k = key;
    KVArrayHandle a = reinterpret_cast<KVArrayHandle>(static_cast<intptr_t>(array));
    rc = KVStorePush(reinterpret_cast<KVStoreHandle>(static_cast<intptr_t>(store)), 1, &k, &a, 0);
  });
  t.join();
  return rc;
}

JNIEXPORT jint JNICALL Java_org_kvstore_test_NativeThreads_free(JNIEnv*, jclass, jlong store) {
  int rc = 0;
  std::thread t([&] { rc = KVStoreFree(reinterpret_cast<KVStoreHandle>(static_cast<intptr_t>(store))); });
  t.join();
  return rc;
}

}  // extern "C"
