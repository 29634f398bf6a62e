// send_queue.h - the order in which a worker's requests leave, and the pull window. No
// sockets: the I/O thread pops what may leave now and sends it.
//
// Invariants.
//  - Priority order. Requests are ranked by (priority desc, sequence asc), the sequence
//    being the order they were queued in. The next request comes from the key whose best
//    queued request ranks first.
//  - Per-key order. The requests of one key leave in the order they were queued: the key's
//    oldest request leaves first and so inherits the rank of the key's best one. A server
//    receives one worker's requests in send order, so a pull queued after a push of its key
//    observes that push. Requests queued with key 0 are unordered (each one its own key).
//  - Pull window. Windowed pulls in flight (popped, not yet Done) hold at most kWindowBytes
//    of reply payload (each counts its reply bytes plus one), but kWindowMin of them may
//    always be in flight. A pull is windowed unless a push of its key is in flight: such a
//    pull waits on the server behind that push, and a sync push may wait for other workers,
//    so holding it back could deadlock workers that order keys differently. A key whose
//    oldest request is a pull that does not fit waits, all its requests with it; every
//    other key goes on, so pushes and control requests are never held back.
//  - Every popped request gets a Ticket; Done(ticket) once its reply arrived (or it
//    failed) gives back its share of the window and of the key's pushes in flight.
//
// Threading. Every method takes the queue's own mutex, so application threads may Push
// while the I/O thread Pops and Dones. No method blocks or calls out while holding it.
//
// Cost. Push, Pop and Done are O(log n) in the number of queued requests, plus, in Pop,
// the windowed pulls ranked ahead of the first one that fits that are too large for the
// room left (none when the pulls are of one size, or when none fits). PopSome takes the
// lock once for many requests. Memory: every node of the queue's containers (a request,
// its lane, their places in the ranked sets) comes from the queue's NodePool
// (node_pool.h), so a request costs no malloc/free once the queue has held as many
// requests as it holds now; the pool keeps the memory of the largest burst.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ps/node_pool.h"

namespace kvstore {
namespace dist {

enum class SendKind {
  kControl,  // no reply payload, no key state (init of a value counts as a push)
  kPush,     // carries a value of its key (push, pushpull, init)
  kPull,     // asks for reply_bytes of its key's value
};

template <typename T>
class SendQueue {
 public:
  static constexpr size_t kWindowBytes = 8u << 20;
  static constexpr int kWindowMin = 2;

  struct Entry {
    uint64_t key = 0;  // 0: unordered
    SendKind kind = SendKind::kControl;
    size_t reply_bytes = 0;  // pulls: the reply's payload bytes
    T item;
  };

  // What a popped request holds until Done.
  struct Ticket {
    uint64_t key = 0;
    size_t window_bytes = 0;  // > 0: counted in the pull window
    bool push = false;        // counted in its key's pushes in flight
  };

  // Queues `entries` in their order, all at `priority`. Returns true when the queue held
  // nothing before (the sender may be asleep).
  bool Push(std::vector<Entry>& entries, int priority);

  // The next request that may leave now, with its ticket; false when none may.
  bool Pop(T* item, Ticket* ticket);
  // Pops up to `max` requests as Pop would one by one (no Done between them), appending
  // them to *out, under one lock; returns how many. When `done` is given, its tickets are
  // given back first (as Done, under the same lock) and it is cleared: a sender that
  // collects the tickets of the replies it read takes the lock once per turn, not once
  // per reply.
  size_t PopSome(std::vector<std::pair<T, Ticket>>* out, size_t max,
                 std::vector<Ticket>* done = nullptr);

  // Gives back what `ticket` holds (once; the ticket is cleared).
  void Done(Ticket* ticket);
  // Whether Done(ticket) has anything to give back (else it need not be called).
  static bool Holds(const Ticket& ticket) { return ticket.window_bytes > 0 || ticket.push; }

  // Removes and returns every queued request in rank order (the window is unchanged).
  std::vector<T> TakeAll();

  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return queued_;
  }
  // The chunks of the queue's node pool (for tests: steady use does not grow it).
  size_t pool_chunks() const {
    std::lock_guard<std::mutex> lock(mu_);
    return pool_.chunks();
  }

 private:
  using Rank = std::pair<int64_t, uint64_t>;  // (-priority, sequence)
  using Slot = std::pair<Rank, uint64_t>;     // (a lane's rank, its key)
  template <typename V>
  using PoolSet = std::set<V, std::less<V>, PoolAllocator<V>>;
  struct Item {
    Rank rank;
    SendKind kind;
    size_t reply_bytes;
    T value;
    Item* next;  // the lane's next request (fifo order)
  };
  // One key's queued requests: a fifo of pooled Items. A lane with requests sits in exactly
  // one of free_ (its head is not a windowed pull) and pulls_ (it is), at `placed` with
  // `placed_bytes`. Its Items go back to the pool when it is destroyed.
  struct Lane {
    explicit Lane(NodePool* p) : ranks(PoolAllocator<Rank>(p)) { items.set_pool(p); }
    Lane(const Lane&) = delete;
    Lane& operator=(const Lane&) = delete;
    bool empty() const { return items.empty(); }
    Item& front() const { return items.front(); }
    PooledFifo<Item> items;
    PoolSet<Rank> ranks;  // of the fifo's items; begin() is the lane's rank
    Rank placed{};
    size_t placed_bytes = 0;
  };
  static constexpr uint64_t kUnordered = uint64_t{1} << 63;  // lanes of key-0 requests

  size_t HeadWindowBytes(uint64_t key, const Lane& lane) const {
    const Item& head = lane.front();
    if (head.kind != SendKind::kPull || pushes_in_flight_.count(key) != 0) return 0;
    return head.reply_bytes + 1;
  }
  void Place(uint64_t key, Lane& lane);
  void Unplace(uint64_t key, const Lane& lane);
  // The best-ranked lane of pulls_ whose head fits the window, or pulls_.end().
  typename PoolSet<Slot>::iterator FittingPull();
  bool PopLocked(T* item, Ticket* ticket);
  void DoneLocked(const Ticket& ticket);

  mutable std::mutex mu_;
  NodePool pool_;  // before the containers: they give their nodes back to it
  uint64_t next_seq_ = 1;
  size_t queued_ = 0;
  std::unordered_map<uint64_t, Lane, std::hash<uint64_t>, std::equal_to<uint64_t>,
                     PoolAllocator<std::pair<const uint64_t, Lane>>>
      lanes_{16, std::hash<uint64_t>(), std::equal_to<uint64_t>(),
             PoolAllocator<std::pair<const uint64_t, Lane>>(&pool_)};
  PoolSet<Slot> free_{PoolAllocator<Slot>(&pool_)};
  PoolSet<Slot> pulls_{PoolAllocator<Slot>(&pool_)};
  // placed_bytes of the lanes in pulls_
  std::multiset<size_t, std::less<size_t>, PoolAllocator<size_t>> pull_bytes_{PoolAllocator<size_t>(&pool_)};
  size_t window_bytes_ = 0;
  int window_count_ = 0;
  // by key
  std::unordered_map<uint64_t, int, std::hash<uint64_t>, std::equal_to<uint64_t>,
                     PoolAllocator<std::pair<const uint64_t, int>>>
      pushes_in_flight_{16, std::hash<uint64_t>(), std::equal_to<uint64_t>(),
                        PoolAllocator<std::pair<const uint64_t, int>>(&pool_)};
};

// The common case is a call's keys queued in order, one request per lane: each lane then
// ranks after every placed one, and the inserts are hinted at the sets' ends (amortised
// O(1) instead of a descent from the root through nodes that miss the cache); a wrong hint
// costs the ordinary O(log n) insert.
template <typename T>
void SendQueue<T>::Place(uint64_t key, Lane& lane) {
  lane.placed = *lane.ranks.begin();
  lane.placed_bytes = HeadWindowBytes(key, lane);
  if (lane.placed_bytes > 0) {
    pulls_.emplace_hint(pulls_.end(), lane.placed, key);
    pull_bytes_.insert(pull_bytes_.end(), lane.placed_bytes);
  } else {
    free_.emplace_hint(free_.end(), lane.placed, key);
  }
}

// Pop unplaces the best-ranked lane, most often the first of its set: erased without a
// search.
template <typename T>
void SendQueue<T>::Unplace(uint64_t key, const Lane& lane) {
  PoolSet<Slot>& set = lane.placed_bytes > 0 ? pulls_ : free_;
  const Slot slot{lane.placed, key};
  if (*set.begin() == slot) {
    set.erase(set.begin());
  } else {
    set.erase(slot);
  }
  if (lane.placed_bytes > 0) pull_bytes_.erase(pull_bytes_.find(lane.placed_bytes));
}

template <typename T>
bool SendQueue<T>::Push(std::vector<Entry>& entries, int priority) {
  std::lock_guard<std::mutex> lock(mu_);
  const bool was_empty = queued_ == 0;
  for (Entry& e : entries) {
    const uint64_t seq = next_seq_++;
    const Rank rank{-static_cast<int64_t>(priority), seq};
    const uint64_t key = e.key != 0 ? e.key : kUnordered | seq;
    Lane& lane = lanes_.try_emplace(key, &pool_).first->second;
    if (!lane.empty()) Unplace(key, lane);
    lane.items.push_back(Item{rank, e.kind, e.reply_bytes, std::move(e.item), nullptr});
    lane.ranks.insert(lane.ranks.end(), rank);  // ranks grow with the sequence at one priority
    Place(key, lane);
    ++queued_;
  }
  return was_empty;
}

template <typename T>
typename SendQueue<T>::template PoolSet<typename SendQueue<T>::Slot>::iterator SendQueue<T>::FittingPull() {
  if (pulls_.empty() || window_count_ < kWindowMin) return pulls_.begin();
  const size_t room = window_bytes_ >= kWindowBytes ? 0 : kWindowBytes - window_bytes_;
  if (*pull_bytes_.begin() > room) return pulls_.end();
  for (auto it = pulls_.begin(); it != pulls_.end(); ++it) {
    if (lanes_.find(it->second)->second.placed_bytes <= room) return it;
  }
  return pulls_.end();
}

template <typename T>
bool SendQueue<T>::Pop(T* item, Ticket* ticket) {
  std::lock_guard<std::mutex> lock(mu_);
  return PopLocked(item, ticket);
}

template <typename T>
size_t SendQueue<T>::PopSome(std::vector<std::pair<T, Ticket>>* out, size_t max,
                             std::vector<Ticket>* done) {
  std::lock_guard<std::mutex> lock(mu_);
  if (done != nullptr) {
    for (const Ticket& t : *done) DoneLocked(t);
    done->clear();
  }
  size_t n = 0;
  for (; n < max && queued_ > 0; ++n) {
    out->emplace_back();
    if (!PopLocked(&out->back().first, &out->back().second)) {
      out->pop_back();
      break;
    }
  }
  return n;
}

template <typename T>
bool SendQueue<T>::PopLocked(T* item, Ticket* ticket) {
  auto pull = FittingPull();
  const bool has_pull = pull != pulls_.end();
  if (free_.empty() && !has_pull) return false;
  const uint64_t key = !free_.empty() && (!has_pull || *free_.begin() < *pull)
                           ? free_.begin()->second
                           : pull->second;
  auto lane_it = lanes_.find(key);
  Lane& lane = lane_it->second;
  *ticket = Ticket{};
  ticket->key = key;
  ticket->window_bytes = lane.placed_bytes;
  ticket->push = lane.front().kind == SendKind::kPush;
  if (ticket->window_bytes > 0) {
    window_bytes_ += ticket->window_bytes;
    ++window_count_;
  }
  if (ticket->push) ++pushes_in_flight_[key];
  Unplace(key, lane);
  *item = std::move(lane.front().value);
  lane.ranks.erase(lane.front().rank);
  lane.items.pop_front();
  --queued_;
  if (lane.empty()) {
    lanes_.erase(lane_it);
  } else {
    Place(key, lane);
  }
  return true;
}

template <typename T>
void SendQueue<T>::Done(Ticket* ticket) {
  if (!Holds(*ticket)) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    DoneLocked(*ticket);
  }
  *ticket = Ticket{};
}

template <typename T>
void SendQueue<T>::DoneLocked(const Ticket& ticket) {
  if (ticket.window_bytes > 0) {
    window_bytes_ -= ticket.window_bytes;
    --window_count_;
  }
  if (ticket.push) {
    auto it = pushes_in_flight_.find(ticket.key);
    if (it != pushes_in_flight_.end() && --it->second == 0) {
      pushes_in_flight_.erase(it);
      // The key's queued pull, if it heads the lane, is windowed again.
      auto lane = lanes_.find(ticket.key);
      if (lane != lanes_.end()) {
        Unplace(ticket.key, lane->second);
        Place(ticket.key, lane->second);
      }
    }
  }
}

template <typename T>
std::vector<T> SendQueue<T>::TakeAll() {
  std::vector<std::pair<Rank, T>> ranked;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ranked.reserve(queued_);
    for (auto& l : lanes_) {
      for (Item& i : l.second.items) ranked.emplace_back(i.rank, std::move(i.value));
    }
    lanes_.clear();
    free_.clear();
    pulls_.clear();
    pull_bytes_.clear();
    queued_ = 0;
  }
  std::sort(ranked.begin(), ranked.end(),
            [](const std::pair<Rank, T>& a, const std::pair<Rank, T>& b) { return a.first < b.first; });
  std::vector<T> out;
  out.reserve(ranked.size());
  for (auto& r : ranked) out.push_back(std::move(r.second));
  return out;
}

}  // namespace dist
}  // namespace kvstore
