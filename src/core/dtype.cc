#include "core/dtype.h"

namespace kvstore {

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  uint32_t bits;
  if (exponent == 0) {
    if (mantissa == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      exponent = 127 - 15 + 1;
      while ((mantissa & 0x400u) == 0) {
        mantissa <<= 1;
        --exponent;
      }
      mantissa &= 0x3ffu;
      bits = sign | (exponent << 23) | (mantissa << 13);
    }
  } else if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else {
    bits = sign | ((exponent + 127 - 15) << 23) | (mantissa << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

uint16_t FloatToHalf(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or nan (keep nan quiet)
    return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  }
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (abs < 0x38800000u) {  // result is subnormal or zero
    if (abs < 0x33000000u) return sign;  // below half the smallest subnormal
    const uint32_t exponent = abs >> 23;
    const uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;
    // value = mantissa * 2^(exponent-150) and the subnormal unit is 2^-24, so the result is
    // mantissa >> (126 - exponent), rounded to nearest even; 14 <= shift <= 24 here.
    const uint32_t shift = 126 - exponent;
    uint32_t result = mantissa >> shift;
    const uint32_t remainder = mantissa & ((1u << shift) - 1u);
    const uint32_t halfway = 1u << (shift - 1);
    if (remainder > halfway || (remainder == halfway && (result & 1u))) ++result;
    return static_cast<uint16_t>(sign | result);
  }
  uint32_t result = ((abs >> 13) - ((127 - 15) << 10));
  const uint32_t remainder = abs & 0x1fffu;
  if (remainder > 0x1000u || (remainder == 0x1000u && (result & 1u))) ++result;
  return static_cast<uint16_t>(sign | result);
}

size_t DTypeSize(int dtype) {
  switch (dtype) {
    case KV_FLOAT32: return 4;
    case KV_FLOAT64: return 8;
    case KV_FLOAT16: return 2;
    case KV_UINT8: return 1;
    case KV_INT32: return 4;
    case KV_INT64: return 8;
    default: return 0;
  }
}

const char* DTypeName(int dtype) {
  switch (dtype) {
    case KV_FLOAT32: return "float32";
    case KV_FLOAT64: return "float64";
    case KV_FLOAT16: return "float16";
    case KV_UINT8: return "uint8";
    case KV_INT32: return "int32";
    case KV_INT64: return "int64";
    default: return "unknown";
  }
}

bool IsValidDType(int dtype) { return DTypeSize(dtype) != 0; }

bool IsIntegerDType(int dtype) {
  return dtype == KV_UINT8 || dtype == KV_INT32 || dtype == KV_INT64;
}

}  // namespace kvstore
