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
#include <string_view>
#include <functional>
#include <unordered_map>
#include <vector>

#include "core/array.h"
#include "core/row_sparse.h"
#include "store/row_sparse.h"
#include "store/store.h"

namespace kvstore {
namespace local_store {

// The largest stored value a push or pull copies by memcpy (SmallHostCopy, Entry::data).
constexpr size_t kSmallCopy = 64 << 10;

// 64-byte aligned, the fields a push or pull of the key reads (its slot, shape, dtype and,
// for a small host value, its data's address and size) in the first cache line: such a
// call copies without touching the value's array object. Its lock is the store's stripe of
// its slot (KeyStripes).
struct alignas(64) Entry {
  int id = 0;               // the int key, or the internal id (the slot) of a string key
  int slot = 0;             // position in LocalStore::entries_
  int dtype = 0;            // fixed at init; readable without the key's lock
  int ndim = 0;             // shape.size()
  std::array<int64_t, 4> dims{};  // shape, when ndim <= 4: compared without touching `shape`
  // value->data() and value->nbytes() when the value is a host array of 1 to kSmallCopy
  // bytes, else nullptr and 0. Follows `value` (CacheValue after every change of it), under
  // the key's lock.
  void* data = nullptr;
  uint32_t copy_bytes = 0;
  bool is_str = false;      // string key (str_key may then be empty) or int key
  std::unique_ptr<Array> value;
  Shape shape;              // fixed at init; readable without the key's lock
  std::string str_key;      // the string key
  std::unique_ptr<Array> merged;     // private copy of the pushed sum handed to the updater
  std::unique_ptr<Array> candidate;  // the updater's output, committed on success
  RowScratch rows_grad, rows_weight;  // lazy row_sparse pushes (store/row_sparse.h)

  // Refreshes `data` and `copy_bytes` from `value` (stored values are dense).
  void CacheValue() {
    const bool small = value->ctx().is_cpu() && value->nbytes() > 0 && value->nbytes() <= kSmallCopy;
    data = small ? value->data() : nullptr;
    copy_bytes = small ? static_cast<uint32_t>(value->nbytes()) : 0;
  }

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
// For a line about to be written (a caller's array, whose call gate the call updates).
inline void PrefetchW(const void* p) { __builtin_prefetch(p, 1); }

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

// One key's values in a push: `n` values at `vals`, a run of the caller's list (each key once:
// the usual call, nothing copied) or of CallScratch::grouped (keys repeated, or row_sparse
// values: then the run is the scratch's own and PlanStorage may replace its elements).
struct PushGroup {
  Entry* entry;
  const Array* const* vals;
  size_t n;
  // Set by PlanPush: every value is row_sparse (pushed by RowSparsePush), or some are and
  // the run then holds their dense casts (CallScratch::densified owns them).
  bool row_sparse;

  // The values as the comm's and the row_sparse helpers take them (their slow paths only).
  std::vector<const Array*> List() const { return std::vector<const Array*>(vals, vals + n); }
};

struct PullItem {
  Entry* entry;
  Array* out;
};

// The per-key lists of one data call. Between calls every vector is empty except for its
// capacity, and `seen` is all zero. Nothing in it is allocated per key: a steady stream of
// calls of any size allocates nothing.
struct CallScratch {
  std::vector<Entry*> entries;       // of the call's keys, in argument order
  std::vector<int> slots;            // their slots
  std::vector<PushGroup> groups;     // the push's, first-appearance order of their keys
  std::vector<const Array*> grouped; // the values regrouped by key (PushGroup), when copied
  std::vector<std::unique_ptr<Array>> densified;  // dense casts of mixed groups' values
  std::vector<PullItem> items;
  std::vector<Entry*> locks;         // pushpull: the pushed entries, distinct, ascending slot
  std::vector<Entry*> other_locks;   // pushpull: the pulled set, compared with `locks`
  KeyStripes::Set stripes;           // the stripes to lock
  std::vector<uint64_t> seen;        // one bit per slot: duplicate detection

  void Reset() {
    entries.clear();
    slots.clear();
    groups.clear();
    grouped.clear();
    densified.clear();
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
    if (s_->entries.capacity() > kKeepKeys || s_->groups.capacity() > kKeepKeys ||
        s_->grouped.capacity() > kKeepKeys || s_->items.capacity() > kKeepKeys ||
        s_->locks.capacity() > kKeepKeys || s_->other_locks.capacity() > kKeepKeys) {
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
  // 2^17 keys: at about 84 bytes per key, a call of 100,000 keys reuses its lists (~8 MiB);
  // one of a million gives them back rather than keeping ~80 MiB per thread. `seen` is not
  // counted: it is one bit per slot of the largest store the thread called out of order (a
  // call of two keys in a big store would otherwise rebuild it every time), far less than
  // that store's own records.
  static constexpr size_t kKeepKeys = size_t{1} << 17;
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
  const Entry& operator[](size_t slot) const { return chunks_[slot / kChunk][slot % kChunk]; }
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

// Int key -> slot: keys in [0, direct size) by direct index, the others by hash map. The
// direct table grows at init while the keys are dense (at most about twice the number of
// keys, plus 1024). Guarded as the entry table.
class IntIndex {
 public:
  // The slot of `key`, or -1.
  int Find(int key) const {
    if (key >= 0 && static_cast<size_t>(key) < direct_.size()) return direct_[key];
    auto it = sparse_.find(key);
    return it == sparse_.end() ? -1 : it->second;
  }
  // The slot of `key` when the direct table holds it (to prefetch its entry), else -1.
  int DirectSlot(int key) const {
    return key >= 0 && static_cast<size_t>(key) < direct_.size() ? direct_[key] : -1;
  }
  // Extends the direct table to cover the non-negative keys of an init of `keys` into a
  // store of `entries` keys when they are dense enough, moving the hash map's keys it now
  // covers into it. Throws bad_alloc with nothing changed (before the move).
  void Grow(const KeyList& keys, size_t entries) {
    int64_t top = -1;
    for (int i = 0; i < keys.size; ++i) top = std::max<int64_t>(top, keys.ints[i]);
    const int64_t limit = 2 * static_cast<int64_t>(entries + static_cast<size_t>(keys.size)) + 1024;
    if (top < static_cast<int64_t>(direct_.size()) || top >= limit) return;
    direct_.resize(static_cast<size_t>(top) + 1, -1);
    for (auto it = sparse_.begin(); it != sparse_.end();) {
      if (it->first >= 0 && it->first <= top) {
        direct_[it->first] = it->second;
        it = sparse_.erase(it);
      } else {
        ++it;
      }
    }
  }
  // Adds a key that is not present (throws bad_alloc only for a key outside the table).
  void Insert(int key, int slot) {
    if (key >= 0 && static_cast<size_t>(key) < direct_.size()) direct_[key] = slot;
    else sparse_.emplace(key, slot);
  }
  void Erase(int key) {
    if (key >= 0 && static_cast<size_t>(key) < direct_.size()) direct_[key] = -1;
    else sparse_.erase(key);
  }

 private:
  std::vector<int> direct_;           // key -> slot (-1: none)
  std::unordered_map<int, int> sparse_;  // the other keys -> slot
};

// String key -> slot: open addressing with linear probing over a power-of-two array of
// cells (the key's 64-bit hash and its slot), at most half full. A lookup compares stored
// hashes, and reads the key itself (the entry's str_key) only on a hash match, so a hit
// costs the home cell's line and the entry's, a miss usually the cell's alone (a node-based
// map walks a node and the string's heap block per probe). Guarded as the entry table.
class StrIndex {
 public:
  static uint64_t Hash(const char* key, size_t len) { return std::hash<std::string_view>{}({key, len}); }

  // The home cell of `hash` and the slot it holds (-1: none; usually, not always, the key's),
  // to prefetch a lookup's lines ahead of time.
  const void* Home(uint64_t hash) const { return cells_.empty() ? nullptr : &cells_[hash & mask_]; }
  int HomeSlot(uint64_t hash) const { return cells_.empty() ? -1 : cells_[hash & mask_].slot; }

  // The slot whose key has `hash` and for which same(slot) holds, or -1.
  template <typename Same>
  int Find(uint64_t hash, Same&& same) const {
    if (cells_.empty()) return -1;
    for (size_t i = hash & mask_;; i = (i + 1) & mask_) {
      const Cell& c = cells_[i];
      if (c.slot < 0) return -1;
      if (c.hash == hash && same(c.slot)) return c.slot;
    }
  }

  // Makes room for `more` insertions without growing. Throws bad_alloc with nothing changed.
  void Reserve(size_t more) {
    const size_t need = 2 * (count_ + more);
    if (need <= cells_.size()) return;
    size_t cap = std::max<size_t>(cells_.size(), 16);
    while (cap < need) cap *= 2;
    std::vector<Cell> cells(cap);
    const size_t mask = cap - 1;
    for (const Cell& c : cells_) {
      if (c.slot < 0) continue;
      size_t i = c.hash & mask;
      while (cells[i].slot >= 0) i = (i + 1) & mask;
      cells[i] = c;
    }
    cells_.swap(cells);
    mask_ = mask;
  }

  // Adds a key that is not present; Reserve made room for it (nothing can fail).
  void Insert(uint64_t hash, int slot) {
    size_t i = hash & mask_;
    while (cells_[i].slot >= 0) i = (i + 1) & mask_;
    cells_[i] = Cell{hash, slot};
    ++count_;
  }

  // Removes `slot`'s key (an init's rollback), shifting later cells of its probe run back
  // so that every remaining key stays reachable from its home cell without tombstones.
  void Erase(uint64_t hash, int slot) {
    if (cells_.empty()) return;
    size_t i = hash & mask_;
    for (; cells_[i].slot != slot; i = (i + 1) & mask_) {
      if (cells_[i].slot < 0) return;  // not inserted (the init failed before)
    }
    --count_;
    for (size_t j = i;;) {
      cells_[i].slot = -1;
      for (;;) {
        j = (j + 1) & mask_;
        if (cells_[j].slot < 0) return;
        const size_t home = cells_[j].hash & mask_;
        // Cell j stays when its home lies cyclically in (i, j]: its probe never passed i.
        const bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
        if (!stays) break;
      }
      cells_[i] = cells_[j];
      i = j;
    }
  }

 private:
  struct Cell {
    uint64_t hash = 0;
    int slot = -1;  // -1: empty
  };
  std::vector<Cell> cells_;
  size_t mask_ = 0;
  size_t count_ = 0;
};

// The lengths and hashes of a call's string keys, taken 2 * kAhead keys ahead of the lookup
// (when the key's home cell is prefetched, so that kAhead keys ahead the entry that cell
// names can be): a ring of the next 4 * kAhead keys.
class StrHashAhead {
 public:
  struct Hashed {
    size_t len;
    uint64_t hash;
  };
  // Hashes the first 2 * kAhead keys (none for int keys).
  StrHashAhead(const KeyList& keys, const StrIndex& index) : keys_(keys), index_(index) {
    if (keys.kind != KeyKind::kStr) return;
    for (int j = 0; j < keys.size && j < 2 * kAhead; ++j) Hash(j);
  }
  // Before looking up key i: hashes key i + 2 * kAhead, prefetches key i + 3 * kAhead.
  void Advance(int i) {
    if (i + 3 * kAhead < keys_.size) Prefetch(keys_.strs[i + 3 * kAhead]);
    if (i + 2 * kAhead < keys_.size) Hash(i + 2 * kAhead);
  }
  // Key j's, for j in [i, i + 2 * kAhead] after Advance(i).
  const Hashed& operator[](int j) const { return ring_[static_cast<size_t>(j) % kRing]; }

 private:
  static constexpr size_t kRing = 4 * kAhead;
  void Hash(int j) {
    const size_t len = std::strlen(keys_.strs[j]);
    Hashed& h = ring_[static_cast<size_t>(j) % kRing];
    h = Hashed{len, StrIndex::Hash(keys_.strs[j], len)};
    Prefetch(index_.Home(h.hash));
  }
  const KeyList& keys_;
  const StrIndex& index_;
  std::array<Hashed, kRing> ring_;
};

// A push with repeated keys: one group per distinct key (first-appearance order), its
// values (in argument order) a run of s->grouped.
inline void GroupRepeats(const std::vector<Entry*>& entries, const Array* const* vals, CallScratch* s) {
  std::unordered_map<Entry*, size_t> index;
  std::vector<size_t> group_of(entries.size());
  std::vector<size_t> count;
  for (size_t i = 0; i < entries.size(); ++i) {
    const auto it = index.emplace(entries[i], count.size()).first;
    if (it->second == count.size()) count.push_back(0);
    group_of[i] = it->second;
    ++count[it->second];
  }
  s->grouped.resize(entries.size());
  s->groups.resize(count.size());
  size_t at = 0;
  for (size_t g = 0; g < count.size(); ++g) {
    s->groups[g] = PushGroup{nullptr, s->grouped.data() + at, 0, false};
    at += count[g];
  }
  for (size_t i = 0; i < entries.size(); ++i) {
    PushGroup& g = s->groups[group_of[i]];
    g.entry = entries[i];
    s->grouped[static_cast<size_t>(g.vals - s->grouped.data()) + g.n++] = vals[i];
  }
}

// Marks row_sparse groups (RowSparsePush checks their value is in host memory, under the
// key's lock); a mixed group is summed from dense casts.
inline void PlanStorage(PushGroup* g, CallScratch* s) {
  size_t sparse = 0;
  for (size_t j = 0; j < g->n; ++j) sparse += g->vals[j]->is_row_sparse() ? 1 : 0;
  if (sparse == 0) return;
  if (sparse == g->n) {
    g->row_sparse = true;
    return;
  }
  const Array** run = s->grouped.data() + (g->vals - s->grouped.data());  // the scratch's run
  for (size_t j = 0; j < g->n; ++j) {
    if (!run[j]->is_row_sparse()) continue;
    s->densified.push_back(CastStorage(*run[j], KV_STYPE_DEFAULT));
    run[j] = s->densified.back().get();
  }
}

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
  if (dst->nbytes() > kSmallCopy || !dst->ctx().is_cpu() || !src.ctx().is_cpu() || dst->is_row_sparse() ||
      src.is_row_sparse() || dst == &src) {
    return false;
  }
  if (dst->nbytes() > 0) std::memcpy(dst->data(), src.data(), dst->nbytes());
  return true;
}

// The same as SmallHostCopy from or into the entry's cached value (Entry::data): false,
// and nothing done, unless the value is small and on the host and `a` is a dense host array
// (of the entry's shape: checked).
inline bool SmallCopyOut(const Entry& e, Array* out) {
  if (e.copy_bytes == 0 || !out->ctx().is_cpu() || out->is_row_sparse() || out->data() == e.data) return false;
  std::memcpy(out->data(), e.data, e.copy_bytes);
  return true;
}
inline bool SmallCopyIn(Entry* e, const Array& src) {
  if (e->copy_bytes == 0 || !src.ctx().is_cpu() || src.is_row_sparse() || src.data() == e->data) return false;
  std::memcpy(e->data, src.data(), e->copy_bytes);
  return true;
}

// The caller's array a push group or pull item copies from or into (its first value or its
// output), for PrefetchAhead.
inline const Array* CallerArray(const PushGroup& g) { return g.vals[0]; }
inline const Array* CallerArray(const PullItem& item) { return item.out; }

// Prefetches what element i + kAhead of a push or pull will touch: the entry and the
// caller's array object one step before the small value's data (Entry::data, or else the
// value's array object) and the caller's array's data.
template <typename T>
void PrefetchAhead(const T* list, size_t n, size_t i) {
  if (i + 2 * kAhead < n) {
    Prefetch(list[i + 2 * kAhead].entry);
    PrefetchW(CallerArray(list[i + 2 * kAhead]));  // its call gate is left (arg_gates.h)
  }
  if (i + kAhead < n) {
    const Entry* e = list[i + kAhead].entry;
    if (e->data != nullptr) Prefetch(e->data);
    else Prefetch(e->value.get());
    Prefetch(CallerArray(list[i + kAhead])->data());
  }
}

}  // namespace local_store
}  // namespace kvstore
