// bench_lazy_update.cc - the optimizer's lazy update (Updater::UpdateRows) of a few rows of
// an embedding table against its dense update (Updater::Update) of the whole table.
//
// The table is R x D float32 (default the 1,000,000 x 64); each round pushes a
// row_sparse gradient of a fraction of the rows (default 1%, spread evenly, other rows each
// round). Measured, per
// optimizer (sgd with momentum, adam), median of several rounds:
//   dense:  Update of the whole table with a dense gradient, in place on the stored value
//           (what lazy_update=0 costs: every row and every state row is read and written);
//   lazy:   what a store does for a lazy update: gather the pushed rows of the table into a
//           scratch block, UpdateRows, commit, scatter the block back (and, in brackets,
//           the optimizer's part alone: UpdateRows and the commit of the staged rows).
// The lazy update must cost in proportion to the rows pushed: the ratio dense/lazy should
// approach the inverse of the fraction (100x at 1%), less what scattered rows cost over a
// stream (each pushed row is a cache miss in the weight and in each state array, where the
// dense update streams at memory bandwidth). The machine is shared and noisy: compare
// ratios from one run, not absolutes across runs.
//
// Usage: bench_lazy_update [--rows R] [--dim D] [--fraction F] [--rounds N]
//                          [--only dense|lazy]   (time one side only, for a profiler)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/array.h"
#include "optimizer/optimizer.h"
#include "../common/timing.h"

namespace {

using bench::Median;
using bench::Now;

using kvstore::Array;
using kvstore::Shape;
using kvstore::UpdateTxn;

struct Options {
  int64_t rows = 1000000;
  int64_t dim = 64;
  double fraction = 0.01;
  int rounds = 7;
  std::string only;  // "dense" or "lazy": time only that one (for a profiler)
};

Options Parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--rows") o.rows = std::atoll(argv[i + 1]);
    else if (flag == "--dim") o.dim = std::atoll(argv[i + 1]);
    else if (flag == "--fraction") o.fraction = std::atof(argv[i + 1]);
    else if (flag == "--rounds") o.rounds = std::atoi(argv[i + 1]);
    else if (flag == "--only") o.only = argv[i + 1];
    else {
      std::fprintf(stderr, "unknown flag %s\n", argv[i]);
      std::exit(2);
    }
  }
  return o;
}

void Fill(Array* a, float scale) {
  float* p = static_cast<float*>(a->data());
  for (int64_t i = 0; i < a->size(); ++i) p[i] = scale * static_cast<float>(i % 1000) - 0.5f;
}

void BenchOne(const char* spec, const Options& o) {
  const Shape shape = {o.rows, o.dim};
  const kvstore::Context host;
  std::unique_ptr<Array> table = Array::Create(shape, KV_FLOAT32, host);
  std::unique_ptr<Array> dense_grad = Array::Create(shape, KV_FLOAT32, host);
  Fill(table.get(), 1e-3f);
  Fill(dense_grad.get(), 1e-4f);
  const int64_t n = std::max<int64_t>(1, static_cast<int64_t>(o.rows * o.fraction));
  std::vector<int64_t> ids(static_cast<size_t>(n));
  const int64_t stride = o.rows / n;
  const Shape block_shape = {n, o.dim};
  std::unique_ptr<Array> block = Array::Create(block_shape, KV_FLOAT32, host);
  std::unique_ptr<Array> grad = Array::Create(block_shape, KV_FLOAT32, host);
  Fill(grad.get(), 1e-4f);

  std::shared_ptr<kvstore::Updater> dense = kvstore::CreateOptimizer(spec);
  std::shared_ptr<kvstore::Updater> lazy = kvstore::CreateOptimizer(spec);
  // First updates create the state (zero-filled, full size, once): not timed.
  for (kvstore::Updater* u : {dense.get(), lazy.get()}) {
    UpdateTxn txn;
    u->Update(0, nullptr, dense_grad.get(), table.get(), &txn);
    txn.Commit();
  }
  const size_t row_bytes = static_cast<size_t>(o.dim) * sizeof(float);
  std::vector<double> t_dense, t_lazy, t_rows;
  for (int r = 0; r < o.rounds; ++r) {
    // Other rows each round, as training pushes: the rows touched are not in cache.
    for (int64_t j = 0; j < n; ++j) ids[j] = j * stride + (r * 37) % stride;
    double t0 = Now();
    if (o.only != "lazy") {
      UpdateTxn txn;
      dense->Update(0, nullptr, dense_grad.get(), table.get(), &txn);
      txn.Commit();
    }
    t_dense.push_back(Now() - t0);
    t0 = Now();
    if (o.only != "dense") {
      uint8_t* w = static_cast<uint8_t*>(table->data());
      uint8_t* b = static_cast<uint8_t*>(block->data());
      for (int64_t j = 0; j < n; ++j) {
        std::memcpy(b + j * row_bytes, w + ids[j] * row_bytes, row_bytes);
      }
      const double t1 = Now();
      UpdateTxn txn;
      lazy->UpdateRows(0, nullptr, shape, ids.data(), n, *grad, block.get(), &txn);
      txn.Commit();
      t_rows.push_back(Now() - t1);
      for (int64_t j = 0; j < n; ++j) {
        std::memcpy(w + ids[j] * row_bytes, b + j * row_bytes, row_bytes);
      }
    }
    t_lazy.push_back(Now() - t0);
  }
  const double d = Median(t_dense), l = Median(t_lazy), u = Median(t_rows);
  std::printf("%-32s table %lld x %lld, %lld rows pushed: dense %9.3f ms, lazy %8.3f ms "
              "(UpdateRows + commit %8.3f ms), dense/lazy %6.1fx\n", spec,
              static_cast<long long>(o.rows), static_cast<long long>(o.dim),
              static_cast<long long>(n), d * 1e3, l * 1e3, u * 1e3, d / l);
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = Parse(argc, argv);
  for (const char* spec : {"sgd(lr=0.1,momentum=0.9,wd=1e-4)", "adam(lr=0.001,wd=1e-4)"}) {
    BenchOne(spec, o);
  }
  return 0;
}
