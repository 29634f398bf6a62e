// bench_local.cc - local-store throughput and latency, reported against a memory-bandwidth
// baseline measured in the same run (this machine is shared and noisy: ratios, not absolutes).
//
//   push:      K values of S bytes summed into one stored value (no updater)
//              GB/s counts K reads + 1 write of S bytes.
//   pull:      the stored value copied into one output; GB/s counts 1 read + 1 write.
//   baseline:  STREAM-add c[i] = a[i] + b[i] over float32 arrays that together touch the same
//              bytes as the push, (K+1)*S, so both run from the same cache level; best of one
//              thread (plain loop) and all threads (OpenMP); GB/s counts 2 reads + 1 write.
//              Baseline, push and pull batches take turns, so load bursts hit them alike.
//              OpenMP waits passively (OMP_WAIT_POLICY=passive unless set), so its idle
//              threads do not compete with the library's worker pool.
//   latency:   one push plus one pull of a 1 Ki-float key, median per pair.
//
// Usage: bench_local [--quick] [--min-seconds X]
#include <kvstore/kvstore.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include <unistd.h>

#include "../tests/common/check.h"
#include "common/timing.h"

namespace {

using bench::Median;
using bench::Now;

double g_min_seconds = 0.3;

// Median seconds per call of each function. The functions take turns, one batch each, for at
// least g_min_seconds in all, so that a burst of load from other processes on this shared
// machine hits every measurement of a comparison alike.
std::vector<double> InterleavedMedianSeconds(const std::vector<std::function<void()>>& fns,
                                             int calls_per_batch) {
  for (const auto& fn : fns) fn();  // warm-up (page faults, caches)
  std::vector<std::vector<double>> samples(fns.size());
  const double start = Now();
  while (samples[0].size() < 5 || (Now() - start < g_min_seconds && samples[0].size() < 1000)) {
    for (size_t f = 0; f < fns.size(); ++f) {
      const double t0 = Now();
      for (int i = 0; i < calls_per_batch; ++i) fns[f]();
      samples[f].push_back((Now() - t0) / calls_per_batch);
    }
  }
  std::vector<double> medians;
  for (auto& s : samples) medians.push_back(Median(s));
  return medians;
}

int CallsFor(size_t bytes) { return bytes <= (64u << 10) ? 200 : bytes <= (1u << 20) ? 20 : 1; }

// The STREAM-add baseline over (K+1)*S bytes: buffers plus one-thread and all-thread kernels.
struct Baseline {
  explicit Baseline(size_t bytes, int k)
      : n(std::max<size_t>(16, (k + 1) * bytes / 3 / sizeof(float))), a(n, 1.0f), b(n, 2.0f), c(n, 0.0f) {}
  void OneThread() {
    for (size_t i = 0; i < n; ++i) c[i] = a[i] + b[i];
  }
  void AllThreads() {
    const long count = static_cast<long>(n);
    float* pa = a.data();
    float* pb = b.data();
    float* pc = c.data();
#pragma omp parallel for schedule(static)
    for (long i = 0; i < count; ++i) pc[i] = pa[i] + pb[i];
  }
  double GBs(double seconds) const { return 3.0 * n * sizeof(float) / seconds / 1e9; }
  size_t n;
  std::vector<float> a, b, c;
};

KVArrayHandle MakeArray(size_t bytes, int dtype, int dev_id, double value) {
  const int64_t n = static_cast<int64_t>(bytes / KVDTypeSize(dtype));
  KVArrayHandle a = nullptr;
  REQUIRE_OK(KVArrayCreate(&n, 1, dtype, KV_CPU, dev_id, &a));
  REQUIRE_OK(KVArrayFill(a, value));
  return a;
}

void BenchThroughput(const std::vector<size_t>& sizes) {
  std::printf("%-9s %-7s %2s %11s %11s %11s %9s %9s\n", "bytes", "dtype", "K", "push GB/s", "pull GB/s",
              "base GB/s", "push/base", "pull/base");
  for (size_t bytes : sizes) {
    for (int k : {1, 2, 4, 8}) {
      Baseline base(bytes, k);
      for (int dtype : {KV_FLOAT32, KV_FLOAT16}) {
        KVStoreHandle kv = nullptr;
        REQUIRE_OK(KVStoreCreate("local", &kv));
        std::vector<KVArrayHandle> vals;
        std::vector<int> keys(k, 0);
        for (int i = 0; i < k; ++i) vals.push_back(MakeArray(bytes, dtype, i, 1.0));
        KVArrayHandle out = MakeArray(bytes, dtype, 0, 0.0);
        const int key = 0;
        REQUIRE_OK(KVStoreInit(kv, 1, &key, &vals[0]));
        const std::vector<double> t = InterleavedMedianSeconds(
            {[&] { base.OneThread(); }, [&] { base.AllThreads(); },
             [&] { REQUIRE_OK(KVStorePush(kv, k, keys.data(), vals.data(), 0)); },
             [&] { REQUIRE_OK(KVStorePull(kv, 1, &key, &out, 0)); }},
            CallsFor(bytes));
        const double base_gbs = base.GBs(std::min(t[0], t[1]));
        const double push_gbs = (k + 1.0) * bytes / t[2] / 1e9;
        const double pull_gbs = 2.0 * bytes / t[3] / 1e9;
        std::printf("%-9zu %-7s %2d %11.2f %11.2f %11.2f %9.2f %9.2f\n", bytes,
                    dtype == KV_FLOAT32 ? "float32" : "float16", k, push_gbs, pull_gbs, base_gbs,
                    push_gbs / base_gbs, pull_gbs / base_gbs);
        std::fflush(stdout);
        for (KVArrayHandle v : vals) KVArrayFree(v);
        KVArrayFree(out);
        KVStoreFree(kv);
      }
    }
  }
}

void BenchLatency() {
  KVStoreHandle kv = nullptr;
  REQUIRE_OK(KVStoreCreate("local", &kv));
  KVArrayHandle v = MakeArray(4096, KV_FLOAT32, 0, 1.0), out = MakeArray(4096, KV_FLOAT32, 0, 0.0);
  const int key = 7;
  REQUIRE_OK(KVStoreInit(kv, 1, &key, &v));
  const double t = InterleavedMedianSeconds(
      {[&] {
        REQUIRE_OK(KVStorePush(kv, 1, &key, &v, 0));
        REQUIRE_OK(KVStorePull(kv, 1, &key, &out, 0));
      }},
      1000)[0];
  std::printf("latency: push+pull of a 1 Ki-float key: %.3f us (median)\n", t * 1e6);
  KVArrayFree(v);
  KVArrayFree(out);
  KVStoreFree(kv);
}

}  // namespace

int main(int argc, char** argv) {
  // OpenMP threads spin after each parallel region by default; on a 2-vCPU machine they would
  // then starve the library's own worker thread during the push measured right after the
  // baseline. libgomp reads OMP_WAIT_POLICY when it loads, so set it and start again.
  if (!std::getenv("OMP_WAIT_POLICY")) {
    setenv("OMP_WAIT_POLICY", "passive", 1);
    execv("/proc/self/exe", argv);
    std::perror("execv /proc/self/exe (continuing with spinning OpenMP threads)");
  }
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick")) quick = true;
    else if (!std::strcmp(argv[i], "--min-seconds") && i + 1 < argc) g_min_seconds = std::atof(argv[++i]);
    else {
      std::fprintf(stderr, "usage: %s [--quick] [--min-seconds X]\n", argv[0]);
      return 2;
    }
  }
  std::printf("kvstore %s local bench, %d threads\n", KVGetVersionString(), omp_get_max_threads());
  BenchLatency();
  std::vector<size_t> sizes = {4u << 10, 64u << 10, 1u << 20, 4u << 20, 16u << 20, 64u << 20};
  if (quick) sizes = {4u << 10, 4u << 20};
  BenchThroughput(sizes);
  return 0;
}
