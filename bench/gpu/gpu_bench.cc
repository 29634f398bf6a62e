// gpu_bench.cc - GPU bandwidth of the kvstore reduce paths, with the hardware baselines
// beside them:
//
//   memcpy      cudaMemcpy device-to-device on gpu 0 (bytes moved = 2 x size)
//   reduce/1    `device` store push of K values that all live on gpu 0: the fused kernel
//               (bytes moved = (K + 1) x size)
//   reduce/N    `device` store push of one value per GPU into a merge buffer on gpu 0
//               (peer reads over NVLink/PCIe when the GPUs allow it)
//   nccl raw    ncclAllReduce over all GPUs, in place (bus bandwidth, as nccl-tests report:
//               size / time x 2 (n - 1) / n)
//   nccl store  `nccl` store pushpull of one value per GPU into the same arrays (the
//               store's all-reduce path plus the copy into the stored value), same formula
//
// Usage: kvstore_gpu_bench [--size-mb MB] [--iters N] [--k K]
// Prints one line per measurement; exits 0 without measuring when there is no GPU.
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#if KVSTORE_BENCH_HAVE_NCCL_H
#include <nccl.h>
#endif

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../../tests/common/check.h"
#include "kvstore/kvstore.h"
#include "../common/timing.h"

namespace {

using bench::Now;

#define BENCH_CUDA(call)                                                                    \
  do {                                                                                      \
    cudaError_t e_ = (call);                                                                \
    if (e_ != cudaSuccess) {                                                                \
      std::fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(e_));               \
      std::exit(1);                                                                         \
    }                                                                                       \
  } while (0)

struct Options {
  double size_mb = 64;
  int iters = 20;
  int k = 4;
};

void Report(const char* name, double bytes_per_iter, double seconds, int iters, const char* what) {
  const double t = seconds / iters;
  std::printf("%-12s %10.3f ms/iter %9.1f GB/s  (%s)\n", name, t * 1e3, bytes_per_iter / t / 1e9,
              what);
}

void BenchMemcpy(size_t bytes, int iters) {
  void *a = nullptr, *b = nullptr;
  BENCH_CUDA(cudaSetDevice(0));
  BENCH_CUDA(cudaMalloc(&a, bytes));
  BENCH_CUDA(cudaMalloc(&b, bytes));
  BENCH_CUDA(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice));  // warm-up
  BENCH_CUDA(cudaDeviceSynchronize());
  const double t0 = Now();
  for (int i = 0; i < iters; ++i) BENCH_CUDA(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice));
  BENCH_CUDA(cudaDeviceSynchronize());
  Report("memcpy", 2.0 * bytes, Now() - t0, iters, "read + write of size");
  BENCH_CUDA(cudaFree(a));
  BENCH_CUDA(cudaFree(b));
}

// Pushes `vals` (all for key 0) to a store initialised on gpu 0; returns seconds for iters.
double TimePush(KVStoreHandle store, std::vector<KVArrayHandle>& vals, int iters) {
  std::vector<int> keys(vals.size(), 0);
  REQUIRE_OK(KVStorePush(store, static_cast<int>(vals.size()), keys.data(), vals.data(), 0));
  const double t0 = Now();
  for (int i = 0; i < iters; ++i) {
    REQUIRE_OK(KVStorePush(store, static_cast<int>(vals.size()), keys.data(), vals.data(), 0));
  }
  return Now() - t0;
}

void BenchDeviceReduce(int64_t n, int k, int ngpu, int iters) {
  const size_t bytes = static_cast<size_t>(n) * 4;
  for (int spread = 0; spread < 2; ++spread) {
    const int count = spread ? ngpu : k;
    if (spread && ngpu < 2) break;
    KVStoreHandle store = nullptr;
    REQUIRE_OK(KVStoreCreate("device", &store));
    KVArrayHandle init = nullptr;
    REQUIRE_OK(KVArrayCreate(&n, 1, KV_FLOAT32, KV_GPU, 0, &init));
    const int key = 0;
    REQUIRE_OK(KVStoreInit(store, 1, &key, &init));
    std::vector<KVArrayHandle> vals(static_cast<size_t>(count));
    for (int j = 0; j < count; ++j) {
      REQUIRE_OK(KVArrayCreate(&n, 1, KV_FLOAT32, KV_GPU, spread ? j : 0, &vals[j]));
      REQUIRE_OK(KVArrayFill(vals[j], 1.0));
    }
    const double s = TimePush(store, vals, iters);
    char name[32], what[96];
    std::snprintf(name, sizeof name, "reduce/%dgpu", spread ? ngpu : 1);
    std::snprintf(what, sizeof what, "%d values, (K + 1) x size moved", count);
    Report(name, (count + 1.0) * bytes, s, iters, what);
    for (KVArrayHandle v : vals) KVArrayFree(v);
    KVArrayFree(init);
    KVStoreFree(store);
  }
}

// ncclAllReduce straight from libnccl (opened like the library does), as the ceiling.
#if KVSTORE_BENCH_HAVE_NCCL_H
void BenchNcclRaw(int64_t n, int ngpu, int iters) {
  void* h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    std::printf("nccl raw     skipped: %s\n", dlerror());
    return;
  }
  using InitAll = ncclResult_t (*)(ncclComm_t*, int, const int*);
  using AllReduce = ncclResult_t (*)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t,
                                     ncclComm_t, cudaStream_t);
  using Group = ncclResult_t (*)();
  using Destroy = ncclResult_t (*)(ncclComm_t);
  auto init_all = reinterpret_cast<InitAll>(dlsym(h, "ncclCommInitAll"));
  auto all_reduce = reinterpret_cast<AllReduce>(dlsym(h, "ncclAllReduce"));
  auto group_start = reinterpret_cast<Group>(dlsym(h, "ncclGroupStart"));
  auto group_end = reinterpret_cast<Group>(dlsym(h, "ncclGroupEnd"));
  auto destroy = reinterpret_cast<Destroy>(dlsym(h, "ncclCommDestroy"));
  if (!init_all || !all_reduce || !group_start || !group_end || !destroy) {
    std::printf("nccl raw     skipped: libnccl.so.2 lacks a symbol\n");
    return;
  }
  std::vector<ncclComm_t> comms(static_cast<size_t>(ngpu));
  std::vector<cudaStream_t> streams(static_cast<size_t>(ngpu));
  std::vector<void*> bufs(static_cast<size_t>(ngpu));
  if (init_all(comms.data(), ngpu, nullptr) != ncclSuccess) {
    std::printf("nccl raw     skipped: ncclCommInitAll failed\n");
    return;
  }
  for (int g = 0; g < ngpu; ++g) {
    BENCH_CUDA(cudaSetDevice(g));
    BENCH_CUDA(cudaStreamCreate(&streams[g]));
    BENCH_CUDA(cudaMalloc(&bufs[g], static_cast<size_t>(n) * 4));
    BENCH_CUDA(cudaMemset(bufs[g], 0, static_cast<size_t>(n) * 4));
  }
  auto run = [&]() {
    group_start();
    for (int g = 0; g < ngpu; ++g) {
      all_reduce(bufs[g], bufs[g], static_cast<size_t>(n), ncclFloat32, ncclSum, comms[g],
                 streams[g]);
    }
    group_end();
  };
  auto sync = [&]() {
    for (int g = 0; g < ngpu; ++g) {
      BENCH_CUDA(cudaSetDevice(g));
      BENCH_CUDA(cudaStreamSynchronize(streams[g]));
    }
  };
  run();
  sync();
  const double t0 = Now();
  for (int i = 0; i < iters; ++i) {
    run();
    sync();  // the store waits for every call too: time the same thing
  }
  const double s = Now() - t0;
  const double factor = ngpu > 1 ? 2.0 * (ngpu - 1) / ngpu : 1.0;
  Report("nccl raw", factor * n * 4.0, s, iters, "ncclAllReduce bus bandwidth");
  for (int g = 0; g < ngpu; ++g) {
    BENCH_CUDA(cudaSetDevice(g));
    BENCH_CUDA(cudaFree(bufs[g]));
    BENCH_CUDA(cudaStreamDestroy(streams[g]));
    destroy(comms[g]);
  }
}
#else
void BenchNcclRaw(int64_t, int, int) {
  std::printf("nccl raw     skipped: built without nccl.h\n");
}
#endif

void BenchNcclStore(int64_t n, int ngpu, int iters) {
  KVStoreHandle store = nullptr;
  const int rc = KVStoreCreate("nccl", &store);
  if (rc != 0) {
    std::printf("nccl store   skipped: %s\n", KVGetLastError());
    return;
  }
  KVArrayHandle init = nullptr;
  REQUIRE_OK(KVArrayCreate(&n, 1, KV_FLOAT32, KV_GPU, 0, &init));
  const int key = 0;
  REQUIRE_OK(KVStoreInit(store, 1, &key, &init));
  std::vector<KVArrayHandle> vals(static_cast<size_t>(ngpu));
  std::vector<int> keys(static_cast<size_t>(ngpu), 0);
  for (int g = 0; g < ngpu; ++g) REQUIRE_OK(KVArrayCreate(&n, 1, KV_FLOAT32, KV_GPU, g, &vals[g]));
  auto once = [&]() {
    REQUIRE_OK(KVStorePushPull(store, ngpu, keys.data(), vals.data(), ngpu, keys.data(),
                             vals.data(), 0));
  };
  once();
  const double t0 = Now();
  for (int i = 0; i < iters; ++i) once();
  const double s = Now() - t0;
  const double factor = ngpu > 1 ? 2.0 * (ngpu - 1) / ngpu : 1.0;
  Report("nccl store", factor * n * 4.0, s, iters, "pushpull, bus bandwidth");
  for (KVArrayHandle v : vals) KVArrayFree(v);
  KVArrayFree(init);
  KVStoreFree(store);
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--size-mb" && i + 1 < argc) {
      opt.size_mb = std::atof(argv[++i]);
    } else if (a == "--iters" && i + 1 < argc) {
      opt.iters = std::atoi(argv[++i]);
    } else if (a == "--k" && i + 1 < argc) {
      opt.k = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--size-mb MB] [--iters N] [--k K]\n", argv[0]);
      return 2;
    }
  }
  if (opt.size_mb <= 0 || opt.iters < 1 || opt.k < 1) {
    std::fprintf(stderr, "--size-mb, --iters and --k must be positive\n");
    return 2;
  }
  int ngpu = 0;
  REQUIRE_OK(KVGetGpuCount(&ngpu));
  if (ngpu == 0) {
    std::printf("no GPU: nothing to measure (KVGetGpuCount = 0)\n");
    return 0;
  }
  const int64_t n = static_cast<int64_t>(opt.size_mb * 1024 * 1024 / 4);
  const size_t bytes = static_cast<size_t>(n) * 4;
  std::printf("kvstore %s, %d GPU(s), %.1f MiB float32 per value, %d iterations\n",
              KVGetVersionString(), ngpu, bytes / 1048576.0, opt.iters);
  BenchMemcpy(bytes, opt.iters);
  BenchDeviceReduce(n, opt.k, ngpu, opt.iters);
  if (KVHasFeature(KV_FEATURE_NCCL)) {
    BenchNcclRaw(n, ngpu, opt.iters);
    BenchNcclStore(n, ngpu, opt.iters);
  }
  return 0;
}
