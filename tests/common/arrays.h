/* arrays.h - array builders and readers for the C and C++ test programs (C99, public ABI
 * only). Setup that fails ends the program (REQUIRE_OK, check.h): a test cannot go on
 * without its arrays.
 *
 * Two families: float32 (2,3) arrays of one value on the CPU (make_f32, all_f32,
 * stored_is: the C API tests), and arrays of any dtype and device filled with deterministic
 * values that are exact in every dtype (make_array, read_back, same_bytes: the GPU tests). */
#ifndef KVSTORE_TESTS_COMMON_ARRAYS_H_
#define KVSTORE_TESTS_COMMON_ARRAYS_H_

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvstore/kvstore.h"
#include "check.h"

/* ---- float32 (2,3) arrays of one value -------------------------------------------- */

__attribute__((unused)) static const int64_t kShape23[2] = {2, 3};

/* A float32 (2,3) array on cpu(dev_id) filled with `value`; ends the test on failure. */
static inline KVArrayHandle make_f32(double value, int dev_id) {
  KVArrayHandle a = NULL;
  REQUIRE_OK(KVArrayCreate(kShape23, 2, KV_FLOAT32, KV_CPU, dev_id, &a));
  REQUIRE_OK(KVArrayFill(a, value));
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

/* ---- arrays of any dtype and device ------------------------------------------------ */

/* Every dtype, for loops over them (KVDTypeName names them). */
__attribute__((unused)) static const int kAllDTypes[6] = {KV_FLOAT32, KV_FLOAT64, KV_FLOAT16,
                                                         KV_UINT8,   KV_INT32,   KV_INT64};

/* binary16 bits of a float that is exactly representable (the tests only use such values:
 * small integers and multiples of 1/8). */
static inline uint16_t half_from_exact_float(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs == 0) return sign;
  const int exp = (int)(abs >> 23) - 127 + 15;
  REQUIRE(exp > 0 && exp < 31 && (abs & 0x1fffu) == 0,
          "half_from_exact_float: %g is not an exact normal half", (double)f);
  return (uint16_t)(sign | (uint16_t)(exp << 10) | (uint16_t)((abs >> 13) & 0x3ffu));
}

/* Writes element i of `dtype` with the value `v` (already suited to the dtype). */
static inline void put_elem(void* buf, int dtype, int64_t i, double v) {
  switch (dtype) {
    case KV_FLOAT32: ((float*)buf)[i] = (float)v; break;
    case KV_FLOAT64: ((double*)buf)[i] = v; break;
    case KV_FLOAT16: ((uint16_t*)buf)[i] = half_from_exact_float((float)v); break;
    case KV_UINT8: ((uint8_t*)buf)[i] = (uint8_t)v; break;
    case KV_INT32: ((int32_t*)buf)[i] = (int32_t)v; break;
    case KV_INT64: ((int64_t*)buf)[i] = (int64_t)v; break;
    default: break;
  }
}

/* A deterministic value for element i of input number `which`: never zero, exact in every
 * dtype (float16 included), varied enough to catch indexing and operator mistakes. For
 * uint8 the values stay small so that sums of a few of them do not all wrap. */
static inline double test_value(int dtype, int which, int64_t i) {
  const int64_t k = (i * 7 + which * 13) % 23; /* 0..22 */
  switch (dtype) {
    case KV_UINT8: return (double)(1 + (k % 20));
    case KV_INT32:
    case KV_INT64: return (double)(k - 11 == 0 ? 12 : k - 11) * (which + 1);
    default: return (double)(k - 11 == 0 ? 12 : k - 11) * 0.125 * (which + 1);
  }
}

/* Creates an array on (dev_type, dev_id) filled with test_value(dtype, which, i). */
static inline KVArrayHandle make_array(const int64_t* shape, int ndim, int dtype, int dev_type,
                                       int dev_id, int which) {
  KVArrayHandle a = NULL;
  REQUIRE_OK(KVArrayCreate(shape, ndim, dtype, dev_type, dev_id, &a));
  int64_t n = 0;
  size_t nbytes = 0;
  KVArrayGetSize(a, &n);
  KVArrayGetNBytes(a, &nbytes);
  void* host = malloc(nbytes ? nbytes : 1);
  for (int64_t i = 0; i < n; ++i) put_elem(host, dtype, i, test_value(dtype, which, i));
  REQUIRE_OK(KVArrayCopyFromHost(a, host, nbytes));
  free(host);
  return a;
}

/* Copies an array of any device into a fresh malloc'ed buffer (the caller frees it). */
static inline void* read_back(KVArrayHandle a, size_t* nbytes_out) {
  size_t nbytes = 0;
  KVArrayGetNBytes(a, &nbytes);
  void* host = malloc(nbytes ? nbytes : 1);
  REQUIRE_OK(KVArrayCopyToHost(a, host, nbytes));
  if (nbytes_out) *nbytes_out = nbytes;
  return host;
}

/* 1 when both arrays hold the same bytes (shapes and dtypes are the caller's business). */
static inline int same_bytes(KVArrayHandle a, KVArrayHandle b) {
  size_t na = 0, nb = 0;
  void* ha = read_back(a, &na);
  void* hb = read_back(b, &nb);
  const int same = na == nb && memcmp(ha, hb, na) == 0;
  free(ha);
  free(hb);
  return same;
}

#endif /* KVSTORE_TESTS_COMMON_ARRAYS_H_ */
