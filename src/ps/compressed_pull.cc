// compressed_pull.cc - compressed pulls (compressed_pull.h): the worker's replicas and the
// server's views and answers.
#include "ps/compressed_pull.h"

#include <cstring>

#include "core/dtype.h"
#include "ps/server.h"

namespace kvstore {
namespace dist {

using compression::Compression;

namespace {

// dst[i] = float32 value i of `src` (n values of dtype float32 or float16, any alignment).
void Widen(const void* src, int dtype, int64_t n, float* dst) {
  if (dtype == KV_FLOAT32) {
    if (n > 0) std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
    return;
  }
  const auto* b = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, b + 2 * i, sizeof(h));
    dst[i] = HalfToFloat(h);
  }
}

int32_t Bits(float t) {
  int32_t b;
  std::memcpy(&b, &t, sizeof(b));
  return b;
}

}  // namespace

PullReplicas::Key* PullReplicas::Of(const WorkerKey& k) {
  std::lock_guard<std::mutex> lock(mu_);
  std::unique_ptr<Key>& slot = keys_[&k];
  if (!slot) {
    slot = std::make_unique<Key>();
    slot->view.resize(k.parts.size());
    slot->valid.assign(k.parts.size(), false);
  }
  return slot.get();
}

std::shared_ptr<PullPlan> PullCompressor::Plan(const Op& op) const {
  if (op.type != MsgType::kPull || !Compression::Compresses(op.key->dtype)) return nullptr;
  std::shared_ptr<PullReplicas> state;
  {
    std::lock_guard<std::mutex> lock(mu_);
    state = state_;
  }
  if (!state) return nullptr;
  auto plan = std::make_shared<PullPlan>();
  plan->replicas = state;
  plan->key = state->Of(*op.key);
  std::lock_guard<std::mutex> lock(plan->key->mu);
  plan->exact.resize(plan->key->valid.size());
  for (size_t i = 0; i < plan->exact.size(); ++i) plan->exact[i] = !plan->key->valid[i];
  return plan;
}

void PullPlan::Apply(std::vector<OutMsg>* msgs) const {
  const int32_t t = Bits(replicas->compression().threshold());
  for (size_t i = 0; i < msgs->size(); ++i) {
    WireHeader& h = (*msgs)[i].h;
    h.flags |= kFlagTwoBit | (exact[i] ? kFlagExactPull : 0u);
    h.arg = t;
  }
}

std::string PullPlan::Receive(const WorkerKey& k, const PartPlan& part, int st, Message* reply) {
  size_t i = 0;
  while (i < k.parts.size() && k.parts[i].offset != part.offset) ++i;
  if (i == k.parts.size()) return "a reply for no part of the key";
  std::lock_guard<std::mutex> lock(key->mu);
  const bool was_valid = key->valid[i];
  key->valid[i] = false;  // until this reply proves otherwise
  if (st != 0 || reply == nullptr) return "";
  const Compression& c = replicas->compression();
  const WireHeader& h = reply->h;
  if (h.offset != part.offset || h.count != part.count || h.dtype != k.dtype) return "malformed reply";
  const size_t n = static_cast<size_t>(part.count);
  std::vector<float>& view = key->view[i];
  if ((h.flags & kFlagTwoBit) == 0) {  // raw: a reset
    if (reply->payload.size() != n * DTypeSize(k.dtype)) return "malformed reply";
    view.resize(n);
    Widen(reply->payload.data(), k.dtype, part.count, view.data());
    key->valid[i] = true;
    return "";
  }
  if (exact[i]) return "a compressed reply to an exact pull";
  if (h.arg != Bits(c.threshold())) return "a compressed reply with another threshold";
  // A pull of the part failed since this one was sent (a timed-out pull may have advanced
  // the server's view): this view cannot take the change.
  if (!was_valid || view.size() != n) return "a compressed reply to a part whose view is not current";
  if (reply->payload.size() != static_cast<size_t>(c.CompressedSize(part.count)) * sizeof(float)) {
    return "malformed reply";
  }
  c.DequantizeAdd(reply->payload.data(), part.count, KV_FLOAT32, view.data());
  zmq::message_t values(n * DTypeSize(k.dtype));
  if (k.dtype == KV_FLOAT32) {
    if (n > 0) std::memcpy(values.data(), view.data(), n * sizeof(float));
  } else {
    auto* out = static_cast<uint16_t*>(values.data());
    for (size_t j = 0; j < n; ++j) out[j] = FloatToHalf(view[j]);
  }
  reply->payload = std::move(values);  // releases a ring view: the new payload is our own
  reply->payload_in_ring = false;
  reply->h.flags &= ~kFlagTwoBit;
  key->valid[i] = true;
  return "";
}

void ResetPullView(const void* stored, int dtype, int64_t count, float t, PullView* view) {
  view->values.resize(static_cast<size_t>(count));
  Widen(stored, dtype, count, view->values.data());
  view->threshold = t;
}

std::unique_ptr<Array> PackPullReply(const Compression& c, const void* stored, int dtype,
                                     int64_t count, PullView* view) {
  // The residual starts at zero: what is not sent stays in w - view (compressed_pull.h).
  std::vector<float> diff(static_cast<size_t>(count)), residual(static_cast<size_t>(count), 0.0f);
  Widen(stored, dtype, count, diff.data());
  for (size_t i = 0; i < diff.size(); ++i) diff[i] -= view->values[i];
  std::unique_ptr<Array> packed = Array::Create({c.CompressedSize(count)}, KV_FLOAT32, Context{});
  c.Quantize(diff.data(), count, KV_FLOAT32, residual.data(), packed->data());
  c.DequantizeAdd(packed->data(), count, KV_FLOAT32, view->values.data());
  return packed;
}

namespace server {

// A pull's answer: raw, or packed when the pull asked for it and this worker's view of the
// part is current under its threshold (compressed_pull.h).
void Server::ReplyPull(const Req& r, const KeyState& k) {
  auto& views = k.pull_views;
  const auto w = static_cast<size_t>(r.rank);
  if (!r.packing) {
    if (w < views.size()) views[w] = PullView();  // compression is off for this worker
    return Reply(r.routing_id, r.req_id, 0, "", &k);
  }
  if (views.size() <= w) views.resize(static_cast<size_t>(num_workers_));
  PullView& view = views[w];
  const float t = r.packing->threshold();
  const void* stored = k.stored->data();
  if (r.exact_pull || view.values.size() != static_cast<size_t>(k.count) || view.threshold != t) {
    ResetPullView(stored, k.dtype, k.count, t, &view);
    return Reply(r.routing_id, r.req_id, 0, "", &k);
  }
  auto buf = std::make_shared<SharedBuf>();
  buf->array = PackPullReply(*r.packing, stored, k.dtype, k.count, &view);
  WireHeader h = MakeHeader(MsgType::kReply, Role::kServer, rank_);
  h.req_id = r.req_id;
  h.flags = kFlagTwoBit;
  h.arg = Bits(t);
  h.dtype = k.dtype;
  h.offset = k.offset;
  h.count = k.count;
  h.total = k.total;
  OutPayload p;
  p.nbytes = buf->array->nbytes();
  p.buf = std::move(buf);
  SendMessage(sock_, &r.routing_id, h, std::string(), p, &shm_);
}

}  // namespace server
}  // namespace dist
}  // namespace kvstore
