// row_sparse_worker.cc - a worker's row_sparse pushes and row_sparse_pull
// (row_sparse_worker.h).
#include "ps/row_sparse_worker.h"

#include <algorithm>
#include <climits>
#include <cstring>

#include "core/dtype.h"
#include "core/row_sparse.h"
#include "ps/mp_push.h"
#include "ps/worker_io.h"
#include "store/row_sparse.h"

namespace kvstore {
namespace dist {
namespace {

// The row length of `k` as the wire carries it (header.arg). Throws NOT_SUPPORTED for a
// key whose rows do not fit (more than INT32_MAX elements per row).
int64_t WireRowLen(const WorkerKey& k, const char* op) {
  const int64_t len = PlacementRowLen(k.shape);
  KV_CHECK(len > 0 && len <= INT32_MAX, KV_ERR_NOT_SUPPORTED,
           "%s of key %s: a distributed store moves row_sparse values only for rows of 1 to %d "
           "elements (shape %s)", op, k.display.c_str(), INT32_MAX, ShapeToString(k.shape).c_str());
  return len;
}

// [lo, hi): the indexes of the sorted `rows` that fall in part `p` of rows of `len`.
std::pair<size_t, size_t> RowsIn(const std::vector<int64_t>& rows, const PartPlan& p, int64_t len) {
  const auto lo = std::lower_bound(rows.begin(), rows.end(), p.offset / len);
  const auto hi = std::lower_bound(lo, rows.end(), (p.offset + p.count) / len);
  return {static_cast<size_t>(lo - rows.begin()), static_cast<size_t>(hi - rows.begin())};
}

// A data message of `k` for part `p`: header fields as PartMessages sets them, plus rows.
OutMsg RowMessage(WorkerIo& io, MsgType type, bool sync, const WorkerKey& k, const PartPlan& p, int64_t len) {
  OutMsg om;
  om.dest = p.server;
  om.h = io.Header(type);
  om.h.flags = (sync ? kFlagSync : 0u) | kFlagRowSparse;
  k.id.ToWire(&om.h, &om.str);
  om.h.offset = p.offset;
  om.h.count = p.count;
  om.h.total = k.size;
  om.h.dtype = k.dtype;
  om.h.arg = static_cast<int32_t>(len);
  om.part = p;
  om.order_key = k.order_id;
  return om;
}

// One key's row_sparse push (all its values row_sparse).
void PushKey(WorkerIo& io, OpTracker& tracker, bool sync, int recv_f16, WorkerKey* k,
             const std::vector<const Array*>& vals, int priority) {
  const int64_t len = PlacementRowLen(k->shape);
  const std::vector<int64_t> rows = UnionRowIds(vals);
  const bool f32_sum = SendsFloat32Sum(k->dtype, vals.size(), recv_f16);
  const int dtype = f32_sum ? KV_FLOAT32 : k->dtype;
  const size_t row_bytes = static_cast<size_t>(len) * DTypeSize(dtype);
  std::unique_ptr<Array> sum = Array::Create({static_cast<int64_t>(rows.size()) * len}, dtype, Context{});
  SumRowsInto(vals, rows, dtype, sum->data());
  // Every part's payload, one after the other: its ids, then its rows.
  auto buf = std::make_shared<SharedBuf>();
  buf->array = Array::Create({static_cast<int64_t>(rows.size() * (sizeof(int64_t) + row_bytes))},
                             KV_UINT8, Context{});
  auto op = std::make_shared<Op>();
  op->type = MsgType::kPush;
  op->key = k;
  op->remaining = static_cast<int>(k->parts.size());
  std::vector<OutMsg> msgs;
  size_t at = 0;
  for (const PartPlan& p : k->parts) {
    const auto range = RowsIn(rows, p, len);
    const size_t n = range.second - range.first;
    char* dst = static_cast<char*>(buf->data()) + at;
    if (n > 0) {
      std::memcpy(dst, rows.data() + range.first, n * sizeof(int64_t));
      std::memcpy(dst + n * sizeof(int64_t), static_cast<const char*>(sum->data()) + range.first * row_bytes,
                  n * row_bytes);
    }
    OutMsg om = RowMessage(io, MsgType::kPush, sync, *k, p, len);
    om.h.flags |= f32_sum ? kFlagFloat32Sum : 0u;
    om.payload = OutPayload{buf, at, n * (sizeof(int64_t) + row_bytes)};
    om.op = op;
    at += om.payload.nbytes;
    msgs.push_back(std::move(om));
  }
  tracker.Begin(*op);
  io.Enqueue(msgs, priority);
}

}  // namespace

void PushRowSparse(WorkerIo& io, OpTracker& tracker, bool sync, int recv_f16, PushGroups* groups,
                   std::vector<std::unique_ptr<Array>>* dense, int priority) {
  std::vector<bool> all_rows(groups->size(), false);
  bool any = false;
  for (size_t g = 0; g < groups->size(); ++g) {
    auto& vals = (*groups)[g].second;
    const size_t sparse = static_cast<size_t>(
        std::count_if(vals.begin(), vals.end(), [](const Array* v) { return v->is_row_sparse(); }));
    if (sparse == 0) continue;
    if (sparse < vals.size()) {
      for (const Array*& v : vals) {
        if (!v->is_row_sparse()) continue;
        dense->push_back(CastStorage(*v, KV_STYPE_DEFAULT));
        v = dense->back().get();
      }
      continue;
    }
    WireRowLen(*(*groups)[g].first, "push");
    all_rows[g] = any = true;
  }
  if (!any) return;
  PushGroups rest;
  for (size_t g = 0; g < groups->size(); ++g) {
    auto& group = (*groups)[g];
    if (all_rows[g]) PushKey(io, tracker, sync, recv_f16, group.first, group.second, priority);
    else rest.push_back(std::move(group));
  }
  *groups = std::move(rest);
}

std::vector<const Array*> DenseValues(int n, const Array* const* vals,
                                      std::vector<std::unique_ptr<Array>>* keep) {
  std::vector<const Array*> out(vals, vals + n);
  for (const Array*& v : out) {
    if (!v->is_row_sparse()) continue;
    keep->push_back(CastStorage(*v, KV_STYPE_DEFAULT));
    v = keep->back().get();
  }
  return out;
}

void CheckDensePushPull(const std::string& store_type, const KeyList& keys, const Array* const* vals) {
  for (int i = 0; i < keys.size; ++i) {
    KV_CHECK(!vals[i]->is_row_sparse(), KV_ERR_NOT_SUPPORTED,
             "pushpull of key %s: store \"%s\" pushpulls dense values only; push the row_sparse "
             "value, then pull (or row_sparse_pull)", keys.Name(i).c_str(), store_type.c_str());
  }
}

namespace {

// One key's part of a row_sparse_pull: its unique sorted ids, the id range asked of each
// part, and the Op whose replies hold the rows (read once `waiter` completed).
struct RowPull {
  std::vector<int64_t> rows;
  std::vector<std::pair<PartPlan, std::pair<size_t, size_t>>> parts;
  std::shared_ptr<Waiter> waiter;
  std::shared_ptr<Op> op;
};

// Queues the requests of `pl` for key `k`. Every part gets one, also a part without a
// requested row: the Op finishes only after every earlier push of the key (op.h's ordering
// rule needs each server's reply).
void StartRowPull(WorkerIo& io, OpTracker& tracker, bool sync, WorkerKey* k, RowPull* pl, int priority) {
  const int64_t len = PlacementRowLen(k->shape);
  auto ids = std::make_shared<SharedBuf>();
  ids->array = Array::Create({static_cast<int64_t>(pl->rows.size())}, KV_INT64, Context{});
  if (!pl->rows.empty()) std::memcpy(ids->data(), pl->rows.data(), pl->rows.size() * sizeof(int64_t));
  auto op = std::make_shared<Op>();
  op->type = MsgType::kPull;
  op->key = k;
  op->rows = true;
  op->row_replies.resize(static_cast<size_t>(io.num_servers()));
  op->remaining = static_cast<int>(k->parts.size());
  op->waiter = pl->waiter = std::make_shared<Waiter>(1);
  pl->op = op;
  std::vector<OutMsg> msgs;
  for (const PartPlan& p : k->parts) {
    const auto range = RowsIn(pl->rows, p, len);
    pl->parts.push_back({p, range});
    OutMsg om = RowMessage(io, MsgType::kPull, sync, *k, p, len);
    om.payload = OutPayload{ids, range.first * sizeof(int64_t), (range.second - range.first) * sizeof(int64_t)};
    om.op = op;
    msgs.push_back(std::move(om));
  }
  tracker.Begin(*op);
  io.Enqueue(msgs, priority);
}

// Waits for the replies of `pl` and checks that each holds its rows of `k`.
void WaitRowPull(const WorkerKey& k, const RowPull& pl, double deadline) {
  pl.waiter->Wait(deadline, "row_sparse_pull of key " + k.display + ": not every server answered");
  const size_t row_bytes = static_cast<size_t>(PlacementRowLen(k.shape)) * DTypeSize(k.dtype);
  for (const auto& part : pl.parts) {
    const size_t got = pl.op->row_replies[static_cast<size_t>(part.first.server)].size();
    const size_t n = part.second.second - part.second.first;
    KV_CHECK(got == n * row_bytes, KV_ERR_PROTOCOL,
             "row_sparse_pull of key %s (server %d): malformed reply (%zu bytes for %zu rows)",
             k.display.c_str(), part.first.server, got, n);
  }
}

}  // namespace

void PullRows(WorkerIo& io, OpTracker& tracker, bool sync, const std::vector<WorkerKey*>& keys, Array* const* outs,
              const Array* const* row_ids, int priority, double deadline) {
  std::vector<RowPull> pulls(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {  // every check before any request leaves
    const WorkerKey& k = *keys[i];
    const Array& out = *outs[i];
    KV_CHECK(out.shape() == k.shape, KV_ERR_SHAPE_MISMATCH,
             "row_sparse_pull of key %s: the output has shape %s, the stored value %s", k.display.c_str(),
             ShapeToString(out.shape()).c_str(), ShapeToString(k.shape).c_str());
    KV_CHECK(out.dtype() == k.dtype, KV_ERR_DTYPE_MISMATCH,
             "row_sparse_pull of key %s: the output is %s, the stored value %s", k.display.c_str(),
             DTypeName(out.dtype()), DTypeName(k.dtype));
    WireRowLen(k, "row_sparse_pull");
    pulls[i].rows = UniqueRowIds(*row_ids[i], k.shape[0], "row_sparse_pull of key " + k.display);
  }
  for (size_t i = 0; i < keys.size(); ++i) StartRowPull(io, tracker, sync, keys[i], &pulls[i], priority);
  // Every reply arrives and is checked, every block is allocated, before any output changes;
  // an output whose storage can hold its new rows keeps it (as the local store's pulls).
  for (size_t i = 0; i < keys.size(); ++i) WaitRowPull(*keys[i], pulls[i], deadline);
  std::vector<std::pair<std::shared_ptr<void>, size_t>> blocks(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    outs[i]->WaitToWrite();
    const size_t bytes = pulls[i].rows.size() * static_cast<size_t>(PlacementRowLen(keys[i]->shape)) *
                         DTypeSize(keys[i]->dtype);
    blocks[i] = outs[i]->storage_bytes() >= bytes
                    ? std::make_pair(outs[i]->storage(), outs[i]->storage_bytes())
                    : std::make_pair(Array::Create({static_cast<int64_t>(bytes)}, KV_UINT8, Context{})->storage(), bytes);
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    const size_t row_bytes = static_cast<size_t>(PlacementRowLen(keys[i]->shape)) * DTypeSize(keys[i]->dtype);
    for (const auto& part : pulls[i].parts) {
      const std::string& reply = pulls[i].op->row_replies[static_cast<size_t>(part.first.server)];
      if (!reply.empty()) {
        std::memcpy(static_cast<char*>(blocks[i].first.get()) + part.second.first * row_bytes, reply.data(), reply.size());
      }
    }
    outs[i]->ReplaceRows(std::move(pulls[i].rows), std::move(blocks[i].first), blocks[i].second);
  }
}

}  // namespace dist
}  // namespace kvstore
