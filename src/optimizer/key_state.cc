// key_state.cc - creating, checking, committing and discarding a key's optimizer state.
#include "optimizer/key_state.h"

#include <algorithm>
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
  if (!staged_rows) {
    for (int i = 0; i < kMaxStateArrays; ++i) {
      f[0][i].swap(f[1][i]);
      d[0][i].swap(d[1][i]);
    }
  } else {
    // Row j of each staging block becomes row rows[j] of its committed array.
    const size_t len = static_cast<size_t>(row_len);
    for (int i = 0; i < row_arrays; ++i) {
      for (size_t j = 0; j < rows.size(); ++j) {
        const size_t at = static_cast<size_t>(rows[j]) * len;
        if (dtype == KV_FLOAT64) {
          std::copy_n(rd[i].data() + j * len, len, d[0][i].data() + at);
        } else {
          std::copy_n(rf[i].data() + j * len, len, f[0][i].data() + at);
        }
      }
    }
    if (master >= 0 && !master_taken.empty()) {
      for (int64_t r : rows) {
        uint8_t* mask = master_taken.data() + static_cast<size_t>(r) * len;
        for (size_t k = 0; k < len; ++k) {
          master_missing -= mask[k] == 0 ? 1 : 0;
          mask[k] = 1;
        }
      }
      if (master_missing == 0) std::vector<uint8_t>().swap(master_taken);
    }
  }
  steps += 1;
  staged = false;
  staged_rows = false;
}

void KeyState::Discard() noexcept {
  std::lock_guard<std::mutex> lock(mu);
  staged = false;
  staged_rows = false;
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

void KeyState::StageRows(const int64_t* row_ids, int64_t n, int64_t len, int num_arrays) {
  const size_t block = static_cast<size_t>(n) * static_cast<size_t>(len);
  rows.assign(row_ids, row_ids + n);
  for (int i = 0; i < num_arrays; ++i) {
    if (dtype == KV_FLOAT64) {
      rd[i].resize(block);
    } else {
      rf[i].resize(block);
    }
  }
  row_len = len;
  row_arrays = num_arrays;
}

template <> Slots<float> KeyState::RowSlotsFor<float>(int num_slots, int64_t j) {
  Slots<float> s;
  const int64_t at = rows[static_cast<size_t>(j)] * row_len;
  for (int i = 0; i < num_slots; ++i) {
    s.in[i] = f[0][i].data() + at;
    s.out[i] = rf[i].data() + j * row_len;
  }
  return s;
}

template <> Slots<double> KeyState::RowSlotsFor<double>(int num_slots, int64_t j) {
  Slots<double> s;
  const int64_t at = rows[static_cast<size_t>(j)] * row_len;
  for (int i = 0; i < num_slots; ++i) {
    s.in[i] = d[0][i].data() + at;
    s.out[i] = rd[i].data() + j * row_len;
  }
  return s;
}

void KeyState::TakeMaster(const uint16_t* weight) noexcept {
  if (master < 0 || master_taken.empty()) return;
  float* m = f[0][master].data();
  for (size_t e = 0; e < master_taken.size(); ++e) {
    if (master_taken[e] == 0) m[e] = HalfToFloat(weight[e]);
  }
  std::vector<uint8_t>().swap(master_taken);
  master_missing = 0;
}

KeyState* StateTable::Get(int key, const char* str_key, int dtype, const Shape& shape,
                          const void* host_weight) {
  const int64_t size = ShapeSize(shape);
  StateKey sk = str_key ? StateKey(true, 0, str_key) : StateKey(false, key, std::string());
  std::lock_guard<std::mutex> lock(mu_);
  auto it = states_.find(sk);
  if (it == states_.end()) {
    // Built completely before it is published, so a failed allocation leaves no entry.
    auto fresh = std::make_unique<KeyState>();
    fresh->dtype = dtype;
    fresh->size = size;
    const size_t n = static_cast<size_t>(size);
    for (int copy = 0; copy < 2; ++copy) {
      for (int i = 0; i < num_slots_; ++i) {
        if (dtype == KV_FLOAT64) {
          fresh->d[copy][i].assign(n, 0.0);
        } else if (!IsIntegerDType(dtype)) {
          fresh->f[copy][i].assign(n, 0.0f);
        }
      }
    }
    if (multi_precision_ && dtype == KV_FLOAT16) {
      fresh->master = num_slots_;
      std::vector<float>& committed = fresh->f[0][num_slots_];
      if (host_weight != nullptr) {
        committed.resize(n);
        const uint16_t* w = static_cast<const uint16_t*>(host_weight);
        for (size_t i = 0; i < n; ++i) committed[i] = HalfToFloat(w[i]);
      } else {  // a lazy update's first: every element untaken
        committed.assign(n, 0.0f);
        fresh->master_taken.assign(n, 0);
        fresh->master_missing = size;
      }
      fresh->f[1][num_slots_].resize(n);  // written whole by every update before it is read
    }
    it = states_.emplace(std::move(sk), std::move(fresh)).first;
    return it->second.get();
  }
  KeyState* slot = it->second.get();
  KV_CHECK(slot->dtype == dtype, KV_ERR_DTYPE_MISMATCH,
           "optimizer %s: the state of key %s was created for dtype %s but the stored value "
           "is now %s", optimizer_, KeyName(key, str_key).c_str(), DTypeName(slot->dtype),
           DTypeName(dtype));
  KV_CHECK(slot->size == size, KV_ERR_SHAPE_MISMATCH,
           "optimizer %s: the state of key %s has %lld elements but the stored value (%s %s) "
           "has %lld", optimizer_, KeyName(key, str_key).c_str(),
           static_cast<long long>(slot->size), DTypeName(dtype), ShapeToString(shape).c_str(),
           static_cast<long long>(size));
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
  if (!master_taken.empty()) {  // an untaken master: its mask follows it
    StateArray a;
    a.shape = {size};
    a.dtype = KV_UINT8;
    a.bytes = master_taken;
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

namespace {

// The mask of an untaken master (the record's last array, uint8, checked for its size):
// each byte must be 0 or 1. A mask without zeros is dropped (the master is whole).
void RestoreMask(const KeyRecord& r, const std::string& path, KeyState* state) {
  const std::vector<uint8_t>& mask = r.arrays.back().bytes;
  int64_t missing = 0;
  for (size_t e = 0; e < mask.size(); ++e) {
    KV_CHECK(mask[e] <= 1, KV_ERR_INVALID_ARGUMENT,
             "optimizer states file '%s': key %s: byte %zu of the master copy's mask is %u (not "
             "0 or 1)", path.c_str(), r.Name().c_str(), e, static_cast<unsigned>(mask[e]));
    missing += mask[e] == 0 ? 1 : 0;
  }
  if (missing == 0) return;
  state->master_taken = mask;
  state->master_missing = missing;
}

}  // namespace

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
    // An untaken master's mask (key_state.h) follows the master, as uint8.
    const bool has_mask = has_master && static_cast<int>(r.arrays.size()) == want + 1 &&
                          r.arrays.back().dtype == KV_UINT8;
    KV_CHECK(static_cast<int>(r.arrays.size()) == want + (has_mask ? 1 : 0),
             KV_ERR_INVALID_ARGUMENT,
             "optimizer states file '%s': key %s has %zu state arrays but optimizer %s keeps %d "
             "for a %s weight%s", path.c_str(), r.Name().c_str(), r.arrays.size(), optimizer_, want,
             DTypeName(r.dtype), has_master ? " (its slots and a float32 master copy)" : "");
    for (size_t i = 0; i < r.arrays.size(); ++i) {
      const StateArray& a = r.arrays[i];
      KV_CHECK(a.dtype == (static_cast<int>(i) < want ? compute : KV_UINT8), KV_ERR_DTYPE_MISMATCH,
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
    if (has_mask) RestoreMask(r, path, state.get());
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
