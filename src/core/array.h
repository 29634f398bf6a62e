// array.h - the n-d array behind KVArrayHandle: dense, or row_sparse.
//
// Invariants: shape, dtype, context and storage type never change after creation; `data()`
// points at nbytes() bytes (size() elements) of the array's storage on its device (nullptr
// only when nbytes() is 0).
// Storage types. A dense array (KV_STYPE_DEFAULT) holds every element: size() is the
// product of shape(). A row_sparse array (KV_STYPE_ROW_SPARSE; host memory only, rank >= 1)
// of logical shape (R, d1, ..., dk) holds the sorted unique row ids r_0 < ... < r_{n-1} in
// [0, R) (row_ids(), host memory) and a data block of shape (n, d1, ..., dk): data(),
// size() and nbytes() describe that block, never the logical array, so code written for
// dense arrays cannot read past it. Such code must refuse row_sparse arrays (RequireDense);
// the row-sparse operations are in core/row_sparse.h. Only ReplaceRows changes the row set.
// The storage is reference-counted: an asynchronous consumer that still reads the bytes
// after the array was freed or its storage replaced (a zero-copy network send) holds a
// reference of its own.
// Asynchronous access. A pending-write count lets producers (distributed pulls) mark the
// array busy; readers call WaitPendingWrites() before touching the data. A pending-read
// count lets consumers (zero-copy distributed pushes) read the data after the call that
// started them returned; writers call WaitToWrite(), which waits for both.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/call_gate.h"
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
struct alignas(64) KVArray_ {
 public:
  // Allocates a zero-filled array. Throws INVALID_ARGUMENT, DEVICE, OUT_OF_MEMORY.
  static std::unique_ptr<KVArray_> Create(const kvstore::Shape& shape, int dtype,
                                          kvstore::Context ctx);
  // A row_sparse array of logical shape `shape` holding rows `row_ids` (strictly increasing,
  // each in [0, shape[0])) with zero data, in host memory. Throws INVALID_ARGUMENT (rank 0,
  // ids out of order or range, and as Create), NOT_SUPPORTED (a non-CPU context), OUT_OF_MEMORY.
  static std::unique_ptr<KVArray_> CreateRowSparse(const kvstore::Shape& shape, int dtype,
                                                   kvstore::Context ctx,
                                                   std::vector<int64_t> row_ids);
  // A dense host array of `shape` and `dtype` over `storage`, a CPU block of at least
  // ShapeSize(shape) elements that the caller keeps or shares (scratch reused across calls,
  // or the block of a row_sparse array seen as its (n, d1, ..., dk) rows). No copy, no
  // zero fill. Throws INVALID_ARGUMENT as Create; `storage` may be null for 0 elements.
  static std::unique_ptr<KVArray_> CreateView(const kvstore::Shape& shape, int dtype,
                                              std::shared_ptr<void> storage);
  ~KVArray_();
  KVArray_(const KVArray_&) = delete;
  KVArray_& operator=(const KVArray_&) = delete;

  const kvstore::Shape& shape() const { return shape_; }
  int ndim() const { return static_cast<int>(shape_.size()); }
  int dtype() const { return dtype_; }
  kvstore::Context ctx() const { return ctx_; }
  // Elements and bytes of the data block (the whole array when dense).
  int64_t size() const { return size_; }
  size_t nbytes() const { return nbytes_; }
  int stype() const { return stype_; }  // KV_STYPE_DEFAULT or KV_STYPE_ROW_SPARSE
  bool is_row_sparse() const { return stype_ == KV_STYPE_ROW_SPARSE; }
  // Row-sparse only (empty for dense): the stored rows, strictly increasing.
  const std::vector<int64_t>& row_ids() const { return row_ids_; }
  int64_t num_rows() const { return static_cast<int64_t>(row_ids_.size()); }
  // Elements per row: the product of shape()[1:] (1 for rank 1, 0 for rank 0).
  int64_t row_len() const;
  // Row-sparse only: replaces the row set by `row_ids` (validated as in CreateRowSparse)
  // and the data block by `block`, host memory of `block_bytes` bytes holding at least
  // row_ids.size() * row_len() elements (the row data, in order; block may be the current
  // storage()). Never fails after validation; the caller has waited for pending reads and
  // writes (WaitToWrite) and re-reads data() afterwards.
  void ReplaceRows(std::vector<int64_t> row_ids, std::shared_ptr<void> block, size_t block_bytes);
  // Bytes the current storage holds (>= nbytes(); more when ReplaceRows kept a larger block).
  size_t storage_bytes() const { return storage_bytes_; }
  // Throws NOT_SUPPORTED "<what>: row_sparse arrays are not supported ..." unless dense.
  void RequireDense(const char* what) const;
  void* data() { return data_; }
  const void* data() const { return data_; }
  // The block behind data() (null when nbytes() is 0); holding it keeps the bytes alive.
  const std::shared_ptr<void>& storage() const { return storage_; }
  // "float32(2,3)@cpu(0)" for error messages.
  std::string Describe() const;

  // Asynchronous-writer protocol: BeginPendingWrite before handing the array to a producer
  // that completes later; the producer calls EndPendingWrite exactly once (code 0 on
  // success). WaitPendingWrites blocks until the count is zero and throws the first error
  // recorded since the last wait (then clears it).
  void BeginPendingWrite();
  void EndPendingWrite(int code, const std::string& message);
  void WaitPendingWrites();
  // How long WaitPendingWrites keeps looking, yielding its vCPU, before it sleeps on the
  // condition variable (process-wide; 0, the default, sleeps at once). The distributed
  // worker sets it from KVSTORE_SPIN_US: a small pull's reply arrives within tens of
  // microseconds, and waking a sleeping thread costs up to ~50 us on a VM (ps/spin_poll.h).
  static void SetWaitSpinUs(int us);

  // Asynchronous-reader protocol: BeginPendingRead before a consumer that completes later
  // reads the data; it calls EndPendingRead exactly once, which may delete the array (see
  // Release). Consumers bound their own lifetime (network deadlines), so waits end.
  void BeginPendingRead();
  void EndPendingRead();
  // Waits for pending writes (throwing their error as WaitPendingWrites) and pending reads:
  // call before writing the data.
  void WaitToWrite();

  // Hands out the data pointer for direct access (KVArrayGetData): waits as WaitToWrite and
  // fixes the storage for the array's lifetime (AdoptStorage refuses from now on).
  void* ExposeData();

  // Replaces the storage by `storage`, a CPU block of nbytes() bytes (a received network
  // buffer), when the data pointer was never exposed and the block is aligned for the
  // dtype; returns false and changes nothing otherwise. Only the producer of a pending
  // write may call it (readers wait for that write, so nobody holds the old pointer).
  bool AdoptStorage(std::shared_ptr<void> storage);

  // The C-ABI calls running on this array (see call_gate.h). Not part of the array's value:
  // a call that only reads the array still holds its gate.
  kvstore::CallGate& call_gate() const { return call_gate_; }
  // No pending write, read or unreported error (WaitPendingWrites and WaitToWrite would
  // return at once). An acquire load: true orders the caller after the last producer.
  bool quiet() const { return quiet_.load(std::memory_order_acquire); }
  // Whether the caller owns the array (made by KVArrayCreate) or the library lends it (an
  // updater's recv/stored); only owned arrays may be freed through the ABI.
  bool caller_owned() const { return caller_owned_; }
  void set_caller_owned() { caller_owned_ = true; }

  // Deletes the array (KVArrayFree) after waiting for pending writes (their error is
  // dropped); while reads are pending the deletion is left to the last EndPendingRead, so
  // freeing never waits for the network.
  static void Release(KVArray_* array);

 private:
  KVArray_(kvstore::Shape shape, int dtype, kvstore::Context ctx);
  // Requires pending_mu_: recomputes quiet_ from the pending counts and error.
  void UpdateQuiet() {
    quiet_.store(pending_writes_ == 0 && pending_reads_ == 0 && pending_error_code_ == 0,
                 std::memory_order_release);
  }

  // The fields every data call reads (shape, dtype, storage type, context, data, the call
  // gate and the pending-work flag) share the object's first cache line (the class is
  // 64-byte aligned): with many keys per call each array costs one miss, not three.
  kvstore::Shape shape_;
  int dtype_;
  int stype_ = KV_STYPE_DEFAULT;
  kvstore::Context ctx_;
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  mutable kvstore::CallGate call_gate_;
  // No pending write, read or unreported error: the waits return without taking
  // pending_mu_. Written under pending_mu_ (release) by every change of the pending counts
  // and error below; an acquire load of true orders the caller after the last producer's
  // writes. The producer still holds pending_mu_ when it sets it, so a caller that saw it
  // may not free the array at once: the destructor takes pending_mu_ first.
  std::atomic<bool> quiet_{true};
  bool caller_owned_ = false;
  int64_t size_ = 0;
  std::vector<int64_t> row_ids_;
  size_t storage_bytes_ = 0;
  std::shared_ptr<void> storage_;

  std::mutex pending_mu_;
  std::condition_variable pending_cv_;
  int pending_reads_ = 0;
  bool exposed_ = false;
  bool release_requested_ = false;  // Release ran while reads were pending
  // Changed under pending_mu_ only; read without it by WaitPendingWrites' spin.
  std::atomic<int> pending_writes_{0};
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

// dst <- src (any devices, same shape and dtype checked by the caller). Both must be dense
// (NOT_SUPPORTED otherwise).
void CopyArray(Array* dst, const Array& src);
}  // namespace kvstore
