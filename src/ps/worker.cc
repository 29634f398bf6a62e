// worker.cc - the worker side of the distributed stores (KVStoreCreate("dist_*") in a
// process whose DMLC_ROLE is worker): the store's construction, its keys, its control
// requests and the exit protocol.
//
// The pieces. worker_store.h is the store's class, worker_calls.cc its data calls (which
// validate calls, prepare each push's payload and queue one Op per key), worker_io.h the I/O
// loop (sockets, outstanding requests, deadlines, dead peers), send_queue.h the order
// requests leave in and the pull window, op.h the completion of operations and the push
// failure rules, push_buffers.h the payloads of pushes, key.h the identity of a key,
// row_sparse_worker.h row_sparse pushes and row_sparse_pull.
//
// Threads. Application threads validate, prepare payloads (Gather: the caller's own large
// CPU value, else a send buffer of the key) and queue requests; the I/O thread does the rest.
// Locks, one per concern, never nested: registry_mu_ (worker_store.h: the key kind, the keys
// and the servers' optimizer), each key's PushBuffers, OpTracker, the send queue, WorkerIo's
// peers_mu_, each Waiter. A key's record (WorkerKey) is immutable after init except for
// the parts those locks guard, and is never removed: pointers to it stay valid.
//
// Pending writes and reads. The C API waits for pending writes into a call's arrays before
// the call (CheckList). Pull/pushpull call BeginPendingWrite on every output; the Op ends
// them (op.h). A zero-copy push holds a pending read on its value until its Op finishes.
#include <algorithm>
#include <exception>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "optimizer/optimizer.h"
#include "ps/clock.h"
#include "ps/dist_states.h"
#include "ps/log.h"
#include "ps/mp_push.h"
#include "ps/placement.h"
#include "ps/worker_store.h"

namespace kvstore {
namespace dist {

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

// Key i of a call, after CheckKind: one probe of the index of the call's key kind.
WorkerKey* WorkerStore::FindKey(const KeyList& keys, int i) {
  WorkerKey* k = keys.kind == KeyKind::kStr ? keys_.FindStr(keys.strs[i]) : keys_.FindInt(keys.ints[i]);
  KV_CHECK(k != nullptr, KV_ERR_UNKNOWN_KEY, "key %s is not initialised (init it first)",
           keys.Name(i).c_str());
  return k;
}

// Checks and files the keys of an init call; all or nothing.
std::vector<WorkerKey*> WorkerStore::AddKeys(const KeyList& keys, const Array* const* vals) {
  std::lock_guard<std::mutex> lock(registry_mu_);
  CheckKind(keys);
  KeyTable<KeyId> seen;  // the call's keys: one named twice fails (linear in the call)
  std::vector<const KeyId*> ids;
  ids.reserve(static_cast<size_t>(keys.size));
  const bool is_str = keys.kind == KeyKind::kStr;
  for (int i = 0; i < keys.size; ++i) {
    const int64_t int_key = is_str ? 0 : keys.ints[i];
    const std::string_view name = is_str ? std::string_view(keys.strs[i]) : std::string_view();
    KV_CHECK(seen.Find(is_str, int_key, name) == nullptr, KV_ERR_INVALID_ARGUMENT,
             "key %s appears twice in one init", keys.Name(i).c_str());
    KV_CHECK(keys_.Find(is_str, int_key, name) == nullptr, KV_ERR_DUPLICATE_KEY,
             "key %s is already initialised", keys.Name(i).c_str());
    const KeyId& id = *seen.Insert(is_str, int_key, name);
    // The wire names a string key by its text, so the text cannot be empty.
    KV_CHECK(!id.is_str || !id.name.empty(), KV_ERR_INVALID_ARGUMENT,
             "key \"\": a distributed store needs non-empty string keys");
    KV_CHECK(vals[i]->ctx().is_cpu() || vals[i]->ctx().is_gpu(), KV_ERR_DEVICE, "bad context");
    CheckPartsFit(id.Parts(vals[i]->size(), io_->num_servers(), cfg_.bigarray_bound,
                           PlacementRowLen(vals[i]->shape())),
                  DTypeSize(vals[i]->dtype()), keys.Name(i));
    ids.push_back(&id);
  }
  if (keys.size > 0) kind_ = keys.kind;
  std::vector<WorkerKey*> added;
  added.reserve(ids.size());
  for (int i = 0; i < keys.size; ++i) {
    const Array& v = *vals[i];
    const KeyId& id = *ids[static_cast<size_t>(i)];
    WorkerKey& k = *keys_.Insert(id.is_str, id.int_key, id.name);
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

std::unique_ptr<Store> CreateWorkerStore(const std::string& type, const Config& cfg) {
  return std::make_unique<WorkerStore>(type, cfg);
}

}  // namespace dist
}  // namespace kvstore
