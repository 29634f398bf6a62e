/* gpu_check.h - assertion helpers and data builders for the GPU tests (C99, public ABI only).
 *
 * CHECK records a failure and continues; main() ends with gpu_check_summary(). Tests that
 * need a GPU call GPU_SKIP_WITHOUT_GPU() first: with no usable GPU they print why and return
 * 77, which ctest reports as skipped (SKIP_RETURN_CODE 77). */
#ifndef KVSTORE_TESTS_GPU_CHECK_H_
#define KVSTORE_TESTS_GPU_CHECK_H_

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvstore/kvstore.h"

#define GPU_TEST_SKIP 77

static int gpu_passed_ = 0;
static int gpu_failed_ = 0;

#define CHECK(cond)                                                               \
  do {                                                                            \
    if (cond) {                                                                   \
      ++gpu_passed_;                                                              \
    } else {                                                                      \
      ++gpu_failed_;                                                              \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);    \
    }                                                                             \
  } while (0)

static inline void gpu_check_err_(int rc, int code, const char* needle, const char* call,
                           const char* file, int line) {
  const char* msg = KVGetLastError();
  if (rc == code && (needle == NULL || strstr(msg, needle) != NULL)) {
    ++gpu_passed_;
  } else {
    ++gpu_failed_;
    fprintf(stderr, "%s:%d: %s returned %d (%s, want %d), message \"%s\" (want \"%s\")\n",
            file, line, call, rc, KVErrorName(rc), code, msg, needle ? needle : "");
  }
}

/* `call` returns `code` and the thread's last error contains `needle` (NULL: any). */
#define CHECK_ERR(call, code, needle) \
  gpu_check_err_((call), (code), (needle), #call, __FILE__, __LINE__)
#define CHECK_OK(call) CHECK_ERR(call, 0, NULL)

static inline int gpu_check_summary(const char* name) {
  printf("%s: %d passed, %d failed\n", name, gpu_passed_, gpu_failed_);
  return gpu_failed_ == 0 ? 0 : 1;
}

/* The number of GPUs; returns 77 from main() when there is none. */
#define GPU_SKIP_WITHOUT_GPU(out_count)                                                \
  do {                                                                                 \
    if (KVGetGpuCount(&(out_count)) != 0 || (out_count) == 0) {                        \
      printf("SKIP: no usable GPU (KVGetGpuCount = %d)\n", (out_count));               \
      return GPU_TEST_SKIP;                                                            \
    }                                                                                  \
  } while (0)

static const int kAllDTypes[6] = {KV_FLOAT32, KV_FLOAT64, KV_FLOAT16,
                                  KV_UINT8,   KV_INT32,   KV_INT64};

static inline const char* dtype_name(int dtype) {
  switch (dtype) {
    case KV_FLOAT32: return "float32";
    case KV_FLOAT64: return "float64";
    case KV_FLOAT16: return "float16";
    case KV_UINT8: return "uint8";
    case KV_INT32: return "int32";
    case KV_INT64: return "int64";
    default: return "?";
  }
}

/* binary16 bits of a float that is exactly representable (the tests only use such values:
 * small integers and multiples of 1/8). */
static inline uint16_t half_from_exact_float(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs == 0) return sign;
  const int exp = (int)(abs >> 23) - 127 + 15;
  if (exp <= 0 || exp >= 31 || (abs & 0x1fffu) != 0) {
    fprintf(stderr, "half_from_exact_float: %g is not an exact normal half\n", (double)f);
    abort();
  }
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
  if (KVArrayCreate(shape, ndim, dtype, dev_type, dev_id, &a) != 0) {
    fprintf(stderr, "make_array: %s\n", KVGetLastError());
    abort();
  }
  int64_t n = 0;
  size_t nbytes = 0;
  KVArrayGetSize(a, &n);
  KVArrayGetNBytes(a, &nbytes);
  void* host = malloc(nbytes ? nbytes : 1);
  for (int64_t i = 0; i < n; ++i) put_elem(host, dtype, i, test_value(dtype, which, i));
  if (KVArrayCopyFromHost(a, host, nbytes) != 0) {
    fprintf(stderr, "make_array copy: %s\n", KVGetLastError());
    abort();
  }
  free(host);
  return a;
}

/* Copies an array of any device into a fresh malloc'ed buffer (the caller frees it). */
static inline void* read_back(KVArrayHandle a, size_t* nbytes_out) {
  size_t nbytes = 0;
  KVArrayGetNBytes(a, &nbytes);
  void* host = malloc(nbytes ? nbytes : 1);
  if (KVArrayCopyToHost(a, host, nbytes) != 0) {
    fprintf(stderr, "read_back: %s\n", KVGetLastError());
    abort();
  }
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

#endif /* KVSTORE_TESTS_GPU_CHECK_H_ */
