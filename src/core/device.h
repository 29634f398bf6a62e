// device.h - the per-device-type backend interface. Arrays allocate, copy and compute
// through the backend of their context's device type. The CPU backend is always present;
// the CUDA backend registers itself when the library is built with CUDA.
//
// Contract for every method: arguments were validated by the caller (shapes, dtypes and
// contexts agree as documented); failures throw kvstore::Error (DEVICE, OUT_OF_MEMORY,
// CUDA, INVALID_ARGUMENT for integer division by zero before any element is written).
#pragma once

#include <cstddef>

#include "core/array.h"
#include "kvstore_features.h"

namespace kvstore {

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  // Throws DEVICE when `ctx` (of this backend's type) cannot be used.
  virtual void CheckContext(const Context& ctx) = 0;
  // Zero-filled memory of `nbytes` (> 0) bytes on ctx.
  virtual void* Alloc(const Context& ctx, size_t nbytes) = 0;
  virtual void Free(const Context& ctx, void* ptr) noexcept = 0;
  virtual void CopyFromHost(Array* dst, const void* src, size_t nbytes) = 0;
  virtual void CopyToHost(const Array& src, void* dst, size_t nbytes) = 0;
  // dst <- src where at least one of them lives on this backend's device type.
  virtual void CopyArray(Array* dst, const Array& src) = 0;
  virtual void Fill(Array* a, double value) = 0;
  virtual void Binary(int op, const Array& a, const Array& b, Array* out) = 0;
  virtual void BinaryScalar(int op, const Array& a, double scalar, Array* out) = 0;
};

// The backend for a device type. Throws DEVICE for an unknown type and for KV_GPU in a build
// without CUDA ("built without CUDA").
DeviceBackend& GetBackend(int dev_type);

// The CPU backend (always available).
DeviceBackend& CpuBackend();

// Number of usable GPUs (0 without CUDA, driver or device).
int GpuCount();

#if KVSTORE_USE_CUDA
// Defined in src/core/cuda/; returns the process-wide CUDA backend.
DeviceBackend& CudaBackend();
int CudaDeviceCount();
#endif

}  // namespace kvstore
