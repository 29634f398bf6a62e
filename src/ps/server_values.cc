// server_values.cc - how a server's stored values change: sync rounds (Progress, RunRound),
// async pushes (ApplyAsync), both through StoreNewValue, and the failure of rounds that
// cannot complete (a dead worker, the timeout). The design is in server.h.
//
// Invariant. A key's stored value is replaced only by StoreNewValue, and only once the new
// value is complete: a failing updater (or allocation) leaves the stored value as it was
// and fails the requests that asked for the change.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/cpu/kernels.h"
#include "core/dtype.h"
#include "core/profile.h"
#include "optimizer/recv_sum.h"
#include "ps/clock.h"
#include "ps/log.h"
#include "ps/mp_push.h"
#include "ps/node_table.h"
#include "ps/server.h"

namespace kvstore {
namespace dist {
namespace server {

// A request's span from its arrival to the end of its round: asynchronous (a round's requests
// overlap), and the key's time waiting for the round (core/profile.h).
static void ProfileRoundWait(const Req& r, const KeyState& k) {
  const int64_t now = profile::NowNs(), arrived = static_cast<int64_t>(r.arrived * 1e9);
  profile::Record('b', "round wait", MsgTypeName(static_cast<uint16_t>(r.type)), arrived, now, k.display,
                  k.count * static_cast<int64_t>(DTypeSize(k.dtype)));
  profile::Count(profile::Stat::kRoundWait, k.display, 0, now - arrived);
}

// The lists a round builds over its sources, kept from round to round by the server thread
// (which runs one round at a time) so that a round allocates nothing once they have grown to
// the job's worker count: `aligned` keeps its first `used` buffers for this round's copies.
struct RoundScratch {
  std::vector<const void*> srcs;
  std::vector<int> dtypes;
  std::vector<std::vector<double>> aligned;
  size_t used = 0;
  std::vector<compression::Compression::Source> packed_srcs;
};

static RoundScratch& TakeRoundScratch() {
  static thread_local RoundScratch s;
  s.srcs.clear();
  s.dtypes.clear();
  s.used = 0;
  s.packed_srcs.clear();
  return s;
}

// Answers pulls at the heads of the FIFOs and runs rounds while every FIFO has a push at
// its head.
void Server::Progress(KeyState* k) {
  for (;;) {
    bool all_push = true;
    for (auto& q : k->fifo) {
      while (!q.empty() && q.front().type == MsgType::kPull) {
        ReplyReq(q.front(), 0, "", k);
        q.pop_front();
      }
      if (q.empty()) all_push = false;
    }
    if (!all_push) {
      TrackRound(k);
      return;
    }
    RunRound(k);
  }
}

// Files `k` in round_starts_ by the arrival of the oldest push heading one of its FIFOs, or
// takes it out when none does. Every change of a key's FIFOs ends in Progress, which calls
// this.
void Server::TrackRound(KeyState* k) {
  double first = -1;
  for (const auto& q : k->fifo) {
    if (q.empty() || q.front().type == MsgType::kPull) continue;
    if (first < 0 || q.front().arrived < first) first = q.front().arrived;
  }
  round_starts_.Set(k, first);
}

// Whether a received payload may become a stored value as it is. Small messages may live
// inside a ZeroMQ receive chunk shared with other messages (keeping one would pin the whole
// chunk) and at any byte offset; they are copied into an array of the key instead. (The
// same rule as Array::AdoptStorage: large, and aligned for the dtype.) A compressed push's
// payload is not the key's size and is never adopted, nor is a view of a worker's ring
// (StoreNewValue's caller says so).
bool Server::Adoptable(const KeyState& k, const zmq::message_t& payload) {
  return payload.size() >= kZeroCopyMinBytes &&
         payload.size() == static_cast<size_t>(k.count) * DTypeSize(k.dtype) &&
         reinterpret_cast<uintptr_t>(payload.data()) % DTypeSize(k.dtype) == 0;
}

std::shared_ptr<SharedBuf> Server::TakeTarget(KeyState* k) {
  std::shared_ptr<SharedBuf> t;
  // (A row_sparse update may leave a (rows, row_len) array as the value: not reused here,
  // dense updaters get {count} arrays.)
  if (k->spare && k->spare->array && k->spare->Idle() && k->spare->array->shape().size() == 1) {
    t = std::move(k->spare);
  } else {
    t = std::make_shared<SharedBuf>();
    t->array = Array::Create({k->count}, k->dtype, Context{});
  }
  k->spare.reset();
  return t;
}

Updater* Server::UpdaterOf(const KeyState& k) const {
  return (k.is_str && hooks_->str_updater) ? hooks_->str_updater.get() : hooks_->updater.get();
}

void Server::Update(KeyState* k, Array* recv, Array* target) {
  Updater* u = UpdaterOf(*k);
  // The optimizer state is committed with the value: once Update returns, StoreNewValue
  // only moves `target` into place, which cannot fail. A throw discards it.
  UpdateTxn txn;
  KV_PROFILE_SCOPE("apply", k->display, static_cast<int64_t>(recv->nbytes()), profile::Stat::kApply);
  u->Update(k->updater_id, k->is_str ? k->name.c_str() : nullptr, recv, target, &txn);
  txn.Commit();
}

// Replaces the stored value of `k` with the result of a round or an async push.
// `combine(dst, dst_dtype)` writes the pushed values (a round's sum, or the one push) to
// dst, which may be the bytes of `incoming` itself (then only what is not already there).
// Without an updater that is the new value, in the key's dtype: accumulated in `incoming`
// (a round's first push, or the async push), which is adopted without a copy when
// Adoptable and not a view of a worker's ring (`incoming_in_ring`), else in a spare array
// of the key (a push in a ring is read there once, into memory that is reused: no copy out
// of the ring first, no fresh pages per round). With an updater it goes to k->merged, in
// the dtype the updater receives (RecvDType: float32 for float16 keys under
// multi_precision, where combine converts each push and sums in float32), and the updater
// turns a copy of the stored value into the new one. Throws what Array::Create and the
// updater throw; the stored value is then unchanged.
template <typename Combine>
void Server::StoreNewValue(KeyState* k, zmq::message_t& incoming, bool incoming_in_ring, Combine&& combine) {
  Updater* updater = UpdaterOf(*k);
  std::shared_ptr<SharedBuf> target;
  if (!updater && !incoming_in_ring && Adoptable(*k, incoming)) {
    combine(incoming.data(), k->dtype);
    target = std::make_shared<SharedBuf>();
    target->msg = std::move(incoming);
  } else if (!updater) {
    target = TakeTarget(k);
    combine(target->array->data(), k->dtype);
  } else {
    const int recv_dtype = updater->RecvDType(k->dtype);
    KV_CHECK(recv_dtype == k->dtype || (recv_dtype == KV_FLOAT32 && k->dtype == KV_FLOAT16),
             KV_ERR_INTERNAL, "key %s: the updater asks for %s sums of %s values",
             k->display.c_str(), DTypeName(recv_dtype), DTypeName(k->dtype));
    target = TakeTarget(k);
    if (!k->merged || k->merged->dtype() != recv_dtype) {
      k->merged = Array::Create({k->count}, recv_dtype, Context{});
    }
    combine(k->merged->data(), recv_dtype);
    CopyBytes(target->array->data(), k->stored->data(), k->stored->size());
    Update(k, k->merged.get(), target->array.get());
  }
  if (k->stored->array) k->spare = std::move(k->stored);
  k->stored = std::move(target);
}

// The status and *msg of a StoreNewValue that threw `e`. Rounds keep the code of a library
// error (`keep_code`) except INVALID_ARGUMENT; everything else is CALLBACK.
int Server::UpdateFailure(const KeyState& k, const std::exception& e, bool keep_code,
                          std::string* msg) const {
  *msg = StrFormat("key %s: the updater on server %d failed: %s", k.display.c_str(), rank_, e.what());
  const auto* err = dynamic_cast<const Error*>(&e);
  if (keep_code && err != nullptr && err->code() != KV_ERR_INVALID_ARGUMENT) return err->code();
  return KV_ERR_CALLBACK;
}

void Server::RunRound(KeyState* k) {
  if (RowSparseRound(k)) return;
  // Sources in rank order 0..W-1; CpuReduceSum adds them in exactly that order, so the
  // round's bits do not depend on arrival order. ZeroMQ may deliver small messages inside
  // its receive buffer at any byte offset; such payloads are copied to aligned scratch
  // before they are read as elements.
  RoundScratch& scratch = TakeRoundScratch();
  std::vector<const void*>& srcs = scratch.srcs;
  std::vector<int>& dtypes = scratch.dtypes;  // float32 for a worker's float32 sum (mp_push.h)
  bool mixed = false;
  // A round with a compressed push is summed by Compression::Sum (float32, rank order).
  std::vector<compression::Compression::Source>& packed_srcs = scratch.packed_srcs;
  bool any_packed = false;
  for (auto& q : k->fifo) {
    const zmq::message_t& p = q.front().payload;
    mixed |= q.front().f32_sum;
    dtypes.push_back(q.front().f32_sum ? KV_FLOAT32 : k->dtype);
    if (reinterpret_cast<uintptr_t>(p.data()) % DTypeSize(dtypes.back()) == 0) {
      srcs.push_back(p.data());
    } else {
      if (scratch.used == scratch.aligned.size()) scratch.aligned.emplace_back();
      std::vector<double>& a = scratch.aligned[scratch.used++];
      a.resize((p.size() + sizeof(double) - 1) / sizeof(double));
      CopyBytes(a.data(), p.data(), p.size());
      srcs.push_back(a.data());
    }
    const auto& packing = q.front().packing;
    packed_srcs.push_back({srcs.back(), packing ? &*packing : nullptr, dtypes.back()});
    any_packed |= packing.has_value();
  }
  zmq::message_t& first = k->fifo[0].front().payload;
  const bool first_in_ring = k->fifo[0].front().in_ring;
  const int num_srcs = static_cast<int>(srcs.size());
  // In place in worker 0's message (srcs[0]), one worker's push is already its own sum.
  // A multi-precision updater gets the float32 sum of the converted pushes instead.
  auto sum = [&](void* dst, int dst_dtype) {
    KV_PROFILE_SCOPE("reduce", k->display, k->count * static_cast<int64_t>(DTypeSize(k->dtype)), profile::Stat::kReduce);
    if (any_packed) {
      compression::Compression::Sum(packed_srcs.data(), num_srcs, k->count, k->dtype, dst, dst_dtype);
    } else if (mixed) {
      SumMixedRound(srcs, dtypes, dst, dst_dtype, k->count);
    } else if (dst_dtype != k->dtype) {
      optimizer::SumToFloat32(srcs.data(), num_srcs, k->dtype, static_cast<float*>(dst), k->count);
    } else if (num_srcs == 1 && dst != first.data()) {
      // One worker's push read from its ring (StoreNewValue): a copy, on this thread (the
      // pool's threads would compete with the worker's own copies on a small host).
      CopyBytes(dst, srcs[0], static_cast<size_t>(k->count) * DTypeSize(k->dtype));
    } else if (num_srcs > 1) {
      CpuReduceSum(srcs.data(), num_srcs, dst, k->count, k->dtype);
    }
  };
  int status = 0;
  std::string msg;
  try {
    StoreNewValue(k, first, first_in_ring, sum);
  } catch (const std::exception& e) {
    status = UpdateFailure(*k, e, true, &msg);
  }
  for (auto& q : k->fifo) {
    const Req& r = q.front();
    if (profile::On()) ProfileRoundWait(r, *k);
    ReplyReq(r, status, msg, r.type == MsgType::kPushPull ? k : nullptr);
    q.pop_front();
  }
}

// Documented default: with no updater an async server assigns the pushed value (adopting
// the received message when it can, see StoreNewValue).
void Server::ApplyAsync(KeyState* k, Req& r) {
  if (r.row_sparse) return ApplyRowsAsync(k, r);
  auto copy = [&](void* dst, int dst_dtype) {
    if (r.f32_sum) {  // a worker's float32 sum, taken only by a multi-precision updater
      KV_CHECK(dst_dtype == KV_FLOAT32, KV_ERR_INTERNAL, "key %s: a float32 sum for a %s sum",
               k->display.c_str(), DTypeName(dst_dtype));
      CopyBytes(dst, r.payload.data(), r.payload.size());
    } else if (r.packing) {  // compressed: dequantised (Compression::Sum of one push)
      const compression::Compression::Source s{r.payload.data(), &*r.packing};
      compression::Compression::Sum(&s, 1, k->count, k->dtype, dst, dst_dtype);
    } else if (dst_dtype != k->dtype) {  // multi-precision: the push converted to float32
      // ZeroMQ may hand over a small payload at any byte offset (see RunRound).
      std::vector<uint16_t> aligned;
      const void* src = r.payload.data();
      if (reinterpret_cast<uintptr_t>(src) % DTypeSize(k->dtype) != 0) {
        aligned.resize(r.payload.size() / sizeof(uint16_t));
        CopyBytes(aligned.data(), src, r.payload.size());
        src = aligned.data();
      }
      optimizer::SumToFloat32(&src, 1, k->dtype, static_cast<float*>(dst), k->count);
    } else if (dst != r.payload.data()) {
      CopyBytes(dst, r.payload.data(), r.payload.size());
    }
  };
  int status = 0;
  std::string msg;
  try {
    StoreNewValue(k, r.payload, r.in_ring, copy);
  } catch (const std::exception& e) {
    status = UpdateFailure(*k, e, false, &msg);
  }
  ReplyReq(r, status, msg, r.type == MsgType::kPushPull ? k : nullptr);
}

// "missing: worker 2, worker 3; pushed: worker 0, worker 1" for the current round.
std::string Server::MissingRanks(const KeyState& k) const {
  std::string missing, have;
  for (int w = 0; w < num_workers_; ++w) {
    const auto& q = k.fifo[static_cast<size_t>(w)];
    const bool pushed = !q.empty() && q.front().type != MsgType::kPull;
    std::string& l = pushed ? have : missing;
    l += (l.empty() ? "" : ", ") + NodeName(Role::kWorker, w);
  }
  return "missing: " + (missing.empty() ? std::string("none") : missing) +
         "; pushed: " + (have.empty() ? std::string("none") : have);
}

void Server::FailQueuedPushes(KeyState* k, int code, const std::string& why) {
  const std::string detail = why + " (" + MissingRanks(*k) + ")";
  // A pull queued behind a failed push fails too: it was ordered after that push and must
  // not return a value that silently lacks it.
  for (auto& q : k->fifo) {
    bool failed_before = false;
    for (auto& r : q) {
      if (r.type != MsgType::kPull) failed_before = true;
      ReplyReq(r, code,
               failed_before && r.type == MsgType::kPull
                   ? "pull ordered after a failed push: " + detail
                   : detail,
               nullptr);
    }
    q.clear();
  }
  Progress(k);
}

// A worker died (`reason` from the scheduler): in sync mode no round can complete any more,
// and every queued push fails.
void Server::FailRounds(int dead_worker, const std::string& reason) {
  if (mode_ != 1) return;
  // Every key with a parked request, found by one pass over the table (a death is rare; a
  // set of such keys would cost a node per parked request).
  keys_.ForEach([&](KeyState& k) {
    bool any = false;
    for (const auto& q : k.fifo) any |= !q.empty();
    if (!any) return;
    FailQueuedPushes(&k, KV_ERR_PEER_DEAD,
                     StrFormat("worker %d died (%s); the sync round of key %s cannot complete",
                               dead_worker, reason.c_str(), k.display.c_str()));
  });
}

void Server::CheckRoundTimeouts() {
  if (cfg_.timeout_sec <= 0) return;
  const double now = NowSec();
  // FailQueuedPushes empties the key's FIFOs, which takes it out of round_starts_.
  for (KeyState* k; (k = round_starts_.Oldest()) != nullptr && now - k->round_since > cfg_.timeout_sec;) {
    Log("sync round of key %s timed out: %s", k->display.c_str(), MissingRanks(*k).c_str());
    FailQueuedPushes(k, KV_ERR_TIMEOUT,
                     StrFormat("the sync round of key %s on server %d timed out after %.0f s",
                               k->display.c_str(), rank_, cfg_.timeout_sec));
  }
}

}  // namespace server
}  // namespace dist
}  // namespace kvstore
