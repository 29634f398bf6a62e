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
// Shape. PooledFifo<T> is a singly linked list through T::next (head and tail pointers and
// its pool, 24 bytes) whose elements live in the owner's NodePool (Server::req_pool_,
// node_pool.h), which hands out the block freed last, still in cache: push_back moves a
// value into a pooled block, pop_front destroys the oldest and gives its block back, as a
// std::deque's would. The FIFO owns its elements (the pool must outlive it). FifoSet<T>
// holds one FIFO per rank, inline for up to kInline ranks (the FIFOs sit in the KeyState's
// own cache lines) and in one heap array beyond. Iteration runs oldest first. One thread;
// not thread-safe.
#pragma once

#include <cstddef>
#include <memory>
#include <utility>

#include "ps/node_pool.h"

namespace kvstore {
namespace dist {

template <typename T>
class PooledFifo {
 public:
  PooledFifo() = default;
  PooledFifo(const PooledFifo&) = delete;
  PooledFifo& operator=(const PooledFifo&) = delete;
  ~PooledFifo() { clear(); }

  // The pool of the elements; set once, while the FIFO is empty.
  void set_pool(NodePool* pool) { pool_ = pool; }

  bool empty() const { return head_ == nullptr; }
  T& front() const { return *head_; }

  void push_back(T&& value) {
    T* t = pool_->New<T>(std::move(value));
    t->next = nullptr;
    if (tail_ != nullptr) tail_->next = t;
    else head_ = t;
    tail_ = t;
  }
  // Destroys the oldest element (the FIFO is not empty).
  void pop_front() {
    T* t = head_;
    head_ = t->next;
    if (head_ == nullptr) tail_ = nullptr;
    pool_->Delete(t);
  }
  void clear() {
    while (head_ != nullptr) pop_front();
  }

  class iterator {
   public:
    explicit iterator(T* t) : t_(t) {}
    T& operator*() const { return *t_; }
    T* operator->() const { return t_; }
    iterator& operator++() {
      t_ = t_->next;
      return *this;
    }
    bool operator!=(const iterator& o) const { return t_ != o.t_; }
    bool operator==(const iterator& o) const { return t_ == o.t_; }

   private:
    T* t_;
  };
  iterator begin() const { return iterator(head_); }
  iterator end() const { return iterator(nullptr); }

 private:
  T* head_ = nullptr;
  T* tail_ = nullptr;
  NodePool* pool_ = nullptr;
};

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
