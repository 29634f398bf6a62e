// bench_sparse.cc - row-sparse pulls and pushes of an embedding table, against a dense pull
// of the whole table measured in the same run (ratios, not absolutes: this machine is shared
// and noisy), on an in-process store or, started by kvstore-launch, on a dist store.
//
//   bench_sparse [--store local] [--rows R] [--fraction F] [--reps N] [--sparse-only]
//   kvstore-launch -n 1 -s 1 -- bench_sparse --store dist_sync [...]
//
//   table:      R x 64 float32 (default R = 1,000,000: 256 MB), one int key
//   dense pull: KVStorePull of the whole table into a dense output, then KVArrayWaitToRead
//   rsp pull:   KVStoreRowSparsePull of F of the rows (default 1%: random ids with repeats,
//               unsorted, int64) into a row_sparse output (it returns with the rows)
//   rsp push:   KVStorePush of a row_sparse gradient of F of the rows, under
//               sgd(learning_rate=0.01) (lazy: only those rows change), then KVStoreWaitAll
//               (a dist store's servers applied it)
//   dense push: KVStorePush of a dense gradient of the whole table under the same sgd, then
//               KVStoreWaitAll (for scale; not part of the ratios the issue asks for)
// The cells take turns, one call each, for --reps rounds; each figure is the median.
// Printed ratios: dense pull time / rsp pull time, and dense pull time / rsp push time.
// On a dist store every worker of the job runs the cells (sync rounds need all of them) with
// its own row ids; worker 0 prints. KVArrayWaitToRead and KVStoreWaitAll return at once on
// an in-process store.
//
// --sparse-only times the two row-sparse cells alone (for a profiler), without ratios; on
// a dist store only with one worker (the dense cells are sync rounds too).
#include <kvstore/kvstore.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "../tests/common/check.h"
#include "common/timing.h"

namespace {

using bench::Median;
using bench::Now;

KVArrayHandle Dense(int64_t rows, int64_t cols, float value) {
  const int64_t shape[2] = {rows, cols};
  KVArrayHandle a = nullptr;
  REQUIRE_OK(KVArrayCreate(shape, 2, KV_FLOAT32, KV_CPU, 0, &a));
  REQUIRE_OK(KVArrayFill(a, value));
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t rows = 1000000, cols = 64;
  double fraction = 0.01;
  int reps = 15;
  bool sparse_only = false;
  std::string store = "local";
  for (int i = 1; i < argc; i += 2) {
    if (!std::strcmp(argv[i], "--sparse-only")) {
      sparse_only = true;
      --i;
      continue;
    }
    REQUIRE(i + 1 < argc, "option %s needs a value", argv[i]);
    if (!std::strcmp(argv[i], "--rows")) rows = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--fraction")) fraction = std::atof(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--reps")) reps = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--store")) store = argv[i + 1];
    else REQUIRE(0, "unknown option %s (known: --store, --rows, --fraction, --reps, --sparse-only)",
                 argv[i]);
  }
  const int64_t shape[2] = {rows, cols};
  const int64_t n_ids = std::max<int64_t>(1, static_cast<int64_t>(rows * fraction));

  KVStoreHandle kv = nullptr;
  REQUIRE_OK(KVStoreCreate(store.c_str(), &kv));
  int rank = 0;
  REQUIRE_OK(KVStoreGetRank(kv, &rank));
  int key = 0;
  KVArrayHandle table = Dense(rows, cols, 1.0f);
  REQUIRE_OK(KVStoreInit(kv, 1, &key, &table));
  REQUIRE_OK(KVStoreSetOptimizer(kv, "sgd(learning_rate=0.01)"));
  REQUIRE_OK(KVStoreBarrier(kv));

  // Row ids as a trainer sees them: random, unsorted, with repeats.
  std::mt19937_64 rng(42 + static_cast<uint64_t>(rank));
  std::uniform_int_distribution<int64_t> pick(0, rows - 1);
  std::vector<int64_t> ids(static_cast<size_t>(n_ids));
  for (int64_t& id : ids) id = pick(rng);
  KVArrayHandle row_ids = nullptr;
  REQUIRE_OK(KVArrayCreate(&n_ids, 1, KV_INT64, KV_CPU, 0, &row_ids));
  REQUIRE_OK(KVArrayCopyFromHost(row_ids, ids.data(), ids.size() * sizeof(int64_t)));
  std::vector<int64_t> unique_ids = ids;
  std::sort(unique_ids.begin(), unique_ids.end());
  unique_ids.erase(std::unique(unique_ids.begin(), unique_ids.end()), unique_ids.end());

  KVArrayHandle dense_out = Dense(rows, cols, 0.0f), dense_grad = Dense(rows, cols, 0.001f);
  KVArrayHandle rsp_out = nullptr, rsp_grad = nullptr;
  REQUIRE_OK(KVArrayCreateRowSparse(shape, 2, KV_FLOAT32, KV_CPU, 0, nullptr, 0, &rsp_out));
  REQUIRE_OK(KVArrayCreateRowSparse(shape, 2, KV_FLOAT32, KV_CPU, 0, unique_ids.data(),
                                    static_cast<int64_t>(unique_ids.size()), &rsp_grad));
  std::vector<float> grad_rows(unique_ids.size() * static_cast<size_t>(cols), 0.001f);
  REQUIRE_OK(KVArrayCopyFromHost(rsp_grad, grad_rows.data(), grad_rows.size() * sizeof(float)));

  const char* names[4] = {"dense pull", "rsp pull", "rsp push", "dense push"};
  std::vector<std::function<void()>> cells = {
      [&] {
        REQUIRE_OK(KVStorePull(kv, 1, &key, &dense_out, 0));
        REQUIRE_OK(KVArrayWaitToRead(dense_out));
      },
      [&] { REQUIRE_OK(KVStoreRowSparsePull(kv, 1, &key, &rsp_out, &row_ids, 0)); },
      [&] {
        REQUIRE_OK(KVStorePush(kv, 1, &key, &rsp_grad, 0));
        REQUIRE_OK(KVStoreWaitAll(kv));
      },
      [&] {
        REQUIRE_OK(KVStorePush(kv, 1, &key, &dense_grad, 0));
        REQUIRE_OK(KVStoreWaitAll(kv));
      },
  };
  for (auto& cell : cells) cell();  // warm-up: page faults, the optimizer's state
  std::vector<std::vector<double>> samples(cells.size());
  for (int r = 0; r < reps; ++r) {
    for (size_t c = 0; c < cells.size(); ++c) {
      if (sparse_only && (c == 0 || c == 3)) continue;
      const double t0 = Now();
      cells[c]();
      samples[c].push_back(Now() - t0);
    }
  }
  if (rank == 0) {
    std::printf("%s: table %lld x %lld float32 (%.0f MB), %lld row ids (%lld unique), %d rounds\n",
                store.c_str(), static_cast<long long>(rows), static_cast<long long>(cols),
                static_cast<double>(rows * cols * 4) / 1e6, static_cast<long long>(n_ids),
                static_cast<long long>(unique_ids.size()), reps);
    std::vector<double> med;
    for (size_t c = 0; c < cells.size(); ++c) {
      med.push_back(samples[c].empty() ? 0.0 : Median(samples[c]));
      if (samples[c].empty()) continue;
      std::printf("  %-10s  median %9.3f ms\n", names[c], med.back() * 1e3);
    }
    if (!sparse_only) {
      std::printf("ratio dense pull / rsp pull: %.1fx\n", med[0] / med[1]);
      std::printf("ratio dense pull / rsp push: %.1fx\n", med[0] / med[2]);
    }
  }
  KVArrayFree(table), KVArrayFree(row_ids), KVArrayFree(dense_out), KVArrayFree(dense_grad);
  KVArrayFree(rsp_out), KVArrayFree(rsp_grad);
  REQUIRE_OK(KVStoreFree(kv));
  return 0;
}
