#include "core/row_sparse.h"

#include <algorithm>
#include <cstring>

#include "core/cpu/kernels.h"
#include "core/device.h"

namespace kvstore {
namespace {

size_t RowBytes(const Array& a) { return static_cast<size_t>(a.row_len()) * DTypeSize(a.dtype()); }

// Whether row `r` of the dense array `a` has an element that is not zero.
bool RowHasNonZero(const Array& a, int64_t r) {
  return DispatchDType(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* p = static_cast<const T*>(a.data()) + r * a.row_len();
    for (int64_t i = 0; i < a.row_len(); ++i) {
      if constexpr (std::is_same<T, half_t>::value) {
        if ((p[i].bits & 0x7fffu) != 0) return true;  // every pattern but +-0
      } else {
        if (!(p[i] == T(0))) return true;  // NaN compares unequal: non-zero
      }
    }
    return false;
  });
}

std::unique_ptr<Array> DenseToRowSparse(const Array& src) {
  RequireHost(src, "cast to row_sparse");
  KV_CHECK(src.ndim() >= 1, KV_ERR_INVALID_ARGUMENT, "cast to row_sparse: %s is a scalar (rank 0)",
           src.Describe().c_str());
  std::vector<int64_t> ids;
  const int64_t rows = src.shape()[0];
  for (int64_t r = 0; r < rows && src.row_len() > 0; ++r) {
    if (RowHasNonZero(src, r)) ids.push_back(r);
  }
  std::unique_ptr<Array> out = Array::CreateRowSparse(src.shape(), src.dtype(), src.ctx(), ids);
  GatherRows(src, ids.data(), static_cast<int64_t>(ids.size()), out->data());
  return out;
}

}  // namespace

void RequireHost(const Array& a, const char* what) {
  KV_CHECK(a.ctx().is_cpu(), KV_ERR_NOT_SUPPORTED,
           "%s: %s is not in host memory (row_sparse operations run on the CPU)", what, a.Describe().c_str());
}

std::unique_ptr<Array> CastStorage(const Array& src, int stype) {
  KV_CHECK(stype == KV_STYPE_DEFAULT || stype == KV_STYPE_ROW_SPARSE, KV_ERR_INVALID_ARGUMENT,
           "unknown storage type %d (valid: 0 default, 1 row_sparse)", stype);
  if (stype == KV_STYPE_ROW_SPARSE) {
    if (!src.is_row_sparse()) return DenseToRowSparse(src);
    std::unique_ptr<Array> out = Array::CreateRowSparse(src.shape(), src.dtype(), src.ctx(), src.row_ids());
    if (src.nbytes() > 0) CpuParallelCopy(out->data(), src.data(), src.nbytes());
    return out;
  }
  std::unique_ptr<Array> out = Array::Create(src.shape(), src.dtype(), src.ctx());
  if (src.is_row_sparse()) DensifyInto(src, out.get());
  else CopyArray(out.get(), src);
  return out;
}

void DensifyInto(const Array& src, Array* dense) {
  RequireHost(*dense, "row_sparse to dense");
  if (dense->nbytes() > 0) std::memset(dense->data(), 0, dense->nbytes());
  ScatterRows(src.data(), src.row_ids().data(), src.num_rows(), dense);
}

void GatherRows(const Array& dense, const int64_t* ids, int64_t n, void* block) {
  RequireHost(dense, "gather rows");
  const size_t row_bytes = RowBytes(dense);
  if (row_bytes == 0) return;
  const char* from = static_cast<const char*>(dense.data());
  char* to = static_cast<char*>(block);
  for (int64_t i = 0; i < n; ++i) std::memcpy(to + i * row_bytes, from + ids[i] * row_bytes, row_bytes);
}

void ScatterRows(const void* block, const int64_t* ids, int64_t n, Array* dense) {
  RequireHost(*dense, "scatter rows");
  const size_t row_bytes = RowBytes(*dense);
  if (row_bytes == 0) return;
  const char* from = static_cast<const char*>(block);
  char* to = static_cast<char*>(dense->data());
  for (int64_t i = 0; i < n; ++i) std::memcpy(to + ids[i] * row_bytes, from + i * row_bytes, row_bytes);
}

std::vector<int64_t> UnionRowIds(const std::vector<const Array*>& arrays) {
  if (arrays.size() == 1) return arrays[0]->row_ids();  // already sorted and unique
  std::vector<int64_t> ids;
  for (const Array* a : arrays) ids.insert(ids.end(), a->row_ids().begin(), a->row_ids().end());
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

}  // namespace kvstore
