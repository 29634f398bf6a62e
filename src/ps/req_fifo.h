// req_fifo.h - a server key's per-worker FIFOs of parked requests (KeyState::fifo), without
// an allocation per request or per key.
//
// Why. A sync server parks each push (and a pull behind one) in its key's FIFO for the
// sender's rank until the round runs, which for one worker is on arrival and otherwise on
// the last worker's push. With one std::deque per key and rank, a queue cycling one element
// allocated and freed a deque block every few requests and kept a 512-byte block and a map
// per key and rank from INIT on (about 58 MB at 100,000 keys), each a cache miss per
// message at large key counts.
//
// Shape. FifoSet<T> holds one PooledFifo (node_pool.h) per rank, its elements in the
// owner's NodePool (Server::req_pool_), which hands out the block freed last, still in
// cache; the FIFOs sit inline for up to kInline ranks (in the KeyState's own cache lines)
// and in one heap array beyond. One thread; not thread-safe.
#pragma once

#include <cstddef>
#include <memory>

#include "ps/node_pool.h"

namespace kvstore {
namespace dist {

template <typename T, size_t kInline = 2>
class FifoSet {
 public:
  using Fifo = PooledFifo<T>;

  FifoSet() = default;
  FifoSet(const FifoSet&) = delete;
  FifoSet& operator=(const FifoSet&) = delete;

  // Sets the number of ranks and the pool of their elements, once (INIT). Changes nothing
  // when it cannot allocate the ranks.
  void resize(size_t n, NodePool* pool) {
    std::unique_ptr<Fifo[]> heap(n > kInline ? new Fifo[n] : nullptr);
    heap_ = std::move(heap);
    n_ = n;
    for (Fifo& f : *this) f.set_pool(pool);
  }
  size_t size() const { return n_; }
  Fifo& operator[](size_t rank) { return data()[rank]; }
  const Fifo& operator[](size_t rank) const { return data()[rank]; }
  Fifo* begin() { return data(); }
  Fifo* end() { return data() + n_; }
  const Fifo* begin() const { return data(); }
  const Fifo* end() const { return data() + n_; }

 private:
  Fifo* data() { return heap_ ? heap_.get() : inline_; }
  const Fifo* data() const { return heap_ ? heap_.get() : inline_; }

  Fifo inline_[kInline];
  std::unique_ptr<Fifo[]> heap_;
  size_t n_ = 0;
};

}  // namespace dist
}  // namespace kvstore
