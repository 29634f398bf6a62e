// cuda_kernels.h - host-side launchers of the element-wise and reduction kernels.
//
// Every launcher is asynchronous on `stream`; pointers are device pointers that kernels on
// the stream's device may dereference; launch failures throw kvstore::Error (CUDA). Element
// semantics match the CPU reference: float16 goes through float32 and is rounded to nearest
// even once per result; integer +, -, * wrap around; integer division truncates and the
// caller has already rejected zero divisors (see LaunchFindZero).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace kvstore {
namespace cuda {

// dst[i] = value for n elements; `value` points at one host element of `dtype`.
void LaunchFill(cudaStream_t stream, int dtype, void* dst, int64_t n, const void* value);

// out[i] = a[i] <op> b[i]; `out` may alias `a` or `b`.
void LaunchBinary(cudaStream_t stream, int op, int dtype, const void* a, const void* b,
                  void* out, int64_t n);

// out[i] = a[i] <op> scalar; `scalar` points at one host element of `dtype`.
void LaunchBinaryScalar(cudaStream_t stream, int op, int dtype, const void* a,
                        const void* scalar, void* out, int64_t n);

// Sets *flag (device int, zeroed by the caller) to 1 when some b[i] == 0.
void LaunchFindZero(cudaStream_t stream, int dtype, const void* b, int64_t n, int* flag);

// dst[i] = sum_k srcs[k][i]; `srcs` is a host array of num_srcs (>= 1) device pointers.
// float16 is accumulated in float32 and rounded once. `dst` may alias srcs[0].
void LaunchReduceSum(cudaStream_t stream, int dtype, const void* const* srcs, int num_srcs,
                     void* dst, int64_t n);

}  // namespace cuda
}  // namespace kvstore
