// kernels.cc - the reference reduction: dst = sum of K arrays, fused into one pass over
// memory, vectorised (AVX2/F16C chosen at run time, portable code otherwise), and split over
// the worker pool for large arrays.
//
// Summation order is fixed: dst[i] = ((s0[i] + s1[i]) + s2[i]) + ... in the element type
// (float16 accumulates in float32 and rounds once), whatever the thread count or the
// instruction set, so every path gives the same bits.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "core/cpu/kernels.h"
#include "core/cpu/worker_pool.h"
#include "core/dtype.h"

namespace kvstore {
namespace {

// Widest group of sources summed in one pass; longer lists continue from the partial sum.
constexpr int kMaxFused = 8;

template <typename T>
inline T Add(T a, T b) {
  if constexpr (std::is_integral<T>::value) {
    using U = typename std::make_unsigned<T>::type;  // wrap-around, no signed overflow UB
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}

// Body of the fused sum of exactly K sources; instantiated per instruction set below.
#define KV_DEFINE_SUM_FIXED(NAME, ATTR)                                            \
  template <typename T, int K>                                                     \
  ATTR void NAME(const T* const* srcs, T* dst, int64_t begin, int64_t end) {      \
    const T* p[K];                                                                 \
    for (int k = 0; k < K; ++k) p[k] = srcs[k];                                    \
    _Pragma("GCC ivdep") for (int64_t i = begin; i < end; ++i) {                   \
      T acc = p[0][i];                                                             \
      for (int k = 1; k < K; ++k) acc = Add(acc, p[k][i]);                         \
      dst[i] = acc;                                                                \
    }                                                                              \
  }

KV_DEFINE_SUM_FIXED(SumFixedPortable, )
KV_DEFINE_SUM_FIXED(SumFixedAvx2, __attribute__((target("avx2"))))

template <typename T, bool kAvx2>
void SumGroup(const T* const* srcs, int k, T* dst, int64_t begin, int64_t end) {
#define KV_SUM_CASE(K)                                                         \
  case K:                                                                      \
    if (kAvx2) SumFixedAvx2<T, K>(srcs, dst, begin, end);                      \
    else SumFixedPortable<T, K>(srcs, dst, begin, end);                        \
    return;
  switch (k) {
    KV_SUM_CASE(1) KV_SUM_CASE(2) KV_SUM_CASE(3) KV_SUM_CASE(4)
    KV_SUM_CASE(5) KV_SUM_CASE(6) KV_SUM_CASE(7) KV_SUM_CASE(8)
    default: break;
  }
#undef KV_SUM_CASE
}

// Sums any number of sources over [begin, end): groups of kMaxFused, each later group
// starting from the partial sum held in dst (exact for every non-float16 type).
template <typename T, bool kAvx2>
void SumRange(const T* const* srcs, int k, T* dst, int64_t begin, int64_t end) {
  int first = std::min(k, kMaxFused);
  SumGroup<T, kAvx2>(srcs, first, dst, begin, end);
  const T* group[kMaxFused];
  for (int done = first; done < k;) {
    const int take = std::min(k - done, kMaxFused - 1);
    group[0] = dst;
    for (int j = 0; j < take; ++j) group[j + 1] = srcs[done + j];
    SumGroup<T, kAvx2>(group, take + 1, dst, begin, end);
    done += take;
  }
}

void SumHalfPortable(const uint16_t* const* srcs, int k, uint16_t* dst, int64_t begin,
                     int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    float acc = HalfToFloat(srcs[0][i]);
    for (int j = 1; j < k; ++j) acc += HalfToFloat(srcs[j][i]);
    dst[i] = FloatToHalf(acc);
  }
}

__attribute__((target("avx2,f16c"))) void SumHalfF16c(const uint16_t* const* srcs, int k,
                                                       uint16_t* dst, int64_t begin,
                                                       int64_t end) {
// (macros, not lambdas: lambdas do not inherit the function's target attribute)
#define KV_LOAD_HALF8(p) _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))
#define KV_STORE_HALF8(p, v)                         \
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), \
                   _mm256_cvtps_ph((v), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))
  int64_t i = begin;
  // Four independent 8-lane accumulators per step hide the conversion latency.
  for (; i + 32 <= end; i += 32) {
    __m256 a0 = KV_LOAD_HALF8(srcs[0] + i), a1 = KV_LOAD_HALF8(srcs[0] + i + 8);
    __m256 a2 = KV_LOAD_HALF8(srcs[0] + i + 16), a3 = KV_LOAD_HALF8(srcs[0] + i + 24);
    for (int j = 1; j < k; ++j) {
      const uint16_t* s = srcs[j] + i;
      a0 = _mm256_add_ps(a0, KV_LOAD_HALF8(s));
      a1 = _mm256_add_ps(a1, KV_LOAD_HALF8(s + 8));
      a2 = _mm256_add_ps(a2, KV_LOAD_HALF8(s + 16));
      a3 = _mm256_add_ps(a3, KV_LOAD_HALF8(s + 24));
    }
    KV_STORE_HALF8(dst + i, a0);
    KV_STORE_HALF8(dst + i + 8, a1);
    KV_STORE_HALF8(dst + i + 16, a2);
    KV_STORE_HALF8(dst + i + 24, a3);
  }
  for (; i + 8 <= end; i += 8) {
    __m256 acc = KV_LOAD_HALF8(srcs[0] + i);
    for (int j = 1; j < k; ++j) acc = _mm256_add_ps(acc, KV_LOAD_HALF8(srcs[j] + i));
    KV_STORE_HALF8(dst + i, acc);
  }
  if (i < end) SumHalfPortable(srcs, k, dst, i, end);
#undef KV_LOAD_HALF8
#undef KV_STORE_HALF8
}

bool HasAvx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}
bool HasF16c() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  return has;
}

// Sums [begin, end) of n-element arrays of one dtype.
void SumRangeDispatch(const void* const* srcs, int k, void* dst, int64_t begin, int64_t end,
                      int dtype) {
  if (dtype == KV_FLOAT16) {
    auto s = reinterpret_cast<const uint16_t* const*>(srcs);
    auto d = static_cast<uint16_t*>(dst);
    if (HasF16c()) SumHalfF16c(s, k, d, begin, end);
    else SumHalfPortable(s, k, d, begin, end);
    return;
  }
  DispatchDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same<T, half_t>::value) {
      auto s = reinterpret_cast<const T* const*>(srcs);
      if (HasAvx2()) SumRange<T, true>(s, k, static_cast<T*>(dst), begin, end);
      else SumRange<T, false>(s, k, static_cast<T*>(dst), begin, end);
    }
  });
}

}  // namespace

void CpuReduceSum(const void* const* srcs, int num_srcs, void* dst, int64_t n, int dtype) {
  if (n <= 0 || num_srcs <= 0) return;
  const size_t elem = DTypeSize(dtype);
  WorkerPool& pool = WorkerPool::Instance();
  const size_t traffic = static_cast<size_t>(n) * elem * static_cast<size_t>(num_srcs + 1);
  if (traffic < pool.parallel_min_bytes() || pool.width() == 1) {
    SumRangeDispatch(srcs, num_srcs, dst, 0, n, dtype);
    return;
  }
  const int parts = pool.width();
  const int64_t align = static_cast<int64_t>(256 / elem);  // keep chunks cache-line aligned
  pool.ParallelFor(parts, [&](int part) {
    int64_t begin, end;
    SplitRange(n, parts, part, align, &begin, &end);
    if (begin < end) SumRangeDispatch(srcs, num_srcs, dst, begin, end, dtype);
  });
}

void CpuParallelCopy(void* dst, const void* src, size_t nbytes) {
  if (nbytes == 0 || dst == src) return;
  WorkerPool& pool = WorkerPool::Instance();
  if (2 * nbytes < pool.parallel_min_bytes() || pool.width() == 1) {
    std::memcpy(dst, src, nbytes);
    return;
  }
  const int parts = pool.width();
  pool.ParallelFor(parts, [&](int part) {
    int64_t begin, end;
    SplitRange(static_cast<int64_t>(nbytes), parts, part, 256, &begin, &end);
    if (begin < end) {
      std::memcpy(static_cast<char*>(dst) + begin, static_cast<const char*>(src) + begin,
                  static_cast<size_t>(end - begin));
    }
  });
}

}  // namespace kvstore
