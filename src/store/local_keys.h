// local_keys.h - the local store's per-key records and per-call scratch (local_store.cc
// alone includes it): entries by slot, the striped key locks, and the lists one data call
// leases from its thread. The invariants they serve are local_store.cc's.
#pragma once

#include <algorithm>
#include <cstring>
#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/array.h"
#include "store/row_sparse.h"

namespace kvstore {
namespace local_store {

// 64-byte aligned, the fields a push or pull of the key reads (its slot, shape, dtype and
// value) in the first cache line. Its lock is the store's stripe of its slot (KeyStripes).
struct alignas(64) Entry {
  int id = 0;               // the int key, or the internal id (the slot) of a string key
  int slot = 0;             // position in LocalStore::entries_
  int dtype = 0;            // fixed at init; readable without the key's lock
  int ndim = 0;             // shape.size()
  std::array<int64_t, 4> dims{};  // shape, when ndim <= 4: compared without touching `shape`
  std::unique_ptr<Array> value;
  bool is_str = false;      // string key (str_key may then be empty) or int key
  Shape shape;              // fixed at init; readable without the key's lock
  std::string str_key;      // the string key
  std::unique_ptr<Array> merged;     // private copy of the pushed sum handed to the updater
  std::unique_ptr<Array> candidate;  // the updater's output, committed on success
  RowScratch rows_grad, rows_weight;  // lazy row_sparse pushes (store/row_sparse.h)

  // Whether `a` has this entry's shape and dtype (readable without the key's lock).
  bool Matches(const Array& a) const {
    if (a.dtype() != dtype || a.ndim() != ndim) return false;
    if (ndim > static_cast<int>(dims.size())) return a.shape() == shape;
    const int64_t* d = a.shape().data();
    for (int j = 0; j < ndim; ++j) {
      if (d[j] != dims[j]) return false;
    }
    return true;
  }
};

// How far ahead the per-key loops prefetch what the next keys will touch: the objects are
// scattered over the heap, and with many keys each is a cache miss.
constexpr int kAhead = 8;

inline void Prefetch(const void* p) { __builtin_prefetch(p); }

// A borrowed run of elements (the used part of a scratch vector).
template <typename T>
struct Span {
  T* first;
  size_t n;
  T* begin() const { return first; }
  T* end() const { return first + n; }
};

// The locks of a store's keys: slot i is guarded by stripe (i / kRun) % kStripes, so that a
// call of many consecutive keys takes one lock per kRun keys, and a store's lock memory is
// fixed (the array never moves: no registry lock is needed to reach it). Stripes are taken
// in ascending index order (no lock-order cycles); keys that share a stripe serialise, as
// operations on one key must. 32 stripes: few enough that a call holding all of them stays
// within what ThreadSanitizer tracks per thread (64 locks), and SaveOptimizerStates' lock of
// every key is 32 locks, not one per key.
class KeyStripes {
 public:
  static constexpr int kRun = 16;
  static constexpr int kStripes = 32;

  // The stripes a call needs, as a bitmap: duplicates collapse, order comes from the bits.
  struct Set {
    std::array<uint64_t, (kStripes + 63) / 64> words{};
    void Add(int slot) {
      const unsigned stripe = static_cast<unsigned>(slot / kRun) % kStripes;
      words[stripe / 64] |= uint64_t{1} << (stripe % 64);
    }
    void AddAll() {
      for (int i = 0; i < kStripes; ++i) words[i / 64] |= uint64_t{1} << (i % 64);
    }
  };

  // Holds the stripes of `set` until destroyed.
  class Hold {
   public:
    Hold(KeyStripes& stripes, const Set& set) : stripes_(stripes), set_(set) {
      int locked = 0;
      try {
        ForEach([&](int i) {
          stripes_.mu_[i].lock();
          ++locked;
        });
      } catch (...) {
        ForEach([&](int i) {
          if (locked-- > 0) stripes_.mu_[i].unlock();
        });
        throw;
      }
    }
    ~Hold() {
      ForEach([&](int i) { stripes_.mu_[i].unlock(); });
    }
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;

   private:
    template <typename Fn>
    void ForEach(Fn&& fn) const {
      for (size_t w = 0; w < set_.words.size(); ++w) {
        for (uint64_t bits = set_.words[w]; bits != 0; bits &= bits - 1) {
          fn(static_cast<int>(w * 64 + static_cast<size_t>(__builtin_ctzll(bits))));
        }
      }
    }
    KeyStripes& stripes_;
    const Set& set_;
  };

 private:
  std::array<std::mutex, kStripes> mu_;
};

struct PushGroup {
  Entry* entry;
  std::vector<const Array*> vals;
  // Set by PlanPush: every value is row_sparse (pushed by RowSparsePush), or some are and
  // `vals` then points at their dense casts, which `densified` owns.
  bool row_sparse = false;
  std::vector<std::unique_ptr<Array>> densified;
};

struct PullItem {
  Entry* entry;
  Array* out;
};

// The per-key lists of one data call. Between calls every vector is empty (groups: its first
// `used` elements were reset) except for their capacity, and `seen` is all zero.
struct CallScratch {
  std::vector<Entry*> entries;       // of the call's keys, in argument order
  std::vector<int> slots;            // their slots
  std::vector<PushGroup> groups;     // groups[0, num_groups) are the push's
  size_t num_groups = 0;
  std::vector<PullItem> items;
  std::vector<Entry*> locks;         // the distinct entries, ascending slot (pushpull: pushed)
  std::vector<Entry*> other_locks;   // pushpull: the pulled set, compared with `locks`
  KeyStripes::Set stripes;           // the stripes to lock
  std::vector<uint64_t> seen;        // one bit per slot: duplicate detection

  void Reset() {
    entries.clear();
    slots.clear();
    for (size_t g = 0; g < num_groups; ++g) {
      groups[g].vals.clear();
      groups[g].densified.clear();
      groups[g].row_sparse = false;
    }
    num_groups = 0;
    items.clear();
    locks.clear();
    other_locks.clear();
    stripes = KeyStripes::Set{};
  }
};

// Leases a CallScratch from the calling thread's pool for one call (a pool, not a single
// object: an updater may call another store from inside a push). A scratch that grew past
// kKeepKeys keys is given back to the allocator instead of kept.
class ScratchLease {
 public:
  ScratchLease() {
    auto& pool = Pool();
    if (pool.empty()) {
      s_ = new CallScratch;
    } else {
      s_ = pool.back().release();
      pool.pop_back();
    }
  }
  ~ScratchLease() {
    s_->Reset();
    if (s_->entries.capacity() > kKeepKeys || s_->groups.size() > kKeepKeys || s_->items.capacity() > kKeepKeys ||
        s_->seen.size() > kKeepKeys / 64) {
      delete s_;
      return;
    }
    try {
      Pool().emplace_back(s_);
    } catch (...) {
      delete s_;
    }
  }
  ScratchLease(const ScratchLease&) = delete;
  ScratchLease& operator=(const ScratchLease&) = delete;
  CallScratch* operator->() const { return s_; }
  CallScratch& operator*() const { return *s_; }

 private:
  static constexpr size_t kKeepKeys = size_t{1} << 16;
  static std::vector<std::unique_ptr<CallScratch>>& Pool() {
    thread_local std::vector<std::unique_ptr<CallScratch>> pool;
    return pool;
  }
  CallScratch* s_;
};

// Sorts `entries` by slot and drops duplicates; a list already strictly ascending (the
// usual case: keys passed in init order, each once) is left as it is in one pass.
inline void SortBySlot(std::vector<Entry*>* entries) {
  bool ascending = true;
  for (size_t i = 1; i < entries->size() && ascending; ++i) ascending = (*entries)[i - 1]->slot < (*entries)[i]->slot;
  if (ascending) return;
  std::sort(entries->begin(), entries->end(), [](const Entry* a, const Entry* b) { return a->slot < b->slot; });
  entries->erase(std::unique(entries->begin(), entries->end()), entries->end());
}

// The entries of a store by slot, in chunks of kChunk allocated whole: addresses are stable
// (a chunk never moves) and consecutive slots are contiguous, so a call over keys in init
// order walks memory in order. Growth requires the registry lock exclusively, indexing it in
// either mode.
class EntryTable {
 public:
  static constexpr size_t kChunk = 256;
  size_t size() const { return size_; }
  Entry& operator[](size_t slot) { return chunks_[slot / kChunk][slot % kChunk]; }
  Entry& back() { return (*this)[size_ - 1]; }
  // A default entry at slot size(). Throws (bad_alloc) with nothing changed.
  Entry& emplace_back() {
    if (size_ == chunks_.size() * kChunk) {
      chunks_.reserve(chunks_.size() + 1);
      chunks_.push_back(std::make_unique<Entry[]>(kChunk));
    }
    return (*this)[size_++];
  }
  // Resets the last entry to the default state (a failed init's rollback).
  void pop_back() {
    back() = Entry();
    --size_;
  }

 private:
  std::vector<std::unique_ptr<Entry[]>> chunks_;
  size_t size_ = 0;
};

// Whether a slot appears more than once in s->slots (a bitmap over the slots, all zero
// again on return).
inline bool Repeats(CallScratch* s) {
  int top = 0;
  for (int slot : s->slots) top = std::max(top, slot);
  if (s->seen.size() <= static_cast<size_t>(top) / 64) s->seen.resize(static_cast<size_t>(top) / 64 + 1, 0);
  bool repeated = false;
  for (int slot : s->slots) {
    uint64_t& w = s->seen[static_cast<size_t>(slot) / 64];
    const uint64_t bit = uint64_t{1} << (slot % 64);
    repeated |= (w & bit) != 0;
    w |= bit;
  }
  for (int slot : s->slots) s->seen[static_cast<size_t>(slot) / 64] = 0;
  return repeated;
}

inline std::string KeyName(const Entry& e) {
  return e.is_str ? "\"" + e.str_key + "\"" : std::to_string(e.id);
}

// The distinct entries of `list` in lock order (ascending slot) into `out`.
template <typename T>
void LockOrder(const T* list, size_t n, std::vector<Entry*>* out) {
  out->clear();
  out->reserve(n);
  for (size_t i = 0; i < n; ++i) out->push_back(list[i].entry);
  SortBySlot(out);
}

// dst <- src by memcpy when both are dense host arrays of at most kSmallCopy bytes (what
// the comm's and the backend's copies do for them, without their per-call lists and
// dispatch); false, and nothing done, otherwise. Shapes and dtypes were checked.
inline bool SmallHostCopy(Array* dst, const Array& src) {
  constexpr size_t kSmallCopy = 64 << 10;
  if (dst->nbytes() > kSmallCopy || !dst->ctx().is_cpu() || !src.ctx().is_cpu() || dst->is_row_sparse() ||
      src.is_row_sparse() || dst == &src) {
    return false;
  }
  if (dst->nbytes() > 0) std::memcpy(dst->data(), src.data(), dst->nbytes());
  return true;
}

// Prefetches what element i + kAhead of a push or pull will touch: the stored value's
// array object two steps before its data, the entry three steps before.
template <typename T>
void PrefetchAhead(const T* list, size_t n, size_t i) {
  if (i + 3 * kAhead < n) Prefetch(&list[i + 3 * kAhead].entry->value);
  if (i + 2 * kAhead < n) Prefetch(list[i + 2 * kAhead].entry->value.get());
  if (i + kAhead < n) Prefetch(list[i + kAhead].entry->value->data());
}

}  // namespace local_store
}  // namespace kvstore
