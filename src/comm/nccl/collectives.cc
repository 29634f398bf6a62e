// collectives.cc - RunCollectives (collectives.h).
#include "comm/nccl/collectives.h"

#include <algorithm>
#include <mutex>

#include "core/cuda/cuda_util.h"

namespace kvstore {
namespace nccl {

namespace {
constexpr size_t kMaxGroupCalls = 1024;
}  // namespace

void RunCollectives(CliqueCache& cliques, std::vector<Collective>& ops) {
  if (ops.empty()) return;
  const Api& api = Lib();
  std::stable_sort(ops.begin(), ops.end(),
                   [](const Collective& a, const Collective& b) { return a.devs < b.devs; });
  std::lock_guard<std::mutex> lock(cuda::DeviceSyncMutex());  // until the streams are idle
  std::vector<int> touched;
  // On failure, wait for the groups already launched: they may still write caller arrays.
  struct DrainOnError {
    std::vector<int>* devs;
    bool armed = true;
    ~DrainOnError() {
      if (!armed) return;
      for (int d : *devs) {
        int previous = -1;
        (void)cudaGetDevice(&previous);
        (void)cudaSetDevice(d);
        (void)cudaDeviceSynchronize();
        if (previous >= 0) (void)cudaSetDevice(previous);
      }
      (void)cudaGetLastError();
    }
  } drain{&touched};
  for (size_t begin = 0; begin < ops.size();) {
    // One group per clique, and at most kMaxGroupCalls NCCL calls per group (older NCCL
    // versions reject more than 2048).
    const size_t per_group = std::max<size_t>(1, kMaxGroupCalls / ops[begin].devs.size());
    size_t end = begin;
    while (end < ops.size() && end - begin < per_group && ops[end].devs == ops[begin].devs) ++end;
    const Clique& clique = cliques.Get(ops[begin].devs);
    touched.insert(touched.end(), clique.devs.begin(), clique.devs.end());
    std::vector<cudaStream_t> streams;
    for (int d : clique.devs) streams.push_back(cuda::Stream(d));
    Check(api.GroupStart(), "ncclGroupStart");
    ncclResult_t launched = ncclSuccess;
    for (size_t o = begin; o < end && launched == ncclSuccess; ++o) {
      const Collective& op = ops[o];
      const ncclDataType_t type = DataType(op.dtype);
      for (size_t r = 0; r < clique.devs.size() && launched == ncclSuccess; ++r) {
        const int rank = static_cast<int>(r);
        if (op.broadcast) {
          launched = api.Broadcast(op.bufs[r], op.bufs[r], op.count, type, op.root,
                                   clique.comms[r], streams[r]);
        } else if (!op.recv.empty()) {
          launched = api.AllReduce(op.bufs[r], op.recv[r], op.count, type, ncclSum,
                                   clique.comms[r], streams[r]);
        } else {
          launched = api.Reduce(op.bufs[r], rank == op.root ? op.root_out : nullptr, op.count,
                                type, ncclSum, op.root, clique.comms[r], streams[r]);
        }
      }
    }
    const ncclResult_t ended = api.GroupEnd();
    Check(launched, ops[begin].broadcast        ? "ncclBroadcast"
                          : !ops[begin].recv.empty() ? "ncclAllReduce"
                                                     : "ncclReduce");
    Check(ended, "ncclGroupEnd");
    begin = end;
  }
  std::sort(touched.begin(), touched.end());
  touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
  drain.armed = false;
  for (int d : touched) cuda::SyncStream(d);
}

}  // namespace nccl
}  // namespace kvstore
