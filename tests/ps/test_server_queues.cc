// test_server_queues.cc - the sync server's per-key bookkeeping without sockets:
// req_fifo.h (per-rank FIFOs of pooled requests: order, ownership, inline ranks, a resize
// that runs out of memory changes nothing) and round_starts.h (pending rounds by start: the
// same oldest key as an ordered set under any sequence of filings, late filings included,
// and memory that stays O(pending rounds)).
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ps/node_pool.h"
#include "ps/req_fifo.h"
#include "ps/round_starts.h"

extern "C" {
#include "../common/check.h"
}
#include "../common/failing_new.h"

using kvstore::dist::FifoSet;
using kvstore::dist::NodePool;
using kvstore::dist::RoundStarts;

namespace {

int g_live = 0;  // Items alive (constructed and not destroyed)

struct Item {
  explicit Item(int v) : value(v), text(std::to_string(v) + " a string too long for SSO") { ++g_live; }
  Item(Item&& o) noexcept : value(o.value), text(std::move(o.text)) { ++g_live; }
  ~Item() { --g_live; }
  int value;
  std::string text;
  Item* next = nullptr;
};

// Per rank, elements come out in the order they went in, whatever the interleaving of ranks;
// every element is destroyed once, popped or left at the end; the pool's blocks are reused.
void test_fifos_keep_order_and_own_elements() {
  NodePool pool;
  {
    FifoSet<Item> set;
    set.resize(2, &pool);
    CHECK(set.size() == 2);
    for (auto& q : set) CHECK(q.empty());
    std::vector<std::vector<int>> expect(2);
    std::mt19937 rng(7);
    int next = 0;
    for (int step = 0; step < 10000; ++step) {
      const size_t r = rng() % 2;
      if (rng() % 3 != 0 || set[r].empty()) {
        set[r].push_back(Item(next));
        expect[r].push_back(next++);
      } else {
        CHECK(set[r].front().value == expect[r].front());
        CHECK(set[r].front().text == std::to_string(expect[r].front()) + " a string too long for SSO");
        set[r].pop_front();
        expect[r].erase(expect[r].begin());
      }
    }
    for (size_t r = 0; r < 2; ++r) {
      std::vector<int> got;
      for (const Item& it : set[r]) got.push_back(it.value);
      CHECK(got == expect[r]);
    }
    CHECK(g_live == static_cast<int>(expect[0].size() + expect[1].size()));
    CHECK(pool.live() == expect[0].size() + expect[1].size());
    set[0].clear();
    CHECK(set[0].empty());
    CHECK(pool.live() == expect[1].size());
  }
  // The set's destruction destroyed what rank 1 still held.
  CHECK(g_live == 0);
  CHECK(pool.live() == 0);
  // One element cycling through a FIFO takes no new memory.
  FifoSet<Item> one;
  one.resize(1, &pool);
  const size_t chunks = pool.chunks();
  for (int i = 0; i < 100000; ++i) {
    one[0].push_back(Item(i));
    one[0].pop_front();
  }
  CHECK(pool.chunks() == chunks);
  CHECK(pool.live() == 0);
}

// More ranks than fit inline go to the heap array; each rank's FIFO is its own.
void test_many_ranks() {
  NodePool pool;
  FifoSet<Item, 2> set;
  set.resize(5, &pool);
  CHECK(set.size() == 5);
  for (int r = 0; r < 5; ++r) {
    for (int i = 0; i <= r; ++i) set[static_cast<size_t>(r)].push_back(Item(10 * r + i));
  }
  for (int r = 0; r < 5; ++r) {
    int n = 0;
    for (const Item& it : set[static_cast<size_t>(r)]) CHECK(it.value == 10 * r + n++);
    CHECK(n == r + 1);
  }
  CHECK(g_live == 15);
}

// A resize that cannot allocate its ranks leaves the set as it was (no ranks), never a rank
// count over storage that is not there (a key's INIT that ran out of memory).
void test_resize_without_memory() {
  NodePool pool;
  FifoSet<Item, 2> set;
  bool threw = false;
  FailNthAllocation(1);
  try {
    set.resize(5, &pool);
  } catch (const std::bad_alloc&) {
    threw = true;
  }
  StopFailingAllocations();
  CHECK(threw && set.size() == 0 && set.begin() == set.end());
  set.resize(5, &pool);
  set[4].push_back(Item(7));
  CHECK(set.size() == 5 && set[4].begin()->value == 7);
}

struct Key {
  double round_since = -1;
  uint64_t round_seq = 0;
  bool round_late = false;
};

// Against a std::set of (start, key): the same oldest key after every filing, with starts
// mostly increasing (the usual case), sometimes older than the newest (late filings), keys
// refiled and cleared at random; held entries stay O(pending).
void test_oldest_matches_an_ordered_set() {
  std::vector<Key> keys(500);
  RoundStarts<Key> rs;
  std::set<std::pair<double, Key*>> ref;
  std::mt19937 rng(20261124);
  double clock = 1.0;
  size_t max_held = 0;
  for (int step = 0; step < 200000; ++step) {
    Key* k = &keys[rng() % keys.size()];
    double since;
    const unsigned pick = rng() % 10;
    if (pick < 3) {
      since = -1;  // the round ran: nothing pending
    } else if (pick < 4 && clock > 2) {
      since = clock - 1.0 * (rng() % 1000) / 1000;  // a late filing
    } else {
      clock += 1.0 / 1024;
      since = clock;
    }
    if (k->round_since >= 0) ref.erase({k->round_since, k});
    if (since >= 0) ref.emplace(since, k);
    rs.Set(k, since);
    CHECK(k->round_since == since);
    if (step % 7 == 0) {
      Key* oldest = rs.Oldest();
      CHECK(oldest == (ref.empty() ? nullptr : ref.begin()->second));
    }
    CHECK(rs.pending() == ref.size());
    if (rs.held() > max_held) max_held = rs.held();
  }
  CHECK(max_held <= 2 * keys.size() + RoundStarts<Key>::kSlack + keys.size());
  // Clearing everything leaves nothing to find.
  for (Key& k : keys) rs.Set(&k, -1);
  CHECK(rs.Oldest() == nullptr);
  CHECK(rs.pending() == 0);
}

// The timeout's use: fail the oldest while it is older than a bound; starts in order come
// out in order, and a late filing comes out before newer ones.
void test_timeout_order() {
  std::vector<Key> keys(4);
  RoundStarts<Key> rs;
  rs.Set(&keys[0], 10);
  rs.Set(&keys[1], 11);
  rs.Set(&keys[2], 12);
  rs.Set(&keys[3], 10.5);  // late: older than 12
  CHECK(rs.Oldest() == &keys[0]);
  rs.Set(&keys[0], -1);
  CHECK(rs.Oldest() == &keys[3]);
  rs.Set(&keys[3], -1);
  CHECK(rs.Oldest() == &keys[1]);
  rs.Set(&keys[1], 13);  // refiled: its old entry is stale
  CHECK(rs.Oldest() == &keys[2]);
  rs.Set(&keys[2], -1);
  CHECK(rs.Oldest() == &keys[1]);
  CHECK(rs.pending() == 1);
}

// A key that stays pending at the front while many others cycle keeps memory bounded.
void test_stale_entries_compacted() {
  std::vector<Key> keys(3);
  RoundStarts<Key> rs;
  rs.Set(&keys[0], 1);
  double t = 2;
  for (int i = 0; i < 100000; ++i) {
    rs.Set(&keys[1 + i % 2], t);
    t += 1e-3;
    rs.Set(&keys[1 + i % 2], -1);
  }
  CHECK(rs.held() <= 2 * 1 + RoundStarts<Key>::kSlack + 1);
  CHECK(rs.Oldest() == &keys[0]);
}

}  // namespace

int main() {
  test_fifos_keep_order_and_own_elements();
  test_many_ranks();
  test_resize_without_memory();
  CHECK(g_live == 0);
  test_oldest_matches_an_ordered_set();
  test_timeout_order();
  test_stale_entries_compacted();
  return check_summary();
}
