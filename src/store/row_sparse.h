// row_sparse.h - row_sparse values in the in-process stores: the push of a key's
// row_sparse values into its dense stored value, and the rows a row_sparse_pull asks for.
//
// The store keeps every value dense (an init with a row_sparse value is stored densified).
// A push whose values for a key are all row_sparse is summed by the union of their rows,
// in the dtype the updater receives (Updater::RecvDType), and reaches the value as follows:
//   - no updater (assign): the value becomes the sum cast to dense (rows not pushed: zero);
//   - RowSparseRecv::kAsIs (callback updaters): Update() with the row_sparse sum as recv and
//     a scratch copy of the whole value as stored;
//   - kDense: Update() with the sum cast to dense;
//   - kRows (lazy optimizers): the pushed rows of the value are gathered into a scratch
//     block, UpdateRows() updates them, and the commit scatters them back: the cost is
//     O(pushed rows * row length), no step touches the rest of the value.
// A built-in updater that leaves row_sparse_recv() at its default (kAsIs) is treated as
// kDense: only callback updaters are handed a row_sparse recv.
// Protocol (the store's all-or-nothing rule, updater.h): the caller holds the key, calls
// Prepare for every row_sparse key of the call after its dense keys were computed (every
// step that can fail: sums, allocations, the updater), and Commit for each only when all
// keys of the call succeeded, before committing the txn. Stored values must be in host
// memory (CheckHostValue, before Prepare): row_sparse arithmetic runs on the CPU.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/array.h"
#include "optimizer/updater.h"

namespace kvstore {

// How `updater` receives a row_sparse sum (see above).
RowSparseRecv RowSparseRecvOf(const Updater& updater);

// Throws NOT_SUPPORTED naming `key` unless the stored value lives in host memory.
void CheckHostValue(const Array& value, const std::string& key);

// The sorted unique rows named by the dense array `row_ids` (any shape and dtype; values
// in any order, duplicates allowed) for a value of `rows` rows. Throws INVALID_ARGUMENT
// (naming `what`) for a row_sparse `row_ids`, a non-integral value, or one outside
// [0, rows). Reads a non-CPU row_ids through a host copy.
std::vector<int64_t> UniqueRowIds(const Array& row_ids, int64_t rows, const std::string& what);

// Host memory reused by the lazy pushes of one key, so that a steady stream of pushes
// allocates (and zero-fills) nothing. Grows, never shrinks; owned by the key's entry and used
// under its lock.
class RowScratch {
 public:
  // A dense host array of `shape` and `dtype` over this memory (contents unspecified).
  std::unique_ptr<Array> View(const Shape& shape, int dtype);

 private:
  std::shared_ptr<void> block_;
  size_t bytes_ = 0;
};

// block <- the sum of `vals` (row_sparse, one dtype, one shape) over `rows` (the union of
// their rows, UnionRowIds), in `dtype`: the values' own dtype (summed as the dense comm
// sums, in the order of `vals`), or float32 for float16 values (each converted, then summed
// in float32: optimizer/recv_sum.h). `block` holds rows.size() rows in `dtype`, host memory.
// O(rows * row length * values). The dist worker sums a push's values with it too.
void SumRowsInto(const std::vector<const Array*>& vals, const std::vector<int64_t>& rows, int dtype,
                 void* block);

// One key's row_sparse push (see the protocol above). The slots belong to the store's
// entry for the key, which the caller holds locked from Prepare to Commit.
class RowSparsePush {
 public:
  RowSparsePush(std::vector<const Array*> vals, std::unique_ptr<Array>* value,
                std::unique_ptr<Array>* candidate, std::unique_ptr<Array>* merged,
                RowScratch* grad_scratch, RowScratch* weight_scratch)
      : vals_(std::move(vals)), value_(value), candidate_(candidate), merged_(merged),
        grad_scratch_(grad_scratch), weight_scratch_(weight_scratch) {}

  // Sums the values and runs `updater` (nullptr: assign) for `key` (`str_key` or nullptr),
  // staging its state in `txn`. `store` marks the updater's thread (UpdaterScope).
  void Prepare(const void* store, Updater* updater, int key, const char* str_key, UpdateTxn* txn);
  // Writes the prepared result into the stored value. Never fails.
  void Commit() noexcept;

 private:
  enum class Result { kNone, kAssign, kSwap, kRows };

  std::vector<const Array*> vals_;
  std::unique_ptr<Array>* value_;
  std::unique_ptr<Array>* candidate_;
  std::unique_ptr<Array>* merged_;
  RowScratch* grad_scratch_;
  RowScratch* weight_scratch_;
  Result result_ = Result::kNone;
  std::vector<int64_t> rows_;        // the union of the pushed rows
  std::unique_ptr<Array> sum_;       // kAssign: the row_sparse sum
  std::unique_ptr<Array> weight_;    // kRows: the updated rows, (rows_.size(), ...)
};

}  // namespace kvstore
