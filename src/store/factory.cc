// factory.cc - CreateStore: the one place that maps a store type name to its implementation.
#include <algorithm>
#include <cctype>

#include "comm/comm.h"
#include "kvstore_features.h"
#include "store/store.h"

namespace kvstore {

namespace {

constexpr const char* kValidTypes =
    "local, local_update_cpu, local_allreduce_cpu, device, local_allreduce_device, nccl, dist, "
    "dist_sync, dist_device_sync, dist_sync_device, dist_async, dist_device_async, "
    "dist_async_device";

bool IsOneOf(const std::string& s, std::initializer_list<const char*> names) {
  return std::any_of(names.begin(), names.end(), [&](const char* n) { return s == n; });
}

}  // namespace

std::unique_ptr<Store> CreateStore(const std::string& type_in) {
  std::string type = type_in;
  std::transform(type.begin(), type.end(), type.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (IsOneOf(type, {"local", "local_update_cpu", "local_allreduce_cpu"})) {
    return CreateLocalStore(type, CreateCpuComm());
  }
  if (IsOneOf(type, {"device", "local_allreduce_device"})) {
    return CreateLocalStore(type, CreateDeviceComm());
  }
  if (type == "nccl") {
#if KVSTORE_USE_NCCL
    return CreateNcclStore(type);
#else
    KV_FAIL(KV_ERR_NOT_SUPPORTED, "store type \"nccl\" needs a build with NCCL (KVSTORE_USE_NCCL)");
#endif
  }
  if (IsOneOf(type, {"dist", "dist_sync", "dist_device_sync", "dist_sync_device", "dist_async",
                     "dist_device_async", "dist_async_device"})) {
#if KVSTORE_USE_DIST
    return CreateDistStore(type);
#else
    KV_FAIL(KV_ERR_NOT_SUPPORTED, "store type \"%s\" needs a build with the distributed stores (KVSTORE_USE_DIST)",
            type.c_str());
#endif
  }
  KV_FAIL(KV_ERR_INVALID_ARGUMENT, "unknown store type \"%s\"; valid types: %s", type_in.c_str(), kValidTypes);
}

}  // namespace kvstore
