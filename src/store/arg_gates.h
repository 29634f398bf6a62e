// arg_gates.h - a data call's array arguments held in use by the store itself, inside its
// own passes over them (Store::enters_array_gates): with many keys each array object is a
// cache miss per pass, so the gate is entered while the lookup pass has the object's line
// instead of in a pass of its own.
//
// Protocol (one list of a call: its values or its outputs):
//  1. EnterNext for arguments 0, 1, ... in order, each before the array is first read: the
//     gate refuses an array being freed (INVALID_ARGUMENT, as c_api's), and an array with
//     pending work, or a row_sparse output, is noted or refused.
//  2. Wait once the pass that entered them released its locks: for the pending work noted,
//     every entered array is waited on as c_api's Ready / ReadyToWrite would (a pending
//     error is thrown). A store never reads or writes an argument's data before Wait.
//  3. Every gate entered is left by the destructor, when the call returns or throws, last
//     argument first: a call holds its arguments for its whole run from the moment it
//     reaches them, so freeing one meanwhile is refused (BUSY, kvstore.h) even once the
//     call is done with it.
#pragma once

#include <cstddef>

#include "core/array.h"
#include "core/error.h"
#include "store/store.h"

namespace kvstore {

class ArgGates {
 public:
  // `arrays`: the call's values, or (outputs) its outputs; `what` names the C-ABI call in
  // the refusal of a row_sparse output ("pull", "pushpull").
  ArgGates(const Array* const* arrays, bool outputs, const char* what)
      : arrays_(arrays), outputs_(outputs), what_(what) {}
  ~ArgGates() {
    for (size_t i = entered_; i-- > 0;) arrays_[i]->call_gate().Leave();  // the first last
  }
  ArgGates(const ArgGates&) = delete;
  ArgGates& operator=(const ArgGates&) = delete;

  // Step 1 for the next argument (index entered()); `keys` names it in the refusal.
  void EnterNext(const KeyList& keys) {
    const Array* a = arrays_[entered_];
    a->call_gate().Enter("array");
    ++entered_;
    pending_ |= !a->quiet();
    if (outputs_ && a->is_row_sparse()) RefuseRowSparse(keys);
  }
  size_t entered() const { return entered_; }

  // Step 2.
  void Wait() {
    if (!pending_) return;
    for (size_t i = 0; i < entered_; ++i) {
      // The arguments are the caller's handles (non-const in the C ABI); waiting changes
      // only their pending-work state, never their value.
      Array* a = const_cast<Array*>(arrays_[i]);
      if (outputs_) a->WaitToWrite();
      else a->WaitPendingWrites();
    }
    pending_ = false;
  }

 private:
  [[noreturn]] void RefuseRowSparse(const KeyList& keys) const {
    const int i = static_cast<int>(entered_ - 1);
    KV_FAIL(KV_ERR_NOT_SUPPORTED,
            "%s: output %d (key %s) is row_sparse; it writes dense outputs (KVStoreRowSparsePull "
            "writes row_sparse ones)", what_, i, keys.Name(i).c_str());
  }

  const Array* const* arrays_;
  bool outputs_;
  const char* what_;
  size_t entered_ = 0;  // arguments [0, entered_) are held
  bool pending_ = false;
};

}  // namespace kvstore
