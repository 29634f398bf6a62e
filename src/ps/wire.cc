// wire.cc - header construction and validation, and whole-message send/receive (wire.h).
#include "ps/wire.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "core/dtype.h"
#include "core/profile.h"
#include "ps/log.h"

namespace kvstore {
namespace dist {

const char* MsgTypeName(uint16_t t) {
  switch (static_cast<MsgType>(t)) {
    case MsgType::kRegister: return "REGISTER";
    case MsgType::kNodeTable: return "NODE_TABLE";
    case MsgType::kBarrier: return "BARRIER";
    case MsgType::kBarrierDone: return "BARRIER_DONE";
    case MsgType::kHeartbeat: return "HEARTBEAT";
    case MsgType::kHeartbeatAck: return "HEARTBEAT_ACK";
    case MsgType::kNodeDead: return "NODE_DEAD";
    case MsgType::kFinish: return "FINISH";
    case MsgType::kFinishAck: return "FINISH_ACK";
    case MsgType::kShutdown: return "SHUTDOWN";
    case MsgType::kShutdownAck: return "SHUTDOWN_ACK";
    case MsgType::kQueryDead: return "QUERY_DEAD";
    case MsgType::kQueryDeadReply: return "QUERY_DEAD_REPLY";
    case MsgType::kAbort: return "ABORT";
    case MsgType::kInit: return "INIT";
    case MsgType::kPush: return "PUSH";
    case MsgType::kPull: return "PULL";
    case MsgType::kPushPull: return "PUSHPULL";
    case MsgType::kCommand: return "COMMAND";
    case MsgType::kSetOptimizer: return "SET_OPTIMIZER";
    case MsgType::kReply: return "REPLY";
    case MsgType::kSaveStates: return "SAVE_STATES";
    case MsgType::kLoadStates: return "LOAD_STATES";
    case MsgType::kShmOffer: return "SHM_OFFER";
    default: return "?";
  }
}

WireHeader MakeHeader(MsgType type, Role role, int rank) {
  WireHeader h;
  std::memset(&h, 0, sizeof(h));
  h.magic = kWireMagic;
  h.version = kWireVersion;
  h.type = static_cast<uint16_t>(type);
  h.sender_role = static_cast<int32_t>(role);
  h.sender_rank = rank;
  h.key = -1;
  h.dtype = -1;
  return h;
}

static bool IsDataType(uint16_t t) {
  return t == static_cast<uint16_t>(MsgType::kInit) || t == static_cast<uint16_t>(MsgType::kPush) ||
         t == static_cast<uint16_t>(MsgType::kPull) ||
         t == static_cast<uint16_t>(MsgType::kPushPull);
}

// A compressed push (kFlagTwoBit / kFlagOneBit, compressed_push.h) of a data message whose
// element range is valid.
static std::string ValidatePacking(const WireHeader& h) {
  const uint32_t packed = h.flags & (kFlagTwoBit | kFlagOneBit);
  if (packed == (kFlagTwoBit | kFlagOneBit)) return "both the 2bit and the 1bit flag";
  if ((h.flags & kFlagFloat32Sum) != 0) return "a compressed push is not a float32 sum";
  const bool pull = h.type == static_cast<uint16_t>(MsgType::kPull);
  const bool reply = h.type == static_cast<uint16_t>(MsgType::kReply);
  if (h.type != static_cast<uint16_t>(MsgType::kPush) &&
      h.type != static_cast<uint16_t>(MsgType::kPushPull) && !pull && !reply) {
    return "only a push, pushpull, pull or reply may be compressed";
  }
  if ((pull || reply) && packed != kFlagTwoBit) return "compressed pulls are 2bit only";
  if ((h.flags & kFlagExactPull) != 0 && !pull) return "only a pull may ask for exact values";
  if (h.dtype != KV_FLOAT32 && h.dtype != KV_FLOAT16) return "compressed values must be float32 or float16";
  float t;
  std::memcpy(&t, &h.arg, sizeof(t));
  if (!std::isfinite(t) || (packed == kFlagTwoBit && !(t > 0))) return "invalid compression threshold";
  const uint64_t per = packed == kFlagTwoBit ? 16 : 32;
  const uint64_t words = (static_cast<uint64_t>(h.count) + per - 1) / per;
  if (pull && h.payload_len != 0) return "a pull carries no payload";
  if (!pull && h.payload_len != words * 4) return "payload length differs from the packed size of count";
  if ((h.flags & kFlagStrKey) != 0 && h.str_len == 0) return "string key without a name";
  return "";
}

// A row_sparse push or pull (kFlagRowSparse) of a data message whose element range is
// valid; the ids themselves are checked by the server (server_row_sparse.cc).
static std::string ValidateRows(const WireHeader& h, uint64_t esize) {
  if (h.type != static_cast<uint16_t>(MsgType::kPush) && h.type != static_cast<uint16_t>(MsgType::kPull)) {
    return "only a push or pull may carry rows";
  }
  if ((h.flags & (kFlagTwoBit | kFlagOneBit)) != 0) return "a row_sparse push is not compressed";
  if (h.arg <= 0) return "row length (arg) is not positive";
  const int64_t len = h.arg;
  if (h.total % len != 0 || h.offset % len != 0 || h.count % len != 0) {
    return "element range is not made of whole rows";
  }
  const uint64_t rows = static_cast<uint64_t>(h.count / len);
  const bool push = h.type == static_cast<uint16_t>(MsgType::kPush);
  const uint64_t row_bytes = static_cast<uint64_t>(len) * esize;  // <= count * esize: no overflow
  const uint64_t per_row = sizeof(int64_t) + (push ? row_bytes : 0);
  if (h.payload_len % per_row != 0) return "payload length is not a whole number of rows";
  if (h.payload_len / per_row > rows) return "more rows than the part holds";
  if ((h.flags & kFlagStrKey) != 0 && h.str_len == 0) return "string key without a name";
  return "";
}

std::string ValidateHeader(const WireHeader& h, size_t frames_after_header,
                           size_t str_frame_size, size_t payload_frame_size) {
  char why[256];
  if (h.magic != kWireMagic) {
    std::snprintf(why, sizeof(why), "bad magic 0x%08x", h.magic);
    return why;
  }
  if (h.version != kWireVersion) {
    std::snprintf(why, sizeof(why), "wire version %u, this build speaks %u", h.version,
                  kWireVersion);
    return why;
  }
  if (h.type == 0 || h.type >= static_cast<uint16_t>(MsgType::kMaxType) ||
      std::strcmp(MsgTypeName(h.type), "?") == 0) {
    std::snprintf(why, sizeof(why), "unknown message type %u", h.type);
    return why;
  }
  if (h.sender_role < 0 || h.sender_role > 2) return "unknown sender role";
  if (h.str_len > kMaxStringFrame) return "string frame too long";
  const size_t expect_frames = 1 + (h.str_len > 0 ? 1 : 0) + (h.payload_len > 0 ? 1 : 0);
  if (h.num_frames != expect_frames || frames_after_header + 1 != expect_frames) {
    std::snprintf(why, sizeof(why), "frame count %zu, header says %u (expected %zu)",
                  frames_after_header + 1, h.num_frames, expect_frames);
    return why;
  }
  if (h.str_len != str_frame_size) return "string frame length differs from the header";
  if (h.payload_len != payload_frame_size) return "payload length differs from the header";
  if ((h.flags & ~kFlagKnownFlags) != 0) return "unknown flags";
  if ((h.flags & kFlagShm) != 0 && h.payload_len == 0) return "a shared-memory payload of no bytes";
  if ((h.flags & (kFlagTwoBit | kFlagOneBit | kFlagExactPull)) != 0 && !IsDataType(h.type)) {
    if (h.type != static_cast<uint16_t>(MsgType::kReply) || (h.flags & kFlagExactPull) != 0 ||
        h.status != 0) {
      return "compression flags on a message that carries no values";
    }
    if (h.offset < 0 || h.count < 0) return "element range outside the value";
    return ValidatePacking(h);  // a compressed pull's reply (compressed_pull.h)
  }
  if ((h.flags & kFlagExactPull) != 0 && (h.flags & kFlagTwoBit) == 0) {
    return "an exact pull that is not a compressed pull";
  }
  if ((h.flags & kFlagRowSparse) != 0 && !IsDataType(h.type)) return "row flag on a message that is not a push or pull";
  if (h.type == static_cast<uint16_t>(MsgType::kSaveStates) && h.payload_len != 0) {
    return "SAVE_STATES carries no payload";
  }
  if (h.type == static_cast<uint16_t>(MsgType::kLoadStates) && (h.arg < 0 || h.arg > 1)) {
    return "LOAD_STATES arg is neither 0 (check) nor 1 (apply)";
  }
  if (IsDataType(h.type)) {
    if (!IsValidDType(h.dtype)) return "invalid dtype";
    if (h.total < 0 || h.offset < 0 || h.count < 0 || h.offset > h.total ||
        h.count > h.total - h.offset) {
      return "element range outside the value";
    }
    const bool f32_sum = (h.flags & kFlagFloat32Sum) != 0;
    if (f32_sum && (h.dtype != KV_FLOAT16 || (h.type != static_cast<uint16_t>(MsgType::kPush) &&
                                              h.type != static_cast<uint16_t>(MsgType::kPushPull)))) {
      return "a float32 sum is only pushed for a float16 key";
    }
    const uint64_t esize = f32_sum ? sizeof(float) : DTypeSize(h.dtype);
    if (static_cast<uint64_t>(h.count) > std::numeric_limits<uint64_t>::max() / esize) {
      return "element count overflows";
    }
    const uint64_t bytes = static_cast<uint64_t>(h.count) * esize;
    const bool has_values = h.type != static_cast<uint16_t>(MsgType::kPull);
    if ((h.flags & kFlagRowSparse) != 0) return ValidateRows(h, esize);
    if ((h.flags & (kFlagTwoBit | kFlagOneBit)) != 0) return ValidatePacking(h);
    if (has_values && h.payload_len != bytes) return "payload length differs from count*dtype";
    if (!has_values && h.payload_len != 0) return "a pull carries no payload";
    if ((h.flags & kFlagStrKey) != 0 && h.str_len == 0) return "string key without a name";
  }
  return "";
}

// The key a data message names, as the profile names keys ("3", "\"w\""); "" for others.
static std::string ProfileKey(const WireHeader& h, const std::string& str) {
  if (!IsDataType(h.type)) return std::string();
  return (h.flags & kFlagStrKey) ? "\"" + str + "\"" : std::to_string(h.key);
}

bool RecvValidMessage(zmq::socket_t& sock, bool router, const char* peer, Message* out,
                      ShmPeers* shm) {
  for (int dropped = 0; dropped < 64; ++dropped) {
    bool ok = false;
    std::string why;
    if (!RecvMessage(sock, router, out, &ok, &why, shm)) return false;
    if (ok) return true;
    LogDropped("dropped a malformed message from %s: %s", peer, why.c_str());
  }
  return false;
}

void CopyOutOfRing(zmq::message_t* payload, bool* in_ring) {
  if (!*in_ring) return;
  zmq::message_t copy(payload->data(), payload->size());
  *payload = std::move(copy);
  *in_ring = false;
}

bool RecvMessage(zmq::socket_t& sock, bool router, Message* out, bool* ok, std::string* why,
                 ShmPeers* shm) {
  profile::Scope prof("recv");
  *ok = false;
  out->payload_in_ring = false;
  // At most the routing id and 3 frames are kept (a hostile peer's further frames are read
  // and dropped, which bounds its memory use); an array, not a vector: no allocation per message.
  constexpr size_t kMaxFrames = 5;
  zmq::message_t frames[kMaxFrames];
  size_t num_frames = 0;
  for (;;) {
    zmq::message_t part;
    zmq::recv_result_t r;
    try {
      r = sock.recv(part, num_frames == 0 ? zmq::recv_flags::dontwait : zmq::recv_flags::none);
    } catch (const zmq::error_t& e) {
      *why = std::string("receive failed: ") + e.what();
      return num_frames != 0;
    }
    if (!r) return num_frames != 0;
    const bool more = part.more();
    if (num_frames < kMaxFrames) frames[num_frames++] = std::move(part);
    if (!more) break;
  }
  size_t i = 0;
  if (router) {
    out->routing_id.assign(frames[0].data<char>(), frames[0].size());
    i = 1;
  }
  if (num_frames > 4 + (router ? 1 : 0) || i >= num_frames) {
    *why = "wrong number of frames";
    return true;
  }
  if (frames[i].size() != sizeof(WireHeader)) {
    *why = "header frame of " + std::to_string(frames[i].size()) + " bytes";
    return true;
  }
  std::memcpy(&out->h, frames[i].data(), sizeof(WireHeader));
  const size_t after = num_frames - i - 1;
  size_t str_size = 0, payload_size = 0;
  size_t next = i + 1;
  if (out->h.str_len > 0 && next < num_frames) str_size = frames[next++].size();
  if (out->h.payload_len > 0 && next < num_frames) payload_size = frames[next++].size();
  // A shared-memory payload's frame is its descriptor; the header describes the bytes.
  const bool in_shm = (out->h.flags & kFlagShm) != 0;
  const size_t desc_size = payload_size;
  if (in_shm) payload_size = static_cast<size_t>(out->h.payload_len);
  *why = ValidateHeader(out->h, after, str_size, payload_size);
  if (!why->empty()) return true;
  if (in_shm && desc_size != sizeof(ShmDesc)) {
    *why = "shared-memory descriptor frame of " + std::to_string(desc_size) + " bytes";
    return true;
  }
  ShmLink* link = nullptr;
  if (in_shm && (shm == nullptr || (link = shm->Find(out->routing_id)) == nullptr)) {
    *why = "a shared-memory payload from a peer without a segment";
    return true;
  }
  next = i + 1;
  out->str.clear();
  if (out->h.str_len > 0) {
    out->str.assign(frames[next].data<char>(), frames[next].size());
    ++next;
  }
  if (in_shm) {
    ShmDesc d;
    std::memcpy(&d, frames[next].data(), sizeof(d));
    if (!link->View(d, out->h.payload_len, &out->payload, why)) return true;
    out->payload_in_ring = true;
    out->h.flags &= ~kFlagShm;
  } else if (out->h.payload_len > 0) {
    out->payload = std::move(frames[next]);
  }
  *ok = true;
  if (prof.on()) prof.Set(ProfileKey(out->h, out->str), out->payload.size(), profile::Stat::kNone, MsgTypeName(out->h.type));
  return true;
}

namespace {
struct ReleaseHint {
  std::shared_ptr<SharedBuf> buf;
};
void ReleaseSharedBuf(void* /*data*/, void* hint) {
  auto* h = static_cast<ReleaseHint*>(hint);
  h->buf->in_flight.fetch_sub(1, std::memory_order_acq_rel);
  delete h;
}
}  // namespace

bool SendMessage(zmq::socket_t& sock, const std::string* routing_id, WireHeader h,
                 const std::string& str, const OutPayload& payload, ShmPeers* shm) {
  KV_PROFILE_SCOPE("send", ProfileKey(h, str), static_cast<int64_t>(payload.nbytes), profile::Stat::kNone, MsgTypeName(h.type));
  ShmDesc desc;
  bool in_shm = false;
  if (shm != nullptr && payload.nbytes >= kShmMinBytes) {
    ShmLink* link = shm->Find(routing_id != nullptr ? *routing_id : std::string());
    in_shm = link != nullptr &&
             link->Put(static_cast<const char*>(payload.buf->data()) + payload.offset_bytes, payload.nbytes, &desc);
  }
  if (in_shm) h.flags |= kFlagShm;
  h.str_len = static_cast<uint32_t>(str.size());
  h.payload_len = payload.nbytes;
  h.num_frames = 1 + (str.empty() ? 0 : 1) + (payload.nbytes > 0 ? 1 : 0);
  try {
    if (routing_id != nullptr) {
      sock.send(zmq::buffer(*routing_id), zmq::send_flags::sndmore);
    }
    const bool more_after_header = h.num_frames > 1;
    sock.send(zmq::const_buffer(&h, sizeof(h)),
              more_after_header ? zmq::send_flags::sndmore : zmq::send_flags::none);
    if (!str.empty()) {
      sock.send(zmq::buffer(str),
                payload.nbytes > 0 ? zmq::send_flags::sndmore : zmq::send_flags::none);
    }
    if (in_shm) {
      sock.send(zmq::const_buffer(&desc, sizeof(desc)), zmq::send_flags::none);
    } else if (payload.nbytes > 0) {
      auto* base = static_cast<char*>(payload.buf->data()) + payload.offset_bytes;
      if (payload.nbytes < kZeroCopyMinBytes) {
        sock.send(zmq::const_buffer(base, payload.nbytes), zmq::send_flags::none);
      } else {
        payload.buf->in_flight.fetch_add(1, std::memory_order_acq_rel);
        auto* hint = new ReleaseHint{payload.buf};
        zmq::message_t msg(base, payload.nbytes, &ReleaseSharedBuf, hint);
        sock.send(msg, zmq::send_flags::none);
      }
    }
  } catch (const zmq::error_t& e) {
    Log("send of %s failed: %s", MsgTypeName(h.type), e.what());
    return false;
  }
  return true;
}

}  // namespace dist
}  // namespace kvstore
