// key_table.h - values found by a key of a distributed store (an int or a string) without
// building a string per lookup: a server's key parts by the key a data message names
// (Server::keys_), a worker's keys by the keys of a call (WorkerStore::keys_).
//
// Storage. Values live in a deque and are only ever appended: a value's address never
// changes while the table lives (Server keeps KeyState pointers in its queue of pending
// rounds, round_starts.h). Nothing is removed.
//
// Index. Two open-addressing tables with linear probing, one for int keys and one for
// string keys, so an int key and a string key never collide (key.h). An int key's entry
// holds the key itself, so a lookup reads one entry (16 bytes; four to a cache line) and
// touches no value; a string key's entry holds
// the 64-bit hash of its bytes and the text is compared on the value only when the hashes
// match. Capacities are powers of two, at most half full: a miss ends at the first empty
// entry after a probe of expected length < 2.5.
//
// Identity. `IdOf::Of(v)` is where a value keeps its key's identity: a struct with `is_str`,
// `int_key` and `name`, set by Insert and never changed after. By default V itself (the
// server's KeyState); the worker's WorkerKey keeps it in its KeyId (worker_keys.h). One
// thread; not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace kvstore {
namespace dist {

// The default IdOf: a value is its own identity.
struct IdentityInValue {
  template <typename V>
  static V& Of(V& v) { return v; }
};

template <typename V, typename IdOf = IdentityInValue>
class KeyTable {
 public:
  KeyTable() = default;
  KeyTable(const KeyTable&) = delete;
  KeyTable& operator=(const KeyTable&) = delete;

  size_t size() const { return values_.size(); }
  // How many of the keys are string keys (is_str) or int keys.
  size_t CountOf(bool is_str) const { return is_str ? strs_used_ : ints_used_; }

  // The value of an int key, or nullptr.
  V* FindInt(int64_t key) const {
    if (ints_.empty()) return nullptr;
    const size_t mask = ints_.size() - 1;
    for (size_t i = MixInt(key) & mask;; i = (i + 1) & mask) {
      const Entry& e = ints_[i];
      if (e.value == nullptr) return nullptr;
      if (static_cast<int64_t>(e.word) == key) return e.value;
    }
  }
  // The value of a string key, or nullptr.
  V* FindStr(std::string_view name) const {
    if (strs_.empty()) return nullptr;
    const uint64_t h = HashStr(name);
    const size_t mask = strs_.size() - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
      const Entry& e = strs_[i];
      if (e.value == nullptr) return nullptr;
      if (e.word == h && IdOf::Of(*e.value).name == name) return e.value;
    }
  }
  // Starts loading the index entry where FindInt(key) begins (the caller finds the key a
  // few keys later; a miss costs nothing but the load).
  void PrefetchInt(int64_t key) const {
    if (!ints_.empty()) __builtin_prefetch(&ints_[MixInt(key) & (ints_.size() - 1)]);
  }
  V* Find(bool is_str, int64_t key, std::string_view name) const {
    return is_str ? FindStr(name) : FindInt(key);
  }

  // Appends a value for a key the table does not hold (Find returned nullptr), with its
  // identity fields set; its other fields are V's defaults.
  V* Insert(bool is_str, int64_t key, std::string_view name) {
    V& v = values_.emplace_back();
    auto& id = IdOf::Of(v);
    id.is_str = is_str;
    id.int_key = key;
    if (is_str) id.name.assign(name.data(), name.size());
    std::vector<Entry>& index = is_str ? strs_ : ints_;
    size_t& used = is_str ? strs_used_ : ints_used_;
    if (2 * (used + 1) > index.size()) Grow(&index);
    Place(&index, is_str ? HashStr(name) : static_cast<uint64_t>(key), is_str, &v);
    ++used;
    return &v;
  }

  // Every value, in insertion order.
  template <typename F>
  void ForEach(F&& f) {
    for (V& v : values_) f(v);
  }
  template <typename F>
  void ForEach(F&& f) const {
    for (const V& v : values_) f(v);
  }

 private:
  // word: an int key's value, or a string key's hash. value == nullptr: empty.
  struct Entry {
    uint64_t word = 0;
    V* value = nullptr;
  };

  // splitmix64's finaliser: consecutive keys (the usual case) spread over the table.
  static uint64_t MixInt(int64_t key) {
    uint64_t x = static_cast<uint64_t>(key);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
  }
  static uint64_t HashStr(std::string_view s) { return std::hash<std::string_view>()(s); }

  static void Place(std::vector<Entry>* index, uint64_t word, bool is_str, V* v) {
    const size_t mask = index->size() - 1;
    size_t i = (is_str ? word : MixInt(static_cast<int64_t>(word))) & mask;
    while ((*index)[i].value != nullptr) i = (i + 1) & mask;
    (*index)[i] = Entry{word, v};
  }
  void Grow(std::vector<Entry>* index) {
    const bool is_str = index == &strs_;
    std::vector<Entry> bigger(index->empty() ? 16 : 2 * index->size());
    for (const Entry& e : *index) {
      if (e.value != nullptr) Place(&bigger, e.word, is_str, e.value);
    }
    index->swap(bigger);
  }

  std::deque<V> values_;
  std::vector<Entry> ints_, strs_;
  size_t ints_used_ = 0, strs_used_ = 0;
};

}  // namespace dist
}  // namespace kvstore
