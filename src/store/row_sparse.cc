#include "store/row_sparse.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "core/cpu/kernels.h"
#include "core/row_sparse.h"
#include "optimizer/recv_sum.h"
#include "store/callback_updater.h"

namespace kvstore {
namespace {

// The shape of a block of `n` rows of `shape`.
Shape BlockShape(const Shape& shape, int64_t n) {
  Shape block = shape;
  block[0] = n;
  return block;
}

// A dense host array of `shape` and `dtype` in *slot, reused when it already is one.
Array* EnsureHost(std::unique_ptr<Array>* slot, const Shape& shape, int dtype) {
  Array* a = slot->get();
  if (!a || a->shape() != shape || a->dtype() != dtype || !a->ctx().is_cpu()) {
    *slot = Array::Create(shape, dtype, Context{});
  }
  return slot->get();
}

}  // namespace

void SumRowsInto(const std::vector<const Array*>& vals, const std::vector<int64_t>& rows, int dtype,
                 void* block) {
  const int src_dtype = vals[0]->dtype();
  const int64_t row_len = vals[0]->row_len();
  const size_t src_row_bytes = static_cast<size_t>(row_len) * DTypeSize(src_dtype);
  const size_t dst_row_bytes = static_cast<size_t>(row_len) * DTypeSize(dtype);
  if (vals.size() == 1 && dtype == src_dtype) {  // the rows are the value's own
    if (vals[0]->nbytes() > 0) CpuParallelCopy(block, vals[0]->data(), vals[0]->nbytes());
    return;
  }
  std::vector<size_t> cursor(vals.size(), 0);
  std::vector<const void*> srcs;
  srcs.reserve(vals.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    srcs.clear();
    for (size_t v = 0; v < vals.size(); ++v) {
      const std::vector<int64_t>& ids = vals[v]->row_ids();
      if (cursor[v] < ids.size() && ids[cursor[v]] == rows[i]) {
        srcs.push_back(static_cast<const char*>(vals[v]->data()) + cursor[v] * src_row_bytes);
        ++cursor[v];
      }
    }
    void* dst = static_cast<char*>(block) + i * dst_row_bytes;
    if (dtype == src_dtype) {
      CpuReduceSum(srcs.data(), static_cast<int>(srcs.size()), dst, row_len, dtype);
    } else {
      optimizer::SumToFloat32(srcs.data(), static_cast<int>(srcs.size()), src_dtype, static_cast<float*>(dst),
                              row_len);
    }
  }
}

std::unique_ptr<Array> RowScratch::View(const Shape& shape, int dtype) {
  const size_t needed = static_cast<size_t>(ShapeSize(shape)) * DTypeSize(dtype);
  if (bytes_ < needed) {
    const size_t grown = needed + needed / 4;  // room for the next push's few extra rows
    block_ = Array::Create({static_cast<int64_t>(grown)}, KV_UINT8, Context{})->storage();
    bytes_ = grown;
  }
  return Array::CreateView(shape, dtype, block_);
}

RowSparseRecv RowSparseRecvOf(const Updater& updater) {
  const RowSparseRecv mode = updater.row_sparse_recv();
  if (mode == RowSparseRecv::kAsIs && dynamic_cast<const CallbackUpdater*>(&updater) == nullptr) {
    return RowSparseRecv::kDense;
  }
  return mode;
}

void CheckHostValue(const Array& value, const std::string& key) {
  KV_CHECK(value.ctx().is_cpu(), KV_ERR_NOT_SUPPORTED,
           "push of row_sparse values to key %s: its stored value %s is not in host memory (row_sparse "
           "pushes need a key initialised from a CPU value)", key.c_str(), value.Describe().c_str());
}

std::vector<int64_t> UniqueRowIds(const Array& row_ids, int64_t rows, const std::string& what) {
  KV_CHECK(!row_ids.is_row_sparse(), KV_ERR_INVALID_ARGUMENT, "%s: row_ids %s must be a dense array", what.c_str(),
           row_ids.Describe().c_str());
  std::unique_ptr<Array> staged;
  const Array* host = &row_ids;
  if (!row_ids.ctx().is_cpu()) {
    staged = Array::Create(row_ids.shape(), row_ids.dtype(), Context{});
    CopyArray(staged.get(), row_ids);
    host = staged.get();
  }
  std::vector<int64_t> ids(static_cast<size_t>(host->size()));
  DispatchDType(host->dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* p = static_cast<const T*>(host->data());
    for (size_t i = 0; i < ids.size(); ++i) {
      if constexpr (std::is_integral<T>::value) {
        ids[i] = static_cast<int64_t>(p[i]);
      } else {
        const double v = ToDouble(p[i]);
        KV_CHECK(std::isfinite(v) && std::trunc(v) == v, KV_ERR_INVALID_ARGUMENT,
                 "%s: row id %g (element %zu of row_ids) is not an integer", what.c_str(), v, i);
        KV_CHECK(v >= 0 && v < static_cast<double>(rows), KV_ERR_INVALID_ARGUMENT,
                 "%s: row id %g (element %zu of row_ids) is outside [0, %lld)", what.c_str(), v, i,
                 static_cast<long long>(rows));
        ids[i] = static_cast<int64_t>(v);
      }
      KV_CHECK(ids[i] >= 0 && ids[i] < rows, KV_ERR_INVALID_ARGUMENT,
               "%s: row id %lld (element %zu of row_ids) is outside [0, %lld)", what.c_str(),
               static_cast<long long>(ids[i]), i, static_cast<long long>(rows));
    }
  });
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

void RowSparsePush::Prepare(const void* store, Updater* updater, int key, const char* str_key,
                            UpdateTxn* txn) {
  Array& value = **value_;
  rows_ = UnionRowIds(vals_);
  const int64_t n = static_cast<int64_t>(rows_.size());
  const int recv_dtype = updater ? updater->RecvDType(value.dtype()) : value.dtype();
  const RowSparseRecv mode = updater ? RowSparseRecvOf(*updater) : RowSparseRecv::kAsIs;
  if (mode == RowSparseRecv::kRows) {
    std::unique_ptr<Array> grad;
    if (vals_.size() == 1 && vals_[0]->dtype() == recv_dtype) {  // the pushed block itself
      grad = Array::CreateView(BlockShape(value.shape(), n), recv_dtype, vals_[0]->storage());
    } else {
      grad = grad_scratch_->View(BlockShape(value.shape(), n), recv_dtype);
      SumRowsInto(vals_, rows_, recv_dtype, grad->data());
    }
    weight_ = weight_scratch_->View(BlockShape(value.shape(), n), value.dtype());
    GatherRows(value, rows_.data(), n, weight_->data());
    UpdaterScope scope(store);
    updater->UpdateRows(key, str_key, value.shape(), rows_.data(), n, *grad, weight_.get(), txn);
    result_ = Result::kRows;
    return;
  }
  std::unique_ptr<Array> sum = Array::CreateRowSparse(value.shape(), recv_dtype, Context{}, rows_);
  SumRowsInto(vals_, rows_, recv_dtype, sum->data());
  if (!updater) {
    sum_ = std::move(sum);
    result_ = Result::kAssign;
    return;
  }
  Array* recv = sum.get();
  if (mode == RowSparseRecv::kDense) {
    recv = EnsureHost(merged_, value.shape(), recv_dtype);
    DensifyInto(*sum, recv);
  }
  Array* candidate = EnsureHost(candidate_, value.shape(), value.dtype());
  CopyArray(candidate, value);
  UpdaterScope scope(store);
  updater->Update(key, str_key, recv, candidate, txn);
  result_ = Result::kSwap;
}

void RowSparsePush::Commit() noexcept {
  switch (result_) {
    case Result::kAssign: DensifyInto(*sum_, value_->get()); break;
    case Result::kSwap: std::swap(*value_, *candidate_); break;
    case Result::kRows: ScatterRows(weight_->data(), rows_.data(), static_cast<int64_t>(rows_.size()), value_->get()); break;
    case Result::kNone: break;
  }
  result_ = Result::kNone;
}

}  // namespace kvstore
