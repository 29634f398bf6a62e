// updater.h - the merge step of a push: stored <- f(key, recv, stored), and the transaction
// that keeps an updater's per-key state in step with the stored values. The built-in
// optimizers (optimizer.h) and the C callbacks (store/callback_updater.h) implement it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/array.h"

namespace kvstore {

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
};

}  // namespace kvstore
