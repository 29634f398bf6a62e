// optimizer.h - built-in optimizers usable as updaters, created from a spec string such as
// "sgd(learning_rate=0.1,momentum=0.9,wd=1e-4,rescale_grad=0.5,clip_gradient=5)".
#pragma once

#include <memory>
#include <string>

#include "optimizer/updater.h"

namespace kvstore {

// Parses `spec` and returns an updater that keeps per-key optimizer state. Throws
// INVALID_ARGUMENT naming the unknown optimizer or parameter (and listing the valid ones).
std::shared_ptr<Updater> CreateOptimizer(const std::string& spec);

// A spec checked as CreateOptimizer checks it, with no optimizer and no state behind it: what
// a distributed worker keeps to vet a spec before shipping it to the servers, and the dtypes
// of pushes before they leave.
class OptimizerSpec {
 public:
  // Throws exactly the error (code and message) CreateOptimizer throws for `spec`.
  explicit OptimizerSpec(const std::string& spec);
  // Throws NOT_SUPPORTED naming `key` when the optimizer can never update a value of
  // `dtype`: the rule of CreateOptimizer(spec)->CheckDType.
  void CheckDType(int dtype, const std::string& key) const;
  // CreateOptimizer(spec)->row_sparse_recv(): kRows for sgd and adam with lazy_update=1
  // (their default), kDense otherwise.
  RowSparseRecv row_sparse_recv() const {
    return lazy_rows_ ? RowSparseRecv::kRows : RowSparseRecv::kDense;
  }

 private:
  const char* name_;       // static storage (the optimizer table)
  bool updates_integers_;  // only test with rescale_grad=1 adds integers exactly
  bool lazy_rows_;         // row_sparse sums update only their rows (UpdateRows)
};

}  // namespace kvstore
