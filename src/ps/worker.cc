// worker.cc - the worker side of the distributed stores (KVStoreCreate("dist_*") in a
// process whose DMLC_ROLE is worker): the store's calls, its keys, and the exit protocol.
//
// The pieces. worker_io.h is the I/O loop (sockets, outstanding requests, deadlines, dead
// peers), send_queue.h the order requests leave in and the pull window, op.h the completion
// of operations and the push failure rules, push_buffers.h the payloads of pushes, key.h
// the identity of a key, row_sparse_worker.h row_sparse pushes and row_sparse_pull. This
// file validates calls, prepares each push's payload and queues one Op per key.
//
// Threads. Application threads validate, prepare payloads (Gather: the caller's own large
// CPU value, else a send buffer of the key) and queue requests; the I/O thread does the rest.
// Locks, one per concern, never nested: registry_mu_ (this file: the key kind, the keys and
// the servers' optimizer), each key's PushBuffers, OpTracker, the send queue, WorkerIo's
// peers_mu_, each Waiter. A key's record (WorkerKey) is immutable after init except for
// the parts those locks guard, and is never removed: pointers to it stay valid.
//
// Pending writes and reads. The C API waits for pending writes into a call's arrays before
// the call (CheckList). Pull/pushpull call BeginPendingWrite on every output; the Op ends
// them (op.h). A zero-copy push holds a pending read on its value until its Op finishes.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <exception>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "comm/comm.h"
#include "core/cpu/kernels.h"
#include "core/dtype.h"
#include "optimizer/optimizer.h"
#include "ps/clock.h"
#include "ps/compressed_pull.h"
#include "ps/dist_states.h"
#include "ps/log.h"
#include "ps/mp_push.h"
#include "ps/op.h"
#include "ps/placement.h"
#include "ps/ps.h"
#include "ps/row_sparse_worker.h"
#include "ps/worker_io.h"

namespace kvstore {
namespace dist {

namespace {

// The groups of one call's keys: which group a key of the call belongs to, in an
// open-addressing table of twice the call's keys, filled once and dropped with the call (one
// allocation per call where a hash map costs one per key). Application thread, one call.
class GroupIndex {
 public:
  explicit GroupIndex(size_t keys) {
    size_t cap = 16;
    while (cap < 2 * keys) cap <<= 1;
    slots_.assign(cap, Slot{nullptr, 0});
    mask_ = cap - 1;
  }
  // The group of `k` and false, or, for a key not seen yet, `next` (filed as its group)
  // and true.
  std::pair<size_t, bool> Insert(const WorkerKey* k, size_t next) {
    // Fibonacci hashing of the address: records are nodes some hundred bytes apart.
    size_t i = static_cast<size_t>((reinterpret_cast<uintptr_t>(k) >> 4) * 0x9E3779B97F4A7C15ull >> 20) & mask_;
    for (;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.key == k) return {s.group, false};
      if (s.key == nullptr) {
        s = Slot{k, next};
        return {next, true};
      }
    }
  }
  // The group of `k`, or SIZE_MAX when it has none.
  size_t Find(const WorkerKey* k) const {
    size_t i = static_cast<size_t>((reinterpret_cast<uintptr_t>(k) >> 4) * 0x9E3779B97F4A7C15ull >> 20) & mask_;
    for (;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.key == k) return s.group;
      if (s.key == nullptr) return SIZE_MAX;
    }
  }

 private:
  struct Slot {
    const WorkerKey* key;
    size_t group;
  };
  std::vector<Slot> slots_;
  size_t mask_ = 0;
};

class WorkerStore : public Store, public Distributed {
 public:
  WorkerStore(const std::string& type, const Config& cfg);
  ~WorkerStore() override { Shutdown(); }

  void Init(const KeyList& keys, const Array* const* vals) override;
  void Push(const KeyList& keys, const Array* const* vals, int priority) override;
  void Pull(const KeyList& keys, Array* const* outs, int priority) override;
  void PushPull(const KeyList& vkeys, const Array* const* vals, const KeyList& okeys,
                Array* const* outs, int priority) override;
  bool takes_row_sparse() const override { return true; }
  void RowSparsePull(const KeyList& keys, Array* const* outs, const Array* const* row_ids, int priority) override;
  void SetUpdater(std::shared_ptr<Updater>) override {
    KV_FAIL(KV_ERR_NOT_SUPPORTED, "store \"%s\": a worker cannot run updaters; use KVStoreSetOptimizer "
            "(shipped to the servers) or set the updater in the server program", type().c_str());
  }
  void SetStrUpdater(std::shared_ptr<Updater> u) override { SetUpdater(std::move(u)); }
  void SetOptimizer(const std::string& spec) override;
  void SetGradientCompression(const std::optional<compression::Compression>& c) override { compressors_.Set(c); }
  void SaveOptimizerStates(const std::string& path) override;
  void LoadOptimizerStates(const std::string& path) override;
  int Rank() const override { return io_->rank(); }
  int GroupSize() const override { return io_->num_workers(); }
  void Barrier() override;
  void WaitAll() override { tracker_.WaitAll(); }
  int NumDeadNodes(int node_group, int timeout_sec) override;
  void SetBarrierBeforeExit(bool enabled) override { barrier_before_exit_ = enabled; }
  void Close() override;
  void SendCommandToServers(int head, const std::string& body) override;
  void RunServer(KVController, void*) override {
    KV_FAIL(KV_ERR_NOT_SUPPORTED, "store \"%s\" cannot run a server: create a dist store in a process "
            "whose DMLC_ROLE is server or scheduler", type().c_str());
  }
  Distributed* distributed() override { return this; }

 private:
  // Key registry (under registry_mu_).
  WorkerKey* FindKey(const KeyList& keys, int i);
  void CheckKind(const KeyList& keys);
  std::vector<WorkerKey*> AddKeys(const KeyList& keys, const Array* const* vals);
  template <typename A>
  std::vector<std::pair<WorkerKey*, std::vector<A*>>> GroupByKey(const KeyList& keys,
                                                                 A* const* arrays, const char* op,
                                                                 const char* noun);
  template <typename Groups>
  void CheckPushable(const Groups& groups) const;

  // Payloads and operations.
  PayloadRef Gather(WorkerKey* k, const std::vector<const Array*>& vals);
  template <typename Groups, typename KeyOf, typename ValsOf>
  std::vector<PayloadRef> GatherAll(const Groups& groups, KeyOf key_of, ValsOf vals_of);
  void PartMessages(const std::shared_ptr<Op>& op, std::vector<OutMsg>* msgs) const;
  void StartDataOp(MsgType type, WorkerKey* k, PayloadRef payload, std::vector<Array*> outs,
                   const std::shared_ptr<Waiter>& waiter, SendBatch* batch);
  template <typename Groups, typename KeyOf, typename OutsOf>
  void StartAll(MsgType type, Groups& groups, std::vector<PayloadRef>& payloads,
                KeyOf key_of, OutsOf outs_of, int priority);

  // Control requests.
  void ControlToScheduler(MsgType type, int arg, int64_t key, const std::shared_ptr<Waiter>& w);
  void ToAllServers(MsgType type, int arg, const std::string& str, const std::shared_ptr<Waiter>& w);
  double ControlDeadline() const { return DeadlineAfter(io_->RequestTimeout()); }
  // Runs the exit protocol once; returns the first error of draining or of the exit barrier
  // (nullptr when both succeeded).
  std::exception_ptr Shutdown();

  const Config cfg_;
  const bool sync_;
  std::unique_ptr<Comm> comm_;
  bool barrier_before_exit_ = true;
  bool shut_down_ = false;  // Shutdown ran (from Close or the destructor)

  Compressors compressors_;      // their own locks
  OpTracker tracker_;            // its own lock; outlives io_
  std::unique_ptr<WorkerIo> io_;

  std::mutex registry_mu_;  // guards the four below
  KeyKind kind_ = KeyKind::kNone;
  std::unordered_map<std::string, WorkerKey> keys_;  // by KeyId::MapKey
  uint64_t next_order_id_ = 1;
  std::optional<OptimizerSpec> optimizer_;  // the servers' optimizer, to vet pushed dtypes
  std::atomic<int> recv_f16_{KV_FLOAT16};    // its RecvDType of float16 keys (mp_push.h)
};

WorkerStore::WorkerStore(const std::string& type, const Config& cfg)
    : Store(type), cfg_(cfg), sync_(type.find("_async") == std::string::npos) {
  comm_ = type.find("device") != std::string::npos ? CreateDeviceComm() : CreateCpuComm();
  io_ = std::make_unique<WorkerIo>(cfg_, &tracker_);
}

// KVStoreFree: the same exit protocol, with its first error reported to the caller.
void WorkerStore::Close() {
  if (std::exception_ptr first = Shutdown()) std::rethrow_exception(first);
}

// Exit protocol: drain, optional barrier of all workers, FINISH to the scheduler (which
// stops the servers once every worker finished), then stop the I/O thread. Every step runs
// even when an earlier one failed, each is bounded by a deadline, and errors are logged and
// returned, never thrown. A second call does nothing.
std::exception_ptr WorkerStore::Shutdown() {
  if (shut_down_) return nullptr;
  shut_down_ = true;
  std::exception_ptr first;
  try {
    WaitAll();
  } catch (const Error& e) {
    Log("pending operations failed at exit: %s", e.what());
    first = std::current_exception();
  }
  if (barrier_before_exit_) {
    try {
      Barrier();
    } catch (const Error& e) {
      Log("exit barrier failed: %s", e.what());
      if (!first) first = std::current_exception();
    }
  }
  if (!first) {
    // A job that lost a node did not finish as it should, even when this worker's own
    // calls all succeeded: KVStoreFree says so, naming the dead nodes.
    const std::string dead = io_->DeadNodes();
    if (!dead.empty()) {
      first = std::make_exception_ptr(Error(
          KV_ERR_PEER_DEAD, StrFormat("worker %d: the job lost %s", io_->rank(), dead.c_str())));
    }
  }
  try {
    auto w = std::make_shared<Waiter>(1);
    ControlToScheduler(MsgType::kFinish, 0, 0, w);
    w->Wait(DeadlineAfter(std::max(2.0, std::min(cfg_.heartbeat_timeout_sec, 10.0))),
            "the scheduler did not acknowledge FINISH");
  } catch (const Error& e) {
    Log("%s", e.what());
  }
  io_->Stop();
  return first;
}

// ---- Keys --------------------------------------------------------------------

void WorkerStore::CheckKind(const KeyList& keys) {
  if (keys.size == 0) return;
  if (kind_ == KeyKind::kNone) return;
  KV_CHECK(kind_ == keys.kind, KV_ERR_KEY_KIND_MISMATCH,
           "key %s: this store uses %s keys; int and string keys cannot be mixed",
           keys.Name(0).c_str(), kind_ == KeyKind::kInt ? "int" : "string");
}

WorkerKey* WorkerStore::FindKey(const KeyList& keys, int i) {
  auto it = keys_.find(KeyId::MapKeyOf(keys, i));
  KV_CHECK(it != keys_.end(), KV_ERR_UNKNOWN_KEY, "key %s is not initialised (init it first)",
           keys.Name(i).c_str());
  return &it->second;
}

// Checks and files the keys of an init call; all or nothing.
std::vector<WorkerKey*> WorkerStore::AddKeys(const KeyList& keys, const Array* const* vals) {
  std::lock_guard<std::mutex> lock(registry_mu_);
  CheckKind(keys);
  std::vector<KeyId> ids;
  std::vector<std::string> map_keys;
  std::unordered_set<std::string> seen;  // linear in the keys of the call
  for (int i = 0; i < keys.size; ++i) {
    KeyId id = KeyId::Of(keys, i);
    std::string mk = id.MapKey();
    KV_CHECK(seen.insert(mk).second, KV_ERR_INVALID_ARGUMENT, "key %s appears twice in one init",
             keys.Name(i).c_str());
    KV_CHECK(keys_.count(mk) == 0, KV_ERR_DUPLICATE_KEY, "key %s is already initialised",
             keys.Name(i).c_str());
    // The wire names a string key by its text, so the text cannot be empty.
    KV_CHECK(!id.is_str || !id.name.empty(), KV_ERR_INVALID_ARGUMENT,
             "key \"\": a distributed store needs non-empty string keys");
    KV_CHECK(vals[i]->ctx().is_cpu() || vals[i]->ctx().is_gpu(), KV_ERR_DEVICE, "bad context");
    CheckPartsFit(id.Parts(vals[i]->size(), io_->num_servers(), cfg_.bigarray_bound,
                           PlacementRowLen(vals[i]->shape())),
                  DTypeSize(vals[i]->dtype()), keys.Name(i));
    ids.push_back(std::move(id));
    map_keys.push_back(std::move(mk));
  }
  if (keys.size > 0) kind_ = keys.kind;
  std::vector<WorkerKey*> added;
  for (int i = 0; i < keys.size; ++i) {
    const Array& v = *vals[i];
    WorkerKey& k = keys_[map_keys[static_cast<size_t>(i)]];
    k.id = std::move(ids[static_cast<size_t>(i)]);
    k.display = keys.Name(i);
    k.order_id = next_order_id_++;
    k.shape = v.shape();
    k.dtype = v.dtype();
    k.size = v.size();
    k.nbytes = v.nbytes();
    k.parts = k.id.Parts(k.size, io_->num_servers(), cfg_.bigarray_bound, PlacementRowLen(k.shape));
    k.buffers = std::make_unique<PushBuffers>(k.shape, k.dtype, k.nbytes, k.display);
    added.push_back(&k);
  }
  return added;
}

// Checks every array against its key's shape and dtype and groups the arrays by key, keys
// in first-appearance order (the order their operations are queued in); linear in the
// number of arrays. Called under registry_mu_.
template <typename A>
std::vector<std::pair<WorkerKey*, std::vector<A*>>> WorkerStore::GroupByKey(const KeyList& keys,
                                                                           A* const* arrays,
                                                                           const char* op,
                                                                           const char* noun) {
  std::vector<std::pair<WorkerKey*, std::vector<A*>>> groups;
  groups.reserve(static_cast<size_t>(keys.size));
  GroupIndex index(static_cast<size_t>(keys.size));
  for (int i = 0; i < keys.size; ++i) {
    WorkerKey* k = FindKey(keys, i);
    A* a = arrays[i];
    KV_CHECK(a->shape() == k->shape, KV_ERR_SHAPE_MISMATCH,
             "%s of key %s: the %s has shape %s, the stored value %s", op, k->display.c_str(), noun,
             ShapeToString(a->shape()).c_str(), ShapeToString(k->shape).c_str());
    KV_CHECK(a->dtype() == k->dtype, KV_ERR_DTYPE_MISMATCH,
             "%s of key %s: the %s is %s, the stored value %s", op, k->display.c_str(), noun,
             DTypeName(a->dtype()), DTypeName(k->dtype));
    const auto added = index.Insert(k, groups.size());
    if (added.second) groups.push_back({k, {a}});
    else groups[added.first].second.push_back(a);
  }
  return groups;
}

// A push call whose keys the servers' optimizer would refuse fails here, before any key of
// it leaves, so a failed call changes no value and no optimizer state on any server.
// Called under registry_mu_.
template <typename Groups>
void WorkerStore::CheckPushable(const Groups& groups) const {
  if (!optimizer_) return;
  for (const auto& g : groups) optimizer_->CheckDType(g.first->dtype, g.first->display);
}

// ---- Operations --------------------------------------------------------------

// The payload of a push or pushpull (push_buffers.h): several values (devices) are summed
// into a send buffer (in float32 for float16 keys under multi_precision, mp_push.h), a
// small or non-CPU value is copied into one, a large CPU value is sent from its own storage. Waits while the key's payloads are all in use, up to the
// request deadline.
PayloadRef WorkerStore::Gather(WorkerKey* k, const std::vector<const Array*>& vals) {
  const double deadline = ControlDeadline();
  if (vals.size() == 1 && vals[0]->ctx().is_cpu() && k->nbytes >= kZeroCopyMinBytes) {
    return k->buffers->Take(const_cast<Array*>(vals[0]), deadline, cfg_.timeout_sec);
  }
  const bool f32_sum = SendsFloat32Sum(k->dtype, vals.size(), recv_f16_.load());
  PayloadRef b = k->buffers->Take(nullptr, deadline, cfg_.timeout_sec, f32_sum ? KV_FLOAT32 : -1);
  if (vals.size() == 1) {
    CopyArray(b.array(), *vals[0]);
  } else if (f32_sum) {
    SumToFloat32(vals, b.array());
  } else {
    comm_->Reduce(vals, b.array());
  }
  return b;
}

// Gather for every group (key_of(g), vals_of(g)); all or nothing (on failure the payloads
// already taken go back with the vector).
template <typename Groups, typename KeyOf, typename ValsOf>
std::vector<PayloadRef> WorkerStore::GatherAll(const Groups& groups, KeyOf key_of, ValsOf vals_of) {
  std::vector<PayloadRef> payloads;
  payloads.reserve(groups.size());
  for (const auto& g : groups) payloads.push_back(Gather(key_of(g), vals_of(g)));
  return payloads;
}

// One message per part of the op's key, into *msgs (cleared first; the caller's vector is
// reused from key to key).
void WorkerStore::PartMessages(const std::shared_ptr<Op>& op, std::vector<OutMsg>* msgs) const {
  const WorkerKey& k = *op->key;
  const bool f32_sum = op->payload && op->payload.array() && op->payload.array()->dtype() != k.dtype;
  const size_t esize = f32_sum ? sizeof(float) : DTypeSize(k.dtype);
  msgs->clear();
  for (const PartPlan& p : k.parts) {
    msgs->emplace_back();
    OutMsg& om = msgs->back();
    om.dest = p.server;
    om.h = io_->Header(op->type);
    om.h.flags = (sync_ ? kFlagSync : 0u) | (f32_sum ? kFlagFloat32Sum : 0u);
    k.id.ToWire(&om.h, &om.str);
    om.h.offset = p.offset;
    om.h.count = p.count;
    om.h.total = k.size;
    om.h.dtype = k.dtype;
    if (op->type != MsgType::kPull && p.count > 0) {
      om.payload.buf = op->payload.buf();
      om.payload.offset_bytes = static_cast<size_t>(p.offset) * esize;
      om.payload.nbytes = static_cast<size_t>(p.count) * esize;
    }
    om.op = op;
    om.part = p;
    om.order_key = k.order_id;
  }
  Compressors::Apply(*op, msgs);
}

// Builds one operation into `batch`. Everything that can fail (allocations) happens before
// any side effect: on failure the payload goes back with the op and no output was marked
// pending, so nothing is left waiting for an op that never started.
void WorkerStore::StartDataOp(MsgType type, WorkerKey* k, PayloadRef payload,
                              std::vector<Array*> outs, const std::shared_ptr<Waiter>& waiter,
                              SendBatch* batch) {
  auto op = std::make_shared<Op>();
  op->type = type;
  op->key = k;
  op->remaining = static_cast<int>(k->parts.size());
  op->payload = std::move(payload);
  compressors_.Prepare(op.get());  // compressed pushes and pulls (compressed_pull.h)
  op->outs = std::move(outs);
  op->waiter = waiter;
  bool need_staging = false;
  for (Array* o : op->outs) need_staging |= !o->ctx().is_cpu();
  if (need_staging) op->staging = Array::Create({k->size}, k->dtype, Context{});
  std::vector<OutMsg>& msgs = batch->Scratch();
  PartMessages(op, &msgs);
  for (Array* o : op->outs) o->BeginPendingWrite();
  tracker_.Begin(*op);
  batch->Add(msgs);
}

// StartDataOp for every group with its payload, queued in batches. When one fails, the ops
// already begun are queued and go on, and the payloads not used yet go back with the vector.
template <typename Groups, typename KeyOf, typename OutsOf>
void WorkerStore::StartAll(MsgType type, Groups& groups, std::vector<PayloadRef>& payloads,
                           KeyOf key_of, OutsOf outs_of, int priority) {
  SendBatch batch(io_.get(), priority);
  batch.ForEach(groups.size(), [&](size_t i) {
    StartDataOp(type, key_of(groups[i]), std::move(payloads[i]), outs_of(groups[i]), nullptr, &batch);
  });
}

void WorkerStore::Init(const KeyList& keys, const Array* const* vals) {
  std::vector<std::unique_ptr<Array>> dense;  // row_sparse values are stored dense
  const std::vector<const Array*> dense_vals = DenseValues(keys.size, vals, &dense);
  std::vector<WorkerKey*> added = AddKeys(keys, vals = dense_vals.data());
  // Rank 0 writes the initial values; every worker then meets in a barrier so that no
  // worker can push or pull a key before the servers have it.
  int status = 0;
  std::string msg;
  if (io_->rank() == 0 && keys.size > 0) {
    auto w = std::make_shared<Waiter>(keys.size);
    SendBatch batch(io_.get(), INT32_MAX);
    batch.ForEach(added.size(), [&](size_t i) {
      StartDataOp(MsgType::kInit, added[i], Gather(added[i], {vals[i]}), {}, w, &batch);
    });
    try {
      w->Wait(ControlDeadline(), "init: the servers did not acknowledge the initial values");
    } catch (const Error& e) {
      status = e.code();
      msg = e.what();
    }
  }
  Barrier();
  KV_CHECK(status == 0, status, "%s", msg.c_str());
}

void WorkerStore::Push(const KeyList& keys, const Array* const* vals, int priority) {
  std::vector<std::pair<WorkerKey*, std::vector<const Array*>>> groups;
  {
    std::lock_guard<std::mutex> lock(registry_mu_);
    CheckKind(keys);
    groups = GroupByKey(keys, vals, "push", "value");
    CheckPushable(groups);
  }
  std::vector<std::unique_ptr<Array>> dense;  // mixed keys' row_sparse values, cast to dense
  PushRowSparse(*io_, tracker_, sync_, recv_f16_.load(), &groups, &dense, priority);
  // Small values are copied now; large CPU values are read in place until the push completes
  // (their writers wait, see push_buffers.h).
  auto key_of = [](const auto& g) { return g.first; };
  std::vector<PayloadRef> payloads =
      GatherAll(groups, key_of, [](const auto& g) -> const auto& { return g.second; });
  StartAll(MsgType::kPush, groups, payloads, key_of,
           [](const auto&) { return std::vector<Array*>(); }, priority);
}

void WorkerStore::Pull(const KeyList& keys, Array* const* outs, int priority) {
  std::unique_lock<std::mutex> lock(registry_mu_);
  CheckKind(keys);
  auto groups = GroupByKey(keys, outs, "pull", "output");
  lock.unlock();
  std::vector<PayloadRef> none(groups.size());
  StartAll(MsgType::kPull, groups, none, [](auto& g) { return g.first; },
           [](auto& g) { return std::move(g.second); }, priority);
}

void WorkerStore::PushPull(const KeyList& vkeys, const Array* const* vals, const KeyList& okeys,
                           Array* const* outs, int priority) {
  struct Group {
    WorkerKey* k;
    std::vector<const Array*> vals;
    std::vector<Array*> outs;
  };
  std::vector<Group> groups;
  {
    std::lock_guard<std::mutex> lock(registry_mu_);
    CheckKind(vkeys);
    CheckKind(okeys);
    KV_CHECK(vkeys.size == 0 || okeys.size == 0 || vkeys.kind == okeys.kind,
             KV_ERR_KEY_KIND_MISMATCH, "pushpull mixes int and string keys");
    CheckDensePushPull(type(), vkeys, vals);
    auto pushed = GroupByKey(vkeys, vals, "pushpull", "value");
    auto pulled = GroupByKey(okeys, outs, "pushpull", "output");
    GroupIndex index(pushed.size());
    groups.reserve(pushed.size());
    for (auto& g : pushed) {
      index.Insert(g.first, groups.size());
      groups.push_back({g.first, std::move(g.second), {}});
    }
    for (auto& g : pulled) {
      const size_t at = index.Find(g.first);
      KV_CHECK(at != SIZE_MAX, KV_ERR_INVALID_ARGUMENT,
               "pushpull: output key %s is not among the pushed keys", g.first->display.c_str());
      groups[at].outs = std::move(g.second);
    }
    for (const Group& g : groups) {
      KV_CHECK(!g.outs.empty(), KV_ERR_INVALID_ARGUMENT,
               "pushpull: pushed key %s has no output", g.k->display.c_str());
    }
    CheckPushable(pushed);  // after the argument checks, as in-process stores order them
  }
  auto key_of = [](const Group& g) { return g.k; };
  std::vector<PayloadRef> payloads =
      GatherAll(groups, key_of, [](const Group& g) -> const auto& { return g.vals; });
  StartAll(MsgType::kPushPull, groups, payloads, key_of,
           [](Group& g) { return std::move(g.outs); }, priority);
}

void WorkerStore::RowSparsePull(const KeyList& keys, Array* const* outs, const Array* const* row_ids,
                                int priority) {
  std::vector<WorkerKey*> ks;
  std::unique_lock<std::mutex> lock(registry_mu_);
  CheckKind(keys);
  for (int i = 0; i < keys.size; ++i) ks.push_back(FindKey(keys, i));
  lock.unlock();
  PullRows(*io_, tracker_, sync_, ks, outs, row_ids, priority, ControlDeadline());
}

// ---- Control requests --------------------------------------------------------

void WorkerStore::ControlToScheduler(MsgType type, int arg, int64_t key,
                                     const std::shared_ptr<Waiter>& w) {
  OutMsg om;
  om.dest = -1;
  om.h = io_->Header(type);
  om.h.arg = arg;
  om.h.key = key;
  om.waiter = w;
  std::vector<OutMsg> v;
  v.push_back(std::move(om));
  io_->Enqueue(v, INT32_MAX);
}

void WorkerStore::ToAllServers(MsgType type, int arg, const std::string& str,
                               const std::shared_ptr<Waiter>& w) {
  std::vector<OutMsg> v;
  for (int s = 0; s < io_->num_servers(); ++s) {
    OutMsg om;
    om.dest = s;
    om.h = io_->Header(type);
    om.h.arg = arg;
    om.str = str;
    om.waiter = w;
    v.push_back(std::move(om));
  }
  io_->Enqueue(v, INT32_MAX);
}

void WorkerStore::Barrier() {
  auto w = std::make_shared<Waiter>(1);
  ControlToScheduler(MsgType::kBarrier, KV_NODE_WORKERS, 0, w);
  w->Wait(ControlDeadline(), StrFormat("worker %d: barrier: no answer from the scheduler", io_->rank()));
}

int WorkerStore::NumDeadNodes(int node_group, int timeout_sec) {
  bool sched_dead;
  const int known = io_->KnownDead(node_group, &sched_dead);
  int count = (node_group & KV_NODE_SCHEDULER) && sched_dead ? 1 : 0;
  if ((node_group & (KV_NODE_SERVERS | KV_NODE_WORKERS)) == 0) return count;
  if (sched_dead) return count + known;
  auto w = std::make_shared<Waiter>(1);
  ControlToScheduler(MsgType::kQueryDead, node_group & (KV_NODE_SERVERS | KV_NODE_WORKERS),
                     static_cast<int64_t>(timeout_sec) * 1000, w);
  try {
    count += static_cast<int>(w->Wait(DeadlineAfter(std::max(2.0, cfg_.heartbeat_timeout_sec)),
                                      "no answer from the scheduler"));
  } catch (const Error&) {
    count += known + ((node_group & KV_NODE_SCHEDULER) ? 1 : 0);
  }
  return count;
}

void WorkerStore::SendCommandToServers(int head, const std::string& body) {
  KV_CHECK(head >= 0, KV_ERR_INVALID_ARGUMENT, "command head %d is reserved", head);
  auto w = std::make_shared<Waiter>(io_->num_servers());
  ToAllServers(MsgType::kCommand, head, body, w);
  w->Wait(ControlDeadline(), StrFormat("command %d: not every server answered", head));
}

void WorkerStore::SetOptimizer(const std::string& spec) {
  // A bad spec fails with INVALID_ARGUMENT on every worker before any server sees it; the
  // checked spec then vets the dtypes of pushes (CheckPushable).
  OptimizerSpec checked(spec);
  const int recv_f16 = RecvDTypeOfFloat16(spec);
  auto w = std::make_shared<Waiter>(io_->num_servers());
  ToAllServers(MsgType::kSetOptimizer, 0, spec, w);
  w->Wait(ControlDeadline(), "set_optimizer: not every server answered");
  std::lock_guard<std::mutex> lock(registry_mu_);
  optimizer_ = checked;
  recv_f16_ = recv_f16;
}

// The protocol is in dist_states.h. This worker's pending operations finish first (as in
// WaitAll), so the state includes its earlier pushes.
void WorkerStore::SaveOptimizerStates(const std::string& path) {
  WaitAll();
  const int n = io_->num_servers();
  auto w = std::make_shared<Waiter>(n, n);
  ToAllServers(MsgType::kSaveStates, 0, std::string(), w);
  w->Wait(ControlDeadline(), "save_optimizer_states: not every server answered");
  optimizer::StatesFile file;
  {
    std::lock_guard<std::mutex> lock(registry_mu_);
    file = JoinServerStates(w->TakePayloads(), keys_);
  }
  optimizer::WriteStatesFile(path, file);
}

void WorkerStore::LoadOptimizerStates(const std::string& path) {
  optimizer::StatesFile file = optimizer::ReadStatesFile(path);
  std::vector<std::string> payloads;
  {
    std::lock_guard<std::mutex> lock(registry_mu_);
    CheckStatesAgainstKeys(file, keys_, path);
    payloads = SplitForServers(file, keys_, io_->num_servers());
  }
  WaitAll();
  for (int apply = 0; apply <= 1; ++apply) {  // every server checks, then every server applies
    auto w = std::make_shared<Waiter>(io_->num_servers());
    std::vector<OutMsg> v = LoadMessages(*io_, payloads, apply == 1, w);
    io_->Enqueue(v, INT32_MAX);
    w->Wait(ControlDeadline(), apply ? "load_optimizer_states: not every server applied the state"
                                     : "load_optimizer_states: not every server checked the state");
  }
}

}  // namespace

std::unique_ptr<Store> CreateWorkerStore(const std::string& type, const Config& cfg) {
  return std::make_unique<WorkerStore>(type, cfg);
}

}  // namespace dist
}  // namespace kvstore
