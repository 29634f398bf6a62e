// updater.h - the merge step of a push: stored <- f(key, recv, stored), and the transaction
// that keeps an updater's per-key state in step with the stored values. The built-in
// optimizers (optimizer.h) and the C callbacks (store/callback_updater.h) implement it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/array.h"
#include "core/error.h"

namespace kvstore {

// How an updater wants the sum of row_sparse pushes to a key whose stored value is dense
// (Updater::row_sparse_recv).
enum class RowSparseRecv {
  kAsIs,   // Update() with recv row_sparse and the whole stored value (the default:
           //   callback updaters; C/binding updaters see a row_sparse recv array)
  kDense,  // Update() with recv cast to dense (zero rows where nothing was pushed)
  kRows,   // UpdateRows(): only the pushed rows change (lazy update)
};

// The per-key state that the updates of one call change, held back until the call commits.
// A caller runs the updater of each key on a scratch copy of the stored value and swaps the
// copies in only when every key of the call succeeded; an updater that keeps per-key state
// (the built-in optimizers) stages that state here the same way, so that stored values and
// state change together or not at all. Protocol, for the caller:
//   1. take its reference to the updater, then create one UpdateTxn for the call (the
//      staged entries live in the updater, so the txn must end first);
//   2. run Update(..., &txn) for each key, holding the key so that no other call updates it
//      before step 3 (a key is staged at most once per txn);
//   3. after the last step that can fail, commit the stored values and call Commit(). A txn
//      destroyed without Commit() discards what was staged: the state stays as it was.
class UpdateTxn {
 public:
  // One key's staged state, implemented by the updater that keeps it.
  class Staged {
   public:
    virtual void Commit() noexcept = 0;
    virtual void Discard() noexcept = 0;

   protected:
    ~Staged() = default;
  };

  UpdateTxn() = default;
  UpdateTxn(const UpdateTxn&) = delete;
  UpdateTxn& operator=(const UpdateTxn&) = delete;
  ~UpdateTxn() {
    for (Staged* s : staged_) s->Discard();
  }

  // Called by an updater before it stages `s`; may throw std::bad_alloc (nothing is staged
  // then). Discarding an entry that was added but never staged is harmless.
  void Add(Staged* s) { staged_.push_back(s); }
  // Makes every staged state current. Never fails.
  void Commit() noexcept {
    for (Staged* s : staged_) s->Commit();
    staged_.clear();
  }

 private:
  std::vector<Staged*> staged_;
};

class Updater {
 public:
  virtual ~Updater() = default;
  // Merges `recv` into `stored` in place. `str_key` is the string key or nullptr for int
  // keys; `key` is the int key or the internal id of the string key. Throws kvstore::Error
  // on failure; `stored` may then be partly written, so callers run it on a scratch copy.
  // State the updater keeps for the key is not changed here: the new state is staged in
  // `txn` and becomes current when the caller commits it (see UpdateTxn).
  virtual void Update(int key, const char* str_key, Array* recv, Array* stored,
                      UpdateTxn* txn) = 0;
  // Throws (naming `key`) when this updater can never update a value of `dtype`. A
  // distributed worker asks before a push leaves it, so that a call mixing accepted and
  // refused keys changes nothing on any server.
  virtual void CheckDType(int dtype, const std::string& key) const {
    (void)dtype;
    (void)key;
  }
  // The dtype in which Update wants `recv` for a stored value of `dtype`: `dtype` itself
  // (the default), or KV_FLOAT32 for float16 values under a multi-precision optimizer. When
  // it differs from `dtype`, the caller forms `recv` by converting each pushed value to
  // this dtype and summing the converted values in it, in push order (SumToFloat32 in
  // optimizer/recv_sum.h), never by converting a sum already rounded to `dtype`. Constant
  // for the updater's lifetime; never throws.
  virtual int RecvDType(int dtype) const { return dtype; }

  // How Update wants the sum of row_sparse pushes for a dense stored value. Constant for
  // the updater's lifetime; never throws.
  virtual RowSparseRecv row_sparse_recv() const { return RowSparseRecv::kAsIs; }

  // The lazy update of rows row_ids[0..n) (sorted, unique, each < rows) of a dense stored
  // value whose shape is `shape` (rows = shape[0]; row_len = product of shape[1:]):
  // `grad` is the dense (n, row_len...) block of the summed pushed rows in
  // RecvDType(dtype); `weight` is a dense scratch block of the same rows of the stored value
  // (n, row_len...) gathered by the caller, updated in place. Per-key state changes only in
  // these rows and is staged in `txn` like Update's (committed or discarded with it; a key
  // is staged at most once per txn, by Update or UpdateRows); the cost is O(n * row_len),
  // never O(rows * row_len). Throws like Update (the caller then discards the scratch
  // block). Called only when row_sparse_recv() returns kRows.
  virtual void UpdateRows(int key, const char* str_key, const Shape& shape,
                          const int64_t* row_ids, int64_t n, const Array& grad,
                          Array* weight, UpdateTxn* txn) {
    (void)str_key;
    (void)shape;
    (void)row_ids;
    (void)n;
    (void)grad;
    (void)weight;
    (void)txn;
    KV_FAIL(KV_ERR_INTERNAL,
            "UpdateRows called on key %d of an updater whose row_sparse_recv() is not kRows",
            key);
  }
};

}  // namespace kvstore
