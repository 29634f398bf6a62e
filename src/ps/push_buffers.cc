// push_buffers.cc - push payloads and the operations' references to them (push_buffers.h).
#include "ps/push_buffers.h"

#include <chrono>

#include "core/error.h"
#include "ps/clock.h"

namespace kvstore {
namespace dist {

PayloadRef& PayloadRef::operator=(PayloadRef&& o) noexcept {
  if (this != &o) {
    Reset();
    owner_ = o.owner_;
    buf_ = std::move(o.buf_);
    lender_ = o.lender_;
    o.owner_ = nullptr;
    o.lender_ = nullptr;
  }
  return *this;
}

void PayloadRef::Reset() {
  if (!buf_) return;
  const bool lent = lender_ != nullptr;
  if (lent) lender_->EndPendingRead();  // may delete a released array; its storage lives on
  lender_ = nullptr;
  buf_->in_flight.fetch_sub(1, std::memory_order_acq_rel);
  buf_.reset();
  owner_->Returned(lent);
  owner_ = nullptr;
}

void PushBuffers::Returned(bool lent) {
  std::lock_guard<std::mutex> lock(mu_);
  if (lent) --lent_;
  cv_.notify_all();
}

PayloadRef PushBuffers::Take(Array* lender, double deadline, double timeout_sec, int dtype) {
  if (dtype < 0) dtype = dtype_;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (lender != nullptr && lent_ < kMaxPayloads) {
      auto b = std::make_shared<SharedBuf>();
      b->borrowed = lender->storage();
      b->borrowed_bytes = nbytes_;
      b->in_flight.store(1, std::memory_order_release);
      lender->BeginPendingRead();
      ++lent_;
      return PayloadRef(this, std::move(b), lender);
    }
    if (lender == nullptr) {
      std::shared_ptr<SharedBuf>* other = nullptr;  // an idle buffer of the other dtype
      for (auto& b : pool_) {
        if (b->Idle() && b->array->dtype() == dtype) {
          b->in_flight.fetch_add(1, std::memory_order_acq_rel);
          return PayloadRef(this, b, nullptr);
        }
        if (b->Idle() && other == nullptr) other = &b;
      }
      if (pool_.size() < kMaxPayloads) break;
      if (other != nullptr) {
        (*other)->array = Array::Create(shape_, dtype, Context{});
        (*other)->in_flight.fetch_add(1, std::memory_order_acq_rel);
        return PayloadRef(this, *other, nullptr);
      }
    }
    KV_CHECK(NowSec() < deadline, KV_ERR_TIMEOUT,
             "push of key %s: %zu earlier pushes are still in flight after %.0f s", key_.c_str(),
             kMaxPayloads, timeout_sec);
    // ZeroMQ's release of a send buffer does not notify, hence the short timeout.
    cv_.wait_for(lock, std::chrono::milliseconds(1));
  }
  auto b = std::make_shared<SharedBuf>();
  b->array = Array::Create(shape_, dtype, Context{});
  b->in_flight.store(1, std::memory_order_release);
  pool_.push_back(b);
  return PayloadRef(this, std::move(b), nullptr);
}

}  // namespace dist
}  // namespace kvstore
