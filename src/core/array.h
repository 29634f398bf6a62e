// array.h - the dense n-d array behind KVArrayHandle.
//
// Invariants: shape, dtype and context never change after creation; `data()` points at
// nbytes() bytes owned by the array on its device (nullptr only when nbytes() is 0).
// A pending-write count lets asynchronous producers (distributed pulls) mark the array busy;
// readers call WaitPendingWrites() before touching the data.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace kvstore {

struct Context {
  int dev_type = KV_CPU;
  int dev_id = 0;
  bool is_cpu() const { return dev_type == KV_CPU; }
  bool is_gpu() const { return dev_type == KV_GPU; }
  bool operator==(const Context& o) const { return dev_type == o.dev_type && dev_id == o.dev_id; }
  bool operator!=(const Context& o) const { return !(*this == o); }
  std::string ToString() const;  // "cpu(0)", "gpu(1)"
};

using Shape = std::vector<int64_t>;
std::string ShapeToString(const Shape& shape);  // "(2,3)", "()" for rank 0
int64_t ShapeSize(const Shape& shape);          // product; 1 for rank 0

}  // namespace kvstore

// The handle type of the C ABI is the array class itself.
struct KVArray_ {
 public:
  // Allocates a zero-filled array. Throws INVALID_ARGUMENT, DEVICE, OUT_OF_MEMORY.
  static std::unique_ptr<KVArray_> Create(const kvstore::Shape& shape, int dtype,
                                          kvstore::Context ctx);
  ~KVArray_();
  KVArray_(const KVArray_&) = delete;
  KVArray_& operator=(const KVArray_&) = delete;

  const kvstore::Shape& shape() const { return shape_; }
  int ndim() const { return static_cast<int>(shape_.size()); }
  int dtype() const { return dtype_; }
  kvstore::Context ctx() const { return ctx_; }
  int64_t size() const { return size_; }
  size_t nbytes() const { return nbytes_; }
  void* data() { return data_; }
  const void* data() const { return data_; }
  // "float32(2,3)@cpu(0)" for error messages.
  std::string Describe() const;

  // Asynchronous-writer protocol: BeginPendingWrite before handing the array to a producer
  // that completes later; the producer calls EndPendingWrite exactly once (code 0 on
  // success). WaitPendingWrites blocks until the count is zero and throws the first error
  // recorded since the last wait (then clears it).
  void BeginPendingWrite();
  void EndPendingWrite(int code, const std::string& message);
  void WaitPendingWrites();

 private:
  KVArray_(kvstore::Shape shape, int dtype, kvstore::Context ctx);

  kvstore::Shape shape_;
  int dtype_;
  kvstore::Context ctx_;
  int64_t size_ = 0;
  size_t nbytes_ = 0;
  void* data_ = nullptr;

  std::mutex pending_mu_;
  std::condition_variable pending_cv_;
  int pending_writes_ = 0;
  int pending_error_code_ = 0;
  std::string pending_error_message_;
};

namespace kvstore {
using Array = ::KVArray_;

// Throws SHAPE_MISMATCH / DTYPE_MISMATCH naming `what` and both shapes or dtypes when `got`
// differs from the expected shape and dtype.
void CheckShapeDType(const Shape& shape, int dtype, const Array& got, const std::string& what);
inline void CheckSameShapeDType(const Array& expected, const Array& got, const std::string& what) {
  CheckShapeDType(expected.shape(), expected.dtype(), got, what);
}

// dst <- src (any devices, same shape and dtype checked by the caller).
void CopyArray(Array* dst, const Array& src);
}  // namespace kvstore
