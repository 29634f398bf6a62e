// worker_groups.h - a data call's arrays grouped by key (WorkerStore::GroupByKey,
// worker_calls.cc): one group per distinct key, groups in first-appearance order (the order
// their operations are queued in), each holding its key's arrays in call order.
//
// Cost. A call names its keys in the order they were initialised (or the reverse) far more
// often than not, and such a call has no repeated key: while the keys' order ids (WorkerKey::
// order_id, distinct per record) are strictly monotonic, each key opens a group and nothing
// else is touched. At the first key out of order a GroupIndex is built over the groups so
// far and used for the rest of the call, so any order and repeated keys still group in
// linear time. Application thread, one call; not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "ps/array_list.h"
#include "ps/op.h"

namespace kvstore {
namespace dist {

template <typename A>
using KeyGroups = std::vector<std::pair<WorkerKey*, ArrayList<A>>>;

// The groups of one call's keys: which group a key of the call belongs to, in an
// open-addressing table of twice the call's keys, filled once and dropped with the call (one
// allocation per call where a hash map costs one per key).
class GroupIndex {
 public:
  explicit GroupIndex(size_t keys) {
    size_t cap = 16;
    while (cap < 2 * keys) cap <<= 1;
    slots_.assign(cap, Slot{nullptr, 0});
    mask_ = cap - 1;
  }
  // The group of `k` and false, or, for a key not seen yet, `next` (filed as its group)
  // and true.
  std::pair<size_t, bool> Insert(const WorkerKey* k, size_t next) {
    for (size_t i = Home(k);; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.key == k) return {s.group, false};
      if (s.key == nullptr) {
        s = Slot{k, next};
        return {next, true};
      }
    }
  }
  // The group of `k`, or SIZE_MAX when it has none.
  size_t Find(const WorkerKey* k) const {
    for (size_t i = Home(k);; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.key == k) return s.group;
      if (s.key == nullptr) return SIZE_MAX;
    }
  }

 private:
  struct Slot {
    const WorkerKey* key;
    size_t group;
  };
  // Fibonacci hashing of the address: records are some hundred bytes apart.
  size_t Home(const WorkerKey* k) const {
    return static_cast<size_t>((reinterpret_cast<uintptr_t>(k) >> 4) * 0x9E3779B97F4A7C15ull >> 20) & mask_;
  }
  std::vector<Slot> slots_;
  size_t mask_ = 0;
};

// Groups arrays[0..n) by key. `find(i)` returns the record of key i (it checks the array
// against it and throws to fail the call; it is called once per i, in order).
template <typename A, typename Find>
KeyGroups<A> GroupArrays(size_t n, A* const* arrays, Find&& find) {
  KeyGroups<A> groups;
  groups.reserve(n);
  std::optional<GroupIndex> index;  // from the first key out of order on
  int dir = 0;                      // the order so far: +1 ascending, -1 descending, 0 unknown
  uint64_t last = 0;                // the order id of the last key, while ordered
  for (size_t i = 0; i < n; ++i) {
    WorkerKey* k = find(i);
    A* a = arrays[i];
    if (!index) {
      const uint64_t id = k->order_id;
      const bool ordered = groups.empty() || (dir >= 0 && id > last) || (dir <= 0 && id < last);
      if (ordered) {
        if (!groups.empty() && dir == 0) dir = id > last ? 1 : -1;
        last = id;
        groups.emplace_back(k, ArrayList<A>(a));
        continue;
      }
      index.emplace(n);
      for (size_t g = 0; g < groups.size(); ++g) index->Insert(groups[g].first, g);
    }
    const auto added = index->Insert(k, groups.size());
    if (added.second) groups.emplace_back(k, ArrayList<A>(a));
    else groups[added.first].second.push_back(a);
  }
  return groups;
}

}  // namespace dist
}  // namespace kvstore
