// round_starts.h - a sync server's pending rounds by when each started (the arrival of the
// oldest push heading one of its key's FIFOs), so that the round timeout looks at the
// oldest only (Server::round_starts_, CheckRoundTimeouts).
//
// Why not a std::set. A set node per pending round costs an allocation and O(log keys)
// pointer chasing, a cache miss per level once 100,000 keys wait at once (two workers'
// pushes of a large call reach a server one call apart).
//
// Shape. Start times almost always come in order: a key's round becomes pending when a push
// arrives, and the clock is monotonic (clock.h). Such filings are appended to a FIFO, which
// stays sorted. A filing older than the FIFO's newest entry (a worker's next push already
// queued when its key's previous round ran) goes to an ordered set of late filings instead;
// the oldest round is the older of the two fronts. Refiling or clearing a key does not
// search the FIFO: its old entry goes stale (the key's `round_seq` no longer matches it)
// and is dropped when it reaches the front, or when the FIFO holds more than twice as many
// entries as there are pending rounds (plus kSlack), by one pass that keeps the live ones
// in order. Memory is thus O(pending rounds), each filing O(1) amortised in the usual
// case, and Oldest the key a set ordered by (start, key) would put first (keys with equal
// starts in the FIFO: in filing order).
//
// V must have `double round_since` (-1: no pending round), `uint64_t round_seq` and `bool
// round_late`, used by this class only (V's defaults: -1, 0, false). One thread; not
// thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <set>
#include <utility>

namespace kvstore {
namespace dist {

template <typename V>
class RoundStarts {
 public:
  static constexpr size_t kSlack = 64;

  // k's pending round started at `since` (seconds, clock.h), or none when since < 0.
  void Set(V* k, double since) {
    if (since < 0) since = -1;
    if (since == k->round_since) return;
    if (k->round_since >= 0) {
      if (k->round_late) late_.erase({k->round_since, k});
      --pending_;
    }
    k->round_since = since;
    k->round_seq = 0;  // the key's entry in order_, if any, is stale from here on
    k->round_late = false;
    if (since < 0) return;
    ++pending_;
    if (order_.empty() || since >= order_.back().since) {
      k->round_seq = next_seq_++;
      order_.push_back({since, k, k->round_seq});
      if (order_.size() > 2 * pending_ + kSlack) Compact();
    } else {
      late_.emplace(since, k);
      k->round_late = true;
    }
  }

  // The key whose pending round started first, or nullptr when none is pending.
  V* Oldest() {
    while (!order_.empty() && Stale(order_.front())) order_.pop_front();
    V* a = order_.empty() ? nullptr : order_.front().k;
    if (late_.empty()) return a;
    V* b = late_.begin()->second;
    if (a == nullptr) return b;
    return std::make_pair(b->round_since, b) < std::make_pair(a->round_since, a) ? b : a;
  }

  size_t pending() const { return pending_; }
  // Entries held, stale ones included (for tests: memory stays O(pending)).
  size_t held() const { return order_.size() + late_.size(); }

 private:
  struct Entry {
    double since;
    V* k;
    uint64_t seq;
  };
  static bool Stale(const Entry& e) { return e.k->round_seq != e.seq; }
  void Compact() {
    std::deque<Entry> live;
    for (const Entry& e : order_) {
      if (!Stale(e)) live.push_back(e);
    }
    order_.swap(live);
  }

  std::deque<Entry> order_;                // non-decreasing `since`; stale entries skipped
  std::set<std::pair<double, V*>> late_;  // filings older than order_'s newest when made
  uint64_t next_seq_ = 1;                  // 0: "no entry in order_"
  size_t pending_ = 0;
};

}  // namespace dist
}  // namespace kvstore
