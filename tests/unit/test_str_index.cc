// test_str_index.cc - the local store's string-key index (store/local_keys.h, StrIndex):
// keys found after growth, misses, and removal in the order an init's rollback removes
// (newest first, and keys never inserted) with every remaining key still found, including
// when all hashes collide in a few home cells (long probe runs that wrap around the table).
#include <cstdint>
#include <string>
#include <vector>

#include "store/local_keys.h"

#include "../common/check.h"

namespace {

using kvstore::local_store::StrIndex;

// Keys 0..n-1 inserted with hash `hash_of(k)`; slot k holds key k.
template <typename HashOf>
void CheckInsertErase(int n, HashOf&& hash_of) {
  StrIndex index;
  std::vector<bool> present(static_cast<size_t>(n), false);
  auto all_found = [&](const char* when) {
    int wrong = 0;
    for (int k = 0; k < n; ++k) {
      const int slot = index.Find(hash_of(k), [k](int s) { return s == k; });
      wrong += slot != (present[static_cast<size_t>(k)] ? k : -1);
    }
    CHECK_MSG(wrong == 0, "%s: %d of %d keys found wrong", when, wrong, n);
  };
  for (int k = 0; k < n; ++k) {  // growth: one key per Reserve
    index.Reserve(1);
    index.Insert(hash_of(k), k);
    present[static_cast<size_t>(k)] = true;
  }
  all_found("after inserts");
  index.Erase(hash_of(n), n);  // never inserted: nothing changes
  all_found("after erasing an absent key");
  for (int k = n - 1; k >= n / 2; --k) {  // an init's rollback: newest first
    index.Erase(hash_of(k), k);
    present[static_cast<size_t>(k)] = false;
  }
  all_found("after erasing the newest half");
  for (int k = 0; k < n / 2; k += 3) {  // and from the middle of probe runs
    index.Erase(hash_of(k), k);
    present[static_cast<size_t>(k)] = false;
  }
  all_found("after erasing every third");
  index.Reserve(static_cast<size_t>(n));
  for (int k = n / 2; k < n; ++k) {
    index.Insert(hash_of(k), k);
    present[static_cast<size_t>(k)] = true;
  }
  all_found("after inserting again");
}

void TestSpreadHashes() {
  CheckInsertErase(5000, [](int k) {
    const std::string key = "w" + std::to_string(k);
    return StrIndex::Hash(key.data(), key.size());
  });
}

// Every hash is one of 4 values, the top ones landing in the last cells: probe runs are
// long and wrap past the end of the table.
void TestCollidingHashes() {
  CheckInsertErase(300, [](int k) { return ~uint64_t{0} - static_cast<uint64_t>(k % 4); });
}

void TestEmpty() {
  StrIndex index;
  CHECK(index.Find(StrIndex::Hash("a", 1), [](int) { return true; }) == -1);
  CHECK(index.HomeSlot(1) == -1);
  index.Erase(1, 0);  // no cells yet: nothing to do
}

}  // namespace

int main() {
  TestEmpty();
  TestSpreadHashes();
  TestCollidingHashes();
  return check_summary();
}
