// store.cc - defaults of the abstract store (what in-process stores answer for the
// distributed-only calls) and key naming for messages.
#include "core/store.h"

#include <algorithm>
#include <cctype>
#include <unordered_map>

#include "comm/comm.h"
#include "optimizer/optimizer.h"

namespace kvstore {

std::string KeyList::Name(int i) const {
  if (kind == KeyKind::kStr) return strs[i] ? StrFormat("\"%s\"", strs[i]) : std::string("(null)");
  return std::to_string(ints[i]);
}

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

using kvstore::Array;
using kvstore::KeyList;

// Every output is checked against the value it will receive before anything is initialised,
// so a broadcast with a bad output changes nothing (every store type relies on this).
void KVStore_::Broadcast(const KeyList& vkeys, const Array* const* vals, const KeyList& okeys,
                         Array* const* outs, int priority) {
  KV_CHECK(vkeys.size == 0 || okeys.size == 0 || vkeys.kind == okeys.kind, KV_ERR_KEY_KIND_MISMATCH,
           "broadcast mixes int and string keys");
  std::unordered_map<std::string, int> source_of;  // first value given for each key name
  for (int v = 0; v < vkeys.size; ++v) source_of.emplace(vkeys.Name(v), v);
  for (int o = 0; o < okeys.size; ++o) {
    const std::string name = okeys.Name(o);
    auto it = source_of.find(name);
    KV_CHECK(it != source_of.end(), KV_ERR_INVALID_ARGUMENT,
             "broadcast: output key %s is not among the broadcast keys", name.c_str());
    kvstore::CheckSameShapeDType(*vals[it->second], *outs[o], "broadcast output of key " + name);
  }
  Init(vkeys, vals);
  Pull(okeys, outs, priority);
}

void KVStore_::SetOptimizer(const std::string& spec) { SetUpdater(kvstore::CreateOptimizer(spec)); }

int KVStore_::NumDeadNodes(int node_group, int timeout_sec) {
  KV_CHECK(node_group > 0 && node_group <= 7, KV_ERR_INVALID_ARGUMENT,
           "node group %d is not a sum of KV_NODE_SCHEDULER, KV_NODE_SERVERS, KV_NODE_WORKERS", node_group);
  KV_CHECK(timeout_sec >= 0, KV_ERR_INVALID_ARGUMENT, "negative timeout %d", timeout_sec);
  return 0;
}

void KVStore_::SetBarrierBeforeExit(bool) {
  KV_FAIL(KV_ERR_NOT_SUPPORTED, "store \"%s\" is not a distributed worker: no exit barrier", type().c_str());
}

void KVStore_::SendCommandToServers(int, const std::string&) {
  KV_FAIL(KV_ERR_NOT_SUPPORTED, "store \"%s\" has no servers to send commands to", type().c_str());
}

void KVStore_::RunServer(KVController, void*) {
  KV_FAIL(KV_ERR_NOT_SUPPORTED, "store \"%s\" cannot run a server: create a dist store in a process whose DMLC_ROLE is server or scheduler",
          type().c_str());
}
