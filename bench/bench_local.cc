// bench_local.cc - local-store throughput and latency, reported against a memory-bandwidth
// baseline measured in the same run (this machine is shared and noisy: ratios, not absolutes).
//
//   push:      K values of S bytes summed into one stored value (no updater)
//              GB/s counts K reads + 1 write of S bytes.
//   pull:      the stored value copied into one output; GB/s counts 1 read + 1 write.
//   baseline:  STREAM-add c[i] = a[i] + b[i] over float32 arrays that together touch the same
//              bytes as the push, (K+1)*S, so both run from the same cache level; best of one
//              thread (plain loop) and all threads (OpenMP); GB/s counts 2 reads + 1 write.
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
#include <vector>

namespace {

double g_min_seconds = 0.3;

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void Try(int rc, const char* what) {
  if (rc != 0) {
    std::fprintf(stderr, "%s failed: %s\n", what, KVGetLastError());
    std::exit(1);
  }
}

// Median seconds per call of fn over batches that together last at least g_min_seconds.
template <typename Fn>
double MedianSeconds(Fn&& fn, int calls_per_batch) {
  fn();  // warm-up (page faults, caches)
  std::vector<double> samples;
  const double start = Now();
  while (samples.size() < 5 || (Now() - start < g_min_seconds && samples.size() < 1000)) {
    const double t0 = Now();
    for (int i = 0; i < calls_per_batch; ++i) fn();
    samples.push_back((Now() - t0) / calls_per_batch);
  }
  std::nth_element(samples.begin(), samples.begin() + samples.size() / 2, samples.end());
  return samples[samples.size() / 2];
}

int CallsFor(size_t bytes) { return bytes <= (64u << 10) ? 200 : bytes <= (1u << 20) ? 20 : 1; }

double BaselineGBs(size_t bytes, int k) {
  const size_t n = std::max<size_t>(16, (k + 1) * bytes / 3 / sizeof(float));
  bytes = n * sizeof(float);
  std::vector<float> a(n, 1.0f), b(n, 2.0f), c(n, 0.0f);
  float* pa = a.data();
  float* pb = b.data();
  float* pc = c.data();
  double best = 0;
  const double t1 = MedianSeconds(
      [&] {
        for (size_t i = 0; i < n; ++i) pc[i] = pa[i] + pb[i];
      },
      CallsFor(bytes));
  const int threads = omp_get_max_threads();
  const double tn = MedianSeconds(
      [&] {
#pragma omp parallel for num_threads(threads) schedule(static)
        for (long i = 0; i < static_cast<long>(n); ++i) pc[i] = pa[i] + pb[i];
      },
      CallsFor(bytes));
  best = 3.0 * bytes / std::min(t1, tn) / 1e9;
  return best;
}

KVArrayHandle MakeArray(size_t bytes, int dtype, int dev_id, double value) {
  const int64_t n = static_cast<int64_t>(bytes / KVDTypeSize(dtype));
  KVArrayHandle a = nullptr;
  Try(KVArrayCreate(&n, 1, dtype, KV_CPU, dev_id, &a), "KVArrayCreate");
  Try(KVArrayFill(a, value), "KVArrayFill");
  return a;
}

void BenchThroughput(const std::vector<size_t>& sizes) {
  std::printf("%-9s %-7s %2s %11s %11s %11s %9s %9s\n", "bytes", "dtype", "K", "push GB/s", "pull GB/s",
              "base GB/s", "push/base", "pull/base");
  for (size_t bytes : sizes) {
    for (int k : {1, 2, 4, 8}) {
      const double base = BaselineGBs(bytes, k);
      for (int dtype : {KV_FLOAT32, KV_FLOAT16}) {
        KVStoreHandle kv = nullptr;
        Try(KVStoreCreate("local", &kv), "KVStoreCreate");
        std::vector<KVArrayHandle> vals;
        std::vector<int> keys(k, 0);
        for (int i = 0; i < k; ++i) vals.push_back(MakeArray(bytes, dtype, i, 1.0));
        KVArrayHandle out = MakeArray(bytes, dtype, 0, 0.0);
        const int key = 0;
        Try(KVStoreInit(kv, 1, &key, &vals[0]), "KVStoreInit");
        const double t_push = MedianSeconds(
            [&] { Try(KVStorePush(kv, k, keys.data(), vals.data(), 0), "KVStorePush"); }, CallsFor(bytes));
        const double t_pull =
            MedianSeconds([&] { Try(KVStorePull(kv, 1, &key, &out, 0), "KVStorePull"); }, CallsFor(bytes));
        const double push_gbs = (k + 1.0) * bytes / t_push / 1e9;
        const double pull_gbs = 2.0 * bytes / t_pull / 1e9;
        std::printf("%-9zu %-7s %2d %11.2f %11.2f %11.2f %9.2f %9.2f\n", bytes,
                    dtype == KV_FLOAT32 ? "float32" : "float16", k, push_gbs, pull_gbs, base, push_gbs / base,
                    pull_gbs / base);
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
  Try(KVStoreCreate("local", &kv), "KVStoreCreate");
  KVArrayHandle v = MakeArray(4096, KV_FLOAT32, 0, 1.0), out = MakeArray(4096, KV_FLOAT32, 0, 0.0);
  const int key = 7;
  Try(KVStoreInit(kv, 1, &key, &v), "KVStoreInit");
  const double t = MedianSeconds(
      [&] {
        Try(KVStorePush(kv, 1, &key, &v, 0), "KVStorePush");
        Try(KVStorePull(kv, 1, &key, &out, 0), "KVStorePull");
      },
      1000);
  std::printf("latency: push+pull of a 1 Ki-float key: %.3f us (median)\n", t * 1e6);
  KVArrayFree(v);
  KVArrayFree(out);
  KVStoreFree(kv);
}

}  // namespace

int main(int argc, char** argv) {
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
