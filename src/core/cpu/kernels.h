// kernels.h - the CPU kernels that arrays, comms and the parameter server share: fused
// multi-source sums and copies, spread over the worker pool (worker_pool.h) for large arrays.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvstore {

// The fused CPU kernel: dst[i] = sum_k srcs[k][i] for n elements of `dtype`. float16 is
// accumulated in float32 and rounded once. Uses the shared worker pool for large n.
// `dst` may alias srcs[0].
void CpuReduceSum(const void* const* srcs, int num_srcs, void* dst, int64_t n, int dtype);

// dst[i] = src[i] with the worker pool for large n.
void CpuParallelCopy(void* dst, const void* src, size_t nbytes);

}  // namespace kvstore
