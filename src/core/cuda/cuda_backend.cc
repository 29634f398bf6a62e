// cuda_backend.cc - the CUDA DeviceBackend: device memory from cudaMalloc, copies between
// host and devices (peer-to-peer when the GPUs allow it), and the element-wise operations as
// kernels on one stream per device.
//
// Synchronisation model: every backend call queues its work on the stream of the device it
// touches and waits for that stream before returning. Data is therefore at rest between
// calls, which keeps the backend correct whatever the caller does next (host reads, another
// device, another thread) at the cost of one stream synchronisation per call.
//
// Without a driver or a device the runtime reports an error from cudaGetDeviceCount; that is
// mapped to zero devices and every GPU context is refused with DEVICE ("no GPU").
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <string>
#include <vector>

#include "core/array.h"
#include "core/cuda/cuda_kernels.h"
#include "core/cuda/cuda_util.h"
#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"

namespace kvstore {
namespace cuda {

void ThrowCudaError(cudaError_t err, const char* what) {
  // Clear the non-sticky error state so that the next call starts clean.
  (void)cudaGetLastError();
  const int code = err == cudaErrorMemoryAllocation ? KV_ERR_OUT_OF_MEMORY : KV_ERR_CUDA;
  ThrowError(code, StrFormat("CUDA error %d (%s) in %s: %s", static_cast<int>(err),
                             cudaGetErrorName(err), what, cudaGetErrorString(err)));
}

namespace {

// Process-wide runtime state. Never destroyed: streams and peer mappings must outlive every
// static object that could still free device memory at exit.
struct Runtime {
  std::once_flag count_once;
  int count = 0;
  std::string why_none;  // CUDA's reason when count is 0

  std::once_flag peer_once;
  std::vector<char> peer;  // peer[dev * count + peer] : kernels on dev may read peer

  std::mutex stream_mu;
  std::vector<cudaStream_t> streams;
};

Runtime& State() {
  static Runtime* rt = new Runtime();
  return *rt;
}

void InitCount(Runtime& rt) {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    // No driver (cudaErrorInsufficientDriver), no device (cudaErrorNoDevice), ...: not an
    // error for the library, just no GPUs.
    rt.why_none = StrFormat("%s: %s", cudaGetErrorName(err), cudaGetErrorString(err));
    (void)cudaGetLastError();
    n = 0;
  } else if (n == 0) {
    rt.why_none = "the CUDA runtime reports no devices";
  }
  rt.count = n;
  rt.streams.assign(static_cast<size_t>(n), nullptr);
}

bool P2PDisabledByEnv() {
  for (const char* name : {"KVSTORE_ENABLE_GPU_P2P", "MXNET_ENABLE_GPU_P2P"}) {
    const char* v = std::getenv(name);
    if (v != nullptr && std::strcmp(v, "0") == 0) return true;
  }
  return false;
}

void InitPeers(Runtime& rt) {
  const int n = rt.count;
  rt.peer.assign(static_cast<size_t>(n) * static_cast<size_t>(n), 0);
  for (int i = 0; i < n; ++i) rt.peer[static_cast<size_t>(i) * n + i] = 1;
  if (n < 2 || P2PDisabledByEnv()) return;
  std::lock_guard<std::mutex> lock(DeviceSyncMutex());  // enabling peers may synchronise
  int previous = 0;
  if (cudaGetDevice(&previous) != cudaSuccess) previous = 0;
  for (int i = 0; i < n; ++i) {
    if (cudaSetDevice(i) != cudaSuccess) {
      (void)cudaGetLastError();
      continue;
    }
    for (int j = 0; j < n; ++j) {
      if (i == j) continue;
      int can = 0;
      if (cudaDeviceCanAccessPeer(&can, i, j) != cudaSuccess || !can) {
        (void)cudaGetLastError();
        continue;
      }
      const cudaError_t err = cudaDeviceEnablePeerAccess(j, 0);
      if (err == cudaSuccess || err == cudaErrorPeerAccessAlreadyEnabled) {
        rt.peer[static_cast<size_t>(i) * n + j] = 1;
      }
      (void)cudaGetLastError();  // a failure only means copies go through the host
    }
  }
  (void)cudaSetDevice(previous);
  (void)cudaGetLastError();
}

}  // namespace

int DeviceCount() {
  Runtime& rt = State();
  std::call_once(rt.count_once, InitCount, std::ref(rt));
  return rt.count;
}

const std::string& NoDeviceReason() {
  DeviceCount();
  return State().why_none;
}

void CheckDevice(int dev_id) {
  const int n = DeviceCount();
  if (n == 0) {
    KV_FAIL(KV_ERR_DEVICE, "no GPU: gpu(%d) was requested but no CUDA device is usable (%s)",
            dev_id, State().why_none.c_str());
  }
  KV_CHECK(dev_id >= 0 && dev_id < n, KV_ERR_DEVICE,
           "gpu(%d) does not exist: this machine has %d GPU%s (gpu(0) to gpu(%d))", dev_id, n,
           n == 1 ? "" : "s", n - 1);
}

cudaStream_t Stream(int dev_id) {
  CheckDevice(dev_id);
  Runtime& rt = State();
  std::lock_guard<std::mutex> lock(rt.stream_mu);
  cudaStream_t& s = rt.streams[static_cast<size_t>(dev_id)];
  if (s == nullptr) {
    DeviceGuard guard(dev_id);
    cudaStream_t created = nullptr;
    KV_CUDA_CALL(cudaStreamCreateWithFlags(&created, cudaStreamNonBlocking));
    s = created;
  }
  return s;
}

void SyncStream(int dev_id) {
  cudaStream_t s = Stream(dev_id);
  KV_CUDA_CALL(cudaStreamSynchronize(s));
}

std::mutex& DeviceSyncMutex() {
  static std::mutex* mu = new std::mutex();
  return *mu;
}

bool CanAccess(int dev, int peer) {
  if (dev == peer) return true;
  Runtime& rt = State();
  const int n = DeviceCount();
  if (dev < 0 || peer < 0 || dev >= n || peer >= n) return false;
  std::call_once(rt.peer_once, InitPeers, std::ref(rt));
  return rt.peer[static_cast<size_t>(dev) * n + peer] != 0;
}

DeviceGuard::DeviceGuard(int dev_id) {
  KV_CUDA_CALL(cudaGetDevice(&previous_));
  if (previous_ != dev_id) KV_CUDA_CALL(cudaSetDevice(dev_id));
}

DeviceGuard::~DeviceGuard() {
  int current = -1;
  if (cudaGetDevice(&current) == cudaSuccess && current != previous_) {
    (void)cudaSetDevice(previous_);
  }
  (void)cudaGetLastError();
}

DeviceBuffer::DeviceBuffer(int dev_id, size_t nbytes) : dev_(dev_id) {
  if (nbytes == 0) return;
  DeviceGuard guard(dev_id);
  std::lock_guard<std::mutex> lock(DeviceSyncMutex());
  KV_CUDA_CALL(cudaMalloc(&ptr_, nbytes));
}

DeviceBuffer::~DeviceBuffer() { Release(); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept : dev_(other.dev_), ptr_(other.ptr_) {
  other.ptr_ = nullptr;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    Release();
    dev_ = other.dev_;
    ptr_ = other.ptr_;
    other.ptr_ = nullptr;
  }
  return *this;
}

void DeviceBuffer::Release() noexcept {
  if (ptr_ == nullptr) return;
  int previous = -1;
  (void)cudaGetDevice(&previous);
  (void)cudaSetDevice(dev_);
  {
    std::lock_guard<std::mutex> lock(DeviceSyncMutex());
    (void)cudaFree(ptr_);
  }
  if (previous >= 0) (void)cudaSetDevice(previous);
  (void)cudaGetLastError();
  ptr_ = nullptr;
}

namespace {

// One host element of `dtype` holding `value`, with the conversion rules of the CPU backend:
// floats round to nearest, integers truncate toward zero and must fit.
struct Scalar {
  alignas(8) unsigned char bytes[8];
};

template <typename T>
void EncodeInt(int dtype, double value, Scalar* out, const char* what) {
  KV_CHECK(std::isfinite(value), KV_ERR_INVALID_ARGUMENT, "%s %g is not finite for dtype %s",
           what, value, DTypeName(dtype));
  const double t = std::trunc(value);
  KV_CHECK(t >= static_cast<double>(std::numeric_limits<T>::min()) &&
               t <= static_cast<double>(std::numeric_limits<T>::max()) &&
               // int64 max is not representable in double: 2^63 itself is out of range
               t < 9223372036854775808.0,
           KV_ERR_INVALID_ARGUMENT, "%s %g is out of range for dtype %s", what, value,
           DTypeName(dtype));
  const T v = static_cast<T>(t);
  std::memcpy(out->bytes, &v, sizeof v);
}

Scalar EncodeScalar(int dtype, double value, const char* what) {
  Scalar s{};
  switch (dtype) {
    case KV_FLOAT32: {
      const float v = static_cast<float>(value);
      std::memcpy(s.bytes, &v, sizeof v);
      break;
    }
    case KV_FLOAT64: std::memcpy(s.bytes, &value, sizeof value); break;
    case KV_FLOAT16: {
      const uint16_t v = FloatToHalf(static_cast<float>(value));
      std::memcpy(s.bytes, &v, sizeof v);
      break;
    }
    case KV_UINT8: EncodeInt<uint8_t>(KV_UINT8, value, &s, what); break;
    case KV_INT32: EncodeInt<int32_t>(KV_INT32, value, &s, what); break;
    case KV_INT64: EncodeInt<int64_t>(KV_INT64, value, &s, what); break;
    default: KV_FAIL(KV_ERR_INVALID_ARGUMENT, "unknown dtype %d", dtype);
  }
  return s;
}

bool ScalarIsZero(int dtype, const Scalar& s) {
  switch (dtype) {
    case KV_UINT8: return s.bytes[0] == 0;
    case KV_INT32: {
      int32_t v;
      std::memcpy(&v, s.bytes, sizeof v);
      return v == 0;
    }
    case KV_INT64: {
      int64_t v;
      std::memcpy(&v, s.bytes, sizeof v);
      return v == 0;
    }
    default: return false;  // floating division by zero gives inf/nan, as on the CPU
  }
}

void CheckOp(int op) {
  KV_CHECK(op >= KV_OP_ADD && op <= KV_OP_DIV, KV_ERR_INVALID_ARGUMENT,
           "unknown element-wise operator %d (expected KV_OP_ADD..KV_OP_DIV)", op);
}

class CudaBackendImpl final : public DeviceBackend {
 public:
  void CheckContext(const Context& ctx) override {
    KV_CHECK(ctx.is_gpu(), KV_ERR_INTERNAL, "CUDA backend asked about %s",
             ctx.ToString().c_str());
    CheckDevice(ctx.dev_id);
  }

  void* Alloc(const Context& ctx, size_t nbytes) override {
    CheckContext(ctx);
    DeviceGuard guard(ctx.dev_id);
    void* ptr = nullptr;
    cudaError_t err;
    {
      std::lock_guard<std::mutex> lock(DeviceSyncMutex());
      err = cudaMalloc(&ptr, nbytes);
    }
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      KV_FAIL(err == cudaErrorMemoryAllocation ? KV_ERR_OUT_OF_MEMORY : KV_ERR_CUDA,
              "cannot allocate %zu bytes on %s: %s", nbytes, ctx.ToString().c_str(),
              cudaGetErrorString(err));
    }
    try {
      cudaStream_t s = Stream(ctx.dev_id);
      KV_CUDA_CALL(cudaMemsetAsync(ptr, 0, nbytes, s));
      KV_CUDA_CALL(cudaStreamSynchronize(s));
    } catch (...) {
      std::lock_guard<std::mutex> lock(DeviceSyncMutex());
      (void)cudaFree(ptr);
      throw;
    }
    return ptr;
  }

  void Free(const Context& ctx, void* ptr) noexcept override {
    if (ptr == nullptr) return;
    int previous = -1;
    (void)cudaGetDevice(&previous);
    (void)cudaSetDevice(ctx.dev_id);
    {
      std::lock_guard<std::mutex> lock(DeviceSyncMutex());
      (void)cudaFree(ptr);  // fails harmlessly once the runtime is shutting down
    }
    if (previous >= 0) (void)cudaSetDevice(previous);
    (void)cudaGetLastError();
  }

  void CopyFromHost(Array* dst, const void* src, size_t nbytes) override {
    if (nbytes == 0) return;
    const int dev = dst->ctx().dev_id;
    DeviceGuard guard(dev);
    cudaStream_t s = Stream(dev);
    KV_CUDA_CALL(cudaMemcpyAsync(dst->data(), src, nbytes, cudaMemcpyHostToDevice, s));
    KV_CUDA_CALL(cudaStreamSynchronize(s));
  }

  void CopyToHost(const Array& src, void* dst, size_t nbytes) override {
    if (nbytes == 0) return;
    const int dev = src.ctx().dev_id;
    DeviceGuard guard(dev);
    cudaStream_t s = Stream(dev);
    KV_CUDA_CALL(cudaMemcpyAsync(dst, src.data(), nbytes, cudaMemcpyDeviceToHost, s));
    KV_CUDA_CALL(cudaStreamSynchronize(s));
  }

  void CopyArray(Array* dst, const Array& src) override {
    const size_t nbytes = dst->nbytes();
    if (nbytes == 0 || dst->data() == src.data()) return;
    KV_CHECK(src.nbytes() == nbytes, KV_ERR_INTERNAL, "copy of %s into %s",
             src.Describe().c_str(), dst->Describe().c_str());
    if (src.ctx().is_cpu()) return CopyFromHost(dst, src.data(), nbytes);
    if (dst->ctx().is_cpu()) return CopyToHost(src, dst->data(), nbytes);
    const int ddev = dst->ctx().dev_id, sdev = src.ctx().dev_id;
    DeviceGuard guard(ddev);
    cudaStream_t s = Stream(ddev);
    if (ddev == sdev) {
      KV_CUDA_CALL(cudaMemcpyAsync(dst->data(), src.data(), nbytes, cudaMemcpyDeviceToDevice, s));
    } else {
      (void)CanAccess(ddev, sdev);  // enables peer access on first use
      KV_CUDA_CALL(cudaMemcpyPeerAsync(dst->data(), ddev, src.data(), sdev, nbytes, s));
    }
    KV_CUDA_CALL(cudaStreamSynchronize(s));
  }

  void Fill(Array* a, double value) override {
    const Scalar v = EncodeScalar(a->dtype(), value, "fill value");
    if (a->size() == 0) return;
    const int dev = a->ctx().dev_id;
    DeviceGuard guard(dev);
    cudaStream_t s = Stream(dev);
    LaunchFill(s, a->dtype(), a->data(), a->size(), v.bytes);
    KV_CUDA_CALL(cudaStreamSynchronize(s));
  }

  void Binary(int op, const Array& a, const Array& b, Array* out) override {
    CheckOp(op);
    const int dev = out->ctx().dev_id;
    KV_CHECK(a.ctx() == out->ctx() && b.ctx() == out->ctx(), KV_ERR_DEVICE,
             "element-wise operands must be on one device: %s, %s -> %s",
             a.Describe().c_str(), b.Describe().c_str(), out->Describe().c_str());
    if (out->size() == 0) return;
    DeviceGuard guard(dev);
    cudaStream_t s = Stream(dev);
    if (op == KV_OP_DIV && IsIntegerDType(b.dtype())) {
      // Reject a zero divisor before anything is written.
      DeviceBuffer flag(dev, sizeof(int));
      int found = 0;
      KV_CUDA_CALL(cudaMemsetAsync(flag.get(), 0, sizeof(int), s));
      LaunchFindZero(s, b.dtype(), b.data(), b.size(), static_cast<int*>(flag.get()));
      KV_CUDA_CALL(cudaMemcpyAsync(&found, flag.get(), sizeof(int), cudaMemcpyDeviceToHost, s));
      KV_CUDA_CALL(cudaStreamSynchronize(s));
      KV_CHECK(found == 0, KV_ERR_INVALID_ARGUMENT,
               "integer division by zero: the divisor %s has a zero element",
               b.Describe().c_str());
    }
    LaunchBinary(s, op, out->dtype(), a.data(), b.data(), out->data(), out->size());
    KV_CUDA_CALL(cudaStreamSynchronize(s));
  }

  void BinaryScalar(int op, const Array& a, double scalar, Array* out) override {
    CheckOp(op);
    KV_CHECK(a.ctx() == out->ctx(), KV_ERR_DEVICE,
             "element-wise operands must be on one device: %s -> %s", a.Describe().c_str(),
             out->Describe().c_str());
    const Scalar v = EncodeScalar(a.dtype(), scalar, "scalar");
    KV_CHECK(!(op == KV_OP_DIV && ScalarIsZero(a.dtype(), v)), KV_ERR_INVALID_ARGUMENT,
             "integer division by zero: %s divided by the scalar %g", a.Describe().c_str(),
             scalar);
    if (out->size() == 0) return;
    const int dev = out->ctx().dev_id;
    DeviceGuard guard(dev);
    cudaStream_t s = Stream(dev);
    LaunchBinaryScalar(s, op, out->dtype(), a.data(), v.bytes, out->data(), out->size());
    KV_CUDA_CALL(cudaStreamSynchronize(s));
  }
};

}  // namespace
}  // namespace cuda

DeviceBackend& CudaBackend() {
  static cuda::CudaBackendImpl* backend = new cuda::CudaBackendImpl();
  return *backend;
}

int CudaDeviceCount() { return cuda::DeviceCount(); }

}  // namespace kvstore
