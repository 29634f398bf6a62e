// collectives.h - NCCL collectives of one store call, launched in groups per clique.
//
// A store describes each reduce, broadcast or all-reduce of a call as a Collective; Run-
// Collectives sorts them by the set of GPUs they span and launches each set's collectives in
// one ncclGroupStart/ncclGroupEnd (at most kMaxGroupCalls NCCL calls per group), then waits
// until the streams of every GPU it touched are idle. Used by store/nccl_store.cc.
#pragma once

#include <cstddef>
#include <vector>

#include "comm/nccl/nccl_lib.h"

namespace kvstore {
namespace nccl {

// One collective of a call: per rank of `devs` a buffer (send for reduce and all-reduce,
// receive for broadcast), the root rank and the element count.
struct Collective {
  std::vector<int> devs;  // sorted GPU ids: the clique
  std::vector<void*> bufs;
  void* root_out = nullptr;  // reduce: where the root receives the sum
  int root = 0;
  size_t count = 0;
  int dtype = 0;
  bool broadcast = false;
  std::vector<void*> recv;  // all-reduce only: per rank, where the sum lands
};

// Launches `ops` (reordered: stably sorted by clique), one NCCL group per clique, and waits
// for them; the library's device-synchronising calls wait meanwhile (cuda::DeviceSyncMutex).
// Throws NCCL or CUDA errors; on failure it first waits for the groups already launched,
// which may still write the callers' arrays.
void RunCollectives(CliqueCache& cliques, std::vector<Collective>& ops);

}  // namespace nccl
}  // namespace kvstore
