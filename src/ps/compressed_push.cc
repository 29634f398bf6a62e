// compressed_push.cc - the packed payloads of compressed pushes (compressed_push.h).
#include "ps/compressed_push.h"

#include <cstring>

#include "core/dtype.h"

namespace kvstore {
namespace dist {

using compression::Compression;

std::optional<Compression> PackingOf(const WireHeader& h) {
  const uint32_t packed = h.flags & (kFlagTwoBit | kFlagOneBit);
  if (packed == 0) return std::nullopt;
  float t;
  std::memcpy(&t, &h.arg, sizeof(t));
  return Compression::Make(packed == kFlagTwoBit ? "2bit" : "1bit", t);
}

void PackedPush::Apply(std::vector<OutMsg>* msgs) const {
  for (size_t i = 0; i < msgs->size(); ++i) {
    OutMsg& m = (*msgs)[i];
    m.h.flags = (m.h.flags & ~kFlagFloat32Sum) | flag;  // packed values have no dtype
    m.h.arg = threshold;
    m.payload.buf = buf;
    m.payload.offset_bytes = offsets[i];
    m.payload.nbytes = nbytes[i];
  }
}

std::shared_ptr<const PackedPush> PushCompressor::State::Pack(const WorkerKey& k,
                                                              const void* values, int dtype) {
  if (!Compression::Compresses(k.dtype)) return nullptr;
  KeyResiduals* r;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::unique_ptr<KeyResiduals>& slot = keys_[&k];
    if (!slot) {
      slot = std::make_unique<KeyResiduals>();
      for (const PartPlan& p : k.parts) slot->by_part.emplace_back(static_cast<size_t>(p.count), 0.0f);
    }
    r = slot.get();
  }
  auto packed = std::make_shared<PackedPush>();
  packed->flag = c_.type() == compression::Type::kTwoBit ? kFlagTwoBit : kFlagOneBit;
  const float t = c_.threshold();
  std::memcpy(&packed->threshold, &t, sizeof(t));
  int64_t words = 0;
  for (const PartPlan& p : k.parts) {
    packed->offsets.push_back(static_cast<size_t>(words) * sizeof(float));
    packed->nbytes.push_back(static_cast<size_t>(c_.CompressedSize(p.count)) * sizeof(float));
    words += c_.CompressedSize(p.count);
  }
  packed->buf = std::make_shared<SharedBuf>();
  packed->buf->array = Array::Create({words}, KV_FLOAT32, Context{});
  auto* out = static_cast<uint8_t*>(packed->buf->array->data());
  const auto* in = static_cast<const uint8_t*>(values);
  const size_t esize = DTypeSize(dtype);
  std::lock_guard<std::mutex> lock(r->mu);
  for (size_t i = 0; i < k.parts.size(); ++i) {
    const PartPlan& p = k.parts[i];
    c_.Quantize(in + static_cast<size_t>(p.offset) * esize, p.count, dtype,
                r->by_part[i].data(), out + packed->offsets[i]);
  }
  return packed;
}

std::shared_ptr<const PackedPush> PushCompressor::Pack(const Op& op) const {
  if (op.type != MsgType::kPush && op.type != MsgType::kPushPull) return nullptr;
  std::shared_ptr<State> state;
  {
    std::lock_guard<std::mutex> lock(mu_);
    state = state_;
  }
  if (!state) return nullptr;
  // A multi-precision float32 sum of float16 values (mp_push.h) is quantised as float32.
  const Array* sum = op.payload.array();
  return state->Pack(*op.key, op.payload.buf()->data(), sum ? sum->dtype() : op.key->dtype);
}

}  // namespace dist
}  // namespace kvstore
