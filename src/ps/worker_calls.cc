// worker_calls.cc - the worker store's data calls (worker_store.h): init, push, pull,
// pushpull and row_sparse_pull. Each call checks its arrays against their keys and groups
// them by key under registry_mu_, then, without it, prepares each push's payload and queues
// one Op per key (StartDataOp), keys in first-appearance order. A call fails before any of
// its keys leaves, or queues every key; payloads already taken go back on failure.
#include <cstdint>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "core/cpu/kernels.h"
#include "core/dtype.h"
#include "ps/mp_push.h"
#include "ps/row_sparse_worker.h"
#include "ps/worker_groups.h"
#include "ps/worker_store.h"

namespace kvstore {
namespace dist {

namespace {

// Lookahead of the per-key loops over a call's groups: the records (and, for a push, the
// key's send buffers and the value) of the key kNear ahead are loaded while this one is
// worked on, since over many keys each is a cache miss.
constexpr size_t kNear = 8;

// Starts loading the first `lines` cache lines of a record (its hot fields come first, op.h:
// the grouping reads the first, a push's payload the first two, an operation's messages and
// its place among the key's pushes three).
inline void PrefetchRecord(const WorkerKey* k, int lines) {
  for (int l = 0; l < lines; ++l) __builtin_prefetch(reinterpret_cast<const char*>(k) + 64 * l);
}

}  // namespace

// ---- Grouping ------------------------------------------------------------------

// Checks every array against its key's shape and dtype and groups the arrays by key
// (worker_groups.h); linear in the number of arrays. *row_sparse (when given) becomes true
// if any array is row_sparse. Called under registry_mu_.
//
// Over many keys each key's index entry, record, array and the two shapes are cache misses
// taken one after the other; for int keys they are loaded ahead instead: key i+kFar's index
// entry and array, then key i+kNear's record (found here, kept in `near` for its turn) and
// its array's shape, then key i+kNear/2's stored shape, while key i is checked.
template <typename A>
KeyGroups<A> WorkerStore::GroupByKey(const KeyList& keys, A* const* arrays, const char* op,
                                     const char* noun, bool* row_sparse) {
  constexpr size_t kFar = 2 * kNear;
  const size_t n = static_cast<size_t>(keys.size);
  const bool ahead = keys.kind == KeyKind::kInt;
  WorkerKey* near[kNear] = {};  // key j's record at j % kNear, from j - kNear on
  return GroupArrays(n, arrays, [&](size_t i) {
    WorkerKey* k = near[i % kNear];
    if (ahead) {
      if (i + kFar < n) {
        keys_.PrefetchInt(keys.ints[i + kFar]);
        __builtin_prefetch(arrays[i + kFar]);
      }
      WorkerKey* r = i + kNear < n ? keys_.FindInt(keys.ints[i + kNear]) : nullptr;
      near[i % kNear] = r;
      if (r != nullptr) {
        PrefetchRecord(r, 1);
        __builtin_prefetch(arrays[i + kNear]->shape().data());
      }
      if (WorkerKey* m = near[(i + kNear / 2) % kNear]) __builtin_prefetch(m->shape.data());
    }
    if (k == nullptr) k = FindKey(keys, static_cast<int>(i));
    const A* a = arrays[i];
    KV_CHECK(a->shape() == k->shape, KV_ERR_SHAPE_MISMATCH,
             "%s of key %s: the %s has shape %s, the stored value %s", op, k->display.c_str(), noun,
             ShapeToString(a->shape()).c_str(), ShapeToString(k->shape).c_str());
    KV_CHECK(a->dtype() == k->dtype, KV_ERR_DTYPE_MISMATCH,
             "%s of key %s: the %s is %s, the stored value %s", op, k->display.c_str(), noun,
             DTypeName(a->dtype()), DTypeName(k->dtype));
    if (row_sparse != nullptr && a->is_row_sparse()) *row_sparse = true;
    return k;
  });
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
PayloadRef WorkerStore::Gather(WorkerKey* k, const Array* const* vals, size_t n) {
  const double deadline = ControlDeadline();
  if (n == 1 && vals[0]->ctx().is_cpu() && k->nbytes >= kZeroCopyMinBytes) {
    return k->buffers->Take(const_cast<Array*>(vals[0]), deadline, cfg_.timeout_sec);
  }
  const bool f32_sum = SendsFloat32Sum(k->dtype, n, recv_f16_.load());
  PayloadRef b = k->buffers->Take(nullptr, deadline, cfg_.timeout_sec, f32_sum ? KV_FLOAT32 : -1);
  if (n == 1) {
    CopyArray(b.array(), *vals[0]);
  } else if (f32_sum) {
    SumToFloat32(std::vector<const Array*>(vals, vals + n), b.array());
  } else {
    comm_->Reduce(std::vector<const Array*>(vals, vals + n), b.array());
  }
  return b;
}

// Gather for every group (key_of(g), vals_of(g)); all or nothing (on failure the payloads
// already taken go back with the vector).
template <typename Groups, typename KeyOf, typename ValsOf>
std::vector<PayloadRef> WorkerStore::GatherAll(const Groups& groups, KeyOf key_of, ValsOf vals_of) {
  std::vector<PayloadRef> payloads;
  payloads.reserve(groups.size());
  const size_t n = groups.size();
  for (size_t i = 0; i < n; ++i) {
    if (i + kNear < n) {
      const WorkerKey* ahead = key_of(groups[i + kNear]);
      PrefetchRecord(ahead, 2);
      const auto& vals = vals_of(groups[i + kNear]);
      if (!vals.empty()) __builtin_prefetch(vals[0]);
    }
    if (i + kNear / 2 < n) __builtin_prefetch(key_of(groups[i + kNear / 2])->buffers.get());
    const auto& vals = vals_of(groups[i]);
    payloads.push_back(Gather(key_of(groups[i]), vals.data(), vals.size()));
  }
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
                              ArrayList<Array> outs, const std::shared_ptr<Waiter>& waiter,
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
    if (i + kNear < groups.size()) PrefetchRecord(key_of(groups[i + kNear]), 3);
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
      StartDataOp(MsgType::kInit, added[i], Gather(added[i], &vals[i], 1), {}, w, &batch);
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
  KeyGroups<const Array> groups;
  bool row_sparse = false;
  {
    std::lock_guard<std::mutex> lock(registry_mu_);
    CheckKind(keys);
    groups = GroupByKey(keys, vals, "push", "value", &row_sparse);
    CheckPushable(groups);
  }
  if (row_sparse) return PushWithRowSparse(groups, priority);
  PushGroupsOf(groups, priority);
}

// A push call with row_sparse values: those of keys whose values are all row_sparse go
// as rows (row_sparse_worker.h), the others are cast to dense in mixed keys.
void WorkerStore::PushWithRowSparse(KeyGroups<const Array>& compact, int priority) {
  PushGroups groups;
  groups.reserve(compact.size());
  for (const auto& g : compact) groups.push_back({g.first, g.second.ToVector()});
  std::vector<std::unique_ptr<Array>> dense;  // mixed keys' row_sparse values, cast to dense
  PushRowSparse(*io_, tracker_, sync_, recv_f16_.load(), &groups, &dense, priority);
  PushGroupsOf(groups, priority);
}

// The dense pushes of a call's groups. Small values are copied now; large CPU values are
// read in place until the push completes (their writers wait, see push_buffers.h).
template <typename Groups>
void WorkerStore::PushGroupsOf(Groups& groups, int priority) {
  auto key_of = [](const auto& g) { return g.first; };
  std::vector<PayloadRef> payloads =
      GatherAll(groups, key_of, [](const auto& g) -> const auto& { return g.second; });
  StartAll(MsgType::kPush, groups, payloads, key_of,
           [](const auto&) { return ArrayList<Array>(); }, priority);
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
    ArrayList<const Array> vals;
    ArrayList<Array> outs;
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
    groups.reserve(pushed.size());
    for (auto& g : pushed) groups.push_back({g.first, std::move(g.second), {}});
    // Output group j is usually pushed group j (the same keys in the same order); an index
    // of the pushed keys is built only for a call where it is not.
    std::optional<GroupIndex> index;
    for (size_t j = 0; j < pulled.size(); ++j) {
      auto& g = pulled[j];
      size_t at = j;
      if (j >= groups.size() || groups[j].k != g.first) {
        if (!index) {
          index.emplace(groups.size());
          for (size_t p = 0; p < groups.size(); ++p) index->Insert(groups[p].k, p);
        }
        at = index->Find(g.first);
      }
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

}  // namespace dist
}  // namespace kvstore
