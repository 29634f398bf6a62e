/* test_gpu_device_store.c - the `device` store with values on the GPUs, every result
 * compared with the `local` store (the CPU reference) fed the same values:
 *  - a reduce of K values spread over all GPUs (and one on the CPU), all dtypes;
 *  - more values than the kernel takes inline (the pointer-table path);
 *  - stored values initialised on the CPU and pushed from GPUs, and the reverse;
 *  - pull into outputs on every GPU and the CPU at once;
 *  - an updater that runs on the GPU arrays, pushpull with the values as outputs. */
#include "../common/arrays.h"

/* stored += 0.5 * recv, through the element-wise API (runs on the stored value's device). */
static int half_step_updater(int key, KVArrayHandle recv, KVArrayHandle stored, void* user) {
  (void)key;
  (void)user;
  int rc = KVArrayBinaryScalar(KV_OP_MUL, recv, 2.0, recv);
  if (rc == 0) rc = KVArrayBinary(KV_OP_ADD, stored, recv, stored);
  return rc;
}

/* Pushes `nvals` values of key 3 (value j on context ctx_of(j)) to a `device` store and a
 * `local` store and pulls into outputs on every device; everything must be equal. */
static void run_case(int dtype, int ngpu, int nvals, int init_dev_type, int use_updater) {
  const int64_t shape[2] = {129, 67};
  KVStoreHandle dev = NULL, ref = NULL;
  CHECK_OK(KVStoreCreate("device", &dev));
  CHECK_OK(KVStoreCreate("local", &ref));
  if (use_updater) {
    CHECK_OK(KVStoreSetUpdater(dev, half_step_updater, NULL, NULL));
    CHECK_OK(KVStoreSetUpdater(ref, half_step_updater, NULL, NULL));
  }
  const int key = 3;
  KVArrayHandle init_dev = make_array(shape, 2, dtype, init_dev_type, 0, 9);
  KVArrayHandle init_ref = make_array(shape, 2, dtype, KV_CPU, 0, 9);
  CHECK_OK(KVStoreInit(dev, 1, &key, &init_dev));
  CHECK_OK(KVStoreInit(ref, 1, &key, &init_ref));

  KVArrayHandle* vals_dev = malloc(sizeof(KVArrayHandle) * (size_t)nvals);
  KVArrayHandle* vals_ref = malloc(sizeof(KVArrayHandle) * (size_t)nvals);
  int* keys = malloc(sizeof(int) * (size_t)nvals);
  for (int j = 0; j < nvals; ++j) {
    /* value j on gpu(j % ngpu), the last one on the CPU */
    const int on_cpu = j == nvals - 1 && nvals > 2;
    vals_dev[j] = make_array(shape, 2, dtype, on_cpu ? KV_CPU : KV_GPU, on_cpu ? 0 : j % ngpu, j);
    vals_ref[j] = make_array(shape, 2, dtype, KV_CPU, 0, j);
    keys[j] = key;
  }
  for (int round = 0; round < 2; ++round) {
    CHECK_OK(KVStorePush(dev, nvals, keys, vals_dev, 0));
    CHECK_OK(KVStorePush(ref, nvals, keys, vals_ref, 0));
  }
  /* outputs on every GPU (two on gpu 0) and on the CPU */
  const int nout = ngpu + 2;
  KVArrayHandle* outs = malloc(sizeof(KVArrayHandle) * (size_t)nout);
  int* okeys = malloc(sizeof(int) * (size_t)nout);
  for (int o = 0; o < nout; ++o) {
    const int on_cpu = o == nout - 1;
    CHECK_OK(KVArrayCreate(shape, 2, dtype, on_cpu ? KV_CPU : KV_GPU, on_cpu ? 0 : o % ngpu,
                           &outs[o]));
    okeys[o] = key;
  }
  KVArrayHandle expect = NULL;
  CHECK_OK(KVArrayCreate(shape, 2, dtype, KV_CPU, 0, &expect));
  CHECK_OK(KVStorePull(ref, 1, &key, &expect, 0));
  CHECK_OK(KVStorePull(dev, nout, okeys, outs, 0));
  int all_same = 1;
  for (int o = 0; o < nout; ++o) all_same &= same_bytes(outs[o], expect);
  CHECK_MSG(all_same, "device store differs from local: %s, %d values, init on %s, updater %d",
            KVDTypeName(dtype), nvals, init_dev_type == KV_GPU ? "gpu" : "cpu", use_updater);

  /* pushpull with the values as their own outputs */
  CHECK_OK(KVStorePushPull(dev, nvals, keys, vals_dev, nvals, keys, vals_dev, 0));
  CHECK_OK(KVStorePushPull(ref, nvals, keys, vals_ref, nvals, keys, vals_ref, 0));
  all_same = 1;
  for (int j = 0; j < nvals; ++j) all_same &= same_bytes(vals_dev[j], vals_ref[j]);
  CHECK(all_same);

  for (int j = 0; j < nvals; ++j) {
    KVArrayFree(vals_dev[j]);
    KVArrayFree(vals_ref[j]);
  }
  for (int o = 0; o < nout; ++o) KVArrayFree(outs[o]);
  free(vals_dev);
  free(vals_ref);
  free(keys);
  free(outs);
  free(okeys);
  KVArrayFree(expect);
  KVArrayFree(init_dev);
  KVArrayFree(init_ref);
  KVStoreFree(dev);
  KVStoreFree(ref);
}

/* A failing push (shape mismatch) on the device store changes nothing. */
static void test_atomic(int ngpu) {
  const int64_t shape[1] = {1000}, bad[1] = {999};
  KVStoreHandle s = NULL;
  CHECK_OK(KVStoreCreate("device", &s));
  const int keys[2] = {1, 2};
  KVArrayHandle init[2] = {make_array(shape, 1, KV_FLOAT32, KV_GPU, 0, 1),
                           make_array(shape, 1, KV_FLOAT32, KV_GPU, ngpu - 1, 2)};
  CHECK_OK(KVStoreInit(s, 2, keys, init));
  KVArrayHandle vals[2] = {make_array(shape, 1, KV_FLOAT32, KV_GPU, ngpu - 1, 5),
                           make_array(bad, 1, KV_FLOAT32, KV_GPU, 0, 6)};
  CHECK_ERR(KVStorePush(s, 2, keys, vals, 0), KV_ERR_SHAPE_MISMATCH, "(999)");
  KVArrayHandle out = NULL;
  CHECK_OK(KVArrayCreate(shape, 1, KV_FLOAT32, KV_GPU, 0, &out));
  CHECK_OK(KVStorePull(s, 1, &keys[0], &out, 0));
  CHECK(same_bytes(out, init[0]));
  KVArrayFree(out);
  for (int i = 0; i < 2; ++i) {
    KVArrayFree(init[i]);
    KVArrayFree(vals[i]);
  }
  KVStoreFree(s);
}

int main(void) {
  int ngpu = 0;
  SKIP_WITHOUT_GPU(ngpu);
  printf("%d GPU(s)\n", ngpu);
  for (int t = 0; t < 6; ++t) {
    const int dtype = kAllDTypes[t];
    run_case(dtype, ngpu, 2 * ngpu + 1, KV_GPU, 0); /* K values over all GPUs + CPU */
    run_case(dtype, ngpu, 2 * ngpu + 1, KV_CPU, 0); /* stored on the CPU, a CPU value too */
    run_case(dtype, ngpu, 2, KV_CPU, 0);            /* stored on the CPU: GPU sum, one copy */
    run_case(dtype, ngpu, 2, KV_GPU, 1);            /* updater on GPU arrays */
    run_case(dtype, ngpu, 1, KV_GPU, 0);            /* single value */
  }
  /* more sources than the kernel takes inline; integers so the order cannot matter */
  run_case(KV_INT32, ngpu, 21, KV_GPU, 0);
  run_case(KV_FLOAT64, ngpu, 21, KV_GPU, 1);
  test_atomic(ngpu);
  return check_summary_named("test_gpu_device_store");
}
