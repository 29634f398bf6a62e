// comm_cpu.cc - the CPU comm: sums on the host with the fused kernel and copies out.
#include <vector>

#include "comm/comm.h"
#include "core/cpu/kernels.h"
#include "core/device.h"
#include "kvstore_features.h"

namespace kvstore {
namespace {

class CpuComm final : public Comm {
 public:
  void Reduce(const std::vector<const Array*>& srcs, Array* dst) override {
    // Values on other devices are staged into host arrays first (GPU builds only).
    std::vector<std::unique_ptr<Array>> staged;
    const std::vector<const void*> ptrs = HostAddresses(srcs, &staged);
    if (dst->ctx().is_cpu()) {
      if (ptrs.size() == 1) {
        CpuParallelCopy(dst->data(), ptrs[0], dst->nbytes());
      } else {
        CpuReduceSum(ptrs.data(), static_cast<int>(ptrs.size()), dst->data(), dst->size(),
                     dst->dtype());
      }
      return;
    }
    std::unique_ptr<Array> host = Array::Create(dst->shape(), dst->dtype(), Context{KV_CPU, 0});
    CpuReduceSum(ptrs.data(), static_cast<int>(ptrs.size()), host->data(), host->size(),
                 host->dtype());
    CopyArray(dst, *host);
  }

  void Broadcast(const Array& src, const std::vector<Array*>& dsts) override {
    for (Array* dst : dsts) CopyArray(dst, src);
  }

  Context MergeContext(const std::vector<Context>&, size_t) override { return Context{KV_CPU, 0}; }
};

}  // namespace

std::vector<const void*> HostAddresses(const std::vector<const Array*>& srcs,
                                       std::vector<std::unique_ptr<Array>>* staged) {
  std::vector<const void*> ptrs;
  ptrs.reserve(srcs.size());
  for (const Array* src : srcs) {
    if (src->ctx().is_cpu()) {
      ptrs.push_back(src->data());
      continue;
    }
    staged->push_back(Array::Create(src->shape(), src->dtype(), Context{KV_CPU, 0}));
    CopyArray(staged->back().get(), *src);
    ptrs.push_back(staged->back()->data());
  }
  return ptrs;
}

std::unique_ptr<Comm> CreateCpuComm() { return std::make_unique<CpuComm>(); }

#if !KVSTORE_USE_CUDA
// Without CUDA every value lives in host memory, so "sum where the values live" is the CPU.
std::unique_ptr<Comm> CreateDeviceComm() { return std::make_unique<CpuComm>(); }
#endif

}  // namespace kvstore
