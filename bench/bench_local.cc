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
//   --keys:    instead of the above, per-key cost by key count: for each K, one push of K
//              keys of F floats (--key-floats, 16) in one call plus one pull of them in one
//              call, the K's taking turns batch by batch; CPU microseconds per key (the
//              process's CPU time: wall time would charge large calls for other processes'
//              load on a shared machine) and the ratio to the first K (flat cost: 1.0), beside a raw baseline of two memcpy per key
//              between K separately allocated buffers of each kind (what scattered memory
//              costs at that K). Init is one
//              call of K keys into a fresh store, timed once per K. --key-op times another
//              call instead of push+pull: push, pull, pushpull (one call), or str (push+pull
//              with string keys "k<j>").
//
// Usage: bench_local [--quick] [--min-seconds X] [--keys 100,1000,10000,100000 [--key-floats F]
//                    [--key-op push|pull|pushpull|str]]
#include <kvstore/kvstore.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <string>
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

double ProcessCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

// Per-key cost of push+pull of K keys in one call, for each K of `counts` (--keys).
void BenchKeyCounts(const std::vector<int>& counts, int64_t floats, const std::string& op) {
  struct Set {
    int k;
    KVStoreHandle kv = nullptr;
    std::vector<int> keys;
    std::vector<std::string> names;
    std::vector<const char*> strs;
    std::vector<KVArrayHandle> vals, outs;
    std::vector<float*> val_data, out_data, stored;  // the raw baseline's buffers
    double init_s = 0;
  };
  std::vector<Set> sets(counts.size());
  for (size_t i = 0; i < counts.size(); ++i) {
    Set& s = sets[i];
    s.k = counts[i];
    REQUIRE_OK(KVStoreCreate("local", &s.kv));
    for (int j = 0; j < s.k; ++j) {
      s.keys.push_back(j);
      s.names.push_back("k" + std::to_string(j));
      KVArrayHandle v = nullptr, o = nullptr;
      REQUIRE_OK(KVArrayCreate(&floats, 1, KV_FLOAT32, KV_CPU, 0, &v));
      REQUIRE_OK(KVArrayFill(v, 1.0));
      REQUIRE_OK(KVArrayCreate(&floats, 1, KV_FLOAT32, KV_CPU, 0, &o));
      s.vals.push_back(v);
      s.outs.push_back(o);
      s.val_data.push_back(new float[static_cast<size_t>(floats)]());
      s.out_data.push_back(new float[static_cast<size_t>(floats)]());
      s.stored.push_back(new float[static_cast<size_t>(floats)]());
    }
    for (const std::string& n : s.names) s.strs.push_back(n.c_str());
    const double t0 = ProcessCpuSeconds();
    if (op == "str") REQUIRE_OK(KVStoreInitStr(s.kv, s.k, s.strs.data(), s.vals.data()));
    else REQUIRE_OK(KVStoreInit(s.kv, s.k, s.keys.data(), s.vals.data()));
    s.init_s = ProcessCpuSeconds() - t0;
  }
  // The store's push+pull of each K, and its raw counterpart: the same two copies per key
  // (value -> a stored buffer of the key -> output) by memcpy between K separately allocated
  // buffers of each kind, so that what scattered memory costs at each K is measured beside
  // the store.
  const size_t bytes = static_cast<size_t>(floats) * sizeof(float);
  std::vector<std::function<void()>> fns;
  for (Set& s : sets) {
    fns.push_back([&s, op] {
      if (op == "str") {
        REQUIRE_OK(KVStorePushStr(s.kv, s.k, s.strs.data(), s.vals.data(), 0));
        REQUIRE_OK(KVStorePullStr(s.kv, s.k, s.strs.data(), s.outs.data(), 0));
      } else if (op == "pushpull") {
        REQUIRE_OK(KVStorePushPull(s.kv, s.k, s.keys.data(), s.vals.data(), s.k, s.keys.data(), s.outs.data(), 0));
      } else {
        if (op != "pull") REQUIRE_OK(KVStorePush(s.kv, s.k, s.keys.data(), s.vals.data(), 0));
        if (op != "push") REQUIRE_OK(KVStorePull(s.kv, s.k, s.keys.data(), s.outs.data(), 0));
      }
    });
    fns.push_back([&s, bytes] {
      for (int j = 0; j < s.k; ++j) std::memcpy(s.stored[j], s.val_data[j], bytes);
      for (int j = 0; j < s.k; ++j) std::memcpy(s.out_data[j], s.stored[j], bytes);
    });
  }
  // CPU time of the process, not wall time: on a shared machine a call of 100,000 keys is
  // preempted nearly always and one of 100 keys nearly never, so wall-time medians would
  // charge the large K for other processes' load. Each function runs in batches of about
  // 20,000 keys, taking turns, until every one has 5 batches and g_min_seconds passed.
  for (const auto& fn : fns) fn();  // warm-up
  std::vector<std::vector<double>> samples(fns.size());
  const double start = Now();
  while (samples[0].size() < 5 || (Now() - start < g_min_seconds && samples[0].size() < 200)) {
    for (size_t f = 0; f < fns.size(); ++f) {
      const int k = sets[f / 2].k, reps = std::max(1, 20000 / k);
      const double c0 = ProcessCpuSeconds();
      for (int r = 0; r < reps; ++r) fns[f]();
      samples[f].push_back((ProcessCpuSeconds() - c0) / reps / k);
    }
  }
  std::printf("%s of K keys of %lld float32 in one call each, init of K keys in one call "
              "(CPU time of the process, median):\n",
              op == "str" ? "push+pull (string keys)" : op.c_str(), static_cast<long long>(floats));
  std::printf("%-8s %10s %8s %10s %8s %10s %12s %8s\n", "K", "us/key", "ratio", "raw us/key", "ratio",
              "store/raw", "init us/key", "ratio");
  const double per0 = Median(samples[0]) * 1e6, raw0 = Median(samples[1]) * 1e6;
  const double ini0 = sets[0].init_s / sets[0].k * 1e6;
  for (size_t i = 0; i < sets.size(); ++i) {
    const double per = Median(samples[2 * i]) * 1e6, raw = Median(samples[2 * i + 1]) * 1e6;
    const double ini = sets[i].init_s / sets[i].k * 1e6;
    std::printf("%-8d %10.3f %8.2f %10.3f %8.2f %10.2f %12.3f %8.2f\n", sets[i].k, per, per / per0, raw,
                raw / raw0, per / raw, ini, ini / ini0);
  }
  std::printf("ratio: to the first K; raw: two memcpy per key between separately allocated "
              "buffers (the memory floor at that K); init: CPU time of one call\n");
  for (Set& s : sets) {
    for (KVArrayHandle a : s.vals) KVArrayFree(a);
    for (KVArrayHandle a : s.outs) KVArrayFree(a);
    for (auto* list : {&s.val_data, &s.out_data, &s.stored}) {
      for (float* f : *list) delete[] f;
    }
    KVStoreFree(s.kv);
  }
}

std::vector<int> ParseCounts(const char* list) {
  std::vector<int> out;
  for (const char* p = list; *p != '\0';) {
    char* end = nullptr;
    const long v = std::strtol(p, &end, 10);
    if (end == p || v <= 0) break;
    out.push_back(static_cast<int>(v));
    p = *end == ',' ? end + 1 : end;
  }
  return out;
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
  std::vector<int> key_counts;
  int64_t key_floats = 16;
  std::string key_op = "push+pull";
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick")) quick = true;
    else if (!std::strcmp(argv[i], "--min-seconds") && i + 1 < argc) g_min_seconds = std::atof(argv[++i]);
    else if (!std::strcmp(argv[i], "--keys") && i + 1 < argc) key_counts = ParseCounts(argv[++i]);
    else if (!std::strcmp(argv[i], "--key-floats") && i + 1 < argc) key_floats = std::max(1L, std::atol(argv[++i]));
    else if (!std::strcmp(argv[i], "--key-op") && i + 1 < argc) key_op = argv[++i];
    else {
      std::fprintf(stderr, "usage: %s [--quick] [--min-seconds X] [--keys K1,K2,... [--key-floats F] [--key-op push|pull|pushpull|str]]\n", argv[0]);
      return 2;
    }
  }
  std::printf("kvstore %s local bench, %d threads\n", KVGetVersionString(), omp_get_max_threads());
  if (!key_counts.empty()) {
    if (key_op != "push+pull" && key_op != "push" && key_op != "pull" && key_op != "pushpull" && key_op != "str") {
      std::fprintf(stderr, "--key-op: push, pull, pushpull or str, not %s\n", key_op.c_str());
      return 2;
    }
    BenchKeyCounts(key_counts, key_floats, key_op);
    return 0;
  }
  BenchLatency();
  std::vector<size_t> sizes = {4u << 10, 64u << 10, 1u << 20, 4u << 20, 16u << 20, 64u << 20};
  if (quick) sizes = {4u << 10, 4u << 20};
  BenchThroughput(sizes);
  return 0;
}
