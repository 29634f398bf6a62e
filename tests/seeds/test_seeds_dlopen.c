/* test_seeds_dlopen.c - replays the sequence of every seed tutorial against an installed
 * libkvstore.so that is opened with dlopen (no link-time dependency), asserting the numbers
 * each tutorial prints. GPU contexts in a tutorial run as CPU contexts when no GPU exists.
 * Usage: test_seeds_dlopen /path/to/libkvstore.so.0 */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <kvstore/kvstore.h>
#include <math.h>
#include <stdlib.h>

#include "../common/check.h"

/* Every entry point is resolved at run time into this table. */
static struct {
  const char* (*GetLastError)(void);
  int (*GetGpuCount)(int*);
  int (*ArrayCreate)(const int64_t*, int, int, int, int, KVArrayHandle*);
  int (*ArrayFree)(KVArrayHandle);
  int (*ArrayFill)(KVArrayHandle, double);
  int (*ArrayCopyToHost)(KVArrayHandle, void*, size_t);
  int (*ArrayBinary)(int, KVArrayHandle, KVArrayHandle, KVArrayHandle);
  int (*ArrayBinaryScalar)(int, KVArrayHandle, double, KVArrayHandle);
  int (*StoreCreate)(const char*, KVStoreHandle*);
  int (*StoreFree)(KVStoreHandle);
  int (*StoreInit)(KVStoreHandle, int, const int*, const KVArrayHandle*);
  int (*StoreInitStr)(KVStoreHandle, int, const char* const*, const KVArrayHandle*);
  int (*StorePush)(KVStoreHandle, int, const int*, const KVArrayHandle*, int);
  int (*StorePushStr)(KVStoreHandle, int, const char* const*, const KVArrayHandle*, int);
  int (*StorePull)(KVStoreHandle, int, const int*, const KVArrayHandle*, int);
  int (*StorePullStr)(KVStoreHandle, int, const char* const*, const KVArrayHandle*, int);
  int (*StoreSetUpdater)(KVStoreHandle, KVUpdater, void*, KVFreeFn);
} kv;

#define KVGetLastError kv.GetLastError /* used by CHECK_ERR */

static int load(const char* path) {
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "dlopen(%s): %s\n", path, dlerror());
    return 0;
  }
#define LOAD(field, sym)                                   \
  do {                                                     \
    *(void**)(&kv.field) = dlsym(lib, #sym);               \
    if (!kv.field) {                                       \
      fprintf(stderr, "missing symbol %s\n", #sym);        \
      return 0;                                            \
    }                                                      \
  } while (0)
  LOAD(GetLastError, KVGetLastError);
  LOAD(GetGpuCount, KVGetGpuCount);
  LOAD(ArrayCreate, KVArrayCreate);
  LOAD(ArrayFree, KVArrayFree);
  LOAD(ArrayFill, KVArrayFill);
  LOAD(ArrayCopyToHost, KVArrayCopyToHost);
  LOAD(ArrayBinary, KVArrayBinary);
  LOAD(ArrayBinaryScalar, KVArrayBinaryScalar);
  LOAD(StoreCreate, KVStoreCreate);
  LOAD(StoreFree, KVStoreFree);
  LOAD(StoreInit, KVStoreInit);
  LOAD(StoreInitStr, KVStoreInitStr);
  LOAD(StorePush, KVStorePush);
  LOAD(StorePushStr, KVStorePushStr);
  LOAD(StorePull, KVStorePull);
  LOAD(StorePullStr, KVStorePullStr);
  LOAD(StoreSetUpdater, KVStoreSetUpdater);
#undef LOAD
  return 1;
}

static const int64_t shape[2] = {2, 3};
static int g_gpu_type = KV_CPU; /* the tutorials' gpu(i) */

/* ones(shape, ctx) * scale */
static KVArrayHandle ones(double scale, int dev_type, int dev_id) {
  KVArrayHandle a = NULL;
  if (kv.ArrayCreate(shape, 2, KV_FLOAT32, dev_type, dev_id, &a) != 0 || kv.ArrayFill(a, 1.0) != 0 ||
      kv.ArrayBinaryScalar(KV_OP_MUL, a, scale, a) != 0) {
    fprintf(stderr, "ones: %s\n", kv.GetLastError());
    exit(2);
  }
  return a;
}

/* 1 when every element equals `want` (float32 compare, as the tutorials print). */
static int equals(KVArrayHandle a, float want) {
  float buf[6];
  if (kv.ArrayCopyToHost(a, buf, sizeof buf) != 0) return 0;
  for (int i = 0; i < 6; ++i) {
    if (buf[i] != want) {
      fprintf(stderr, "element %d = %.9g, want %.9g\n", i, buf[i], want);
      return 0;
    }
  }
  return 1;
}

static void release(KVArrayHandle* list, int n) {
  for (int i = 0; i < n; ++i) kv.ArrayFree(list[i]);
}

/* stored += input * factor, the updater of the Python (2), Scala (2), Perl (3) and
 * Python-np (0.01) tutorials. */
static int scaled_updater(int key, KVArrayHandle input, KVArrayHandle stored, void* user_data) {
  (void)key;
  KVArrayHandle tmp = NULL;
  int rc = kv.ArrayCreate(shape, 2, KV_FLOAT32, KV_CPU, 0, &tmp) ||
           kv.ArrayBinaryScalar(KV_OP_MUL, input, *(double*)user_data, tmp) ||
           kv.ArrayBinary(KV_OP_ADD, stored, tmp, stored);
  kv.ArrayFree(tmp);
  return rc;
}

/* python-kvstore.md (and scala-kvstore.md, which is the same sequence). */
static void seed_python(double factor) {
  KVStoreHandle s = NULL;
  CHECK(kv.StoreCreate("local", &s) == 0);
  int k3 = 3;
  KVArrayHandle v = ones(2, KV_CPU, 0), a = ones(0, KV_CPU, 0);
  CHECK(kv.StoreInit(s, 1, &k3, &v) == 0);
  CHECK(kv.StorePull(s, 1, &k3, &a, 0) == 0 && equals(a, 2));
  KVArrayHandle e = ones(8, KV_CPU, 0);
  CHECK(kv.StorePush(s, 1, &k3, &e, 0) == 0);
  CHECK(kv.StorePull(s, 1, &k3, &a, 0) == 0 && equals(a, 8));
  KVArrayHandle b[4];
  int k3s[4] = {3, 3, 3, 3};
  for (int i = 0; i < 4; ++i) b[i] = ones(1, g_gpu_type, i);
  CHECK(kv.StorePush(s, 4, k3s, b, 0) == 0);
  CHECK(kv.StorePull(s, 1, &k3, &a, 0) == 0 && equals(a, 4));
  CHECK(kv.StoreSetUpdater(s, scaled_updater, &factor, NULL) == 0);
  CHECK(kv.StorePull(s, 1, &k3, &a, 0) == 0 && equals(a, 4));
  KVArrayHandle o = ones(1, KV_CPU, 0);
  CHECK(kv.StorePush(s, 1, &k3, &o, 0) == 0);
  CHECK(kv.StorePull(s, 1, &k3, &a, 0) == 0 && equals(a, 6));
  /* pull into several devices */
  CHECK(kv.StorePull(s, 4, k3s, b, 0) == 0 && equals(b[1], 6));
  /* list of keys */
  int keys[3] = {5, 7, 9};
  KVArrayHandle l[3] = {ones(1, KV_CPU, 0), ones(1, KV_CPU, 0), ones(1, KV_CPU, 0)};
  CHECK(kv.StoreInit(s, 3, keys, l) == 0);
  CHECK(kv.StorePush(s, 3, keys, l, 0) == 0);
  KVArrayHandle z[3] = {ones(0, KV_CPU, 0), ones(0, KV_CPU, 0), ones(0, KV_CPU, 0)};
  CHECK(kv.StorePull(s, 3, keys, z, 0) == 0 && equals(z[1], 3));
  /* list of keys, each with values on all devices: b = [[ones on gpus]] * 3 */
  int flat_keys[12];
  KVArrayHandle flat[12];
  for (int i = 0; i < 12; ++i) flat_keys[i] = keys[i / 4], flat[i] = b[i % 4];
  kv.ArrayFill(b[0], 1), kv.ArrayFill(b[1], 1), kv.ArrayFill(b[2], 1), kv.ArrayFill(b[3], 1);
  CHECK(kv.StorePush(s, 12, flat_keys, flat, 0) == 0);
  CHECK(kv.StorePull(s, 12, flat_keys, flat, 0) == 0 && equals(b[1], 11));
  release(&v, 1), release(&a, 1), release(&e, 1), release(&o, 1), release(b, 4), release(l, 3), release(z, 3);
  kv.StoreFree(s);
}

/* python-np-kvstore.md: device store, negative values, cpu contexts. */
static void seed_python_np(void) {
  KVStoreHandle s = NULL;
  CHECK(kv.StoreCreate("device", &s) == 0);
  int k3 = 3;
  KVArrayHandle v = ones(-2, KV_CPU, 0), A = ones(0, KV_CPU, 0);
  CHECK(kv.StoreInit(s, 1, &k3, &v) == 0);
  CHECK(kv.StorePull(s, 1, &k3, &A, 0) == 0 && equals(A, -2));
  KVArrayHandle m7 = ones(-7, KV_CPU, 0);
  CHECK(kv.StorePush(s, 1, &k3, &m7, 0) == 0);
  CHECK(kv.StorePull(s, 1, &k3, &A, 0) == 0 && equals(A, -7));
  KVArrayHandle B[3] = {ones(1, KV_CPU, 0), ones(1, KV_CPU, 1), ones(1, KV_CPU, 2)};
  int k3s[3] = {3, 3, 3};
  CHECK(kv.StorePush(s, 3, k3s, B, 0) == 0);
  CHECK(kv.StorePull(s, 1, &k3, &A, 0) == 0 && equals(A, 3));
  int keys[4] = {7, 11, 13, 17};
  KVArrayHandle val = ones(-3, KV_CPU, 0);
  KVArrayHandle vals[4] = {val, val, val, val};
  CHECK(kv.StoreInit(s, 4, keys, vals) == 0);
  KVArrayHandle C = ones(0, KV_CPU, 0);
  KVArrayHandle Cs[4] = {C, C, C, C};
  CHECK(kv.StorePull(s, 4, keys, Cs, 0) == 0 && equals(C, -3));
  /* D = [[ones*-0.1 on 3 cpus]] * 4: each key receives the float32 sum of three -0.1 */
  KVArrayHandle D[3] = {ones(-0.1, KV_CPU, 0), ones(-0.1, KV_CPU, 1), ones(-0.1, KV_CPU, 2)};
  int dk[12];
  KVArrayHandle dv[12];
  for (int i = 0; i < 12; ++i) dk[i] = keys[i / 3], dv[i] = D[i % 3];
  CHECK(kv.StorePush(s, 12, dk, dv, 0) == 0);
  CHECK(kv.StorePull(s, 4, keys, Cs, 0) == 0);
  const float tenth = -0.1f;
  CHECK(equals(C, (tenth + tenth) + tenth)); /* prints as -0.3 in float32 */
  double factor = 0.01;
  CHECK(kv.StoreSetUpdater(s, scaled_updater, &factor, NULL) == 0);
  CHECK(kv.StorePull(s, 1, &k3, &A, 0) == 0 && equals(A, 3));
  KVArrayHandle five = ones(5, KV_CPU, 0);
  CHECK(kv.StorePush(s, 1, &k3, &five, 0) == 0);
  CHECK(kv.StorePull(s, 1, &k3, &A, 0) == 0 && equals(A, 3.0f + 5.0f * 0.01f));
  release(&v, 1), release(&A, 1), release(&m7, 1), release(B, 3), release(&val, 1), release(&C, 1);
  release(D, 3), release(&five, 1);
  kv.StoreFree(s);
}

/* clojure-kvstore.md: string keys. */
static void seed_clojure(void) {
  KVStoreHandle s = NULL;
  CHECK(kv.StoreCreate("local", &s) == 0);
  const char* k3 = "3";
  KVArrayHandle v = ones(2, KV_CPU, 0), a = ones(0, KV_CPU, 0);
  CHECK(kv.StoreInitStr(s, 1, &k3, &v) == 0);
  CHECK(kv.StorePullStr(s, 1, &k3, &a, 0) == 0 && equals(a, 2));
  KVArrayHandle e = ones(8, KV_CPU, 0);
  CHECK(kv.StorePushStr(s, 1, &k3, &e, 0) == 0);
  CHECK(kv.StorePullStr(s, 1, &k3, &a, 0) == 0 && equals(a, 8));
  KVArrayHandle b[3] = {ones(1, KV_CPU, 0), ones(1, KV_CPU, 1), ones(1, KV_CPU, 2)};
  const char* k333[3] = {"3", "3", "3"};
  CHECK(kv.StorePushStr(s, 3, k333, b, 0) == 0);
  CHECK(kv.StorePullStr(s, 1, &k3, &a, 0) == 0 && equals(a, 3));
  KVArrayHandle two[2] = {ones(1, KV_CPU, 0), ones(1, KV_CPU, 1)};
  CHECK(kv.StorePullStr(s, 2, k333, two, 0) == 0 && equals(two[0], 3) && equals(two[1], 3));
  const char* ks[3] = {"5", "7", "9"};
  KVArrayHandle l[3] = {ones(1, KV_CPU, 0), ones(1, KV_CPU, 0), ones(1, KV_CPU, 0)};
  KVArrayHandle z[3] = {ones(0, KV_CPU, 0), ones(0, KV_CPU, 0), ones(0, KV_CPU, 0)};
  CHECK(kv.StoreInitStr(s, 3, ks, l) == 0);
  CHECK(kv.StorePushStr(s, 3, ks, l, 0) == 0);
  CHECK(kv.StorePullStr(s, 3, ks, z, 0) == 0 && equals(z[0], 1) && equals(z[1], 1) && equals(z[2], 1));
  release(&v, 1), release(&a, 1), release(&e, 1), release(b, 3), release(two, 2), release(l, 3), release(z, 3);
  kv.StoreFree(s);
}

/* perl-kvstore.md */
static void seed_perl(void) {
  KVStoreHandle s = NULL;
  CHECK(kv.StoreCreate("local", &s) == 0);
  int k3 = 3;
  KVArrayHandle v = ones(2, KV_CPU, 0), a = ones(0, KV_CPU, 0);
  CHECK(kv.StoreInit(s, 1, &k3, &v) == 0);
  CHECK(kv.StorePull(s, 1, &k3, &a, 0) == 0 && equals(a, 2));
  KVArrayHandle e = ones(8, KV_CPU, 0);
  CHECK(kv.StorePush(s, 1, &k3, &e, 0) == 0);
  CHECK(kv.StorePull(s, 1, &k3, &a, 0) == 0 && equals(a, 8));
  KVArrayHandle two[2] = {ones(1, KV_CPU, 0), ones(1, KV_CPU, 1)};
  int k33[2] = {3, 3};
  CHECK(kv.StorePush(s, 2, k33, two, 0) == 0);
  CHECK(kv.StorePull(s, 1, &k3, &a, 0) == 0 && equals(a, 2));
  double factor = 3;
  CHECK(kv.StoreSetUpdater(s, scaled_updater, &factor, NULL) == 0);
  CHECK(kv.StorePush(s, 2, k33, two, 0) == 0);
  CHECK(kv.StorePull(s, 1, &k3, &a, 0) == 0 && equals(a, 8));
  KVArrayHandle zz[2] = {ones(0, KV_CPU, 0), ones(0, KV_CPU, 1)};
  CHECK(kv.StorePull(s, 2, k33, zz, 0) == 0 && equals(zz[1], 8));
  int keys[3] = {5, 7, 9};
  KVArrayHandle l[3] = {ones(1, KV_CPU, 0), ones(1, KV_CPU, 0), ones(1, KV_CPU, 0)};
  CHECK(kv.StoreInit(s, 3, keys, l) == 0);
  CHECK(kv.StorePush(s, 3, keys, l, 0) == 0);
  CHECK(kv.StorePull(s, 3, keys, l, 0) == 0 && equals(l[1], 4));
  release(&v, 1), release(&a, 1), release(&e, 1), release(two, 2), release(zz, 2), release(l, 3);
  kv.StoreFree(s);
}

int main(int argc, char** argv) {
  if (argc != 2 || !load(argv[1])) {
    fprintf(stderr, "usage: %s /path/to/libkvstore.so.0\n", argv[0]);
    return 2;
  }
  int gpus = 0;
  kv.GetGpuCount(&gpus);
  g_gpu_type = gpus >= 4 ? KV_GPU : KV_CPU;
  seed_python(2.0); /* python-kvstore.md */
  seed_python(2.0); /* scala-kvstore.md: the same sequence and updater (stored += input * 2) */
  seed_python_np();
  seed_clojure();
  seed_perl();
  return check_summary();
}
