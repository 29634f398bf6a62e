// call_gate.h - the count of C-ABI calls running on one handle, so that freeing a handle
// while a call on it runs is refused (KV_ERR_BUSY) instead of freeing memory in use.
//
// Protocol: every ABI function that is given a handle holds a CallGate::Scope on it for its
// whole run (nested calls from inside an updater hold their own). KVStoreFree/KVArrayFree
// first Close() the gate, which succeeds only when no call is running; from then on new
// calls are refused. The gate cannot see a call that has not entered the library yet: a
// caller that frees a handle on one thread while another thread may be about to pass it to
// a call must order the two itself (every binding keeps its own in-use count for this).
#pragma once

#include <atomic>

#include "core/error.h"

namespace kvstore {

class CallGate {
 public:
  // Holds the gate for one call; throws INVALID_ARGUMENT when the handle is being freed.
  class Scope {
   public:
    Scope(CallGate& gate, const char* what) : gate_(&gate) { gate_->Enter(what); }
    ~Scope() {
      if (gate_) gate_->Leave();
    }
    Scope(Scope&& other) noexcept : gate_(other.gate_) { other.gate_ = nullptr; }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    Scope& operator=(Scope&&) = delete;

   private:
    CallGate* gate_;
  };

  // Enter before a call uses the handle (throws INVALID_ARGUMENT when it is being freed),
  // Leave once it returned; Scope pairs them for one handle.
  void Enter(const char* what) {
    if (state_.fetch_add(kCall, std::memory_order_acquire) & kClosed) {
      state_.fetch_sub(kCall, std::memory_order_release);
      KV_FAIL(KV_ERR_INVALID_ARGUMENT, "%s is being freed", what);
    }
  }
  void Leave() { state_.fetch_sub(kCall, std::memory_order_release); }

  // The calls holding the gate now (a snapshot, for tests and diagnostics).
  unsigned calls() const { return state_.load(std::memory_order_acquire) / kCall; }

  // Marks the handle as being freed. Throws BUSY naming `what` and the number of running
  // calls when any call holds the gate (the handle is then left usable).
  void Close(const char* what) {
    unsigned expected = 0;
    if (state_.compare_exchange_strong(expected, kClosed, std::memory_order_acq_rel)) return;
    KV_CHECK(!(expected & kClosed), KV_ERR_INVALID_ARGUMENT, "%s is already being freed", what);
    KV_FAIL(KV_ERR_BUSY,
            "%s is in use by %u call(s) that have not returned (another thread, or the %s's "
            "own callback); it was not freed and stays usable",
            what, expected / kCall, what);
  }

 private:
  static constexpr unsigned kClosed = 1;
  static constexpr unsigned kCall = 2;

  std::atomic<unsigned> state_{0};  // kCall * running calls | kClosed
};

}  // namespace kvstore
