// push_buffers.h - the payloads of one key's pushes, and the reference an operation holds
// on its payload.
//
// A push's payload is either one of the key's send buffers (the caller's values are summed
// or copied into it) or, for a single large CPU value, the caller's own storage (zero-copy:
// the array gets a pending read until the operation completes, so its writers wait and
// KVArrayFree defers, and the storage stays alive until ZeroMQ releases it).
//
// Invariants.
//  - A key has at most kMaxPayloads payloads in use: send buffers that an operation or
//    ZeroMQ still references (SharedBuf::in_flight > 0), and lent arrays whose operation
//    has not completed. Take waits for one to come free, so memory stays bounded, nothing
//    is allocated per push, and a fast worker cannot pile up pushes on a server.
//  - Every payload Take hands out is held by exactly one PayloadRef; destroying or
//    resetting it ends the operation's reference (and the lender's pending read) exactly
//    once, on every path, so callers need no release in their error handling.
//
// Threading. A PushBuffers is used by any thread; it has its own mutex. A PayloadRef is
// owned by one thread at a time (an application thread, then the I/O thread); resetting it
// takes its PushBuffers' mutex and may run the lender's deferred KVArrayFree.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/array.h"
#include "ps/wire.h"

namespace kvstore {
namespace dist {

class PushBuffers;

// An operation's reference to its payload. Move-only.
class PayloadRef {
 public:
  PayloadRef() = default;
  PayloadRef(PushBuffers* owner, std::shared_ptr<SharedBuf> buf, Array* lender)
      : owner_(owner), buf_(std::move(buf)), lender_(lender) {}
  PayloadRef(PayloadRef&& o) noexcept { *this = std::move(o); }
  PayloadRef& operator=(PayloadRef&& o) noexcept;
  PayloadRef(const PayloadRef&) = delete;
  PayloadRef& operator=(const PayloadRef&) = delete;
  ~PayloadRef() { Reset(); }

  // Ends the reference now (idempotent).
  void Reset();

  explicit operator bool() const { return buf_ != nullptr; }
  // The buffer, for the messages that carry it (each takes its own ZeroMQ reference).
  const std::shared_ptr<SharedBuf>& buf() const { return buf_; }
  // The send buffer to fill (not for a lent array).
  Array* array() const { return buf_->array.get(); }

 private:
  PushBuffers* owner_ = nullptr;
  std::shared_ptr<SharedBuf> buf_;
  Array* lender_ = nullptr;  // zero-copy: the array whose pending read this ends
};

class PushBuffers {
 public:
  static constexpr size_t kMaxPayloads = 8;

  // Payloads of values of `shape` and `dtype` (`nbytes` bytes) of the key named `key`.
  PushBuffers(Shape shape, int dtype, size_t nbytes, std::string key)
      : shape_(std::move(shape)), dtype_(dtype), nbytes_(nbytes), key_(std::move(key)) {}

  // A payload: `lender`'s storage when not null, else a send buffer to fill, of the key's
  // dtype or of `dtype` when given (a float32 sum, mp_push.h; a full pool gives an idle
  // buffer of the other dtype a new array). Waits while every payload is in use; throws
  // TIMEOUT at `deadline` (`timeout_sec` names it).
  PayloadRef Take(Array* lender, double deadline, double timeout_sec, int dtype = -1);

 private:
  friend class PayloadRef;
  // PayloadRef::Reset: one lent array back (the send buffer's count is the SharedBuf's).
  void Returned(bool lent);

  const Shape shape_;
  const int dtype_;
  const size_t nbytes_;
  const std::string key_;
  std::mutex mu_;
  std::condition_variable cv_;  // a payload came back (ZeroMQ's releases do not notify)
  std::vector<std::shared_ptr<SharedBuf>> pool_;  // send buffers
  size_t lent_ = 0;  // lent arrays whose operation has not completed
};

}  // namespace dist
}  // namespace kvstore
