// server_row_sparse.cc - a server's row_sparse pushes and pulls (wire.h kFlagRowSparse; the
// design is in server.h "Rows").
//
// Invariants.
//  - A row request reaches a key only after TakesRows checked its ids: strictly increasing,
//    inside the rows of the part this server holds, and its row length the key's.
//  - The value changes exactly as the in-process stores change it (store/row_sparse.h,
//    RowSparsePush): the round's pushes become row_sparse arrays of the part's shape
//    (rows, row_len) in rank order, and RowSparsePush sums and applies them. Assign and the
//    lazy update write the value in place when no reply is still sending it, otherwise a
//    copy (copy-on-write, as StoreNewValue); a failure leaves the value as it was.
#include <cstring>
#include <vector>

#include "core/dtype.h"
#include "core/row_sparse.h"
#include "optimizer/recv_sum.h"
#include "ps/log.h"
#include "ps/server.h"

namespace kvstore {
namespace dist {
namespace server {
namespace {

int64_t ReadId(const zmq::message_t& payload, int64_t i) {
  int64_t id;
  std::memcpy(&id, static_cast<const char*>(payload.data()) + i * sizeof(int64_t), sizeof(id));
  return id;
}

// The number of rows a row request of `bytes` payload bytes carries (ValidateRows made the
// division exact): ids only for a pull, ids and rows for a push.
int64_t NumRows(MsgType type, bool f32_sum, int64_t row_len, int dtype, size_t bytes) {
  const size_t esize = f32_sum ? sizeof(float) : DTypeSize(dtype);
  const size_t per_row = sizeof(int64_t) + (type == MsgType::kPush ? static_cast<size_t>(row_len) * esize : 0);
  return static_cast<int64_t>(bytes / per_row);
}
int64_t NumRows(const Req& r, int dtype) {
  return NumRows(r.type, r.f32_sum, r.row_len, dtype, r.payload.size());
}

// A push's rows as a row_sparse array of the part's shape (rows, row_len), ids made local
// to the part, in the payload's dtype (float32 for a float32 sum).
std::unique_ptr<Array> PushedRows(const Req& r, const KeyState& k) {
  const int dtype = r.f32_sum ? KV_FLOAT32 : k.dtype;
  const int64_t n = NumRows(r, k.dtype);
  const int64_t begin = k.offset / r.row_len;
  std::vector<int64_t> ids(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = ReadId(r.payload, i) - begin;
  std::unique_ptr<Array> a =
      Array::CreateRowSparse({k.count / r.row_len, r.row_len}, dtype, Context{}, std::move(ids));
  CopyBytes(a->data(), static_cast<const char*>(r.payload.data()) + n * sizeof(int64_t), a->nbytes());
  return a;
}

// `a` (float16 rows) converted to float32 rows, for a round that mixes float16 pushes with
// float32 sums under a multi-precision updater (each value converted, then summed in
// float32, as optimizer/recv_sum.h sums).
std::unique_ptr<Array> ToFloat32Rows(const Array& a) {
  std::unique_ptr<Array> f = Array::CreateRowSparse(a.shape(), KV_FLOAT32, Context{}, a.row_ids());
  const void* src = a.data();
  if (a.size() > 0) optimizer::SumToFloat32(&src, 1, KV_FLOAT16, static_cast<float*>(f->data()), a.size());
  return f;
}

}  // namespace

bool Server::TakesRows(const Message& m, KeyState* k) {
  if ((m.h.flags & kFlagRowSparse) == 0) return true;
  const int64_t len = m.h.arg;
  if (k->row_len != 0 && k->row_len != len) {
    Reply(m.routing_id, m.h.req_id, KV_ERR_SHAPE_MISMATCH,
          StrFormat("key %s: server %d holds rows of %lld elements, the request names rows of %lld",
                    k->display.c_str(), rank_, static_cast<long long>(k->row_len),
                    static_cast<long long>(len)));
    return false;
  }
  const int64_t n = NumRows(static_cast<MsgType>(m.h.type), (m.h.flags & kFlagFloat32Sum) != 0, len,
                            k->dtype, m.payload.size());
  const int64_t begin = k->offset / len, end = (k->offset + k->count) / len;
  for (int64_t i = 0, prev = -1; i < n; ++i) {
    const int64_t id = ReadId(m.payload, i);
    if (id < begin || id >= end || (i > 0 && id <= prev)) {
      Reply(m.routing_id, m.h.req_id, KV_ERR_INVALID_ARGUMENT,
            StrFormat("key %s: row id %lld (position %lld) of a row_sparse %s is outside the rows "
                      "[%lld, %lld) server %d holds, or not above the one before",
                      k->display.c_str(), static_cast<long long>(id), static_cast<long long>(i),
                      MsgTypeName(m.h.type), static_cast<long long>(begin),
                      static_cast<long long>(end), rank_));
      return false;
    }
    prev = id;
  }
  k->row_len = len;
  return true;
}

// A row_sparse pull: its rows of the stored value, gathered into a reply buffer of their own
// (the stored value may change before ZeroMQ has sent them).
void Server::ReplyRows(const Req& r, const KeyState& k) {
  const int64_t n = NumRows(r, k.dtype);
  const size_t row_bytes = static_cast<size_t>(r.row_len) * DTypeSize(k.dtype);
  const int64_t begin = k.offset / r.row_len;
  auto buf = std::make_shared<SharedBuf>();
  try {
    buf->array = Array::Create({n * r.row_len}, k.dtype, Context{});
  } catch (const Error& e) {
    Reply(r.routing_id, r.req_id, e.code(), e.what());
    return;
  }
  const char* stored = static_cast<const char*>(k.stored->data());
  for (int64_t i = 0; i < n; ++i) {
    CopyBytes(static_cast<char*>(buf->array->data()) + i * row_bytes,
              stored + (ReadId(r.payload, i) - begin) * row_bytes, row_bytes);
  }
  WireHeader h = MakeHeader(MsgType::kReply, Role::kServer, rank_);
  h.req_id = r.req_id;
  h.dtype = k.dtype;
  h.offset = k.offset;
  h.count = k.count;
  h.total = k.total;
  h.arg = static_cast<int32_t>(r.row_len);
  SendMessage(sock_, &r.routing_id, h, std::string(), OutPayload{buf, 0, buf->size()}, &shm_);
}

// A sync round with row_sparse pushes at its heads: all of them row_sparse, it runs here
// (returns true); mixed with dense pushes, the row_sparse ones are cast to dense and the
// dense round runs (returns false), as the in-process stores sum such a key.
bool Server::RowSparseRound(KeyState* k) {
  size_t sparse = 0;
  for (auto& q : k->fifo) sparse += q.front().row_sparse ? 1 : 0;
  if (sparse == 0) return false;
  int status = 0;
  std::string msg;
  try {
    if (sparse < k->fifo.size()) {
      for (auto& q : k->fifo) {
        Req& r = q.front();
        if (!r.row_sparse) continue;
        std::unique_ptr<Array> rows = PushedRows(r, *k);
        std::unique_ptr<Array> dense = Array::Create(rows->shape(), rows->dtype(), Context{});
        DensifyInto(*rows, dense.get());
        r.payload.rebuild(dense->data(), dense->nbytes());
        r.row_sparse = false;
      }
      return false;
    }
    std::vector<const Req*> pushes;
    for (auto& q : k->fifo) pushes.push_back(&q.front());
    ApplyRows(k, pushes);
  } catch (const std::exception& e) {
    status = UpdateFailure(*k, e, true, &msg);
  }
  for (auto& q : k->fifo) {
    ReplyReq(q.front(), status, msg, nullptr);
    q.pop_front();
  }
  return true;
}

void Server::ApplyRowsAsync(KeyState* k, Req& r) {
  int status = 0;
  std::string msg;
  try {
    ApplyRows(k, {&r});
  } catch (const std::exception& e) {
    status = UpdateFailure(*k, e, false, &msg);
  }
  ReplyReq(r, status, msg, nullptr);
}

// The value of `k` after the row_sparse `pushes` (rank order), or a throw with the value
// unchanged.
void Server::ApplyRows(KeyState* k, const std::vector<const Req*>& pushes) {
  if (k->count == 0) return;  // an empty part: nothing to change
  std::vector<std::unique_ptr<Array>> owned;
  bool f16 = false, f32 = false;
  for (const Req* r : pushes) {
    owned.push_back(PushedRows(*r, *k));
    (r->f32_sum ? f32 : f16) = true;
  }
  std::vector<const Array*> vals;
  for (auto& a : owned) {
    if (f16 && f32 && a->dtype() == KV_FLOAT16) a = ToFloat32Rows(*a);
    vals.push_back(a.get());
  }
  Updater* u = UpdaterOf(*k);
  const RowSparseRecv mode = u ? RowSparseRecvOf(*u) : RowSparseRecv::kAsIs;
  const bool in_place = u == nullptr || mode == RowSparseRecv::kRows;
  // The bytes the commit writes: the stored value's own, unless a reply is still sending
  // them (then a copy; the kAsIs/kDense updaters write a candidate of their own anyway).
  std::shared_ptr<SharedBuf> target = k->stored;
  if (in_place && !k->stored->Idle()) {
    target = TakeTarget(k);
    CopyBytes(target->data(), k->stored->data(), k->stored->size());
  }
  k->rows_view = Array::CreateView({k->count / k->row_len, k->row_len}, k->dtype,
                                   std::shared_ptr<void>(target, target->data()));
  Array* view = k->rows_view.get();
  if (!k->grad_scratch) k->grad_scratch = std::make_unique<RowScratch>();
  if (!k->weight_scratch) k->weight_scratch = std::make_unique<RowScratch>();
  RowSparsePush push(std::move(vals), &k->rows_view, &k->rows_candidate, &k->rows_merged,
                     k->grad_scratch.get(), k->weight_scratch.get());
  try {
    UpdateTxn txn;
    push.Prepare(this, u, k->updater_id, k->is_str ? k->name.c_str() : nullptr, &txn);
    push.Commit();
    txn.Commit();
  } catch (...) {
    k->rows_view.reset();
    if (target != k->stored) k->spare = std::move(target);
    throw;
  }
  if (k->rows_view.get() != view) {  // kAsIs/kDense: the candidate is the new value
    target = std::make_shared<SharedBuf>();
    target->array = std::move(k->rows_view);
  }
  k->rows_view.reset();  // the view must not keep the old value's bytes
  k->rows_candidate.reset();
  if (target != k->stored) {
    if (k->stored->array) k->spare = std::move(k->stored);
    k->stored = std::move(target);
  }
}

}  // namespace server
}  // namespace dist
}  // namespace kvstore
