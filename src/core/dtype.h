// dtype.h - element types, the binary16 value type, and dispatch from a runtime dtype to a
// compile-time element type.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/error.h"
#include "kvstore/kvstore.h"

namespace kvstore {

// IEEE 754 binary16 stored as its bit pattern. Arithmetic goes through float.
struct half_t {
  uint16_t bits;
};

float HalfToFloat(uint16_t h);
uint16_t FloatToHalf(float f);  // round to nearest even; overflow gives +-inf

// Size in bytes of one element; 0 for an unknown dtype.
size_t DTypeSize(int dtype);
// "float32", "float16", ...; "unknown" for an unknown dtype.
const char* DTypeName(int dtype);
bool IsValidDType(int dtype);
bool IsIntegerDType(int dtype);

// Calls fn(T{}) with T the element type of `dtype` (half_t for float16).
// Throws INVALID_ARGUMENT for an unknown dtype.
template <typename Fn>
auto DispatchDType(int dtype, Fn&& fn) {
  switch (dtype) {
    case KV_FLOAT32: return fn(float{});
    case KV_FLOAT64: return fn(double{});
    case KV_FLOAT16: return fn(half_t{});
    case KV_UINT8: return fn(uint8_t{});
    case KV_INT32: return fn(int32_t{});
    case KV_INT64: return fn(int64_t{});
    default: KV_FAIL(KV_ERR_INVALID_ARGUMENT, "unknown dtype %d", dtype);
  }
}

// Element conversions used by the generic kernels.
template <typename T> inline double ToDouble(T v) { return static_cast<double>(v); }
template <> inline double ToDouble<half_t>(half_t v) { return HalfToFloat(v.bits); }
template <typename T> inline T FromDouble(double v) { return static_cast<T>(v); }
template <> inline half_t FromDouble<half_t>(double v) { return half_t{FloatToHalf(static_cast<float>(v))}; }

}  // namespace kvstore
