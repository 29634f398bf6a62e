// array_list.h - the arrays of one key in a worker's data call: a group's values or outputs
// (worker_groups.h) and an operation's outputs (Op::outs, op.h). Almost always one array,
// kept inline, so that a call of many keys allocates and frees nothing per key for them
// (with a vector per key, a call of 100,000 keys freed 100,000 small blocks, half of them
// on the I/O thread); two or more (one per device) live in a vector, every one of them, so
// that the arrays are always contiguous from begin().
#pragma once

#include <cstddef>
#include <vector>

namespace kvstore {
namespace dist {

template <typename A>
class ArrayList {
 public:
  ArrayList() = default;
  explicit ArrayList(A* a) : one_(a), n_(1) {}

  void push_back(A* a) {
    if (n_ == 0) {
      one_ = a;
    } else {
      if (n_ == 1) many_.push_back(one_);
      many_.push_back(a);
    }
    ++n_;
  }
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  A* const* begin() const { return n_ <= 1 ? &one_ : many_.data(); }
  A* const* end() const { return begin() + n_; }
  A* const* data() const { return begin(); }
  A* operator[](size_t i) const { return begin()[i]; }
  // The arrays as a vector, for the calls that take one.
  std::vector<A*> ToVector() const { return std::vector<A*>(begin(), end()); }

 private:
  A* one_ = nullptr;      // the array while there is one
  std::vector<A*> many_;  // every array once there are two or more
  size_t n_ = 0;
};

}  // namespace dist
}  // namespace kvstore
