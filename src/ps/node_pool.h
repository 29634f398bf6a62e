// node_pool.h - a free-list allocator for the nodes of one owner's node-based containers
// (std::set, std::unordered_map, PooledFifo below), so that a container that gains and loses
// an element per request costs no malloc/free per request.
//
// Why. A call of K keys puts K requests through the worker's send queue and its table of
// outstanding requests; with the default allocator each request costs several malloc/free
// pairs spread over two threads, and a call of 100,000 keys grows the heap by hundreds of
// MiB that the kernel zeroes again at every call once glibc gave it back.
//
// Ownership. A NodePool owns every byte it hands out: blocks come from chunks of kChunkBytes
// that the pool frees, all at once, when it is destroyed; a block given back goes on its
// size class's free list for the next allocation of that size. The pool therefore keeps
// the memory of its largest burst for its life, which is the point (bounded by the largest
// number of elements its containers held at once). Blocks above kMaxPooled bytes (hash
// tables' bucket arrays) go to operator new and back at once.
//
// Threading. None: the owner serialises every use (the send queue under its mutex, the I/O
// thread's own tables). Containers using a pool must be destroyed before it (declare the
// pool first).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <utility>
#include <vector>

namespace kvstore {
namespace dist {

class NodePool {
 public:
  static constexpr size_t kGrain = 16;          // size classes: multiples of 16 bytes
  static constexpr size_t kMaxPooled = 1024;     // larger blocks are not pooled
  static constexpr size_t kChunkBytes = 64u << 10;

  NodePool() = default;
  NodePool(const NodePool&) = delete;
  NodePool& operator=(const NodePool&) = delete;

  void* Allocate(size_t bytes) {
    if (bytes > kMaxPooled) return ::operator new(bytes);
    const size_t c = Class(bytes);
    ++live_;
    if (Free* f = free_[c]) {
      free_[c] = f->next;
      return f;
    }
    const size_t n = (c + 1) * kGrain;
    if (left_ < n) {
      chunks_.emplace_back(new char[kChunkBytes]);
      cur_ = chunks_.back().get();
      left_ = kChunkBytes;
    }
    void* p = cur_;
    cur_ += n;
    left_ -= n;
    return p;
  }

  void Deallocate(void* p, size_t bytes) {
    if (bytes > kMaxPooled) return ::operator delete(p);
    const size_t c = Class(bytes);
    --live_;
    Free* f = static_cast<Free*>(p);
    f->next = free_[c];
    free_[c] = f;
  }

  // Constructs / destroys one T in a pooled block.
  template <typename T, typename... Args>
  T* New(Args&&... args) {
    void* p = Allocate(sizeof(T));
    try {
      return new (p) T(std::forward<Args>(args)...);
    } catch (...) {
      Deallocate(p, sizeof(T));
      throw;
    }
  }
  template <typename T>
  void Delete(T* t) {
    t->~T();
    Deallocate(t, sizeof(T));
  }

  // Pooled blocks handed out and not given back; chunks the pool holds (for tests).
  size_t live() const { return live_; }
  size_t chunks() const { return chunks_.size(); }

 private:
  struct Free {
    Free* next;
  };
  static size_t Class(size_t bytes) { return bytes == 0 ? 0 : (bytes - 1) / kGrain; }

  Free* free_[kMaxPooled / kGrain] = {};
  std::vector<std::unique_ptr<char[]>> chunks_;
  char* cur_ = nullptr;
  size_t left_ = 0;
  size_t live_ = 0;
};

// The standard-library allocator over a NodePool (every container of one owner shares it).
template <typename T>
struct PoolAllocator {
  using value_type = T;
  NodePool* pool;
  explicit PoolAllocator(NodePool* p) noexcept : pool(p) {}
  template <typename U>
  PoolAllocator(const PoolAllocator<U>& o) noexcept : pool(o.pool) {}
  T* allocate(size_t n) { return static_cast<T*>(pool->Allocate(n * sizeof(T))); }
  void deallocate(T* p, size_t n) noexcept { pool->Deallocate(p, n * sizeof(T)); }
  template <typename U>
  bool operator==(const PoolAllocator<U>& o) const noexcept { return pool == o.pool; }
  template <typename U>
  bool operator!=(const PoolAllocator<U>& o) const noexcept { return pool != o.pool; }
};

// A FIFO of T (which has a `T* next` member for the list) whose elements live in a NodePool:
// push_back moves a value into a pooled block, pop_front destroys the oldest and gives its
// block back, as a std::deque's would without a block per few elements. Head and tail
// pointers and the pool, 24 bytes. The FIFO owns its elements (the pool must outlive it);
// iteration runs oldest first.
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

}  // namespace dist
}  // namespace kvstore
