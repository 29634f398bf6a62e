/* test_gpu_nccl_store.c - the `nccl` store over all GPUs, every dtype, compared with the
 * `local` store fed the same values: lists of keys with one value per GPU plus extra values
 * on one GPU and on the CPU, pull into every GPU and the CPU, pushpull with an updater,
 * string keys, broadcast, and the error paths (which must leave the store unchanged).
 *
 * The values are small multiples of 1/8, so every sum is exact in every dtype and the NCCL
 * summation order (float16 in float16) cannot change a bit. */
#include "../common/arrays.h"

#define NKEYS 3

static int add_twice_updater(int key, KVArrayHandle recv, KVArrayHandle stored, void* user) {
  (void)key;
  (void)user;
  int rc = KVArrayBinary(KV_OP_ADD, stored, recv, stored);
  if (rc == 0) rc = KVArrayBinary(KV_OP_ADD, stored, recv, stored);
  return rc;
}

static const int64_t kShapes[NKEYS][2] = {{1000, 33}, {7, 1}, {65536, 3}};

/* For key k: one value per GPU, one more on gpu 0 and one on the CPU. */
static int build_values(int dtype, int ngpu, KVArrayHandle* dev_vals, KVArrayHandle* ref_vals,
                        int* keys) {
  int n = 0;
  for (int k = 0; k < NKEYS; ++k) {
    for (int j = 0; j < ngpu + 2; ++j) {
      const int on_cpu = j == ngpu + 1;
      const int gpu = j < ngpu ? j : 0;
      dev_vals[n] = make_array(kShapes[k], 2, dtype, on_cpu ? KV_CPU : KV_GPU, on_cpu ? 0 : gpu,
                               (j + k) % 4);
      ref_vals[n] = make_array(kShapes[k], 2, dtype, KV_CPU, 0, (j + k) % 4);
      keys[n] = 10 + k;
      ++n;
    }
  }
  return n;
}

static void free_all(KVArrayHandle* a, int n) {
  for (int i = 0; i < n; ++i) KVArrayFree(a[i]);
}

/* Pulls every key into outputs on all GPUs (two on gpu 0) and the CPU and compares them
 * with the reference store's value. */
static int pull_matches(KVStoreHandle nccl, KVStoreHandle ref, int dtype, int ngpu) {
  int ok = 1;
  const int per_key = ngpu + 2;
  KVArrayHandle outs[NKEYS * 64];
  int keys[NKEYS * 64];
  int n = 0;
  for (int k = 0; k < NKEYS; ++k) {
    for (int o = 0; o < per_key; ++o) {
      const int on_cpu = o == per_key - 1;
      KVArrayCreate(kShapes[k], 2, dtype, on_cpu ? KV_CPU : KV_GPU, on_cpu ? 0 : o % ngpu,
                    &outs[n]);
      keys[n++] = 10 + k;
    }
  }
  CHECK_OK(KVStorePull(nccl, n, keys, outs, 0));
  for (int k = 0; k < NKEYS; ++k) {
    KVArrayHandle expect = NULL;
    const int key = 10 + k;
    KVArrayCreate(kShapes[k], 2, dtype, KV_CPU, 0, &expect);
    CHECK_OK(KVStorePull(ref, 1, &key, &expect, 0));
    for (int o = 0; o < per_key; ++o) ok &= same_bytes(outs[k * per_key + o], expect);
    KVArrayFree(expect);
  }
  free_all(outs, n);
  return ok;
}

static void run_dtype(int dtype, int ngpu) {
  KVStoreHandle nccl = NULL, ref = NULL;
  CHECK_OK(KVStoreCreate("nccl", &nccl));
  CHECK_OK(KVStoreCreate("local", &ref));
  const char* type = NULL;
  CHECK_OK(KVStoreGetType(nccl, &type));
  CHECK(type != NULL && strcmp(type, "nccl") == 0);

  /* init: key 10 from the CPU, 11 from gpu 0, 12 from the last GPU */
  int keys[NKEYS] = {10, 11, 12};
  KVArrayHandle init_dev[NKEYS], init_ref[NKEYS];
  for (int k = 0; k < NKEYS; ++k) {
    const int dev_type = k == 0 ? KV_CPU : KV_GPU;
    const int dev_id = k == 2 ? ngpu - 1 : 0;
    init_dev[k] = make_array(kShapes[k], 2, dtype, dev_type, dev_id, k);
    init_ref[k] = make_array(kShapes[k], 2, dtype, KV_CPU, 0, k);
  }
  CHECK_OK(KVStoreInit(nccl, NKEYS, keys, init_dev));
  CHECK_OK(KVStoreInit(ref, NKEYS, keys, init_ref));
  CHECK(pull_matches(nccl, ref, dtype, ngpu));

  KVArrayHandle dev_vals[NKEYS * 64], ref_vals[NKEYS * 64];
  int vkeys[NKEYS * 64];
  const int n = build_values(dtype, ngpu, dev_vals, ref_vals, vkeys);
  CHECK_OK(KVStorePush(nccl, n, vkeys, dev_vals, 0));
  CHECK_OK(KVStorePush(ref, n, vkeys, ref_vals, 0));
  const int pushed_ok = pull_matches(nccl, ref, dtype, ngpu);
  CHECK_MSG(pushed_ok, "nccl push differs from local for %s", KVDTypeName(dtype));

  /* pushpull with an updater, the values as outputs */
  CHECK_OK(KVStoreSetUpdater(nccl, add_twice_updater, NULL, NULL));
  CHECK_OK(KVStoreSetUpdater(ref, add_twice_updater, NULL, NULL));
  CHECK_OK(KVStorePushPull(nccl, n, vkeys, dev_vals, n, vkeys, dev_vals, 0));
  CHECK_OK(KVStorePushPull(ref, n, vkeys, ref_vals, n, vkeys, ref_vals, 0));
  int same = 1;
  for (int i = 0; i < n; ++i) same &= same_bytes(dev_vals[i], ref_vals[i]);
  CHECK_MSG(same, "nccl pushpull differs from local for %s", KVDTypeName(dtype));
  CHECK(pull_matches(nccl, ref, dtype, ngpu));

  /* errors leave the store as it was */
  const int64_t bad_shape[2] = {7, 2};
  KVArrayHandle bad = make_array(bad_shape, 2, dtype, KV_GPU, 0, 1);
  KVArrayHandle mixed[2] = {dev_vals[0], bad};
  const int mixed_keys[2] = {10, 11};
  CHECK_ERR(KVStorePush(nccl, 2, mixed_keys, mixed, 0), KV_ERR_SHAPE_MISMATCH, "(7,2)");
  CHECK_ERR(KVStorePull(nccl, 2, mixed_keys, mixed, 0), KV_ERR_SHAPE_MISMATCH, "(7,2)");
  const int unknown = 99;
  CHECK_ERR(KVStorePush(nccl, 1, &unknown, &bad, 0), KV_ERR_UNKNOWN_KEY, "99");
  CHECK_ERR(KVStoreInit(nccl, 1, &keys[0], &init_dev[0]), KV_ERR_DUPLICATE_KEY, NULL);
  CHECK(pull_matches(nccl, ref, dtype, ngpu));
  KVArrayFree(bad);

  free_all(dev_vals, n);
  free_all(ref_vals, n);
  free_all(init_dev, NKEYS);
  free_all(init_ref, NKEYS);
  KVStoreFree(nccl);
  KVStoreFree(ref);
}

/* PushPull without an updater, one value and one output per GPU for every key: the
 * all-reduce path (in place for keys 10 and 12, into separate outputs for key 11). */
static void test_allreduce_path(int dtype, int ngpu) {
  KVStoreHandle nccl = NULL, ref = NULL;
  CHECK_OK(KVStoreCreate("nccl", &nccl));
  CHECK_OK(KVStoreCreate("local", &ref));
  int keys[NKEYS] = {10, 11, 12};
  KVArrayHandle init[NKEYS];
  for (int k = 0; k < NKEYS; ++k) init[k] = make_array(kShapes[k], 2, dtype, KV_CPU, 0, k);
  CHECK_OK(KVStoreInit(nccl, NKEYS, keys, init));
  CHECK_OK(KVStoreInit(ref, NKEYS, keys, init));
  KVArrayHandle vals[NKEYS * 64], outs[NKEYS * 64], ref_vals[NKEYS * 64];
  int vkeys[NKEYS * 64];
  int n = 0;
  for (int k = 0; k < NKEYS; ++k) {
    for (int g = 0; g < ngpu; ++g) {
      vals[n] = make_array(kShapes[k], 2, dtype, KV_GPU, g, (g + k) % 4);
      ref_vals[n] = make_array(kShapes[k], 2, dtype, KV_CPU, 0, (g + k) % 4);
      if (k == 1) {
        KVArrayCreate(kShapes[k], 2, dtype, KV_GPU, (g + 1) % ngpu, &outs[n]); /* other order */
      } else {
        outs[n] = vals[n];
      }
      vkeys[n++] = 10 + k;
    }
  }
  CHECK_OK(KVStorePushPull(nccl, n, vkeys, vals, n, vkeys, outs, 0));
  CHECK_OK(KVStorePushPull(ref, n, vkeys, ref_vals, n, vkeys, ref_vals, 0));
  int same = 1;
  for (int i = 0; i < n; ++i) same &= same_bytes(outs[i], ref_vals[i]);
  CHECK_MSG(same, "nccl all-reduce pushpull differs for %s", KVDTypeName(dtype));
  CHECK(pull_matches(nccl, ref, dtype, ngpu)); /* the stored values are the sums too */
  for (int i = 0; i < n; ++i) {
    if (outs[i] != vals[i]) KVArrayFree(outs[i]);
    KVArrayFree(vals[i]);
    KVArrayFree(ref_vals[i]);
  }
  free_all(init, NKEYS);
  KVStoreFree(nccl);
  KVStoreFree(ref);
}

/* String keys and broadcast: init + pull to every GPU in one call. */
static void test_str_keys_and_broadcast(int ngpu) {
  KVStoreHandle s = NULL;
  CHECK_OK(KVStoreCreate("nccl", &s));
  const int64_t shape[1] = {4096};
  const char* names[1] = {"weight"};
  KVArrayHandle v = make_array(shape, 1, KV_FLOAT32, KV_CPU, 0, 2);
  KVArrayHandle outs[64];
  const char* onames[64];
  for (int g = 0; g < ngpu; ++g) {
    KVArrayCreate(shape, 1, KV_FLOAT32, KV_GPU, g, &outs[g]);
    onames[g] = "weight";
  }
  CHECK_OK(KVStoreBroadcastStr(s, 1, names, &v, ngpu, onames, outs, 0));
  for (int g = 0; g < ngpu; ++g) CHECK(same_bytes(outs[g], v));
  /* every GPU pushes its copy: the stored value becomes ngpu * v */
  CHECK_OK(KVStorePushStr(s, ngpu, onames, outs, 0));
  CHECK_OK(KVStorePullStr(s, ngpu, onames, outs, 0));
  CHECK_OK(KVArrayBinaryScalar(KV_OP_MUL, v, (double)ngpu, v));
  for (int g = 0; g < ngpu; ++g) CHECK(same_bytes(outs[g], v));
  const int int_key = 1;
  CHECK_ERR(KVStorePush(s, 1, &int_key, &v, 0), KV_ERR_KEY_KIND_MISMATCH, NULL);
  free_all(outs, ngpu);
  KVArrayFree(v);
  KVStoreFree(s);
}

int main(void) {
  int ngpu = 0;
  SKIP_WITHOUT_GPU(ngpu);
  CHECK(KVHasFeature(KV_FEATURE_NCCL) == 1);
  if (ngpu > 60) ngpu = 60;
  KVStoreHandle probe = NULL;
  const int rc = KVStoreCreate("nccl", &probe);
  if (rc == KV_ERR_NCCL) {
    check_skip("NCCL is not usable here: %s", KVGetLastError());
    return CHECK_SKIP_STATUS;
  }
  CHECK_OK(rc);
  KVStoreFree(probe);
  printf("%d GPU(s)\n", ngpu);
  for (int t = 0; t < 6; ++t) {
    run_dtype(kAllDTypes[t], ngpu);
    test_allreduce_path(kAllDTypes[t], ngpu);
  }
  test_str_keys_and_broadcast(ngpu);
  return check_summary_named("test_gpu_nccl_store");
}
