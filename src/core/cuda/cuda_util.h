// cuda_util.h - shared pieces of the CUDA backend, the GPU comm and the nccl store: error
// mapping, a scoped current-device guard, the per-device streams and the peer-access table.
// Host-only; the kernels live in cuda_kernels.cu behind cuda_kernels.h.
#pragma once

#include <cuda_runtime_api.h>

#include <mutex>
#include <string>

#include "core/error.h"

namespace kvstore {
namespace cuda {

// Throws kvstore::Error for a failed CUDA call: OUT_OF_MEMORY for allocation failures,
// CUDA otherwise, with CUDA's own message and what we were doing.
[[noreturn]] void ThrowCudaError(cudaError_t err, const char* what);

}  // namespace cuda
}  // namespace kvstore

// KV_CUDA_CALL(cudaMemcpy(...)): throws on failure; the message names the failed call.
#define KV_CUDA_CALL(call)                                            \
  do {                                                                \
    cudaError_t kv_cuda_err_ = (call);                                \
    if (kv_cuda_err_ != cudaSuccess) ::kvstore::cuda::ThrowCudaError(kv_cuda_err_, #call); \
  } while (0)

namespace kvstore {
namespace cuda {

// Number of usable devices: 0 when the driver or device is missing (never throws). The
// first call initialises the runtime and the peer-access table; later calls are cheap.
int DeviceCount();

// Why DeviceCount() is 0 (CUDA's own message); empty when there are GPUs.
const std::string& NoDeviceReason();

// Throws DEVICE when `dev_id` is not a usable GPU ("no GPU" when there is none at all).
void CheckDevice(int dev_id);

// The stream of a device: every kernel and copy of the library on that device goes through
// it, and every public operation synchronises it before returning, so data is at rest
// between calls. Created on first use (non-blocking with respect to the legacy stream).
cudaStream_t Stream(int dev_id);

// Blocks until everything queued on the device's stream has finished; throws CUDA with the
// message of an asynchronous failure.
void SyncStream(int dev_id);

// True when kernels running on `dev` may dereference memory of `peer` (same device, or
// peer access was enabled at start-up; KVSTORE_ENABLE_GPU_P2P=0 or MXNET_ENABLE_GPU_P2P=0
// disables it).
bool CanAccess(int dev, int peer);

// Held around every cudaMalloc/cudaFree of the library, and by the nccl store from the
// launch of a group of collectives until they have completed. cudaMalloc and cudaFree
// synchronise the device; run concurrently with NCCL kernels that wait for their peers they
// can deadlock, and interleaved group launches of two threads on the same GPUs can too.
std::mutex& DeviceSyncMutex();

// Makes `dev_id` current for the lifetime of the guard and restores the previous device.
class DeviceGuard {
 public:
  explicit DeviceGuard(int dev_id);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

// Raw device memory owned by RAII (scratch buffers of the comm and the nccl store).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(int dev_id, size_t nbytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return ptr_; }

 private:
  void Release() noexcept;
  int dev_ = -1;
  void* ptr_ = nullptr;
};

}  // namespace cuda
}  // namespace kvstore
