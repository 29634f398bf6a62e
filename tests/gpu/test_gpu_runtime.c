/* test_gpu_runtime.c - what a CUDA build does on any machine, GPU or not (never skipped):
 *  - the features are reported, KVGetGpuCount answers (0 without driver or device);
 *  - without a GPU, a GPU array is KV_ERR_DEVICE "no GPU" and the nccl store a clear error;
 *    with GPUs, an id past the last one is KV_ERR_DEVICE;
 *  - the `device` store with CPU values (the CUDA build's device comm on its CPU path) gives
 *    the same results as the `local` store, with and without an updater.
 *
 * With --expect-hidden-libs (run by no_cuda_libs.sh in an environment where the CUDA and
 * NCCL libraries cannot be found) it also proves that they really are unreachable, and that
 * the nccl store then fails with KV_ERR_NCCL or KV_ERR_DEVICE instead of crashing. */
#include <dlfcn.h>

#include "../common/arrays.h"

#ifndef KVSTORE_EXPECT_NCCL
#define KVSTORE_EXPECT_NCCL 1
#endif

static int scale_updater(int key, KVArrayHandle recv, KVArrayHandle stored, void* user) {
  (void)key;
  (void)user;
  int rc = KVArrayBinaryScalar(KV_OP_SUB, stored, 1.0, stored);
  if (rc == 0) rc = KVArrayBinary(KV_OP_ADD, stored, recv, stored);
  return rc;
}

static void test_device_store_on_cpu(void) {
  const int64_t shape[2] = {300, 41};
  for (int t = 0; t < 6; ++t) {
    const int dtype = kAllDTypes[t];
    for (int upd = 0; upd < 2; ++upd) {
      KVStoreHandle dev = NULL, ref = NULL;
      CHECK_OK(KVStoreCreate("device", &dev));
      CHECK_OK(KVStoreCreate("local", &ref));
      if (upd) {
        CHECK_OK(KVStoreSetUpdater(dev, scale_updater, NULL, NULL));
        CHECK_OK(KVStoreSetUpdater(ref, scale_updater, NULL, NULL));
      }
      const int key = 5;
      KVArrayHandle init = make_array(shape, 2, dtype, KV_CPU, 0, 3);
      CHECK_OK(KVStoreInit(dev, 1, &key, &init));
      CHECK_OK(KVStoreInit(ref, 1, &key, &init));
      KVArrayHandle vals[5];
      int keys[5];
      for (int j = 0; j < 5; ++j) {
        vals[j] = make_array(shape, 2, dtype, KV_CPU, j, j); /* cpu(0)..cpu(4) */
        keys[j] = key;
      }
      CHECK_OK(KVStorePush(dev, 5, keys, vals, 0));
      CHECK_OK(KVStorePush(ref, 5, keys, vals, 0));
      KVArrayHandle a = NULL, b = NULL;
      CHECK_OK(KVArrayCreate(shape, 2, dtype, KV_CPU, 0, &a));
      CHECK_OK(KVArrayCreate(shape, 2, dtype, KV_CPU, 0, &b));
      CHECK_OK(KVStorePull(dev, 1, &key, &a, 0));
      CHECK_OK(KVStorePull(ref, 1, &key, &b, 0));
      CHECK(same_bytes(a, b));
      /* and the sum is not a no-op: it differs from the initial value */
      CHECK(!same_bytes(a, init));
      for (int j = 0; j < 5; ++j) KVArrayFree(vals[j]);
      KVArrayFree(a);
      KVArrayFree(b);
      KVArrayFree(init);
      KVStoreFree(dev);
      KVStoreFree(ref);
    }
  }
}

static void test_gpu_contexts(int ngpu) {
  const int64_t shape[1] = {16};
  KVArrayHandle a = NULL;
  if (ngpu == 0) {
    CHECK_ERR(KVArrayCreate(shape, 1, KV_FLOAT32, KV_GPU, 0, &a), KV_ERR_DEVICE, "no GPU");
    CHECK(a == NULL);
    CHECK_ERR(KVArrayCreate(NULL, 0, KV_INT64, KV_GPU, 3, &a), KV_ERR_DEVICE, "no GPU");
    CHECK(a == NULL);
  } else {
    CHECK_ERR(KVArrayCreate(shape, 1, KV_FLOAT32, KV_GPU, ngpu, &a), KV_ERR_DEVICE,
              "does not exist");
    CHECK(a == NULL);
    CHECK_OK(KVArrayCreate(shape, 1, KV_FLOAT32, KV_GPU, ngpu - 1, &a));
    KVArrayFree(a);
  }
}

static void test_nccl_store(int ngpu, int hidden) {
  KVStoreHandle s = NULL;
  const int rc = KVStoreCreate("nccl", &s);
  if (!KVSTORE_EXPECT_NCCL) {
    CHECK(rc == KV_ERR_NOT_SUPPORTED);
  } else if (ngpu == 0) {
    CHECK_ERR(rc, KV_ERR_DEVICE, "needs at least one GPU");
  } else if (hidden) {
    CHECK_ERR(rc, KV_ERR_NCCL, "libnccl.so.2");
  } else if (rc == KV_ERR_NCCL) {
    /* a GPU machine without NCCL installed: the error must say what is missing */
    CHECK_ERR(rc, KV_ERR_NCCL, "libnccl.so.2");
    printf("note: NCCL is not installed here: %s\n", KVGetLastError());
  } else {
    CHECK_OK(rc);
  }
  if (rc != 0) CHECK(s == NULL);
  KVStoreFree(s);
}

int main(int argc, char** argv) {
  const int hidden = argc > 1 && strcmp(argv[1], "--expect-hidden-libs") == 0;
  if (hidden) {
    /* The environment must really hide the libraries, or this test proves nothing. */
    const char* libs[4] = {"libnccl.so.2", "libcudart.so.13", "libcudart.so", "libcuda.so.1"};
    for (int i = 0; i < 4; ++i) {
      void* h = dlopen(libs[i], RTLD_NOW | RTLD_LOCAL);
      CHECK_MSG(h == NULL, "%s is still reachable", libs[i]);
    }
  }
  CHECK(KVHasFeature(KV_FEATURE_CUDA) == 1);
  CHECK(KVHasFeature(KV_FEATURE_NCCL) == KVSTORE_EXPECT_NCCL);
  int ngpu = -1;
  CHECK_OK(KVGetGpuCount(&ngpu));
  CHECK(ngpu >= 0);
  CHECK_ERR(KVGetGpuCount(NULL), KV_ERR_NULL_POINTER, NULL);
  printf("%d GPU(s)%s\n", ngpu, hidden ? ", CUDA/NCCL libraries hidden" : "");
  test_gpu_contexts(ngpu);
  test_nccl_store(ngpu, hidden);
  test_device_store_on_cpu();
  return check_summary_named("test_gpu_runtime");
}
