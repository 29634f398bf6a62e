#include "core/array.h"

#include <limits>

#include "core/device.h"
#include "core/spin.h"

namespace kvstore {

std::string Context::ToString() const {
  const char* name = dev_type == KV_CPU ? "cpu" : dev_type == KV_GPU ? "gpu" : "dev?";
  return StrFormat("%s(%d)", name, dev_id);
}

std::string ShapeToString(const Shape& shape) {
  std::string out = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ",";
    out += std::to_string(shape[i]);
  }
  return out + ")";
}

int64_t ShapeSize(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

void CheckShapeDType(const Shape& shape, int dtype, const Array& got, const std::string& what) {
  KV_CHECK(shape == got.shape(), KV_ERR_SHAPE_MISMATCH, "%s: shape mismatch: expected %s, got %s",
           what.c_str(), ShapeToString(shape).c_str(), ShapeToString(got.shape()).c_str());
  KV_CHECK(dtype == got.dtype(), KV_ERR_DTYPE_MISMATCH, "%s: dtype mismatch: expected %s, got %s",
           what.c_str(), DTypeName(dtype), DTypeName(got.dtype()));
}

void CopyArray(Array* dst, const Array& src) {
  src.RequireDense("copy");
  dst->RequireDense("copy");
  if (dst == &src || dst->nbytes() == 0) return;
  // The non-CPU side (if any) owns cross-device copies.
  DeviceBackend& backend = GetBackend(src.ctx().is_cpu() ? dst->ctx().dev_type : src.ctx().dev_type);
  backend.CopyArray(dst, src);
}

}  // namespace kvstore

using kvstore::Context;
using kvstore::Shape;

KVArray_::KVArray_(Shape shape, int dtype, Context ctx)
    : shape_(std::move(shape)), dtype_(dtype), ctx_(ctx) {}

namespace {

// Validates shape, dtype and context as KVArrayCreate documents; returns the element count.
int64_t CheckedSize(const Shape& shape, int dtype, Context ctx) {
  KV_CHECK(shape.size() <= KV_MAX_NDIM, KV_ERR_INVALID_ARGUMENT,
           "array rank %zu exceeds the maximum of %d", shape.size(), KV_MAX_NDIM);
  KV_CHECK(kvstore::IsValidDType(dtype), KV_ERR_INVALID_ARGUMENT,
           "unknown dtype %d (valid: 0 float32, 1 float64, 2 float16, 3 uint8, 4 int32, 6 int64)",
           dtype);
  KV_CHECK(ctx.dev_id >= 0, KV_ERR_DEVICE, "invalid device id %d", ctx.dev_id);
  const size_t elem = kvstore::DTypeSize(dtype);
  int64_t size = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    KV_CHECK(shape[i] >= 0, KV_ERR_INVALID_ARGUMENT, "negative dimension %lld at axis %zu of %s",
             static_cast<long long>(shape[i]), i, kvstore::ShapeToString(shape).c_str());
    KV_CHECK(shape[i] == 0 || size <= std::numeric_limits<int64_t>::max() / shape[i] /
                                          static_cast<int64_t>(elem),
             KV_ERR_INVALID_ARGUMENT, "array of shape %s is too large",
             kvstore::ShapeToString(shape).c_str());
    size *= shape[i];
  }
  kvstore::GetBackend(ctx.dev_type).CheckContext(ctx);
  return size;
}

// Throws INVALID_ARGUMENT unless `ids` are strictly increasing row ids of `shape`.
void CheckRowIds(const Shape& shape, const std::vector<int64_t>& ids) {
  for (size_t i = 0; i < ids.size(); ++i) {
    KV_CHECK(ids[i] >= 0 && ids[i] < shape[0], KV_ERR_INVALID_ARGUMENT,
             "row_sparse row id %lld (position %zu) is outside [0, %lld) of shape %s",
             static_cast<long long>(ids[i]), i, static_cast<long long>(shape[0]),
             kvstore::ShapeToString(shape).c_str());
    KV_CHECK(i == 0 || ids[i - 1] < ids[i], KV_ERR_INVALID_ARGUMENT,
             "row_sparse row ids must be strictly increasing: %lld at position %zu follows %lld",
             static_cast<long long>(ids[i]), i, static_cast<long long>(ids[i - 1]));
  }
}

std::shared_ptr<void> Allocate(Context ctx, size_t nbytes) {
  if (nbytes == 0) return nullptr;
  void* data = kvstore::GetBackend(ctx.dev_type).Alloc(ctx, nbytes);
  return std::shared_ptr<void>(data, [ctx](void* p) { kvstore::GetBackend(ctx.dev_type).Free(ctx, p); });
}

}  // namespace

std::unique_ptr<KVArray_> KVArray_::Create(const Shape& shape, int dtype, Context ctx) {
  const int64_t size = CheckedSize(shape, dtype, ctx);
  std::unique_ptr<KVArray_> array(new KVArray_(shape, dtype, ctx));
  array->size_ = size;
  array->nbytes_ = static_cast<size_t>(size) * kvstore::DTypeSize(dtype);
  array->storage_ = Allocate(ctx, array->nbytes_);
  array->storage_bytes_ = array->nbytes_;
  array->data_ = array->storage_.get();
  return array;
}

std::unique_ptr<KVArray_> KVArray_::CreateView(const Shape& shape, int dtype, std::shared_ptr<void> storage) {
  const Context host{};
  const int64_t size = CheckedSize(shape, dtype, host);
  std::unique_ptr<KVArray_> array(new KVArray_(shape, dtype, host));
  array->size_ = size;
  array->nbytes_ = static_cast<size_t>(size) * kvstore::DTypeSize(dtype);
  KV_CHECK(array->nbytes_ == 0 || storage != nullptr, KV_ERR_INTERNAL, "a view of %s has no storage",
           array->Describe().c_str());
  array->storage_ = array->nbytes_ > 0 ? std::move(storage) : nullptr;
  array->storage_bytes_ = array->nbytes_;
  array->data_ = array->storage_.get();
  return array;
}

std::unique_ptr<KVArray_> KVArray_::CreateRowSparse(const Shape& shape, int dtype, Context ctx,
                                                    std::vector<int64_t> row_ids) {
  KV_CHECK(!shape.empty(), KV_ERR_INVALID_ARGUMENT, "a row_sparse array needs rank >= 1 (got a scalar)");
  CheckedSize(shape, dtype, ctx);
  KV_CHECK(ctx.is_cpu(), KV_ERR_NOT_SUPPORTED, "row_sparse arrays live in host memory; %s is not supported",
           ctx.ToString().c_str());
  CheckRowIds(shape, row_ids);
  std::unique_ptr<KVArray_> array(new KVArray_(shape, dtype, ctx));
  array->stype_ = KV_STYPE_ROW_SPARSE;
  // The block is at most the logical array, whose byte size CheckedSize bounded.
  const size_t nbytes = static_cast<size_t>(static_cast<int64_t>(row_ids.size()) * array->row_len()) *
                        kvstore::DTypeSize(dtype);
  array->ReplaceRows(std::move(row_ids), Allocate(ctx, nbytes), nbytes);
  return array;
}

int64_t KVArray_::row_len() const {
  if (shape_.empty()) return 0;
  int64_t n = 1;
  for (size_t i = 1; i < shape_.size(); ++i) n *= shape_[i];
  return n;
}

void KVArray_::ReplaceRows(std::vector<int64_t> row_ids, std::shared_ptr<void> block, size_t block_bytes) {
  CheckRowIds(shape_, row_ids);
  const int64_t size = static_cast<int64_t>(row_ids.size()) * row_len();
  const size_t nbytes = static_cast<size_t>(size) * kvstore::DTypeSize(dtype_);
  KV_CHECK(block_bytes >= nbytes && (nbytes == 0 || block != nullptr), KV_ERR_INTERNAL,
           "ReplaceRows: a block of %zu bytes for %zu bytes of rows", block_bytes, nbytes);
  std::lock_guard<std::mutex> lock(pending_mu_);
  row_ids_ = std::move(row_ids);
  size_ = size;
  nbytes_ = nbytes;
  storage_ = block ? std::move(block) : nullptr;
  storage_bytes_ = storage_ ? block_bytes : 0;
  data_ = storage_.get();
}

void KVArray_::RequireDense(const char* what) const {
  KV_CHECK(!is_row_sparse(), KV_ERR_NOT_SUPPORTED,
           "%s: row_sparse arrays are not supported (got %s); cast it to dense first "
           "(KVArrayCastStorage)", what, Describe().c_str());
}

// A producer ends a pending write (or read) by setting quiet_ and then unlocking pending_mu_;
// a thread that saw quiet_ without the lock may free the array before that unlock has
// finished. Taking the lock here waits for it, so the mutex is never destroyed in use.
KVArray_::~KVArray_() { std::lock_guard<std::mutex> lock(pending_mu_); }

std::string KVArray_::Describe() const {
  return kvstore::StrFormat("%s%s%s@%s", is_row_sparse() ? "row_sparse " : "", kvstore::DTypeName(dtype_),
                            kvstore::ShapeToString(shape_).c_str(), ctx_.ToString().c_str());
}

void KVArray_::BeginPendingWrite() {
  std::lock_guard<std::mutex> lock(pending_mu_);
  ++pending_writes_;
  UpdateQuiet();
}

void KVArray_::EndPendingWrite(int code, const std::string& message) {
  std::lock_guard<std::mutex> lock(pending_mu_);
  if (code != 0 && pending_error_code_ == 0) {
    pending_error_code_ = code;
    pending_error_message_ = message;
  }
  if (--pending_writes_ == 0) pending_cv_.notify_all();
  UpdateQuiet();
}

void KVArray_::BeginPendingRead() {
  std::lock_guard<std::mutex> lock(pending_mu_);
  ++pending_reads_;
  UpdateQuiet();
}

void KVArray_::EndPendingRead() {
  bool release;
  {
    std::lock_guard<std::mutex> lock(pending_mu_);
    release = --pending_reads_ == 0 && release_requested_;
    if (pending_reads_ == 0) pending_cv_.notify_all();
    UpdateQuiet();
  }
  if (release) delete this;
}

void KVArray_::WaitToWrite() {
  if (quiet_.load(std::memory_order_acquire)) return;
  WaitPendingWrites();
  std::unique_lock<std::mutex> lock(pending_mu_);
  pending_cv_.wait(lock, [this] { return pending_reads_ == 0; });
}

void* KVArray_::ExposeData() {
  WaitToWrite();
  std::lock_guard<std::mutex> lock(pending_mu_);
  exposed_ = true;
  return data_;
}

bool KVArray_::AdoptStorage(std::shared_ptr<void> storage) {
  if (!ctx_.is_cpu() || !storage ||
      reinterpret_cast<uintptr_t>(storage.get()) % kvstore::DTypeSize(dtype_) != 0) {
    return false;
  }
  std::lock_guard<std::mutex> lock(pending_mu_);
  if (exposed_) return false;
  storage_ = std::move(storage);
  storage_bytes_ = nbytes_;
  data_ = storage_.get();
  return true;
}

void KVArray_::Release(KVArray_* array) {
  if (array == nullptr) return;
  try {
    array->WaitPendingWrites();
  } catch (const kvstore::Error&) {
  }
  {
    std::lock_guard<std::mutex> lock(array->pending_mu_);
    if (array->pending_reads_ > 0) {
      array->release_requested_ = true;
      return;
    }
  }
  delete array;
}

namespace {
std::atomic<int> g_wait_spin_us{0};
}  // namespace

void KVArray_::SetWaitSpinUs(int us) { g_wait_spin_us.store(us < 0 ? 0 : us, std::memory_order_relaxed); }

void KVArray_::WaitPendingWrites() {
  if (quiet_.load(std::memory_order_acquire)) return;
  const int spin_us = g_wait_spin_us.load(std::memory_order_relaxed);
  // Looks for the last write's end without the lock (the producer takes it to end the
  // write), then confirms it and reads its error under the lock below.
  kvstore::SpinUntil([this] { return pending_writes_.load(std::memory_order_acquire) == 0; }, spin_us);
  std::unique_lock<std::mutex> lock(pending_mu_);
  if (pending_writes_ == 0 && pending_error_code_ == 0) return;
  // Producers bound their own waits (network timeouts), so every pending write ends.
  pending_cv_.wait(lock, [this] { return pending_writes_ == 0; });
  if (pending_error_code_ != 0) {
    const int code = pending_error_code_;
    std::string message = std::move(pending_error_message_);
    pending_error_code_ = 0;
    pending_error_message_.clear();
    UpdateQuiet();
    throw kvstore::Error(code, message);
  }
}
