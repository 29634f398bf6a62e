// cuda_kernels.cu - the element-wise and reduction kernels of the CUDA backend.
//
// One grid-stride kernel per operation, instantiated for the six dtypes. Each element type
// has a small traits struct that says how to load it into the arithmetic type, how to store
// the result, and how the four operators behave (wrap-around for integers, float32 math for
// float16), so the kernels themselves stay generic.
#include <cuda_fp16.h>

#include <algorithm>
#include <cstring>
#include <cstdint>
#include <type_traits>

#include "core/cuda/cuda_kernels.h"
#include "core/cuda/element_ops.cuh"
#include "core/cuda/cuda_util.h"
#include "kvstore/kvstore.h"

namespace kvstore {
namespace cuda {
namespace {

using ops::FloatOps;
using ops::HalfOps;
using ops::IntOps;
using ops::Sum;

constexpr int kBlock = 256;
constexpr int64_t kMaxBlocks = 8192;  // grid-stride beyond that; plenty for any GPU
constexpr int kInlineSrcs = 16;       // reduce sources passed by value in the launch

int BlocksFor(int64_t n) {
  return static_cast<int>(std::min<int64_t>((n + kBlock - 1) / kBlock, kMaxBlocks));
}

// --- kernels ---------------------------------------------------------------------------------

template <typename Ops>
__global__ void FillKernel(typename Ops::Storage* dst, int64_t n, typename Ops::Storage v) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(blockDim.x) * gridDim.x) {
    dst[i] = v;
  }
}

template <typename Ops>
__global__ void BinaryKernel(int op, const typename Ops::Storage* a,
                             const typename Ops::Storage* b, typename Ops::Storage* out,
                             int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(blockDim.x) * gridDim.x) {
    out[i] = Ops::Store(Ops::Apply(op, Ops::Load(a[i]), Ops::Load(b[i])));
  }
}

template <typename Ops>
__global__ void BinaryScalarKernel(int op, const typename Ops::Storage* a,
                                   typename Ops::Storage scalar, typename Ops::Storage* out,
                                   int64_t n) {
  const typename Ops::Acc s = Ops::Load(scalar);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(blockDim.x) * gridDim.x) {
    out[i] = Ops::Store(Ops::Apply(op, Ops::Load(a[i]), s));
  }
}

template <typename Ops>
__global__ void FindZeroKernel(const typename Ops::Storage* b, int64_t n, int* flag) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(blockDim.x) * gridDim.x) {
    if (Ops::IsZero(b[i])) {
      *flag = 1;  // benign race: every writer stores the same value
      return;
    }
  }
}

template <typename T>
struct SrcList {
  const T* ptr[kInlineSrcs];
};

// Sources passed by value (num_srcs <= kInlineSrcs): the common case of one value per GPU.
template <typename Ops>
__global__ void ReduceInlineKernel(SrcList<typename Ops::Storage> srcs, int num_srcs,
                                   typename Ops::Storage* dst, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(blockDim.x) * gridDim.x) {
    typename Ops::Acc acc = Ops::Load(srcs.ptr[0][i]);
    for (int k = 1; k < num_srcs; ++k) acc = Sum<Ops>::Add(acc, Ops::Load(srcs.ptr[k][i]));
    dst[i] = Ops::Store(acc);
  }
}

// Any number of sources, their pointers in device memory.
template <typename Ops>
__global__ void ReduceListKernel(const typename Ops::Storage* const* srcs, int num_srcs,
                                 typename Ops::Storage* dst, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(blockDim.x) * gridDim.x) {
    typename Ops::Acc acc = Ops::Load(srcs[0][i]);
    for (int k = 1; k < num_srcs; ++k) acc = Sum<Ops>::Add(acc, Ops::Load(srcs[k][i]));
    dst[i] = Ops::Store(acc);
  }
}

// --- dispatch --------------------------------------------------------------------------------

template <typename Fn>
void DispatchOps(int dtype, Fn&& fn) {
  switch (dtype) {
    case KV_FLOAT32: fn(FloatOps<float>{}); break;
    case KV_FLOAT64: fn(FloatOps<double>{}); break;
    case KV_FLOAT16: fn(HalfOps{}); break;
    case KV_UINT8: fn(IntOps<uint8_t>{}); break;
    case KV_INT32: fn(IntOps<int32_t>{}); break;
    case KV_INT64: fn(IntOps<int64_t>{}); break;
    default: KV_FAIL(KV_ERR_INVALID_ARGUMENT, "unknown dtype %d", dtype);
  }
}

void CheckLaunch(const char* what) {
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) ThrowCudaError(err, what);
}

}  // namespace

void LaunchFill(cudaStream_t stream, int dtype, void* dst, int64_t n, const void* value) {
  if (n <= 0) return;
  DispatchOps(dtype, [&](auto ops) {
    using Ops = decltype(ops);
    using S = typename Ops::Storage;
    S v;
    std::memcpy(&v, value, sizeof v);
    FillKernel<Ops><<<BlocksFor(n), kBlock, 0, stream>>>(static_cast<S*>(dst), n, v);
  });
  CheckLaunch("fill kernel launch");
}

void LaunchBinary(cudaStream_t stream, int op, int dtype, const void* a, const void* b,
                  void* out, int64_t n) {
  if (n <= 0) return;
  DispatchOps(dtype, [&](auto ops) {
    using Ops = decltype(ops);
    using S = typename Ops::Storage;
    BinaryKernel<Ops><<<BlocksFor(n), kBlock, 0, stream>>>(
        op, static_cast<const S*>(a), static_cast<const S*>(b), static_cast<S*>(out), n);
  });
  CheckLaunch("element-wise kernel launch");
}

void LaunchBinaryScalar(cudaStream_t stream, int op, int dtype, const void* a,
                        const void* scalar, void* out, int64_t n) {
  if (n <= 0) return;
  DispatchOps(dtype, [&](auto ops) {
    using Ops = decltype(ops);
    using S = typename Ops::Storage;
    S s;
    std::memcpy(&s, scalar, sizeof s);
    BinaryScalarKernel<Ops><<<BlocksFor(n), kBlock, 0, stream>>>(
        op, static_cast<const S*>(a), s, static_cast<S*>(out), n);
  });
  CheckLaunch("element-wise scalar kernel launch");
}

void LaunchFindZero(cudaStream_t stream, int dtype, const void* b, int64_t n, int* flag) {
  if (n <= 0) return;
  DispatchOps(dtype, [&](auto ops) {
    using Ops = decltype(ops);
    using S = typename Ops::Storage;
    FindZeroKernel<Ops><<<BlocksFor(n), kBlock, 0, stream>>>(static_cast<const S*>(b), n, flag);
  });
  CheckLaunch("zero-divisor check kernel launch");
}

void LaunchReduceSum(cudaStream_t stream, int dtype, const void* const* srcs, int num_srcs,
                     void* dst, int64_t n) {
  if (n <= 0) return;
  KV_CHECK(num_srcs >= 1, KV_ERR_INTERNAL, "reduce of %d sources", num_srcs);
  DispatchOps(dtype, [&](auto ops) {
    using Ops = decltype(ops);
    using S = typename Ops::Storage;
    if (num_srcs <= kInlineSrcs) {
      SrcList<S> list{};
      for (int k = 0; k < num_srcs; ++k) list.ptr[k] = static_cast<const S*>(srcs[k]);
      ReduceInlineKernel<Ops><<<BlocksFor(n), kBlock, 0, stream>>>(list, num_srcs,
                                                                   static_cast<S*>(dst), n);
      CheckLaunch("reduce kernel launch");
      return;
    }
    // Many sources: the pointer table goes to stream-ordered device memory, freed in order.
    const size_t table_bytes = sizeof(void*) * static_cast<size_t>(num_srcs);
    void* table = nullptr;
    KV_CUDA_CALL(cudaMallocAsync(&table, table_bytes, stream));
    cudaError_t err = cudaMemcpyAsync(table, srcs, table_bytes, cudaMemcpyHostToDevice, stream);
    if (err == cudaSuccess) {
      ReduceListKernel<Ops><<<BlocksFor(n), kBlock, 0, stream>>>(
          static_cast<const S* const*>(table), num_srcs, static_cast<S*>(dst), n);
      err = cudaGetLastError();
    }
    // The host array `srcs` must outlive the copy: wait before returning to the caller.
    const cudaError_t sync_err = cudaStreamSynchronize(stream);
    cudaFreeAsync(table, stream);
    if (err != cudaSuccess) ThrowCudaError(err, "reduce kernel launch");
    if (sync_err != cudaSuccess) ThrowCudaError(sync_err, "reduce kernel");
  });
}

}  // namespace cuda
}  // namespace kvstore
