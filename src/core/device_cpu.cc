// device_cpu.cc - the CPU backend: host memory, copies and the element-wise kernels.
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <type_traits>

#include "core/cpu/kernels.h"
#include "core/device.h"
#include "kvstore_features.h"

namespace kvstore {
namespace {

constexpr size_t kAlignment = 64;
// Large buffers start at a rotating multiple of 128 bytes past their page-aligned block, so
// that the sources and destination of a kernel do not share the same offset within a page
// (same-offset streams alias in the L1 and the store buffer and halve copy bandwidth).
constexpr size_t kStaggerMinBytes = 64 << 10;
constexpr size_t kStaggerStep = 128;
constexpr size_t kStaggerSlots = 31;

// Integer element-wise arithmetic without undefined behaviour: wrap-around like unsigned
// arithmetic, truncating division, INT_MIN / -1 wraps. Division by zero is rejected by the
// caller before any element is written.
template <typename T>
inline T IntOp(int op, T a, T b) {
  using U = typename std::make_unsigned<T>::type;
  switch (op) {
    case KV_OP_ADD: return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
    case KV_OP_SUB: return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
    case KV_OP_MUL: return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
    default:
      if (std::is_signed<T>::value && b == static_cast<T>(-1)) {
        return static_cast<T>(U(0) - static_cast<U>(a));
      }
      return static_cast<T>(a / b);
  }
}

template <typename T>
inline T FloatOp(int op, T a, T b) {
  switch (op) {
    case KV_OP_ADD: return a + b;
    case KV_OP_SUB: return a - b;
    case KV_OP_MUL: return a * b;
    default: return a / b;
  }
}

template <typename T>
void ApplyBinary(int op, const T* a, const T* b, T* out, int64_t n) {
  if constexpr (std::is_same<T, half_t>::value) {
    for (int64_t i = 0; i < n; ++i) {
      out[i].bits = FloatToHalf(FloatOp(op, HalfToFloat(a[i].bits), HalfToFloat(b[i].bits)));
    }
  } else if constexpr (std::is_integral<T>::value) {
    for (int64_t i = 0; i < n; ++i) out[i] = IntOp<T>(op, a[i], b[i]);
  } else {
    switch (op) {  // one loop per operator so each vectorises
      case KV_OP_ADD: for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i]; break;
      case KV_OP_SUB: for (int64_t i = 0; i < n; ++i) out[i] = a[i] - b[i]; break;
      case KV_OP_MUL: for (int64_t i = 0; i < n; ++i) out[i] = a[i] * b[i]; break;
      default: for (int64_t i = 0; i < n; ++i) out[i] = a[i] / b[i]; break;
    }
  }
}

template <typename T>
void ApplyScalar(int op, const T* a, T s, T* out, int64_t n) {
  if constexpr (std::is_same<T, half_t>::value) {
    const float sf = HalfToFloat(s.bits);
    for (int64_t i = 0; i < n; ++i) out[i].bits = FloatToHalf(FloatOp(op, HalfToFloat(a[i].bits), sf));
  } else if constexpr (std::is_integral<T>::value) {
    for (int64_t i = 0; i < n; ++i) out[i] = IntOp<T>(op, a[i], s);
  } else {
    switch (op) {
      case KV_OP_ADD: for (int64_t i = 0; i < n; ++i) out[i] = a[i] + s; break;
      case KV_OP_SUB: for (int64_t i = 0; i < n; ++i) out[i] = a[i] - s; break;
      case KV_OP_MUL: for (int64_t i = 0; i < n; ++i) out[i] = a[i] * s; break;
      default: for (int64_t i = 0; i < n; ++i) out[i] = a[i] / s; break;
    }
  }
}

void CheckOp(int op) {
  KV_CHECK(op >= KV_OP_ADD && op <= KV_OP_DIV, KV_ERR_INVALID_ARGUMENT,
           "unknown operator %d (valid: 0 add, 1 sub, 2 mul, 3 div)", op);
}

// Converts a double to an integer dtype exactly as documented: truncation toward zero, and
// values outside the type's range (or NaN) are an error.
template <typename T>
T ScalarToElement(double v) {
  if constexpr (std::is_integral<T>::value) {
    KV_CHECK(!std::isnan(v), KV_ERR_INVALID_ARGUMENT, "NaN cannot be converted to an integer dtype");
    const double t = std::trunc(v);
    // The upper bound compares against 2^bits exactly (max() itself may round up in double).
    const double upper = std::ldexp(1.0, std::numeric_limits<T>::digits);
    KV_CHECK(t >= static_cast<double>(std::numeric_limits<T>::min()) && t < upper,
             KV_ERR_INVALID_ARGUMENT, "value %g is out of range for the integer dtype", v);
    return static_cast<T>(t);
  } else {
    return FromDouble<T>(v);
  }
}

class CpuDeviceBackend final : public DeviceBackend {
 public:
  void CheckContext(const Context& ctx) override {
    KV_CHECK(ctx.dev_id >= 0, KV_ERR_DEVICE, "invalid CPU device id %d", ctx.dev_id);
  }

  // Layout: [block start ... | pointer to block start | data], data 64-byte aligned.
  void* Alloc(const Context& ctx, size_t nbytes) override {
    const size_t rounded = (nbytes + kAlignment - 1) / kAlignment * kAlignment;
    const size_t stagger =
        nbytes >= kStaggerMinBytes ? (next_stagger_.fetch_add(1, std::memory_order_relaxed) % kStaggerSlots + 1) * kStaggerStep : 0;
    const size_t total = kAlignment + stagger + rounded;
    void* block = rounded >= nbytes && total > rounded ? std::aligned_alloc(kAlignment, total) : nullptr;
    KV_CHECK(block != nullptr, KV_ERR_OUT_OF_MEMORY, "cannot allocate %zu bytes on %s", nbytes,
             ctx.ToString().c_str());
    char* data = static_cast<char*>(block) + kAlignment + stagger;
    std::memcpy(data - sizeof(void*), &block, sizeof(void*));
    std::memset(data, 0, rounded);
    return data;
  }

  void Free(const Context&, void* ptr) noexcept override {
    void* block;
    std::memcpy(&block, static_cast<char*>(ptr) - sizeof(void*), sizeof(void*));
    std::free(block);
  }

  void CopyFromHost(Array* dst, const void* src, size_t nbytes) override {
    CpuParallelCopy(dst->data(), src, nbytes);
  }

  void CopyToHost(const Array& src, void* dst, size_t nbytes) override {
    CpuParallelCopy(dst, src.data(), nbytes);
  }

  void CopyArray(Array* dst, const Array& src) override {
    KV_CHECK(dst->ctx().is_cpu() && src.ctx().is_cpu(), KV_ERR_DEVICE,
             "copy between %s and %s needs the GPU backend", src.ctx().ToString().c_str(),
             dst->ctx().ToString().c_str());
    CpuParallelCopy(dst->data(), src.data(), src.nbytes());
  }

  void Fill(Array* a, double value) override {
    DispatchDType(a->dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T v = ScalarToElement<T>(value);
      T* p = static_cast<T*>(a->data());
      for (int64_t i = 0; i < a->size(); ++i) p[i] = v;
    });
  }

  void Binary(int op, const Array& a, const Array& b, Array* out) override {
    CheckOp(op);
    DispatchDType(a.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* pb = static_cast<const T*>(b.data());
      if constexpr (std::is_integral<T>::value) {
        if (op == KV_OP_DIV) {
          for (int64_t i = 0; i < b.size(); ++i) {
            KV_CHECK(pb[i] != 0, KV_ERR_INVALID_ARGUMENT,
                     "integer division by zero (divisor element %lld of %s is 0)",
                     static_cast<long long>(i), b.Describe().c_str());
          }
        }
      }
      ApplyBinary<T>(op, static_cast<const T*>(a.data()), pb, static_cast<T*>(out->data()),
                     a.size());
    });
  }

  void BinaryScalar(int op, const Array& a, double scalar, Array* out) override {
    CheckOp(op);
    DispatchDType(a.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T s = ScalarToElement<T>(scalar);
      if constexpr (std::is_integral<T>::value) {
        KV_CHECK(!(op == KV_OP_DIV && s == 0), KV_ERR_INVALID_ARGUMENT,
                 "integer division by zero (scalar %g converts to 0 for %s)", scalar,
                 DTypeName(a.dtype()));
      }
      ApplyScalar<T>(op, static_cast<const T*>(a.data()), s, static_cast<T*>(out->data()),
                     a.size());
    });
  }

 private:
  std::atomic<size_t> next_stagger_{0};
};

}  // namespace

DeviceBackend& CpuBackend() {
  static CpuDeviceBackend backend;
  return backend;
}

DeviceBackend& GetBackend(int dev_type) {
  if (dev_type == KV_CPU) return CpuBackend();
  if (dev_type == KV_GPU) {
#if KVSTORE_USE_CUDA
    return CudaBackend();
#else
    KV_FAIL(KV_ERR_DEVICE, "gpu context requested but libkvstore was built without CUDA");
#endif
  }
  KV_FAIL(KV_ERR_DEVICE, "unknown device type %d (valid: 1 cpu, 2 gpu)", dev_type);
}

int GpuCount() {
#if KVSTORE_USE_CUDA
  return CudaDeviceCount();
#else
  return 0;
#endif
}

}  // namespace kvstore
