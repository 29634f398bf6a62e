// op.cc - completion of a worker's operations and the push failure bookkeeping (op.h).
#include "ps/op.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "core/dtype.h"
#include "core/error.h"
#include "core/profile.h"
#include "ps/clock.h"
#include "ps/compressed_pull.h"

namespace kvstore {
namespace dist {

namespace {
// An op's span, from Begin to Finish: asynchronous (the ops of the I/O thread overlap), with
// the key's bytes; its duration is the key's time waiting for the round (profile.h).
void ProfileOp(const Op& op) {
  const int64_t now = profile::NowNs();
  profile::Record('b', OpVerb(op.type), nullptr, op.begun_ns, now, op.key->display,
                  static_cast<int64_t>(op.key->nbytes));
  profile::Count(profile::Stat::kRoundWait, op.key->display, 0, now - op.begun_ns);
}
}  // namespace

const char* OpVerb(MsgType t) {
  switch (t) {
    case MsgType::kInit: return "init";
    case MsgType::kPush: return "push";
    case MsgType::kPull: return "pull";
    case MsgType::kPushPull: return "pushpull";
    default: return MsgTypeName(static_cast<uint16_t>(t));
  }
}

void Waiter::Complete(int status, const std::string& msg, int64_t value, int server,
                      const Message* reply) {
  std::lock_guard<std::mutex> lock(mu_);
  if (status == 0 && reply != nullptr && server >= 0 && static_cast<size_t>(server) < payloads_.size()) {
    payloads_[static_cast<size_t>(server)].assign(static_cast<const char*>(reply->payload.data()),
                                                  reply->payload.size());
  }
  if (status != 0 && status_ == 0) {
    status_ = status;
    msg_ = msg;
  }
  value_ += value;
  if (--remaining_ == 0) cv_.notify_all();
}

int64_t Waiter::Wait(double deadline_sec, const std::string& what) {
  std::unique_lock<std::mutex> lock(mu_);
  while (remaining_ > 0) {
    const double left = deadline_sec - NowSec();
    if (left <= 0) KV_FAIL(KV_ERR_TIMEOUT, "%s", what.c_str());
    cv_.wait_for(lock, std::chrono::duration<double>(std::min(left, 3600.0)));
  }
  if (status_ != 0) KV_FAIL(status_, "%s", msg_.c_str());
  return value_;
}

namespace {

// A whole-value reply for a single CPU output becomes the output's storage instead of
// being copied into it, unless the output's data pointer was handed out (KVArrayGetData)
// or the reply is a view of the server's shared-memory ring (copied straight into the
// output instead: wire.h Message::payload_in_ring). On refusal the payload is left in `reply`.
bool AdoptReply(Array* out, Message* reply) {
  if (!out->ctx().is_cpu() || reply->payload_in_ring) return false;
  auto holder = std::make_shared<zmq::message_t>(std::move(reply->payload));
  if (out->AdoptStorage(std::shared_ptr<void>(holder, holder->data()))) return true;
  reply->payload = std::move(*holder);
  return false;
}

}  // namespace

bool Op::CompletePart(const PartPlan& part, int dest, int st, const std::string& m,
                      Message* reply) {
  const WorkerKey& k = *key;
  const std::string refused = pulled ? pulled->Receive(k, part, st, reply) : std::string();
  if (!refused.empty()) {
    if (status == 0) {
      status = KV_ERR_PROTOCOL;
      msg = StrFormat("%s of key %s (server %d): %s", OpVerb(type), k.display.c_str(), dest, refused.c_str());
    }
  } else if (st == 0 && rows) {
    if (reply != nullptr && dest >= 0 && static_cast<size_t>(dest) < row_replies.size()) {
      row_replies[static_cast<size_t>(dest)].assign(static_cast<const char*>(reply->payload.data()),
                                                    reply->payload.size());
    }
  } else if (st == 0 && (type == MsgType::kPull || type == MsgType::kPushPull)) {
    const size_t esize = DTypeSize(k.dtype);
    const size_t want = static_cast<size_t>(part.count) * esize;
    // (A packed reply was unpacked by `pulled` above; one nobody asked for is refused.)
    if (reply == nullptr || (reply->h.flags & (kFlagTwoBit | kFlagOneBit)) != 0 ||
        reply->payload.size() != want || reply->h.offset != part.offset ||
        reply->h.count != part.count || reply->h.dtype != k.dtype) {
      status = KV_ERR_PROTOCOL;
      msg = StrFormat("%s of key %s (server %d): malformed reply", OpVerb(type), k.display.c_str(),
                      dest);
    } else if (want >= kZeroCopyMinBytes && k.parts.size() == 1 && outs.size() == 1 &&
               !staging && AdoptReply(outs[0], reply)) {
      // The received buffer became the output's storage.
    } else if (want > 0) {
      const size_t off = static_cast<size_t>(part.offset) * esize;
      if (staging) std::memcpy(static_cast<char*>(staging->data()) + off, reply->payload.data(), want);
      for (Array* out : outs) {
        if (out->ctx().is_cpu()) std::memcpy(static_cast<char*>(out->data()) + off, reply->payload.data(), want);
      }
    }
  } else if (st != 0 && status == 0) {
    status = st;
    msg = StrFormat("%s of key %s (server %d): %s", OpVerb(type), k.display.c_str(), dest,
                    m.empty() ? "failed" : m.c_str());
  }
  return --remaining == 0;
}

void OpTracker::Begin(Op& op) {
  std::lock_guard<std::mutex> lock(mu_);
  in_flight_.fetch_add(1, std::memory_order_relaxed);
  PushRecord& p = op.key->pushes;
  if (op.type == MsgType::kPush || op.type == MsgType::kPushPull) op.push_seq = ++p.queued;
  op.after_pushes = p.queued;
  if (profile::On()) op.begun_ns = profile::NowNs();
}

void OpTracker::Finish(Op& op) {
  if (op.begun_ns != 0) ProfileOp(op);
  if (op.status == 0 && op.staging) {
    for (Array* out : op.outs) {
      if (out->ctx().is_cpu()) continue;
      try {
        std::unique_ptr<Array> shaped = Array::Create(out->shape(), out->dtype(), Context{});
        std::memcpy(shaped->data(), op.staging->data(), op.staging->nbytes());
        CopyArray(out, *shaped);
      } catch (const Error& e) {
        op.status = e.code();
        op.msg = e.what();
      }
    }
  }
  // The push ordering rule (op.h): every earlier push of the key has finished. A successful
  // operation of a key with no failed push on record changes nothing (the common case: no
  // lock).
  PushRecord& p = op.key->pushes;
  if (op.status != 0 || p.failed_seq.load(std::memory_order_relaxed) != 0) {
    std::lock_guard<std::mutex> lock(mu_);
    const uint64_t failed = p.failed_seq.load(std::memory_order_relaxed);
    if (op.push_seq != 0 && op.status != 0) {
      p.failed_seq.store(op.push_seq, std::memory_order_relaxed);
      p.failed_code = op.status;
      p.failed_msg = op.msg;
      failures_.push_back({op.key, op.status, op.msg, op.type != MsgType::kPush});
    } else if (op.push_seq != 0 && op.push_seq > failed) {
      p.failed_seq.store(0, std::memory_order_relaxed);
    } else if (op.type == MsgType::kPull && op.status == 0 && failed != 0 &&
               failed <= op.after_pushes) {
      op.status = p.failed_code;
      op.msg = StrFormat("pull of key %s follows a failed push of the key: %s",
                         op.key->display.c_str(), p.failed_msg.c_str());
    }
  }
  for (Array* out : op.outs) out->EndPendingWrite(op.status, op.msg);
  op.payload.Reset();
  if (op.waiter) op.waiter->Complete(op.status, op.msg);
  // The release orders everything above before WaitAll's acquiring read of zero (the
  // decrements form one release sequence). Above one, the count drops without the mutex.
  // The decrement that may reach zero is made under the mutex, and wakes WaitAll there:
  // WaitAll reads the count only under the mutex, so it cannot see zero (and return, and
  // let the tracker be destroyed) before this call is done with the tracker, and a waiter
  // that read a non-zero count is asleep by then, not between its read and its sleep.
  // Begin, the only other writer, increments under the mutex.
  int64_t n = in_flight_.load(std::memory_order_relaxed);
  while (n > 1 && !in_flight_.compare_exchange_weak(n, n - 1, std::memory_order_acq_rel,
                                                    std::memory_order_relaxed)) {
  }
  if (n > 1) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (in_flight_.fetch_sub(1, std::memory_order_acq_rel) == 1) idle_cv_.notify_all();
}

void OpTracker::WaitAll() {
  std::vector<PushFailure> failures;
  {
    std::unique_lock<std::mutex> lock(mu_);
    idle_cv_.wait(lock, [&] { return in_flight_.load(std::memory_order_acquire) == 0; });
    for (PushFailure& f : failures_) {
      f.key->pushes.failed_seq.store(0, std::memory_order_relaxed);
      if (!f.reported) failures.push_back(std::move(f));
    }
    failures_.clear();
  }
  if (failures.empty()) return;
  constexpr size_t kListed = 4;
  std::string msg =
      failures.size() == 1 ? std::string() : StrFormat("%zu pushes failed: ", failures.size());
  for (size_t i = 0; i < failures.size() && i < kListed; ++i) {
    msg += (i > 0 ? "; " : "") + failures[i].msg;
  }
  if (failures.size() > kListed) msg += StrFormat("; and %zu more", failures.size() - kListed);
  KV_FAIL(failures[0].code, "%s", msg.c_str());
}

}  // namespace dist
}  // namespace kvstore
