// test_gpu_element_ops.cu - the per-element rules of the CUDA kernels (element_ops.cuh),
// evaluated on the host, against the CPU backend through the public ABI, bit for bit: the
// four operators with arrays and scalars, and the K-way sum of the reduce kernel, in all six
// dtypes, on edge values (integer limits, x / -1, wrap-around, float16 rounding ties,
// subnormals, overflow to infinity). Runs everywhere: it needs nvcc, not a GPU. On a GPU
// the same rules run in the kernels; gpu_arrays and gpu_device_store check them there.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

#include "../common/check.h"
#include "core/cuda/element_ops.cuh"
#include "kvstore/kvstore.h"

namespace {

using namespace kvstore::cuda::ops;

template <typename S>
bool IsNan(int dtype, S v) {
  if constexpr (std::is_same<S, uint16_t>::value) {  // float16 bit patterns
    return dtype == KV_FLOAT16 && (v & 0x7c00u) == 0x7c00u && (v & 0x3ffu) != 0;
  } else {
    return std::is_floating_point<S>::value && std::isnan(static_cast<double>(v));
  }
}

// Equal bits, or both NaN (NaN payloads differ between CPU and GPU conversions).
template <typename S>
bool SameElems(int dtype, const std::vector<S>& a, const std::vector<S>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(S)) == 0) continue;
    if (IsNan(dtype, a[i]) && IsNan(dtype, b[i])) continue;
    std::fprintf(stderr, "  element %zu differs\n", i);
    return false;
  }
  return true;
}

template <typename S>
KVArrayHandle CpuArray(int dtype, const std::vector<S>& v) {
  int64_t n = static_cast<int64_t>(v.size());
  KVArrayHandle a = nullptr;
  REQUIRE_OK(KVArrayCreate(&n, 1, dtype, KV_CPU, 0, &a));
  REQUIRE_OK(KVArrayCopyFromHost(a, v.data(), v.size() * sizeof(S)));
  return a;
}

template <typename S>
std::vector<S> Read(KVArrayHandle a, size_t n) {
  std::vector<S> out(n);
  REQUIRE_OK(KVArrayCopyToHost(a, out.data(), n * sizeof(S)));
  return out;
}

// The element the CPU backend makes of a scalar (the GPU backend converts the same way).
template <typename S>
S CpuScalar(int dtype, double value) {
  std::vector<S> one(1);
  KVArrayHandle a = CpuArray<S>(dtype, one);
  REQUIRE_OK(KVArrayFill(a, value));
  S s = Read<S>(a, 1)[0];
  KVArrayFree(a);
  return s;
}

template <typename Ops>
void CheckDType(int dtype, const std::vector<typename Ops::Storage>& a,
                const std::vector<typename Ops::Storage>& b, const std::vector<double>& scalars,
                bool integer) {
  using S = typename Ops::Storage;
  const size_t n = a.size();
  KVArrayHandle ca = CpuArray<S>(dtype, a), cb = CpuArray<S>(dtype, b);
  KVArrayHandle cout = CpuArray<S>(dtype, std::vector<S>(n));
  for (int op = KV_OP_ADD; op <= KV_OP_DIV; ++op) {
    // array form
    std::vector<S> host(n);
    for (size_t i = 0; i < n; ++i) host[i] = Ops::Store(Ops::Apply(op, Ops::Load(a[i]), Ops::Load(b[i])));
    const int rc = KVArrayBinary(op, ca, cb, cout);
    CHECK_MSG(rc == 0, "CPU binary op (dtype %d, op %d)", dtype, op);
    CHECK_MSG(SameElems(dtype, host, Read<S>(cout, n)),
              "array operator matches the CPU (dtype %d, op %d)", dtype, op);
    // scalar form
    for (double sv : scalars) {
      const S s = CpuScalar<S>(dtype, sv);
      if (integer && op == KV_OP_DIV && Ops::IsZero(s)) continue;
      for (size_t i = 0; i < n; ++i) host[i] = Ops::Store(Ops::Apply(op, Ops::Load(a[i]), Ops::Load(s)));
      CHECK_MSG(KVArrayBinaryScalar(op, ca, sv, cout) == 0, "CPU scalar op (dtype %d, op %d)",
                dtype, op);
      CHECK_MSG(SameElems(dtype, host, Read<S>(cout, n)),
                "scalar operator matches the CPU (dtype %d, op %d)", dtype, op);
    }
  }
  // K-way sum (the reduce kernel's loop) against the local store's CPU reduction.
  const int k = 6;
  std::vector<std::vector<S>> srcs;
  for (int j = 0; j < k; ++j) {
    std::vector<S> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = (j % 2) ? a[(i + j) % n] : b[(i * 3 + j) % n];
    srcs.push_back(v);
  }
  std::vector<S> host(n);
  for (size_t i = 0; i < n; ++i) {
    typename Ops::Acc acc = Ops::Load(srcs[0][i]);
    for (int j = 1; j < k; ++j) acc = Sum<Ops>::Add(acc, Ops::Load(srcs[j][i]));
    host[i] = Ops::Store(acc);
  }
  KVStoreHandle store = nullptr;
  KVStoreCreate("local", &store);
  const int key = 1;
  std::vector<KVArrayHandle> vals;
  for (int j = 0; j < k; ++j) vals.push_back(CpuArray<S>(dtype, srcs[j]));
  std::vector<int> keys(k, key);
  CHECK_MSG(KVStoreInit(store, 1, &key, &vals[0]) == 0, "init (dtype %d)", dtype);
  CHECK_MSG(KVStorePush(store, k, keys.data(), vals.data(), 0) == 0, "push (dtype %d)", dtype);
  CHECK_MSG(KVStorePull(store, 1, &key, &cout, 0) == 0, "pull (dtype %d)", dtype);
  CHECK_MSG(SameElems(dtype, host, Read<S>(cout, n)),
            "K-way sum matches the CPU reduction (dtype %d)", dtype);
  for (KVArrayHandle v : vals) KVArrayFree(v);
  KVStoreFree(store);
  KVArrayFree(ca);
  KVArrayFree(cb);
  KVArrayFree(cout);
}

template <typename T>
std::vector<T> IntValues(std::mt19937_64& rng, bool nonzero) {
  const T lo = std::numeric_limits<T>::min(), hi = std::numeric_limits<T>::max();
  std::vector<T> edges = {lo, hi, T(1), T(2), T(3), T(7), T(100), static_cast<T>(hi / 2 + 1)};
  if (std::is_signed<T>::value) {
    for (T x : {T(-1), T(-2), T(-7), static_cast<T>(lo + 1), static_cast<T>(-100)}) {
      edges.push_back(x);
    }
  }
  if (!nonzero) edges.push_back(T(0));
  std::vector<T> v;
  for (T x : edges) {
    if (!nonzero || x != 0) v.push_back(x);  // the unsigned minimum is 0
  }
  std::uniform_int_distribution<long long> d(static_cast<long long>(lo),
                                             static_cast<long long>(hi));
  while (v.size() < 257) {
    const T x = static_cast<T>(d(rng));
    if (!nonzero || x != 0) v.push_back(x);
  }
  return v;
}

std::vector<uint16_t> HalfValues(std::mt19937_64& rng) {
  // signed zeros, smallest subnormal, largest subnormal, smallest normal, one, 65504,
  // infinities, a NaN, values whose sums and products land on rounding ties
  std::vector<uint16_t> v = {0x0000, 0x8000, 0x0001, 0x03ff, 0x0400, 0x3c00, 0x7bff, 0xfbff,
                             0x7c00, 0xfc00, 0x7e00, 0x3c01, 0x4000, 0x6400, 0x1400, 0xbc01};
  std::uniform_int_distribution<int> d(0, 0xffff);
  while (v.size() < 257) v.push_back(static_cast<uint16_t>(d(rng)));
  return v;
}

template <typename T>
std::vector<T> FloatValues(std::mt19937_64& rng) {
  std::vector<T> v = {T(0), T(-0.0), T(1), T(-1), T(0.1), T(1e30), T(-1e-30),
                      std::numeric_limits<T>::max(), std::numeric_limits<T>::denorm_min(),
                      std::numeric_limits<T>::infinity()};
  std::uniform_real_distribution<double> d(-1e3, 1e3);
  while (v.size() < 257) v.push_back(static_cast<T>(d(rng)));
  return v;
}

template <typename T>
std::vector<T> Rotate(std::vector<T> v, size_t by) {
  std::vector<T> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = v[(i + by) % v.size()];
  return out;
}

}  // namespace

int main() {
  std::mt19937_64 rng(12345);
  const std::vector<double> int_scalars = {3.0, -1.0, 2.9, -7.5, 0.0, 1.0};
  const std::vector<double> u8_scalars = {3.0, 255.0, 2.9, 0.0, 1.0};
  const std::vector<double> float_scalars = {3.0, -1.0, 0.1, 1e-3, 65504.0, 0.0, 1e6};
  {
    auto a = IntValues<int32_t>(rng, false), b = Rotate(IntValues<int32_t>(rng, true), 5);
    CheckDType<IntOps<int32_t>>(KV_INT32, a, b, int_scalars, true);
  }
  {
    auto a = IntValues<int64_t>(rng, false), b = Rotate(IntValues<int64_t>(rng, true), 3);
    CheckDType<IntOps<int64_t>>(KV_INT64, a, b, int_scalars, true);
  }
  {
    auto a = IntValues<uint8_t>(rng, false), b = Rotate(IntValues<uint8_t>(rng, true), 7);
    CheckDType<IntOps<uint8_t>>(KV_UINT8, a, b, u8_scalars, true);
  }
  {
    auto a = HalfValues(rng), b = Rotate(HalfValues(rng), 11);
    CheckDType<HalfOps>(KV_FLOAT16, a, b, float_scalars, false);
  }
  {
    auto a = FloatValues<float>(rng), b = Rotate(FloatValues<float>(rng), 2);
    CheckDType<FloatOps<float>>(KV_FLOAT32, a, b, float_scalars, false);
  }
  {
    auto a = FloatValues<double>(rng), b = Rotate(FloatValues<double>(rng), 4);
    CheckDType<FloatOps<double>>(KV_FLOAT64, a, b, float_scalars, false);
  }
  return check_summary_named("test_gpu_element_ops");
}
