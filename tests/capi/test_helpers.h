/* test_helpers.h - array helpers for the C API tests (public header only). */
#ifndef KVSTORE_TESTS_HELPERS_H_
#define KVSTORE_TESTS_HELPERS_H_

#include <kvstore/kvstore.h>
#include <stdlib.h>

#include "../common/check.h"

static const int64_t kShape23[2] = {2, 3};

/* A float32 (2,3) array on cpu(dev_id) filled with `value`; aborts the test on failure. */
static inline KVArrayHandle make_f32(double value, int dev_id) {
  KVArrayHandle a = NULL;
  if (KVArrayCreate(kShape23, 2, KV_FLOAT32, KV_CPU, dev_id, &a) != 0 || KVArrayFill(a, value) != 0) {
    fprintf(stderr, "cannot create a test array: %s\n", KVGetLastError());
    exit(2);
  }
  return a;
}

/* 1 when every element of the float32 array equals `value`. */
static inline int all_f32(KVArrayHandle a, float value) {
  float buf[64];
  int64_t n = 0;
  if (KVArrayGetSize(a, &n) != 0 || n > 64) return 0;
  if (KVArrayCopyToHost(a, buf, (size_t)n * sizeof(float)) != 0) return 0;
  for (int64_t i = 0; i < n; ++i) {
    if (buf[i] != value) {
      fprintf(stderr, "element %lld is %g, want %g\n", (long long)i, buf[i], value);
      return 0;
    }
  }
  return 1;
}

/* 1 when pulling int key `key` from `kv` gives all `value`. */
static inline int stored_is(KVStoreHandle kv, int key, float value) {
  KVArrayHandle out = make_f32(-12345, 0);
  int ok = KVStorePull(kv, 1, &key, &out, 0) == 0 && all_f32(out, value);
  KVArrayFree(out);
  return ok;
}

static inline int stored_str_is(KVStoreHandle kv, const char* key, float value) {
  KVArrayHandle out = make_f32(-12345, 0);
  int ok = KVStorePullStr(kv, 1, &key, &out, 0) == 0 && all_f32(out, value);
  KVArrayFree(out);
  return ok;
}

#endif
