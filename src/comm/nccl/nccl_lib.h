// nccl_lib.h - NCCL opened at run time. libkvstore never links libnccl: the first user calls
// nccl::Lib(), which dlopen()s libnccl.so.2 (or $KVSTORE_NCCL_LIBRARY) and resolves the
// functions below, so the library loads and its CPU paths run where NCCL is absent.
#pragma once

#include <nccl.h>

#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace kvstore {
namespace nccl {

struct Api {
  int version = 0;  // NCCL_VERSION_CODE of the loaded library
  ncclResult_t (*GetVersion)(int*) = nullptr;
  const char* (*GetErrorString)(ncclResult_t) = nullptr;
  const char* (*GetLastError)(ncclComm_t) = nullptr;  // optional (NCCL >= 2.13)
  ncclResult_t (*CommInitAll)(ncclComm_t*, int, const int*) = nullptr;
  ncclResult_t (*CommDestroy)(ncclComm_t) = nullptr;
  ncclResult_t (*Reduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, int,
                         ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*Broadcast)(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t,
                            cudaStream_t) = nullptr;
  ncclResult_t (*AllReduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t,
                            ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*GroupStart)() = nullptr;
  ncclResult_t (*GroupEnd)() = nullptr;
};

// The loaded library; throws kvstore::Error (NCCL) naming the library and dlerror() when it
// cannot be opened or lacks a function. Thread-safe; the result (or failure) is cached.
const Api& Lib();

// Throws kvstore::Error (NCCL) for a failed call: NCCL's message, plus the communicator's
// last error when there is one.
void Check(ncclResult_t result, const char* what, ncclComm_t comm = nullptr);

// Maps a kvstore dtype to NCCL's; throws INVALID_ARGUMENT for an unsupported one.
ncclDataType_t DataType(int dtype);

// One communicator per GPU of a sorted, duplicate-free device list (ncclCommInitAll).
// comms[i] belongs to devs[i].
struct Clique {
  std::vector<int> devs;
  std::vector<ncclComm_t> comms;
  int RankOf(int dev) const;  // -1 when dev is not in the clique
};

// The cliques of one store, created on first use and destroyed (ncclCommDestroy) with the
// cache, that is when the store is freed rather than at process exit, where NCCL's threads
// would race with the CUDA runtime's teardown.
class CliqueCache {
 public:
  CliqueCache() = default;
  ~CliqueCache();
  CliqueCache(const CliqueCache&) = delete;
  CliqueCache& operator=(const CliqueCache&) = delete;
  // Throws DEVICE for a bad device, NCCL when the communicators cannot be created.
  const Clique& Get(const std::vector<int>& devs);

 private:
  std::mutex mu_;
  std::map<std::vector<int>, std::unique_ptr<Clique>> cliques_;
};

}  // namespace nccl
}  // namespace kvstore
