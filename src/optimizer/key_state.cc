// key_state.cc - creating, checking, committing and discarding a key's optimizer state.
#include "optimizer/key_state.h"

#include <cstddef>
#include <cstdint>
#include <utility>

#include "core/dtype.h"
#include "core/error.h"

namespace kvstore {
namespace optimizer {

std::string KeyName(int key, const char* str_key) {
  return str_key ? StrFormat("\"%s\"", str_key) : StrFormat("%d", key);
}

void KeyState::Commit() noexcept {
  std::lock_guard<std::mutex> lock(mu);
  if (!staged) return;
  for (int i = 0; i < kMaxStateArrays; ++i) {
    f[0][i].swap(f[1][i]);
    d[0][i].swap(d[1][i]);
  }
  steps += 1;
  staged = false;
}

void KeyState::Discard() noexcept {
  std::lock_guard<std::mutex> lock(mu);
  staged = false;
}

template <> Slots<float> KeyState::SlotsFor<float>(int num_slots) {
  Slots<float> s;
  for (int i = 0; i < num_slots; ++i) {
    s.in[i] = f[0][i].data();
    s.out[i] = f[1][i].data();
  }
  return s;
}

template <> Slots<double> KeyState::SlotsFor<double>(int num_slots) {
  Slots<double> s;
  for (int i = 0; i < num_slots; ++i) {
    s.in[i] = d[0][i].data();
    s.out[i] = d[1][i].data();
  }
  return s;
}

KeyState* StateTable::Get(int key, const char* str_key, const Array& stored,
                          const void* host_weight) {
  StateKey sk = str_key ? StateKey(true, 0, str_key) : StateKey(false, key, std::string());
  std::lock_guard<std::mutex> lock(mu_);
  auto it = states_.find(sk);
  if (it == states_.end()) {
    // Built completely before it is published, so a failed allocation leaves no entry.
    auto fresh = std::make_unique<KeyState>();
    fresh->dtype = stored.dtype();
    fresh->size = stored.size();
    const size_t n = static_cast<size_t>(fresh->size);
    for (int copy = 0; copy < 2; ++copy) {
      for (int i = 0; i < num_slots_; ++i) {
        if (stored.dtype() == KV_FLOAT64) {
          fresh->d[copy][i].assign(n, 0.0);
        } else if (!IsIntegerDType(stored.dtype())) {
          fresh->f[copy][i].assign(n, 0.0f);
        }
      }
    }
    if (multi_precision_ && stored.dtype() == KV_FLOAT16) {
      fresh->master = num_slots_;
      std::vector<float>& committed = fresh->f[0][num_slots_];
      committed.resize(n);
      const uint16_t* w = static_cast<const uint16_t*>(host_weight);
      for (size_t i = 0; i < n; ++i) committed[i] = HalfToFloat(w[i]);
      fresh->f[1][num_slots_].resize(n);  // written whole by every update before it is read
    }
    it = states_.emplace(std::move(sk), std::move(fresh)).first;
    return it->second.get();
  }
  KeyState* slot = it->second.get();
  KV_CHECK(slot->dtype == stored.dtype(), KV_ERR_DTYPE_MISMATCH,
           "optimizer %s: the state of key %s was created for dtype %s but the stored value "
           "is now %s", optimizer_, KeyName(key, str_key).c_str(), DTypeName(slot->dtype),
           DTypeName(stored.dtype()));
  KV_CHECK(slot->size == stored.size(), KV_ERR_SHAPE_MISMATCH,
           "optimizer %s: the state of key %s has %lld elements but the stored value %s has "
           "%lld", optimizer_, KeyName(key, str_key).c_str(), static_cast<long long>(slot->size),
           stored.Describe().c_str(), static_cast<long long>(stored.size()));
  return slot;
}

}  // namespace optimizer
}  // namespace kvstore
