// request_table.h - a worker's outstanding requests by id (WorkerIo), without hashing.
//
// Ids are given in send order, each once, growing by one per request (some ids are never
// inserted: requests failed before they left). The table is a ring of slots indexed by
// id - base: a find is an index and a compare, entries sit contiguous in send order, and
// completing a request leaves a tombstone that is dropped once every older id is done.
//
// Invariants.
//  - The ring covers ids [base, base + size); its first slot, if any, is live (tombstones
//    at the front are popped as they appear). live() counts the live entries of the ring
//    and of the overflow.
//  - Bounded memory. One request that stays outstanding long (a barrier with no timeout)
//    while thousands of later ones complete would stretch the ring over every id sent
//    meanwhile. So when the ring must grow while at most a quarter of its slots are live,
//    its older half's live entries move to `overflow_` (an ordered map of the few
//    long-lived ones) and the ring drops that half: a full ring holds at most about eight
//    slots per live entry, and the ring never holds more slots than its largest burst of
//    outstanding requests needed (Ids() walks them). (Requests to a slow server
//    interleaved with a fast one's leave about half the slots live: they stay in the ring.)
//  - Every id below base_ that is outstanding is in overflow_; no id at or above it is.
//
// Threading: none (the I/O thread's own).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

namespace kvstore {
namespace dist {

template <typename V>
class RequestTable {
 public:
  // Inserts `v` under `id`, which is greater than every id inserted before.
  void Insert(uint64_t id, V v) {
    if (size_ == 0) base_ = id;
    // ids skipped since the last insert (never inserted) take tombstones; never the first
    while (base_ + size_ < id) PushBack(false, V());
    PushBack(true, std::move(v));
    ++live_;
  }

  // The entry under `id`, or nullptr (never inserted, or erased).
  V* Find(uint64_t id) {
    if (id >= base_ && id - base_ < size_) {
      Slot& s = At(id - base_);
      return s.live ? &s.value : nullptr;
    }
    if (id < base_ && !overflow_.empty()) {
      auto it = overflow_.find(id);
      if (it != overflow_.end()) return &it->second;
    }
    return nullptr;
  }

  // Removes the entry under `id` (which Find found) and returns it.
  V Take(uint64_t id) {
    --live_;
    if (id < base_ || id - base_ >= size_) {
      auto it = overflow_.find(id);
      V v = std::move(it->second);
      overflow_.erase(it);
      return v;
    }
    Slot& s = At(id - base_);
    V v = std::move(s.value);
    s.value = V();
    s.live = false;
    while (size_ > 0 && !At(0).live) {
      head_ = (head_ + 1) & mask_;
      ++base_;
      --size_;
    }
    return v;
  }

  // The oldest outstanding id, or 0 when none.
  uint64_t Oldest() const {
    if (!overflow_.empty()) return overflow_.begin()->first;
    return size_ > 0 ? base_ : 0;
  }

  // Every outstanding id, oldest first (a snapshot: the caller may Take while walking it).
  std::vector<uint64_t> Ids() const {
    std::vector<uint64_t> ids;
    ids.reserve(live_);
    for (const auto& e : overflow_) ids.push_back(e.first);
    for (size_t i = 0; i < size_; ++i) {
      if (slots_[(head_ + i) & mask_].live) ids.push_back(base_ + i);
    }
    return ids;
  }

  size_t live() const { return live_; }
  bool empty() const { return live_ == 0; }
  // Slots of the ring (for tests: bounded by the live entries).
  size_t span() const { return size_; }
  size_t overflow_size() const { return overflow_.size(); }

 private:
  struct Slot {
    bool live = false;
    V value{};
  };
  Slot& At(size_t i) { return slots_[(head_ + i) & mask_]; }

  void PushBack(bool live, V v) {
    if (size_ == slots_.size()) Grow();
    if (!live && size_ == 0) {  // Grow spilled every live entry: the first slot stays live
      ++base_;
      return;
    }
    Slot& s = slots_[(head_ + size_) & mask_];
    s.live = live;
    s.value = std::move(v);
    ++size_;
  }

  // Full ring: spill the older half's live entries when at most a quarter of the slots are live
  // (long-lived stragglers behind many tombstones), else double the ring.
  void Grow() {
    const size_t ring_live = live_ - overflow_.size();
    if (size_ >= 16 && ring_live * 4 <= size_) {
      const size_t half = size_ / 2;
      for (size_t i = 0; i < half; ++i) {
        Slot& s = At(i);
        if (s.live) overflow_.emplace(base_ + i, std::move(s.value));
        s.value = V();
        s.live = false;
      }
      head_ = (head_ + half) & mask_;
      base_ += half;
      size_ -= half;
      while (size_ > 0 && !At(0).live) {
        head_ = (head_ + 1) & mask_;
        ++base_;
        --size_;
      }
      return;
    }
    std::vector<Slot> bigger(slots_.empty() ? 16 : slots_.size() * 2);
    for (size_t i = 0; i < size_; ++i) bigger[i] = std::move(At(i));
    slots_.swap(bigger);
    head_ = 0;
    mask_ = slots_.size() - 1;
  }

  std::vector<Slot> slots_;  // a power of two of them, or none
  size_t mask_ = 0;
  size_t head_ = 0;  // the slot of id base_
  size_t size_ = 0;
  uint64_t base_ = 0;
  size_t live_ = 0;
  std::map<uint64_t, V> overflow_;
};

}  // namespace dist
}  // namespace kvstore
