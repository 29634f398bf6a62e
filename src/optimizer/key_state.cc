// key_state.cc - creating, checking, committing and discarding a key's optimizer state.
#include "optimizer/key_state.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
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

std::vector<StateArray> KeyState::SavedArrays(int num_slots) const {
  std::vector<StateArray> arrays;
  if (IsIntegerDType(dtype)) return arrays;
  const int count = num_slots + (master >= 0 ? 1 : 0);  // the master follows the slots
  for (int i = 0; i < count; ++i) {
    StateArray a;
    a.shape = {size};
    const bool wide = dtype == KV_FLOAT64;
    a.dtype = wide ? KV_FLOAT64 : KV_FLOAT32;
    const void* src = wide ? static_cast<const void*>(d[0][i].data()) : f[0][i].data();
    a.bytes.resize(static_cast<size_t>(size) * DTypeSize(a.dtype));
    if (!a.bytes.empty()) std::memcpy(a.bytes.data(), src, a.bytes.size());
    arrays.push_back(std::move(a));
  }
  return arrays;
}

std::vector<KeyRecord> StateTable::Save() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<KeyRecord> records;
  records.reserve(states_.size());
  for (const auto& [sk, state] : states_) {  // map order: int keys, then strings, ascending
    std::lock_guard<std::mutex> key_lock(state->mu);
    KV_CHECK(!state->staged, KV_ERR_INTERNAL,
             "optimizer %s: saving the state of key %s while an update is staged", optimizer_,
             KeyName(std::get<1>(sk), std::get<0>(sk) ? std::get<2>(sk).c_str() : nullptr).c_str());
    KeyRecord r;
    r.is_str = std::get<0>(sk);
    r.key = std::get<1>(sk);
    r.str_key = std::get<2>(sk);
    r.dtype = state->dtype;
    r.shape = {state->size};
    r.steps = state->steps;
    r.arrays = state->SavedArrays(num_slots_);
    records.push_back(std::move(r));
  }
  return records;
}

void StateTable::Restore(std::vector<KeyRecord>* records, const std::string& path, bool apply) {
  // Check and build everything before the swap, so that a refusal or a failed allocation
  // leaves the table as it was.
  std::map<StateKey, std::unique_ptr<KeyState>> fresh;
  for (KeyRecord& r : *records) {
    const int64_t size = ShapeSize(r.shape);
    const bool integer = IsIntegerDType(r.dtype);
    const bool has_master = multi_precision_ && r.dtype == KV_FLOAT16;
    const int want = integer ? 0 : num_slots_ + (has_master ? 1 : 0);
    const int compute = r.dtype == KV_FLOAT64 ? KV_FLOAT64 : KV_FLOAT32;
    KV_CHECK(static_cast<int>(r.arrays.size()) == want, KV_ERR_INVALID_ARGUMENT,
             "optimizer states file '%s': key %s has %zu state arrays but optimizer %s keeps %d "
             "for a %s weight%s", path.c_str(), r.Name().c_str(), r.arrays.size(), optimizer_, want,
             DTypeName(r.dtype), has_master ? " (its slots and a float32 master copy)" : "");
    for (size_t i = 0; i < r.arrays.size(); ++i) {
      const StateArray& a = r.arrays[i];
      KV_CHECK(a.dtype == compute, KV_ERR_DTYPE_MISMATCH,
               "optimizer states file '%s': key %s state array %zu is %s but optimizer %s keeps "
               "%s state for a %s weight", path.c_str(), r.Name().c_str(), i, DTypeName(a.dtype),
               optimizer_, DTypeName(compute), DTypeName(r.dtype));
      KV_CHECK(ShapeSize(a.shape) == size, KV_ERR_SHAPE_MISMATCH,
               "optimizer states file '%s': key %s state array %zu has shape %s but the weight "
               "has shape %s", path.c_str(), r.Name().c_str(), i, ShapeToString(a.shape).c_str(),
               ShapeToString(r.shape).c_str());
    }
    auto state = std::make_unique<KeyState>();
    state->dtype = r.dtype;
    state->size = size;
    state->steps = r.steps;
    state->master = has_master ? num_slots_ : -1;
    const size_t n = static_cast<size_t>(size);
    for (int i = 0; i < want; ++i) {
      const uint8_t* src = r.arrays[i].bytes.data();
      if (compute == KV_FLOAT64) {
        state->d[0][i].resize(n);
        if (n > 0) std::memcpy(state->d[0][i].data(), src, n * sizeof(double));
        state->d[1][i].assign(n, 0.0);
      } else {
        state->f[0][i].resize(n);
        if (n > 0) std::memcpy(state->f[0][i].data(), src, n * sizeof(float));
        state->f[1][i].assign(n, 0.0f);
      }
    }
    r.arrays.clear();
    StateKey sk = r.is_str ? StateKey(true, 0, r.str_key) : StateKey(false, r.key, std::string());
    KV_CHECK(fresh.emplace(std::move(sk), std::move(state)).second, KV_ERR_INVALID_ARGUMENT,
             "optimizer states file '%s': key %s appears twice", path.c_str(), r.Name().c_str());
  }
  if (!apply) return;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& entry : states_) {
    std::lock_guard<std::mutex> key_lock(entry.second->mu);
    KV_CHECK(!entry.second->staged, KV_ERR_INTERNAL,
             "optimizer %s: loading states while an update is staged", optimizer_);
  }
  states_.swap(fresh);
}

}  // namespace optimizer
}  // namespace kvstore
