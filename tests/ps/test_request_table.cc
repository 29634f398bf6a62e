// test_request_table.cc - the worker's outstanding requests by id (src/ps/request_table.h):
// find/take in any order, ids never inserted and ids taken are not found, the oldest id for
// the deadline scan, the snapshot of ids, and bounded memory under a long-lived request.
#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "ps/request_table.h"

extern "C" {
#include "../common/check.h"
}

#define MUST(cond) REQUIRE(cond, "%s", #cond)

using kvstore::dist::RequestTable;
using Table = RequestTable<std::string>;

static std::string Name(uint64_t id) { return "r" + std::to_string(id); }

// Against a std::map model: random inserts with gaps, takes in random order.
static void TestModel() {
  Table t;
  std::map<uint64_t, std::string> model;
  std::mt19937_64 rng(7);
  uint64_t next = 1;
  for (int step = 0; step < 200000; ++step) {
    if (model.empty() || rng() % 3 != 0) {
      next += rng() % 4 == 0 ? 1 + rng() % 3 : 0;  // ids that never got an entry
      t.Insert(next, Name(next));
      model.emplace(next, Name(next));
      ++next;
    } else {
      // mostly the older ones, sometimes the newest: tombstones everywhere
      auto it = model.begin();
      std::advance(it, static_cast<long>(rng() % std::min<size_t>(model.size(), 64)));
      if (rng() % 5 == 0) it = std::prev(model.end());
      const std::string* f = t.Find(it->first);
      MUST(f != nullptr && *f == it->second);
      MUST(t.Take(it->first) == it->second);
      MUST(t.Find(it->first) == nullptr);
      model.erase(it);
    }
    MUST(t.Oldest() == (model.empty() ? 0 : model.begin()->first));
    if (step % 997 == 0) {
      MUST(t.live() == model.size());
      MUST(t.Oldest() == (model.empty() ? 0 : model.begin()->first));
      std::vector<uint64_t> ids = t.Ids();
      std::vector<uint64_t> want;
      for (auto& e : model) want.push_back(e.first);
      MUST(ids == want);
      for (uint64_t probe = 0; probe < next + 2; probe += 1 + rng() % 50) {
        const std::string* f = t.Find(probe);
        MUST((f != nullptr) == (model.count(probe) != 0));
      }
    }
  }
  CHECK(t.live() == model.size());
  for (auto& e : model) CHECK(t.Take(e.first) == e.second);
  CHECK(t.empty());
  CHECK(t.Oldest() == 0);
}

// Unknown ids: 0 (the shared-memory handshake's), never inserted, taken twice, beyond the newest.
static void TestUnknown() {
  Table t;
  CHECK(t.Find(0) == nullptr);
  CHECK(t.Find(1) == nullptr);
  t.Insert(3, "a");
  t.Insert(5, "b");
  CHECK(t.Find(0) == nullptr);
  CHECK(t.Find(2) == nullptr);
  CHECK(t.Find(4) == nullptr);  // skipped
  CHECK(t.Find(6) == nullptr);
  CHECK(t.Find(3) != nullptr && *t.Find(3) == "a");
  CHECK(t.Oldest() == 3);
  CHECK(t.Take(3) == "a");
  CHECK(t.Find(3) == nullptr);  // a duplicate reply finds nothing
  CHECK(t.Oldest() == 5);
  CHECK(t.span() == 1);  // the tombstones before 5 went
  CHECK(t.Take(5) == "b");
  CHECK(t.empty() && t.span() == 0);
  t.Insert(9, "c");  // after the table ran empty
  CHECK(t.Find(5) == nullptr && t.Find(9) != nullptr && t.Oldest() == 9);
}

// One request outstanding forever while a million later ones come and go: the ring stays
// small (the straggler moves to the overflow), and it is still found, oldest, and taken.
static void TestStraggler() {
  Table t;
  t.Insert(1, "barrier");
  size_t max_span = 0;
  uint64_t id = 2;
  for (int round = 0; round < 10000; ++round) {
    const uint64_t first = id;
    for (int i = 0; i < 100; ++i, ++id) t.Insert(id, Name(id));
    for (uint64_t j = first; j < id; ++j) MUST(t.Take(j) == Name(j));
    max_span = std::max(max_span, t.span());
  }
  CHECK_MSG(max_span <= 1024, "ring span %zu with 1 live request", max_span);
  CHECK(t.overflow_size() == 1);
  CHECK(t.Find(1) != nullptr && *t.Find(1) == "barrier");
  CHECK(t.Oldest() == 1);
  CHECK(t.Ids() == std::vector<uint64_t>{1});
  CHECK(t.Take(1) == "barrier");
  CHECK(t.empty() && t.Oldest() == 0);
}

// A spill that empties the ring while ids skipped before an insert still take their places
// (requests failed before they left): the ring's first slot stays live, so the deadline
// scan's Oldest() is always an id Find knows.
static void TestSpillBeforeSkippedIds() {
  Table t;
  for (uint64_t id = 1; id <= 16; ++id) t.Insert(id, Name(id));  // a full ring of 16
  for (uint64_t id = 2; id <= 16; ++id) MUST(t.Take(id) == Name(id));
  t.Insert(19, Name(19));  // 17 and 18 were never inserted; the ring spills id 1 at 17
  CHECK(t.Oldest() == 1 && t.Find(1) != nullptr);
  CHECK(t.Take(1) == Name(1));
  CHECK(t.Oldest() == 19);
  CHECK(t.Find(t.Oldest()) != nullptr && *t.Find(19) == Name(19));
  CHECK(t.Ids() == std::vector<uint64_t>{19});
  CHECK(t.Take(19) == Name(19));
  CHECK(t.empty() && t.Oldest() == 0);
}

// Two servers, one slow: every other request stays outstanding, all in the ring.
static void TestHalfLive() {
  Table t;
  for (uint64_t id = 1; id <= 100000; ++id) {
    t.Insert(id, Name(id));
    if (id % 2 == 0) t.Take(id);
  }
  CHECK(t.live() == 50000);
  CHECK(t.overflow_size() == 0);
  CHECK(t.Oldest() == 1);
  for (uint64_t id = 1; id <= 100000; id += 2) CHECK(t.Take(id) == Name(id));
  CHECK(t.empty());
}

int main() {
  TestUnknown();
  TestModel();
  TestStraggler();
  TestHalfLive();
  TestSpillBeforeSkippedIds();
  return check_summary();
}
