// test_reduce.cc - the CPU reduction kernel and the float16 conversions against plain
// scalar references, for every dtype, many source counts and sizes, on both the single-
// thread and the worker-pool paths.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <vector>

#include "comm/comm.h"
#include "core/cpu/kernels.h"
#include "core/dtype.h"

extern "C" {
#include "../common/check.h"
}

using namespace kvstore;

static void test_half_round_trip() {
  // Every half bit pattern survives half -> float -> half (NaNs stay NaN).
  int bad = 0;
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = HalfToFloat(static_cast<uint16_t>(h));
    const uint16_t back = FloatToHalf(f);
    if (std::isnan(f) ? !std::isnan(HalfToFloat(back)) : back != h) ++bad;
  }
  CHECK(bad == 0);
  CHECK(FloatToHalf(1.0f) == 0x3c00);
  CHECK(FloatToHalf(65504.0f) == 0x7bff);
  CHECK(FloatToHalf(65520.0f) == 0x7c00);           // rounds to +inf
  CHECK(FloatToHalf(1.0f + 1.0f / 2048) == 0x3c00);  // tie -> even
  CHECK(FloatToHalf(1.0f + 3.0f / 2048) == 0x3c02);  // tie -> even (up)
  CHECK(FloatToHalf(5.9604645e-08f) == 0x0001);      // smallest subnormal
  CHECK(FloatToHalf(2.9802322e-08f) == 0x0000);      // half of it ties to even zero
  CHECK(FloatToHalf(-0.0f) == 0x8000);
}

template <typename T>
static T Random(std::mt19937& rng) {
  if constexpr (std::is_floating_point<T>::value) {
    return static_cast<T>(std::uniform_real_distribution<double>(-100, 100)(rng));
  } else {
    return static_cast<T>(rng());
  }
}

// dst = left-to-right sum, the order the kernel promises.
template <typename T>
static bool CheckType(int dtype, int k, int64_t n) {
  std::mt19937 rng(static_cast<unsigned>(k * 1000 + n));
  std::vector<std::vector<T>> srcs(k, std::vector<T>(n));
  for (auto& s : srcs)
    for (auto& x : s) x = Random<T>(rng);
  std::vector<const void*> ptrs;
  for (auto& s : srcs) ptrs.push_back(s.data());
  std::vector<T> dst(n), want(n);
  for (int64_t i = 0; i < n; ++i) {
    T acc = srcs[0][i];
    for (int j = 1; j < k; ++j) {
      if constexpr (std::is_integral<T>::value) {
        using U = typename std::make_unsigned<T>::type;
        acc = static_cast<T>(static_cast<U>(acc) + static_cast<U>(srcs[j][i]));
      } else {
        acc += srcs[j][i];
      }
    }
    want[i] = acc;
  }
  CpuReduceSum(ptrs.data(), k, dst.data(), n, dtype);
  return std::memcmp(dst.data(), want.data(), n * sizeof(T)) == 0;
}

static bool CheckHalf(int k, int64_t n) {
  std::mt19937 rng(static_cast<unsigned>(k * 7 + n));
  std::vector<std::vector<uint16_t>> srcs(k, std::vector<uint16_t>(n));
  for (auto& s : srcs)
    for (auto& x : s) x = FloatToHalf(std::uniform_real_distribution<float>(-10, 10)(rng));
  std::vector<const void*> ptrs;
  for (auto& s : srcs) ptrs.push_back(s.data());
  std::vector<uint16_t> dst(n), want(n);
  for (int64_t i = 0; i < n; ++i) {
    float acc = HalfToFloat(srcs[0][i]);
    for (int j = 1; j < k; ++j) acc += HalfToFloat(srcs[j][i]);
    want[i] = FloatToHalf(acc);
  }
  CpuReduceSum(ptrs.data(), k, dst.data(), n, KV_FLOAT16);
  return dst == want;
}

static void test_reduce_all() {
  const int64_t sizes[] = {1, 7, 8, 9, 63, 1000, 4099, 70001};
  for (int k : {1, 2, 3, 5, 8, 9, 17}) {
    for (int64_t n : sizes) {
      CHECK(CheckType<float>(KV_FLOAT32, k, n));
      CHECK(CheckType<double>(KV_FLOAT64, k, n));
      CHECK(CheckType<int32_t>(KV_INT32, k, n));
      CHECK(CheckType<int64_t>(KV_INT64, k, n));
      CHECK(CheckType<uint8_t>(KV_UINT8, k, n));
      CHECK(CheckHalf(k, n));
    }
  }
  // dst may alias the first source
  std::vector<float> a(5000, 1.5f), b(5000, 2.0f);
  const void* ptrs[2] = {a.data(), b.data()};
  CpuReduceSum(ptrs, 2, a.data(), 5000, KV_FLOAT32);
  CHECK(a[0] == 3.5f && a[4999] == 3.5f);
}

int main() {
  test_half_round_trip();
  test_reduce_all();
  return check_summary();
}
