// device_comm.cc - the comm of the `device` store in CUDA builds: sums on the GPU that holds
// the merge buffer, broadcasts to outputs on any device.
//
// Reduce: with a GPU destination, one fused kernel on the destination's stream reads every
// source. Sources on that GPU, and on GPUs it has peer access to, are read in place; sources
// on the CPU or on GPUs without peer access are first staged into scratch memory of the
// destination GPU. With a CPU destination the CPU kernel (CpuReduceSum) does the sum, after
// staging GPU sources into host memory, so an all-CPU key never touches CUDA; when every
// source is on a GPU the sum is done there and only the result crosses the bus.
//
// MergeContext spreads the merge buffers of GPU keys over all GPUs by size, as the reference
// does: each new key goes to the GPU holding the fewest merge-buffer bytes so far (ties: the
// GPU of the key's value, then the lowest id).
#include <cuda_runtime_api.h>

#include <memory>
#include <mutex>
#include <vector>

#include "comm/comm.h"
#include "core/cpu/kernels.h"
#include "core/array.h"
#include "core/cuda/cuda_kernels.h"
#include "core/cuda/cuda_util.h"
#include "core/error.h"

namespace kvstore {
namespace {

class CudaDeviceComm final : public Comm {
 public:
  void Reduce(const std::vector<const Array*>& srcs, Array* dst) override {
    KV_CHECK(!srcs.empty(), KV_ERR_INTERNAL, "reduce into %s without sources",
             dst->Describe().c_str());
    if (srcs.size() == 1) {
      if (srcs[0] != dst) CopyArray(dst, *srcs[0]);
      return;
    }
    if (dst->nbytes() == 0) return;
    if (dst->ctx().is_gpu()) {
      ReduceOnGpu(srcs, dst);
    } else {
      ReduceOnCpu(srcs, dst);
    }
  }

  void Broadcast(const Array& src, const std::vector<Array*>& dsts) override {
    for (Array* dst : dsts) {
      if (dst == &src || dst->data() == src.data()) continue;
      CopyArray(dst, src);
    }
  }

  Context MergeContext(const std::vector<Context>& ctxs, size_t nbytes) override {
    int preferred = -1;
    for (const Context& c : ctxs) {
      if (c.is_gpu() && preferred < 0) preferred = c.dev_id;
    }
    if (preferred < 0) return Context{KV_CPU, 0};  // CPU-only keys never touch CUDA
    const int n = cuda::DeviceCount();
    for (const Context& c : ctxs) {
      if (c.is_gpu()) cuda::CheckDevice(c.dev_id);
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (load_.size() < static_cast<size_t>(n)) load_.resize(static_cast<size_t>(n), 0);
    int best = preferred;
    for (int g = 0; g < n; ++g) {
      if (load_[static_cast<size_t>(g)] < load_[static_cast<size_t>(best)]) best = g;
    }
    load_[static_cast<size_t>(best)] += nbytes;
    return Context{KV_GPU, best};
  }

 private:
  static void ReduceOnGpu(const std::vector<const Array*>& srcs, Array* dst) {
    const int dev = dst->ctx().dev_id;
    cuda::DeviceGuard guard(dev);
    SumOnDevice(srcs, dev, dst->data());
    KV_CUDA_CALL(cudaStreamSynchronize(cuda::Stream(dev)));
  }

  static void ReduceOnCpu(const std::vector<const Array*>& srcs, Array* dst) {
    bool all_gpu = true;
    for (const Array* src : srcs) all_gpu = all_gpu && src->ctx().is_gpu();
    if (all_gpu) {
      // Sum on the first source's GPU (same order, so the same bits as the CPU kernel) and
      // move one array over the bus instead of K.
      const int dev = srcs[0]->ctx().dev_id;
      cuda::DeviceGuard guard(dev);
      cuda::DeviceBuffer sum(dev, dst->nbytes());
      cudaStream_t stream = cuda::Stream(dev);
      SumOnDevice(srcs, dev, sum.get());
      KV_CUDA_CALL(cudaMemcpyAsync(dst->data(), sum.get(), dst->nbytes(),
                                   cudaMemcpyDeviceToHost, stream));
      KV_CUDA_CALL(cudaStreamSynchronize(stream));
      return;
    }
    std::vector<std::unique_ptr<Array>> staged;
    const std::vector<const void*> ptrs = HostAddresses(srcs, &staged);
    CpuReduceSum(ptrs.data(), static_cast<int>(ptrs.size()), dst->data(), dst->size(),
                 dst->dtype());
  }

  // Queues out = sum(srcs) on the stream of `dev` (the current device). Sources on `dev` or
  // on GPUs it has peer access to are read in place; the others are staged into scratch
  // memory of `dev`. Returns once queued, except that it waits for the stream when it staged
  // anything, so that the scratch buffers outlive the kernel that reads them.
  static void SumOnDevice(const std::vector<const Array*>& srcs, int dev, void* out) {
    const Array& first = *srcs[0];
    const size_t nbytes = first.nbytes();
    cudaStream_t stream = cuda::Stream(dev);
    std::vector<cuda::DeviceBuffer> staged;
    staged.reserve(srcs.size());
    std::vector<const void*> ptrs;
    ptrs.reserve(srcs.size());
    for (const Array* src : srcs) {
      const Context c = src->ctx();
      if (c.is_gpu() && cuda::CanAccess(dev, c.dev_id)) {
        ptrs.push_back(src->data());
        continue;
      }
      staged.emplace_back(dev, nbytes);
      void* tmp = staged.back().get();
      if (c.is_cpu()) {
        KV_CUDA_CALL(cudaMemcpyAsync(tmp, src->data(), nbytes, cudaMemcpyHostToDevice, stream));
      } else {
        KV_CUDA_CALL(cudaMemcpyPeerAsync(tmp, dev, src->data(), c.dev_id, nbytes, stream));
      }
      ptrs.push_back(tmp);
    }
    cuda::LaunchReduceSum(stream, first.dtype(), ptrs.data(), static_cast<int>(ptrs.size()), out,
                          first.size());
    if (!staged.empty()) KV_CUDA_CALL(cudaStreamSynchronize(stream));
  }

  std::mutex mu_;
  std::vector<size_t> load_;  // merge-buffer bytes placed on each GPU
};

}  // namespace

std::unique_ptr<Comm> CreateDeviceComm() { return std::make_unique<CudaDeviceComm>(); }

}  // namespace kvstore
