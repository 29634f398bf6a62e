// nccl_lib.cc - dlopen of libnccl.so.2 and the process-wide communicator cache.
#include "comm/nccl/nccl_lib.h"

#include <dlfcn.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <string>

#include "core/cuda/cuda_util.h"
#include "core/error.h"
#include "kvstore/kvstore.h"

namespace kvstore {
namespace nccl {
namespace {

struct Loaded {
  Api api;
  std::string error;  // non-empty when loading failed
};

template <typename Fn>
bool Resolve(void* handle, const char* name, Fn* fn, std::string* error) {
  *fn = reinterpret_cast<Fn>(dlsym(handle, name));
  if (*fn == nullptr && error->empty()) {
    *error = StrFormat("the NCCL library has no symbol %s", name);
  }
  return *fn != nullptr;
}

Loaded* Load() {
  auto* out = new Loaded();  // kept for the life of the process, like the dlopen handle
  const char* override_path = std::getenv("KVSTORE_NCCL_LIBRARY");
  const char* path = override_path != nullptr && *override_path ? override_path : "libnccl.so.2";
  void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    out->error = StrFormat("cannot load NCCL (%s): %s", path, why ? why : "unknown error");
    return out;
  }
  Api& a = out->api;
  std::string& e = out->error;
  Resolve(handle, "ncclGetVersion", &a.GetVersion, &e);
  Resolve(handle, "ncclGetErrorString", &a.GetErrorString, &e);
  Resolve(handle, "ncclCommInitAll", &a.CommInitAll, &e);
  Resolve(handle, "ncclCommDestroy", &a.CommDestroy, &e);
  Resolve(handle, "ncclReduce", &a.Reduce, &e);
  Resolve(handle, "ncclBroadcast", &a.Broadcast, &e);
  Resolve(handle, "ncclAllReduce", &a.AllReduce, &e);
  Resolve(handle, "ncclGroupStart", &a.GroupStart, &e);
  Resolve(handle, "ncclGroupEnd", &a.GroupEnd, &e);
  a.GetLastError = reinterpret_cast<const char* (*)(ncclComm_t)>(dlsym(handle, "ncclGetLastError"));
  if (e.empty() && a.GetVersion(&a.version) != ncclSuccess) {
    e = StrFormat("ncclGetVersion failed in %s", path);
  }
  if (e.empty() && a.version < 2400) {  // ncclBroadcast and ncclCommInitAll semantics
    e = StrFormat("%s is NCCL %d; version 2.4 or newer is needed", path, a.version);
  }
  if (!e.empty()) {
    e = StrFormat("cannot use NCCL (%s): %s", path, e.c_str());
    dlclose(handle);
  }
  return out;
}

const Loaded& LoadedLib() {
  static const Loaded* loaded = Load();
  return *loaded;
}

}  // namespace

const Api& Lib() {
  const Loaded& l = LoadedLib();
  KV_CHECK(l.error.empty(), KV_ERR_NCCL, "%s", l.error.c_str());
  return l.api;
}

void Check(ncclResult_t result, const char* what, ncclComm_t comm) {
  if (result == ncclSuccess) return;
  const Api& a = Lib();
  std::string detail;
  if (a.GetLastError != nullptr) {
    const char* last = a.GetLastError(comm);
    if (last != nullptr && *last) detail = StrFormat(" (%s)", last);
  }
  KV_FAIL(KV_ERR_NCCL, "NCCL error %d in %s: %s%s", static_cast<int>(result), what,
          a.GetErrorString(result), detail.c_str());
}

ncclDataType_t DataType(int dtype) {
  switch (dtype) {
    case KV_FLOAT32: return ncclFloat32;
    case KV_FLOAT64: return ncclFloat64;
    case KV_FLOAT16: return ncclFloat16;
    case KV_UINT8: return ncclUint8;
    case KV_INT32: return ncclInt32;
    case KV_INT64: return ncclInt64;
    default: KV_FAIL(KV_ERR_INVALID_ARGUMENT, "dtype %d is not supported by the nccl store", dtype);
  }
}

int Clique::RankOf(int dev) const {
  for (size_t i = 0; i < devs.size(); ++i) {
    if (devs[i] == dev) return static_cast<int>(i);
  }
  return -1;
}

const Clique& CliqueCache::Get(const std::vector<int>& devs) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = cliques_.find(devs);
  if (it != cliques_.end()) return *it->second;
  const Api& a = Lib();
  for (int d : devs) cuda::CheckDevice(d);
  auto clique = std::make_unique<Clique>();
  clique->devs = devs;
  clique->comms.assign(devs.size(), nullptr);
  {
    // ncclCommInitAll switches devices; keep the caller's current device.
    cuda::DeviceGuard guard(devs[0]);
    Check(a.CommInitAll(clique->comms.data(), static_cast<int>(devs.size()), devs.data()),
          "ncclCommInitAll");
  }
  const Clique& ref = *clique;
  cliques_.emplace(devs, std::move(clique));
  return ref;
}

CliqueCache::~CliqueCache() {
  if (cliques_.empty()) return;
  const Api& a = Lib();  // loaded: a clique exists
  // ncclCommDestroy frees device memory: keep it apart from other threads' collectives.
  std::lock_guard<std::mutex> lock(cuda::DeviceSyncMutex());
  for (auto& entry : cliques_) {
    for (ncclComm_t comm : entry.second->comms) {
      if (comm != nullptr) (void)a.CommDestroy(comm);
    }
  }
}

}  // namespace nccl
}  // namespace kvstore
