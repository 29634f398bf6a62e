// recv_sum.cc - SumToFloat32 (recv_sum.h).
#include "optimizer/recv_sum.h"

#include <cstddef>

#include "core/cpu/worker_pool.h"
#include "core/dtype.h"

namespace kvstore {
namespace optimizer {
namespace {

inline float Load(const void* src, int dtype, int64_t i) {
  return dtype == KV_FLOAT16 ? HalfToFloat(static_cast<const uint16_t*>(src)[i])
                             : static_cast<const float*>(src)[i];
}

// One range [begin, end): the first source is converted into dst, the others added to it
// one at a time, so every element sees the additions in source order. dtype_of(k) is the
// dtype of source k.
template <typename DTypeOf>
void SumRange(const void* const* srcs, int num_srcs, DTypeOf dtype_of, float* dst,
              int64_t begin, int64_t end) {
  const int first = dtype_of(0);
  for (int64_t i = begin; i < end; ++i) dst[i] = Load(srcs[0], first, i);
  for (int k = 1; k < num_srcs; ++k) {
    const int dtype = dtype_of(k);
    for (int64_t i = begin; i < end; ++i) dst[i] += Load(srcs[k], dtype, i);
  }
}

template <typename DTypeOf>
void Sum(const void* const* srcs, int num_srcs, DTypeOf dtype_of, size_t src_bytes, float* dst,
         int64_t n) {
  WorkerPool& pool = WorkerPool::Instance();
  const size_t traffic = static_cast<size_t>(n) * (src_bytes + sizeof(float));
  if (traffic < pool.parallel_min_bytes() || pool.width() == 1) {
    SumRange(srcs, num_srcs, dtype_of, dst, 0, n);
    return;
  }
  const int parts = pool.width();
  pool.ParallelFor(parts, [&](int part) {
    int64_t begin, end;
    SplitRange(n, parts, part, 64, &begin, &end);
    if (begin < end) SumRange(srcs, num_srcs, dtype_of, dst, begin, end);
  });
}

}  // namespace

void SumToFloat32(const void* const* srcs, int num_srcs, int src_dtype, float* dst, int64_t n) {
  Sum(srcs, num_srcs, [src_dtype](int) { return src_dtype; },
      static_cast<size_t>(num_srcs) * DTypeSize(src_dtype), dst, n);
}

void SumToFloat32(const void* const* srcs, const int* src_dtypes, int num_srcs, float* dst,
                  int64_t n) {
  size_t src_bytes = 0;
  for (int k = 0; k < num_srcs; ++k) src_bytes += DTypeSize(src_dtypes[k]);
  Sum(srcs, num_srcs, [src_dtypes](int k) { return src_dtypes[k]; }, src_bytes, dst, n);
}

}  // namespace optimizer
}  // namespace kvstore
