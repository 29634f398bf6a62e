// compressed_reduce.h - gradient compression in the device store: each pushed value is
// quantised with its own residual and dequantised before the sum (the reference's
// CommDevice::ReduceCompressed, with a per-device residual).
//
// Invariants.
//  - A residual belongs to one (key, position of the value among the key's values in a push)
//    pair: position j of every push of the key uses the j-th residual, so a worker that
//    pushes one value per device in a fixed device order gets the reference's per-device
//    error feedback. Residuals start at zero and live until the setting is replaced.
//  - A setting is immutable once installed; Set replaces the whole State (a fresh one with no
//    residuals, or none), so a push that took the old State finishes with it and the new
//    setting never sees the old residuals.
//
// Threading. Set and Current may run on any thread (a mutex guards the pointer). A State's
// residual of a key is only touched by a push holding that key's entry lock; the State's own
// mutex guards only its residual map's structure.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "compression/compression.h"
#include "core/array.h"

namespace kvstore {

class GradientCompression {
 public:
  class State {
   public:
    explicit State(const compression::Compression& c) : c_(c) {}
    const compression::Compression& compression() const { return c_; }
    // dst (the key's shape; float32, or the values' dtype) <- the float32 sum, in the order
    // of `vals`, of each value quantised with residual (key, position) and dequantised,
    // rounded once to dst's dtype (compression.h, Compression::Sum). `key` identifies the
    // key (stable for the store's life); the caller holds its lock. vals share shape and a
    // dtype that Compresses(); they may live on any device.
    void Reduce(const void* key, const std::vector<const Array*>& vals, Array* dst);

   private:
    std::vector<float>* Residual(const void* key, int position, int64_t n);

    const compression::Compression c_;
    std::mutex mu_;  // guards the structure of residuals_ (not the vectors' contents)
    std::map<std::pair<const void*, int>, std::vector<float>> residuals_;
  };

  void Set(const std::optional<compression::Compression>& c) {
    std::shared_ptr<State> fresh = c ? std::make_shared<State>(*c) : nullptr;
    std::lock_guard<std::mutex> lock(mu_);
    state_.swap(fresh);
  }
  // The setting a push runs with, or nullptr (no compression).
  std::shared_ptr<State> Current() const {
    std::lock_guard<std::mutex> lock(mu_);
    return state_;
  }

 private:
  mutable std::mutex mu_;
  std::shared_ptr<State> state_;
};

}  // namespace kvstore
