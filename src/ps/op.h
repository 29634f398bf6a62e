// op.h - the completion of a worker's operations: a control request's Waiter, a data
// operation (Op) spread over its key's parts, and the OpTracker that finishes operations
// and keeps the failure bookkeeping of pushes.
//
// Invariants.
//  - Failures belong to operations. A failed push is reported by the next WaitAll, naming
//    the push, the key and the server; it does not fail later calls on other keys. A pull
//    of a key whose latest earlier push by this worker failed fails too (it cannot contain
//    that push), until a later push of the key succeeds or a WaitAll reported the failure.
//    This holds because the operations of one key finish in the order they were queued
//    (per-key send order, one connection per server, replies in order): when a pull
//    finishes, the outcome of every earlier push of its key is known.
//  - Pending writes. Every output of an Op had BeginPendingWrite before the Op was queued,
//    and gets exactly one EndPendingWrite (with the Op's error, if any) when it finishes;
//    the Op's payload reference ends then too, before its waiter is told.
//  - WaitAll returns once every operation begun before it has finished.
//
// Threading. Begin runs on application threads, Op::CompletePart and Finish on the I/O
// thread (only there). An Op's own fields belong to the thread that holds it (its builder,
// then the I/O thread). OpTracker's mutex guards its failure list and every key's
// PushRecord, and WaitAll sleeps under it; nothing else is done under it. The count of
// operations in flight is atomic: Finish takes the mutex only when the operation failed,
// when its key has a failed push on record, or when it was the last one in flight (to wake
// WaitAll), so that the I/O thread does not contend with application threads, nor wake a
// waiter, per operation. Once WaitAll has returned, no Finish of an operation begun before
// it touches the tracker again, so the tracker may be destroyed then. A Waiter has its own
// mutex.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/array.h"
#include "ps/array_list.h"
#include "ps/key.h"
#include "ps/placement.h"
#include "ps/push_buffers.h"
#include "ps/wire.h"

namespace kvstore {
namespace dist {

struct PackedPush;  // compressed_push.h
struct PullPlan;    // compressed_pull.h

// "push", "pull", ... for error messages.
const char* OpVerb(MsgType t);

// Completion of a blocking control request (init, barrier, command, ...), counted down by
// `n` answers; values of the answers are summed.
class Waiter {
 public:
  explicit Waiter(int n) : remaining_(n) {}
  // A waiter that also keeps the payload of each successful reply, by server rank
  // (SAVE_STATES): `num_servers` slots.
  Waiter(int n, int num_servers) : remaining_(n), payloads_(static_cast<size_t>(num_servers)) {}
  // `reply` (may be null) from server `server` (-1: the scheduler).
  void Complete(int status, const std::string& msg, int64_t value = 0, int server = -1,
                const Message* reply = nullptr);
  // Throws the first error, or TIMEOUT with `what` when the deadline passes.
  int64_t Wait(double deadline_sec, const std::string& what);
  // After a successful Wait: the kept payloads, by server rank.
  std::vector<std::string> TakePayloads() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::move(payloads_);
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int remaining_;
  int status_ = 0;
  std::string msg_;
  int64_t value_ = 0;
  std::vector<std::string> payloads_;
};

// Pushes of one key and the latest failed one, which later pulls must not pretend to
// contain (failed_seq 0: none, or superseded, or reported). Guarded by OpTracker's mutex;
// failed_seq is also read without it by Finish on the I/O thread, which is the only thread
// that makes it non-zero (WaitAll only clears it), so a zero read there is current.
struct PushRecord {
  uint64_t queued = 0;
  std::atomic<uint64_t> failed_seq{0};
  int failed_code = 0;
  std::string failed_msg;
};

// The worker's record of an initialised key. Everything but `pushes` and `buffers` is
// fixed at init.
//
// Layout. Every data call reads the fields up to `buffers` for each of its keys, and over
// many keys each record is a cache miss: they come first, in the record's first two cache
// lines (the record is line-aligned), which the per-key loops load ahead (worker_calls.cc).
struct alignas(64) WorkerKey {
  uint64_t order_id = 0;  // the send queue's key
  Shape shape;
  int dtype = 0;
  int64_t size = 0;
  size_t nbytes = 0;
  std::vector<PartPlan> parts;
  std::unique_ptr<PushBuffers> buffers;  // its own lock
  KeyId id;
  PushRecord pushes;                     // OpTracker's lock
  std::string display;
};

// One user-visible operation on one key, spread over its parts.
struct Op {
  MsgType type;
  WorkerKey* key = nullptr;
  int remaining = 0;  // parts not yet accounted for
  int status = 0;
  std::string msg;
  ArrayList<Array> outs;
  std::unique_ptr<Array> staging;  // host copy when an output is not on the CPU
  PayloadRef payload;
  // A compressed push or pushpull: what its messages carry instead of `payload`, which the
  // op still holds (the key's bound on payloads in flight).
  std::shared_ptr<const PackedPush> packed;
  // A compressed pull: what each part asked for; its replies are unpacked through it.
  std::shared_ptr<PullPlan> pulled;
  std::shared_ptr<Waiter> waiter;
  // A row_sparse pull (row_sparse_worker.h): its parts' reply payloads (the rows), by server
  // rank, for the caller to read once `waiter` completed.
  bool rows = false;
  std::vector<std::string> row_replies;
  // A push, pushpull or init: its place among the key's pushes. A pull: the number of
  // pushes of the key queued before it.
  uint64_t push_seq = 0;
  uint64_t after_pushes = 0;
  int64_t begun_ns = 0;  // when Begin queued it, while profiling (core/profile.h); else 0

  // Accounts for one part: its outcome from server `dest`, and for a successful pull or
  // pushpull the server's `reply` (its values are copied into place, or adopted). Returns
  // true when that was the last part (the caller then calls OpTracker::Finish).
  bool CompletePart(const PartPlan& part, int dest, int status, const std::string& msg,
                    Message* reply);
};

// A push failure not yet cleared by a WaitAll. A failed pushpull was already reported on
// its outputs: the wait only clears its key's failed state.
struct PushFailure {
  WorkerKey* key;
  int code;
  std::string msg;
  bool reported;
};

class OpTracker {
 public:
  // An operation about to be queued: counted in flight, placed among its key's pushes.
  void Begin(Op& op);
  // Finishes an operation whose parts are all accounted for (see the invariants).
  void Finish(Op& op);
  // Waits until every operation has finished, then throws the push failures not reported
  // yet (the first one's code, every one's message up to a few) and clears them.
  void WaitAll();

 private:
  std::mutex mu_;
  std::condition_variable idle_cv_;  // notified, under mu_, when in_flight_ reaches zero
  std::atomic<int64_t> in_flight_{0};
  std::vector<PushFailure> failures_;
};

}  // namespace dist
}  // namespace kvstore
