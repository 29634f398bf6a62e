// c_api.cc - the extern "C" shims: check arguments, translate handles, run, and turn every
// failure into a return code plus the thread's last-error message (guard.h). Nothing thrown
// inside the library crosses this boundary. Queries about a store's capabilities are in
// capabilities.cc.
#include <cstring>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "c_api/call_arrays.h"
#include "c_api/guard.h"
#include "c_api/profile_call.h"
#include "core/device.h"
#include "kvstore_features.h"
#include "store/callback_updater.h"
#include "store/store.h"
#include "kvstore/kvstore.h"

using kvstore::Array;
using kvstore::KeyList;
using kvstore::Store;

using kvstore::capi::CallArrays;
using kvstore::capi::CheckList;
using kvstore::capi::CheckStorage;
using kvstore::capi::EnterArray;
using kvstore::capi::Ready;
using kvstore::capi::ReadyToWrite;
using kvstore::capi::EnterStore;
using kvstore::capi::Guard;
using kvstore::capi::InCall;

namespace {

kvstore::Shape ToShape(const int64_t* dims, int ndim) {
  KV_CHECK(ndim >= 0 && ndim <= KV_MAX_NDIM, KV_ERR_INVALID_ARGUMENT, "ndim %d is outside [0, %d]", ndim,
           KV_MAX_NDIM);
  KV_CHECK(ndim == 0 || dims != nullptr, KV_ERR_NULL_POINTER, "shape is NULL with ndim %d", ndim);
  return kvstore::Shape(dims, dims + ndim);
}

int StoreInit(KVStoreHandle store, const KeyList& keys, const KVArrayHandle* vals) {
  return Guard([&] {
    const InCall in_call = EnterStore(store);
    CallArrays v = CheckList(keys, vals, "init");
    CheckStorage(*store, keys, v, "init");
    store->Init(keys, v.data());
  });
}

// Whether the store takes the arrays of a push, pull or pushpull unchecked beyond their
// pointers (Store::enters_array_gates): not while profiling, whose record of the call reads
// the arrays after the store returned.
bool StoreEntersGates(const Store& store) { return store.enters_array_gates() && !kvstore::profile::On(); }

int StorePush(KVStoreHandle store, const KeyList& keys, const KVArrayHandle* vals, int priority) {
  return Guard([&] {
    const InCall in_call = EnterStore(store);
    if (StoreEntersGates(*store)) {
      kvstore::capi::CheckPointers(keys, vals, "push");
      return store->Push(keys, vals, priority);
    }
    CallArrays v = CheckList(keys, vals, "push");
    CheckStorage(*store, keys, v, "push");
    const kvstore::capi::ProfiledCall prof("push", kvstore::profile::Stat::kPush, keys, v);
    store->Push(keys, v.data(), priority);
  });
}

int StorePull(KVStoreHandle store, const KeyList& keys, const KVArrayHandle* outs, int priority) {
  return Guard([&] {
    const InCall in_call = EnterStore(store);
    if (StoreEntersGates(*store)) {
      kvstore::capi::CheckPointers(keys, outs, "pull");
      return store->Pull(keys, outs, priority);
    }
    CallArrays o = CheckList(keys, outs, "pull", true);
    CheckStorage(*store, keys, o, "pull", true);
    const kvstore::capi::ProfiledCall prof("pull", kvstore::profile::Stat::kPull, keys, o);
    store->Pull(keys, o.data(), priority);
  });
}

template <bool kBroadcast>
int StorePushPullOrBroadcast(KVStoreHandle store, const KeyList& vkeys, const KVArrayHandle* vals,
                             const KeyList& okeys, const KVArrayHandle* outs, int priority) {
  return Guard([&] {
    const InCall in_call = EnterStore(store);
    if (!kBroadcast && StoreEntersGates(*store)) {
      kvstore::capi::CheckPointers(vkeys, vals, "pushpull");
      kvstore::capi::CheckPointers(okeys, outs, "pushpull output");
      return store->PushPull(vkeys, vals, okeys, outs, priority);
    }
    CallArrays v = CheckList(vkeys, vals, kBroadcast ? "broadcast" : "pushpull");
    CallArrays o = CheckList(okeys, outs, kBroadcast ? "broadcast output" : "pushpull output", true);
    CheckStorage(*store, vkeys, v, kBroadcast ? "broadcast" : "pushpull");
    CheckStorage(*store, okeys, o, kBroadcast ? "broadcast" : "pushpull", true);
    const kvstore::capi::ProfiledCall prof(kBroadcast ? "broadcast" : "pushpull",
        kBroadcast ? kvstore::profile::Stat::kNone : kvstore::profile::Stat::kPush, vkeys, v, &okeys, &o);
    if (kBroadcast) store->Broadcast(vkeys, v.data(), okeys, o.data(), priority);
    else store->PushPull(vkeys, v.data(), okeys, o.data(), priority);
  });
}

// Hands a callback registration to the store through `set`. The header leaves user_data with
// the caller when registration fails, so a refused registration is disowned before this
// function's reference, possibly the last, is dropped.
template <typename Set>
void Register(std::shared_ptr<kvstore::CallbackUpdater> registration, Set&& set) {
  try {
    set(registration);
  } catch (...) {
    registration->Disown();
    throw;
  }
}

int EnvRoleIs(const char* role, bool when_unset) {
  const char* v = std::getenv("DMLC_ROLE");
  if (!v || !*v) return when_unset ? 1 : 0;
  return std::strcmp(v, role) == 0 ? 1 : 0;
}

}  // namespace

extern "C" {

int KVGetVersion(void) { return KVSTORE_VERSION_NUMBER; }

const char* KVGetVersionString(void) {
#define KV_STR2(x) #x
#define KV_STR(x) KV_STR2(x)
  return KV_STR(KVSTORE_VERSION_MAJOR) "." KV_STR(KVSTORE_VERSION_MINOR) "." KV_STR(KVSTORE_VERSION_PATCH);
}

int KVHasFeature(int feature) {
  switch (feature) {
    case KV_FEATURE_CUDA: return KVSTORE_USE_CUDA ? 1 : 0;
    case KV_FEATURE_NCCL: return KVSTORE_USE_NCCL ? 1 : 0;
    case KV_FEATURE_DIST: return KVSTORE_USE_DIST ? 1 : 0;
    default: return 0;
  }
}

int KVGetGpuCount(int* out_count) {
  return Guard([&] {
    KV_REQUIRE(out_count, "out_count");
    *out_count = kvstore::GpuCount();
  });
}

const char* KVGetLastError(void) { return kvstore::capi::LastError().c_str(); }

const char* KVErrorName(int code) {
  if (code == KV_OK) return "KV_OK";
#define KV_ERROR_NAME_CASE_(sym, val, desc) \
  if (code == (val)) return "KV_ERR_" #sym;
  KV_ERROR_TABLE(KV_ERROR_NAME_CASE_)
#undef KV_ERROR_NAME_CASE_
  return "KV_ERR_UNKNOWN";
}

size_t KVDTypeSize(int dtype) { return kvstore::DTypeSize(dtype); }

const char* KVDTypeName(int dtype) {
  return kvstore::IsValidDType(dtype) ? kvstore::DTypeName(dtype) : nullptr;
}

/* ---- arrays ---- */

int KVArrayCreate(const int64_t* shape, int ndim, int dtype, int dev_type, int dev_id, KVArrayHandle* out) {
  return Guard([&] {
    KV_REQUIRE(out, "out");
    std::unique_ptr<Array> a = Array::Create(ToShape(shape, ndim), dtype, kvstore::Context{dev_type, dev_id});
    a->set_caller_owned();
    *out = a.release();
  });
}

int KVArrayFree(KVArrayHandle array) {
  return Guard([&] {
    if (array == nullptr) return;
    KV_CHECK(array->caller_owned(), KV_ERR_INVALID_ARGUMENT,
             "array %s is lent by the store (an updater's argument) and must not be freed",
             array->Describe().c_str());
    array->call_gate().Close("array");
    Array::Release(array);
  });
}

int KVArrayGetNDim(KVArrayHandle array, int* out_ndim) {
  return Guard([&] {
    const InCall in_call = EnterArray(array, "array");
    KV_REQUIRE(out_ndim, "out_ndim");
    *out_ndim = array->ndim();
  });
}

int KVArrayGetShape(KVArrayHandle array, int64_t* out_dims, int capacity, int* out_ndim) {
  return Guard([&] {
    const InCall in_call = EnterArray(array, "array");
    KV_REQUIRE(out_ndim, "out_ndim");
    *out_ndim = array->ndim();
    KV_CHECK(capacity >= array->ndim(), KV_ERR_INVALID_ARGUMENT, "capacity %d is smaller than the rank %d",
             capacity, array->ndim());
    KV_CHECK(array->ndim() == 0 || out_dims != nullptr, KV_ERR_NULL_POINTER, "out_dims is NULL");
    std::copy(array->shape().begin(), array->shape().end(), out_dims);
  });
}

int KVArrayGetSize(KVArrayHandle array, int64_t* out_size) {
  return Guard([&] {
    const InCall in_call = EnterArray(array, "array");
    KV_REQUIRE(out_size, "out_size");
    *out_size = kvstore::ShapeSize(array->shape());  // logical, also for row_sparse
  });
}

int KVArrayGetNBytes(KVArrayHandle array, size_t* out_nbytes) {
  return Guard([&] {
    const InCall in_call = EnterArray(array, "array");
    KV_REQUIRE(out_nbytes, "out_nbytes");
    *out_nbytes = array->nbytes();
  });
}

int KVArrayGetDType(KVArrayHandle array, int* out_dtype) {
  return Guard([&] {
    const InCall in_call = EnterArray(array, "array");
    KV_REQUIRE(out_dtype, "out_dtype");
    *out_dtype = array->dtype();
  });
}

int KVArrayGetContext(KVArrayHandle array, int* out_dev_type, int* out_dev_id) {
  return Guard([&] {
    const InCall in_call = EnterArray(array, "array");
    KV_REQUIRE(out_dev_type, "out_dev_type");
    KV_REQUIRE(out_dev_id, "out_dev_id");
    *out_dev_type = array->ctx().dev_type;
    *out_dev_id = array->ctx().dev_id;
  });
}

int KVArrayGetData(KVArrayHandle array, void** out_data) {
  return Guard([&] {
    const InCall in_call = EnterArray(array, "array");
    KV_REQUIRE(out_data, "out_data");
    KV_CHECK(array->ctx().is_cpu(), KV_ERR_DEVICE, "array %s is not in host memory", array->Describe().c_str());
    *out_data = array->ExposeData();
  });
}

int KVArrayCopyFromHost(KVArrayHandle array, const void* data, size_t nbytes) {
  return Guard([&] {
    const InCall in_call = EnterArray(array, "array");
    KV_CHECK(nbytes == array->nbytes(), KV_ERR_INVALID_ARGUMENT,
             "copy from host: %zu bytes given, array %s holds %zu bytes", nbytes, array->Describe().c_str(),
             array->nbytes());
    if (nbytes == 0) return;
    KV_REQUIRE(data, "data");
    kvstore::GetBackend(array->ctx().dev_type).CopyFromHost(ReadyToWrite(array), data, nbytes);
  });
}

int KVArrayCopyToHost(KVArrayHandle array, void* data, size_t nbytes) {
  return Guard([&] {
    const InCall in_call = EnterArray(array, "array");
    KV_CHECK(nbytes == array->nbytes(), KV_ERR_INVALID_ARGUMENT,
             "copy to host: %zu bytes given, array %s holds %zu bytes", nbytes, array->Describe().c_str(),
             array->nbytes());
    if (nbytes == 0) return;
    KV_REQUIRE(data, "data");
    kvstore::GetBackend(array->ctx().dev_type).CopyToHost(*Ready(array), data, nbytes);
  });
}

int KVArrayCopy(KVArrayHandle dst, KVArrayHandle src) {
  return Guard([&] {
    const InCall in_call_dst = EnterArray(dst, "dst");
    const InCall in_call_src = EnterArray(src, "src");
    src->RequireDense("KVArrayCopy");
    dst->RequireDense("KVArrayCopy");
    kvstore::CheckSameShapeDType(*dst, *src, "copy from " + src->Describe() + " to " + dst->Describe());
    kvstore::CopyArray(ReadyToWrite(dst), *Ready(src));
  });
}

int KVArrayFill(KVArrayHandle array, double value) {
  return Guard([&] {
    const InCall in_call = EnterArray(array, "array");
    array->RequireDense("KVArrayFill");
    kvstore::GetBackend(array->ctx().dev_type).Fill(ReadyToWrite(array), value);
  });
}

int KVArrayBinary(int op, KVArrayHandle a, KVArrayHandle b, KVArrayHandle out) {
  return Guard([&] {
    const InCall in_call_a = EnterArray(a, "a");
    const InCall in_call_b = EnterArray(b, "b");
    const InCall in_call_out = EnterArray(out, "out");
    for (const Array* x : {a, b, out}) x->RequireDense("KVArrayBinary");
    kvstore::CheckSameShapeDType(*a, *b, "element-wise operands " + a->Describe() + " and " + b->Describe());
    kvstore::CheckSameShapeDType(*a, *out, "element-wise output " + out->Describe());
    KV_CHECK(a->ctx() == b->ctx() && a->ctx() == out->ctx(), KV_ERR_DEVICE,
             "element-wise operands must be on one device: %s, %s, %s", a->ctx().ToString().c_str(),
             b->ctx().ToString().c_str(), out->ctx().ToString().c_str());
    kvstore::GetBackend(a->ctx().dev_type).Binary(op, *Ready(a), *Ready(b), ReadyToWrite(out));
  });
}

int KVArrayBinaryScalar(int op, KVArrayHandle a, double scalar, KVArrayHandle out) {
  return Guard([&] {
    const InCall in_call_a = EnterArray(a, "a");
    const InCall in_call_out = EnterArray(out, "out");
    a->RequireDense("KVArrayBinaryScalar");
    out->RequireDense("KVArrayBinaryScalar");
    kvstore::CheckSameShapeDType(*a, *out, "element-wise output " + out->Describe());
    KV_CHECK(a->ctx() == out->ctx(), KV_ERR_DEVICE, "element-wise operands must be on one device: %s, %s",
             a->ctx().ToString().c_str(), out->ctx().ToString().c_str());
    kvstore::GetBackend(a->ctx().dev_type).BinaryScalar(op, *Ready(a), scalar, ReadyToWrite(out));
  });
}

int KVArrayWaitToRead(KVArrayHandle array) {
  return Guard([&] {
    const InCall in_call = EnterArray(array, "array");
    array->WaitPendingWrites();
  });
}

/* ---- stores ---- */

int KVStoreCreate(const char* type, KVStoreHandle* out) {
  return Guard([&] {
    KV_REQUIRE(type, "type");
    KV_REQUIRE(out, "out");
    *out = kvstore::CreateStore(type).release();
  });
}

int KVStoreFree(KVStoreHandle store) {
  return Guard([&] {
    if (store == nullptr) return;
    store->call_gate().Close("store");  // BUSY while a call runs: nothing is freed
    std::unique_ptr<Store> owned(store);  // destroyed even when Close throws
    owned->Close();
  });
}

int KVStoreGetType(KVStoreHandle store, const char** out_type) {
  return Guard([&] {
    const InCall in_call = EnterStore(store);
    KV_REQUIRE(out_type, "out_type");
    *out_type = store->type().c_str();
  });
}

int KVStoreInit(KVStoreHandle store, int num, const int* keys, const KVArrayHandle* vals) {
  return StoreInit(store, KeyList::Ints(num, keys), vals);
}
int KVStoreInitStr(KVStoreHandle store, int num, const char* const* keys, const KVArrayHandle* vals) {
  return StoreInit(store, KeyList::Strs(num, keys), vals);
}

int KVStorePush(KVStoreHandle store, int num, const int* keys, const KVArrayHandle* vals, int priority) {
  return StorePush(store, KeyList::Ints(num, keys), vals, priority);
}
int KVStorePushStr(KVStoreHandle store, int num, const char* const* keys, const KVArrayHandle* vals,
                   int priority) {
  return StorePush(store, KeyList::Strs(num, keys), vals, priority);
}

int KVStorePull(KVStoreHandle store, int num, const int* keys, const KVArrayHandle* outs, int priority) {
  return StorePull(store, KeyList::Ints(num, keys), outs, priority);
}
int KVStorePullStr(KVStoreHandle store, int num, const char* const* keys, const KVArrayHandle* outs,
                   int priority) {
  return StorePull(store, KeyList::Strs(num, keys), outs, priority);
}

int KVStorePushPull(KVStoreHandle store, int vnum, const int* vkeys, const KVArrayHandle* vals, int onum,
                    const int* okeys, const KVArrayHandle* outs, int priority) {
  return StorePushPullOrBroadcast<false>(store, KeyList::Ints(vnum, vkeys), vals, KeyList::Ints(onum, okeys),
                                         outs, priority);
}
int KVStorePushPullStr(KVStoreHandle store, int vnum, const char* const* vkeys, const KVArrayHandle* vals,
                       int onum, const char* const* okeys, const KVArrayHandle* outs, int priority) {
  return StorePushPullOrBroadcast<false>(store, KeyList::Strs(vnum, vkeys), vals, KeyList::Strs(onum, okeys),
                                         outs, priority);
}

int KVStoreBroadcast(KVStoreHandle store, int vnum, const int* vkeys, const KVArrayHandle* vals, int onum,
                     const int* okeys, const KVArrayHandle* outs, int priority) {
  return StorePushPullOrBroadcast<true>(store, KeyList::Ints(vnum, vkeys), vals, KeyList::Ints(onum, okeys),
                                        outs, priority);
}
int KVStoreBroadcastStr(KVStoreHandle store, int vnum, const char* const* vkeys, const KVArrayHandle* vals,
                        int onum, const char* const* okeys, const KVArrayHandle* outs, int priority) {
  return StorePushPullOrBroadcast<true>(store, KeyList::Strs(vnum, vkeys), vals, KeyList::Strs(onum, okeys),
                                        outs, priority);
}

int KVStoreSetUpdater(KVStoreHandle store, KVUpdater updater, void* user_data, KVFreeFn free_fn) {
  return Guard([&] {
    const InCall in_call = EnterStore(store);
    if (!updater) return store->SetUpdater(nullptr);
    Register(kvstore::MakeCallbackUpdater(updater, user_data, free_fn),
             [store](std::shared_ptr<kvstore::Updater> u) { store->SetUpdater(std::move(u)); });
  });
}

int KVStoreSetStrUpdater(KVStoreHandle store, KVStrUpdater updater, void* user_data, KVFreeFn free_fn) {
  return Guard([&] {
    const InCall in_call = EnterStore(store);
    if (!updater) return store->SetStrUpdater(nullptr);
    Register(kvstore::MakeStrCallbackUpdater(updater, user_data, free_fn),
             [store](std::shared_ptr<kvstore::Updater> u) { store->SetStrUpdater(std::move(u)); });
  });
}

int KVStoreSetOptimizer(KVStoreHandle store, const char* spec) {
  return Guard([&] {
    const InCall in_call = EnterStore(store);
    KV_REQUIRE(spec, "spec");
    store->SetOptimizer(spec);
  });
}

int KVStoreSaveOptimizerStates(KVStoreHandle store, const char* path) {
  return Guard([&] {
    const InCall in_call = EnterStore(store);
    KV_REQUIRE(path, "path");
    store->SaveOptimizerStates(path);
  });
}

int KVStoreLoadOptimizerStates(KVStoreHandle store, const char* path) {
  return Guard([&] {
    const InCall in_call = EnterStore(store);
    KV_REQUIRE(path, "path");
    store->LoadOptimizerStates(path);
  });
}

int KVStoreSetGradientCompression(KVStoreHandle store, int num_params, const char* const* keys,
                                  const char* const* vals) {
  return Guard([&] {
    const InCall in_call = EnterStore(store);
    KV_CHECK(num_params >= 0, KV_ERR_INVALID_ARGUMENT, "num_params is %d", num_params);
    std::vector<std::pair<std::string, std::string>> params;
    if (num_params > 0) {
      KV_REQUIRE(keys, "keys");
      KV_REQUIRE(vals, "vals");
    }
    for (int i = 0; i < num_params; ++i) {
      KV_CHECK(keys[i] && vals[i], KV_ERR_NULL_POINTER, "%s[%d] is NULL", keys[i] ? "vals" : "keys", i);
      params.emplace_back(keys[i], vals[i]);
    }
    store->SetGradientCompression(kvstore::compression::Compression::FromParamsOrNone(params));
  });
}

int KVStoreGetRank(KVStoreHandle store, int* out_rank) {
  return Guard([&] {
    const InCall in_call = EnterStore(store);
    KV_REQUIRE(out_rank, "out_rank");
    kvstore::Distributed* dist = store->distributed();
    *out_rank = dist ? dist->Rank() : 0;
  });
}

int KVStoreGetGroupSize(KVStoreHandle store, int* out_size) {
  return Guard([&] {
    const InCall in_call = EnterStore(store);
    KV_REQUIRE(out_size, "out_size");
    kvstore::Distributed* dist = store->distributed();
    *out_size = dist ? dist->GroupSize() : 1;
  });
}

int KVStoreBarrier(KVStoreHandle store) {
  return Guard([&] {
    const InCall in_call = EnterStore(store);
    if (kvstore::Distributed* dist = store->distributed()) dist->Barrier();
  });
}

int KVStoreWaitAll(KVStoreHandle store) {
  return Guard([&] {
    const InCall in_call = EnterStore(store);
    store->WaitAll();
  });
}

int KVStoreGetNumDeadNode(KVStoreHandle store, int node_id, int timeout_sec, int* out_number) {
  return Guard([&] {
    const InCall in_call = EnterStore(store);
    KV_REQUIRE(out_number, "out_number");
    KV_CHECK(node_id > 0 && node_id <= 7, KV_ERR_INVALID_ARGUMENT,
             "node group %d is not a sum of KV_NODE_SCHEDULER, KV_NODE_SERVERS, KV_NODE_WORKERS", node_id);
    KV_CHECK(timeout_sec >= 0, KV_ERR_INVALID_ARGUMENT, "negative timeout %d", timeout_sec);
    kvstore::Distributed* dist = store->distributed();
    *out_number = dist ? dist->NumDeadNodes(node_id, timeout_sec) : 0;
  });
}

int KVStoreSetBarrierBeforeExit(KVStoreHandle store, int barrier_before_exit) {
  return Guard([&] {
    const InCall in_call = EnterStore(store);
    kvstore::Distributed* dist = store->distributed();
    KV_CHECK(dist, KV_ERR_NOT_SUPPORTED, "store \"%s\" is not a distributed worker: no exit barrier",
             store->type().c_str());
    dist->SetBarrierBeforeExit(barrier_before_exit != 0);
  });
}

int KVStoreSendCommandToServers(KVStoreHandle store, int head, const char* body) {
  return Guard([&] {
    const InCall in_call = EnterStore(store);
    KV_REQUIRE(body, "body");
    KV_CHECK(head >= 0, KV_ERR_INVALID_ARGUMENT, "command head %d is reserved (heads < 0 belong to the library)",
             head);
    kvstore::Distributed* dist = store->distributed();
    KV_CHECK(dist, KV_ERR_NOT_SUPPORTED, "store \"%s\" has no servers to send commands to",
             store->type().c_str());
    dist->SendCommandToServers(head, body);
  });
}

int KVStoreRunServer(KVStoreHandle store, KVController controller, void* user_data) {
  return Guard([&] {
    const InCall in_call = EnterStore(store);
    kvstore::Distributed* dist = store->distributed();
    KV_CHECK(dist, KV_ERR_NOT_SUPPORTED,
             "store \"%s\" cannot run a server: create a dist store in a process whose DMLC_ROLE "
             "is server or scheduler",
             store->type().c_str());
    dist->RunServer(controller, user_data);
  });
}

int KVIsWorkerNode(void) { return EnvRoleIs("worker", true); }
int KVIsServerNode(void) { return EnvRoleIs("server", false); }
int KVIsSchedulerNode(void) { return EnvRoleIs("scheduler", false); }

}  // extern "C"
