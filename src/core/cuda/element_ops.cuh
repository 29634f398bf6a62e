// element_ops.cuh - the per-element rules of the CUDA kernels, one traits struct per
// element type: how to load a stored element into the arithmetic type, how to store a
// result, and the four operators. They are host-and-device functions so that a host test
// (tests/gpu/test_gpu_element_ops.cu) can check them, bit for bit, against the CPU backend
// on machines without a GPU.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "kvstore/kvstore.h"

#define KV_HD __host__ __device__ __forceinline__

namespace kvstore {
namespace cuda {
namespace ops {

// Floating types: native arithmetic.
template <typename T>
struct FloatOps {
  using Storage = T;
  using Acc = T;
  KV_HD static Acc Load(Storage v) { return v; }
  KV_HD static Storage Store(Acc v) { return v; }
  KV_HD static Acc Apply(int op, Acc a, Acc b) {
    switch (op) {
      case KV_OP_ADD: return a + b;
      case KV_OP_SUB: return a - b;
      case KV_OP_MUL: return a * b;
      default: return a / b;
    }
  }
  KV_HD static bool IsZero(Storage v) { return v == Storage(0); }
};

// float16: stored as its bit pattern, computed in float32, rounded to nearest even.
struct HalfOps {
  using Storage = uint16_t;
  using Acc = float;
  KV_HD static Acc Load(Storage v) { return __half2float(__ushort_as_half(v)); }
  KV_HD static Storage Store(Acc v) { return __half_as_ushort(__float2half_rn(v)); }
  KV_HD static Acc Apply(int op, Acc a, Acc b) { return FloatOps<float>::Apply(op, a, b); }
  KV_HD static bool IsZero(Storage v) { return (v & 0x7fffu) == 0; }
};

// Integers: +, -, * in the unsigned twin (defined wrap-around); / truncates. x / -1 is the
// wrapped negation, so INT_MIN / -1 gives INT_MIN instead of trapping. uint8 computes in
// unsigned int and truncates on store.
template <typename T>
struct IntOps {
  using Storage = T;
  using Acc = T;
  using U = typename std::make_unsigned<
      typename std::conditional<(sizeof(T) < sizeof(int)), int, T>::type>::type;
  KV_HD static Acc Load(Storage v) { return v; }
  KV_HD static Storage Store(Acc v) { return v; }
  KV_HD static Acc Apply(int op, Acc a, Acc b) {
    const U ua = static_cast<U>(a), ub = static_cast<U>(b);
    switch (op) {
      case KV_OP_ADD: return static_cast<T>(ua + ub);
      case KV_OP_SUB: return static_cast<T>(ua - ub);
      case KV_OP_MUL: return static_cast<T>(ua * ub);
      default:
        if (std::is_signed<T>::value && b == static_cast<T>(-1)) return static_cast<T>(U(0) - ua);
        return b == 0 ? T(0) : static_cast<T>(a / b);  // zero divisors were rejected on the host
    }
  }
  KV_HD static bool IsZero(Storage v) { return v == 0; }
};

template <typename Ops>
struct Sum {
  // The sum of integers wraps like the CPU kernel does; floats accumulate in Acc.
  using Acc = typename Ops::Acc;
  KV_HD static Acc Add(Acc a, Acc b) { return Ops::Apply(KV_OP_ADD, a, b); }
};

}  // namespace ops
}  // namespace cuda
}  // namespace kvstore
