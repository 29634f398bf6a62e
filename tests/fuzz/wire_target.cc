// wire_target.cc - see wire_target.h. The properties checked, from the decoders' contracts
// (src/ps/wire.h, src/ps/node_table.h, src/optimizer/spec.h):
//  - RecvMessage consumes exactly one whole multipart message, whatever its frames (nothing
//    of it is left to be read as the next message);
//  - a message it accepts satisfies every rule of the header: magic, version, a known type
//    and sender role, only known flags, num_frames equal to the frames that arrived, string
//    and payload frames of exactly the declared lengths, a string of at most
//    kMaxStringFrame bytes, and for data messages a valid dtype, 0 <= offset <= total,
//    0 <= count <= total - offset, a payload of count * dtype-size bytes (none for a pull),
//    or for a compressed push (one of the 2bit and 1bit flags; push or pushpull only;
//    float32 or float16; a finite threshold in arg, > 0 for 2bit) 4 * ceil(count / 16 or
//    32) bytes (a compressed pull, 2bit only, none; kFlagExactPull only there; a reply with
//    kFlagTwoBit has status 0 and 4 * ceil(count / 16) bytes: ps/compressed_pull.h), or for a rows message (kFlagRowSparse; push or pull only, never compressed)
//    a row length arg > 0 dividing offset, count and total and a payload of n <= count / arg
//    rows of 8 + arg * dtype-size bytes (a push) or 8 bytes (a pull),
//    and a string frame when the key is a string; ValidateHeader agrees; a ROUTER message
//    carries its sender's routing id; sent again with SendMessage it decodes to the same
//    header, string and payload;
//  - a message it refuses comes with a reason;
//  - shared memory (mode bit 1, wire.h kFlagShm, shm.h): an accepted message never carries
//    kFlagShm (RecvMessage replaces the descriptor by the bytes); a message whose descriptor
//    describes its payload exactly is never refused for its descriptor, and when accepted
//    carries the bytes that were put into the ring; a descriptor from a sender without a
//    segment (mode bit 2) is always refused; an accepted message with a payload of at least
//    kShmMinBytes sent again through the segment decodes to the same message;
//  - ParsePorts accepts 1 to 64 ports in 1..65535 that survive FormatPorts, and leaves its
//    output alone otherwise; ParseTable accepts only tables that list every server rank once
//    with valid ports and survive FormatTable, and otherwise throws PROTOCOL leaving its
//    outputs alone; ParseSpec accepts an identifier with finite parameter values, and
//    otherwise throws INVALID_ARGUMENT.
#include "wire_target.h"

#include <zmq.hpp>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>

#include "core/dtype.h"
#include "core/error.h"
#include "ps/node_table.h"
#include "ps/shm.h"
#include "ps/wire.h"
#include "optimizer/spec.h"

namespace kvstore {
namespace fuzz {
namespace {

using dist::Message;
using dist::MsgType;
using dist::WireHeader;

WireStats g_stats;

[[noreturn]] void Broken(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
[[noreturn]] void Broken(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::fprintf(stderr, "fuzz_wire: PROPERTY VIOLATED: ");
  std::vfprintf(stderr, fmt, ap);
  std::fprintf(stderr, "\n");
  va_end(ap);
  std::abort();
}

// One socket pair per receiving kind, made once: in-process transport, unlimited queues.
struct Sockets {
  zmq::context_t ctx{1};
  zmq::socket_t pair_tx{ctx, zmq::socket_type::pair};
  zmq::socket_t pair_rx{ctx, zmq::socket_type::pair};
  zmq::socket_t dealer{ctx, zmq::socket_type::dealer};
  zmq::socket_t router{ctx, zmq::socket_type::router};
  Sockets() {
    for (zmq::socket_t* s : {&pair_tx, &pair_rx, &dealer, &router}) {
      s->set(zmq::sockopt::sndhwm, 0);
      s->set(zmq::sockopt::rcvhwm, 0);
      s->set(zmq::sockopt::linger, 0);
    }
    pair_rx.bind("inproc://fuzz-wire-pair");
    pair_tx.connect("inproc://fuzz-wire-pair");
    router.bind("inproc://fuzz-wire-router");
    dealer.set(zmq::sockopt::routing_id, "fuzz-peer");
    dealer.connect("inproc://fuzz-wire-router");
  }
};

Sockets& Socks() {
  static Sockets* s = new Sockets;  // never destroyed: libFuzzer leaves through exit()
  return *s;
}

// Shared memory between the two ends of each socket pair, as two accepted SHM_OFFERs would
// leave it: segment `a` for messages to the PAIR receiver (its server-side link writes
// ring 1, its worker-side link reads it), segment `b` for messages to the ROUTER (the
// dealer's worker-side link writes ring 0, the router's server-side link reads it). The
// ShmPeers are what SendMessage and RecvMessage are given on each end.
struct Segments {
  dist::ShmPeers pair_tx, pair_rx, dealer, router;
  dist::ShmPeers none;  // a receiver without a segment
  bool ok = false;

  Segments() { Make(); }
  // (Re)makes both segments, e.g. after a forged descriptor turned a ring off or refused
  // messages left one full.
  void Make() {
    pair_tx = dist::ShmPeers();
    pair_rx = dist::ShmPeers();
    dealer = dist::ShmPeers();
    router = dist::ShmPeers();
    std::string why;
    std::unique_ptr<dist::ShmLink> wa = dist::ShmLink::Create(kShmRingBytes, &why);
    std::unique_ptr<dist::ShmLink> wb = dist::ShmLink::Create(kShmRingBytes, &why);
    if (!wa || !wb) Broken("no shared-memory segment: %s", why.c_str());
    std::unique_ptr<dist::ShmLink> sa = dist::ShmLink::Accept(wa->offer(), &why);
    std::unique_ptr<dist::ShmLink> sb = dist::ShmLink::Accept(wb->offer(), &why);
    if (!sa || !sb) Broken("a segment offered by this process was not accepted: %s", why.c_str());
    wa->Answered(true);
    wb->Answered(true);
    pair_tx.Add("", 0, std::move(sa));
    pair_rx.Add("", 0, std::move(wa));
    dealer.Add("", 0, std::move(wb));
    router.Add("fuzz-peer", 0, std::move(sb));
    ++g_stats.shm_segments;
    ok = true;
  }
  dist::ShmLink* Writer(bool to_router) { return (to_router ? dealer : pair_tx).Find(""); }
  dist::ShmLink* Reader(bool to_router) { return to_router ? router.Find("fuzz-peer") : pair_rx.Find(""); }
};

Segments& Shm() {
  static Segments* s = new Segments;  // never destroyed, as Socks()
  return *s;
}

// The bytes the target puts into a ring for a payload of n bytes.
std::string ShmPattern(uint64_t n) {
  std::string b(static_cast<size_t>(n), '\0');
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<char>((i * 31 + n) & 0xff);
  return b;
}

// Mode bit 1: puts the payload a kFlagShm header names into the sender's ring and turns the
// payload frame (a delta, see wire_target.h) into the descriptor. Returns the bytes put, or
// "" when the message is not such a one; *exact tells whether the delta was zero, *sent is
// the descriptor sent.
std::string PutShmPayload(bool router, std::vector<std::string>* frames, bool* exact, dist::ShmDesc* sent) {
  *exact = false;
  if (frames->empty() || (*frames)[0].size() != sizeof(WireHeader)) return std::string();
  WireHeader h;
  std::memcpy(&h, (*frames)[0].data(), sizeof(h));
  if ((h.flags & dist::kFlagShm) == 0 || h.payload_len == 0 || h.payload_len > kShmRingBytes) return std::string();
  const size_t at = 1 + (h.str_len > 0 ? 1 : 0);
  if (at >= frames->size() || (*frames)[at].size() != sizeof(dist::ShmDesc)) return std::string();
  Segments& seg = Shm();
  const std::string bytes = ShmPattern(h.payload_len);
  dist::ShmDesc d;
  if (!seg.Writer(router)->Put(bytes.data(), bytes.size(), &d)) {
    seg.Make();  // full (refused payloads are never consumed) or turned off by a forged end
    if (!seg.Writer(router)->Put(bytes.data(), bytes.size(), &d)) Broken("a fresh ring refused %zu bytes", bytes.size());
  }
  dist::ShmDesc delta;
  std::memcpy(&delta, (*frames)[at].data(), sizeof(delta));
  *exact = delta.offset == 0 && delta.len == 0 && delta.end == 0;
  d.offset += delta.offset;
  d.len += delta.len;
  d.end += delta.end;
  (*frames)[at].assign(reinterpret_cast<const char*>(&d), sizeof(d));
  *sent = d;
  return bytes;
}

void SendFrames(zmq::socket_t& s, const std::vector<std::string>& frames) {
  for (size_t i = 0; i < frames.size(); ++i) {
    s.send(zmq::buffer(frames[i]), i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
  }
}

void WaitReadable(zmq::socket_t& s) {
  zmq::pollitem_t item = {static_cast<void*>(s), 0, ZMQ_POLLIN, 0};
  zmq::poll(&item, 1, std::chrono::milliseconds(5000));
  if (!(item.revents & ZMQ_POLLIN)) Broken("a sent message did not arrive within 5 s");
}

// Nothing may be left of a message after RecvMessage returned.
void CheckDrained(zmq::socket_t& s) {
  zmq::message_t part;
  if (s.recv(part, zmq::recv_flags::dontwait)) {
    Broken("RecvMessage left a frame of %zu bytes behind (it would be read as the next message)", part.size());
  }
}

bool IsData(uint16_t t) {
  return t == static_cast<uint16_t>(MsgType::kInit) || t == static_cast<uint16_t>(MsgType::kPush) ||
         t == static_cast<uint16_t>(MsgType::kPull) || t == static_cast<uint16_t>(MsgType::kPushPull);
}

void CheckAccepted(const Message& m, size_t frames_after_header, bool router) {
  const WireHeader& h = m.h;
  if (h.magic != dist::kWireMagic || h.version != dist::kWireVersion) Broken("accepted magic %08x version %u", h.magic, h.version);
  if (h.type == 0 || h.type >= static_cast<uint16_t>(MsgType::kMaxType) || std::strcmp(dist::MsgTypeName(h.type), "?") == 0) {
    Broken("accepted message type %u", h.type);
  }
  if (h.sender_role < 0 || h.sender_role > 2) Broken("accepted sender role %d", h.sender_role);
  if ((h.flags & ~dist::kFlagKnownFlags) != 0) Broken("accepted flags %08x", h.flags);
  if ((h.flags & dist::kFlagShm) != 0) Broken("an accepted message still carries the shared-memory flag");
  if (h.num_frames != frames_after_header + 1) Broken("accepted num_frames %u with %zu frames", h.num_frames, frames_after_header + 1);
  if (m.str.size() != h.str_len || h.str_len > dist::kMaxStringFrame) Broken("accepted a string of %zu bytes, header says %u", m.str.size(), h.str_len);
  if (m.payload.size() != h.payload_len) Broken("accepted a payload of %zu bytes, header says %llu", m.payload.size(), static_cast<unsigned long long>(h.payload_len));
  if (frames_after_header != (h.str_len > 0 ? 1u : 0u) + (h.payload_len > 0 ? 1u : 0u)) Broken("accepted %zu frames after the header", frames_after_header);
  if (router && m.routing_id != "fuzz-peer") Broken("a ROUTER message carries routing id \"%s\"", m.routing_id.c_str());
  if (h.type == static_cast<uint16_t>(MsgType::kSaveStates) && h.payload_len != 0) {
    Broken("accepted a SAVE_STATES with %llu payload bytes", static_cast<unsigned long long>(h.payload_len));
  }
  if (h.type == static_cast<uint16_t>(MsgType::kLoadStates) && (h.arg < 0 || h.arg > 1)) {
    Broken("accepted a LOAD_STATES with arg %d", h.arg);
  }
  const bool reply = h.type == static_cast<uint16_t>(MsgType::kReply);
  if (!IsData(h.type) && (h.flags & (dist::kFlagTwoBit | dist::kFlagOneBit)) != 0) {
    // Only a compressed pull's reply (ps/compressed_pull.h): 2bit, status 0, packed size.
    float t;
    std::memcpy(&t, &h.arg, sizeof(t));
    if (!reply || h.status != 0 || (h.flags & dist::kFlagOneBit) != 0) {
      Broken("accepted compression flags on a %s", dist::MsgTypeName(h.type));
    } else if (!std::isfinite(t) || !(t > 0) || h.count < 0 || h.offset < 0 ||
               (h.dtype != KV_FLOAT32 && h.dtype != KV_FLOAT16) ||
               static_cast<long double>(h.payload_len) != 4 * std::ceil(static_cast<long double>(h.count) / 16)) {
      Broken("accepted a compressed reply of %lld elements, %llu bytes", static_cast<long long>(h.count),
             static_cast<unsigned long long>(h.payload_len));
    }
  }
  if ((h.flags & dist::kFlagExactPull) != 0 &&
      (h.type != static_cast<uint16_t>(MsgType::kPull) || (h.flags & dist::kFlagTwoBit) == 0)) {
    Broken("accepted the exact-pull flag on a %s", dist::MsgTypeName(h.type));
  }
  if (!IsData(h.type) && (h.flags & dist::kFlagRowSparse) != 0) Broken("accepted the rows flag on a %s", dist::MsgTypeName(h.type));
  if (IsData(h.type)) {
    if (!IsValidDType(h.dtype)) Broken("accepted dtype %d", h.dtype);
    if (h.offset < 0 || h.total < 0 || h.count < 0 || h.offset > h.total || h.count > h.total - h.offset) {
      Broken("accepted elements [%lld, +%lld) of %lld", static_cast<long long>(h.offset), static_cast<long long>(h.count), static_cast<long long>(h.total));
    }
    const bool pull = h.type == static_cast<uint16_t>(MsgType::kPull);
    const bool f32_sum = (h.flags & dist::kFlagFloat32Sum) != 0;  // mp_push.h
    long double bytes = static_cast<long double>(h.count) * (f32_sum ? 4 : DTypeSize(h.dtype));
    const uint32_t packed = h.flags & (dist::kFlagTwoBit | dist::kFlagOneBit);
    if (packed != 0) {
      float t;
      std::memcpy(&t, &h.arg, sizeof(t));
      if (packed == (dist::kFlagTwoBit | dist::kFlagOneBit)) Broken("accepted both compression flags");
      if (f32_sum) Broken("accepted a compressed float32 sum");
      if (h.type != static_cast<uint16_t>(MsgType::kPush) && h.type != static_cast<uint16_t>(MsgType::kPushPull) &&
          !(pull && packed == dist::kFlagTwoBit)) {  // a pull may ask for 2bit replies only
        Broken("accepted a compressed %s", dist::MsgTypeName(h.type));
      }
      if (h.dtype != KV_FLOAT32 && h.dtype != KV_FLOAT16) Broken("accepted a compressed push of dtype %d", h.dtype);
      if (!std::isfinite(t) || (packed == dist::kFlagTwoBit && !(t > 0))) Broken("accepted threshold %g", static_cast<double>(t));
      const long double per = packed == dist::kFlagTwoBit ? 16 : 32;
      bytes = 4 * std::ceil(static_cast<long double>(h.count) / per);
    }
    if ((h.flags & dist::kFlagRowSparse) != 0) {  // wire.h kFlagRowSparse
      const bool push = h.type == static_cast<uint16_t>(MsgType::kPush);
      if (!push && !pull) Broken("accepted rows on a %s", dist::MsgTypeName(h.type));
      if (packed != 0) Broken("accepted a compressed rows message");
      if (h.arg <= 0 || h.total % h.arg != 0 || h.offset % h.arg != 0 || h.count % h.arg != 0) {
        Broken("accepted rows of length %d over elements [%lld, +%lld) of %lld", h.arg, static_cast<long long>(h.offset),
               static_cast<long long>(h.count), static_cast<long long>(h.total));
      }
      const long double per = 8 + (push ? static_cast<long double>(h.arg) * (f32_sum ? 4 : DTypeSize(h.dtype)) : 0);
      const long double n = static_cast<long double>(h.payload_len) / per;
      if (n != std::floor(n) || n > static_cast<long double>(h.count / h.arg)) {
        Broken("accepted a rows %s of %llu payload bytes (row length %d, %lld elements)", dist::MsgTypeName(h.type),
               static_cast<unsigned long long>(h.payload_len), h.arg, static_cast<long long>(h.count));
      }
    } else if (pull ? h.payload_len != 0 : static_cast<long double>(h.payload_len) != bytes) {
      Broken("accepted a %s of %lld elements of dtype %d with %llu payload bytes", dist::MsgTypeName(h.type),
             static_cast<long long>(h.count), h.dtype, static_cast<unsigned long long>(h.payload_len));
    }
    if ((h.flags & dist::kFlagStrKey) && h.str_len == 0) Broken("accepted a string key without a name");
  }
  const std::string again = dist::ValidateHeader(h, frames_after_header, m.str.size(), m.payload.size());
  if (!again.empty()) Broken("RecvMessage accepted what ValidateHeader refuses: %s", again.c_str());
}

// Sends the accepted message again through the library's encoder; it must decode to the
// same header, string and payload.
// In shared-memory mode a payload of at least kShmMinBytes goes through the ring (when it
// has room) and comes back through it.
void CheckRoundTrip(const Message& m, bool router, bool shm) {
  Sockets& s = Socks();
  zmq::socket_t& tx = router ? s.dealer : s.pair_tx;
  zmq::socket_t& rx = router ? s.router : s.pair_rx;
  dist::ShmPeers* tx_shm = shm ? (router ? &Shm().dealer : &Shm().pair_tx) : nullptr;
  dist::ShmPeers* rx_shm = shm ? (router ? &Shm().router : &Shm().pair_rx) : nullptr;
  // The bytes as received: an accepted payload from a ring is a view of it, and a forged
  // descriptor (its `end` moved) may name space that the sender reuses for the re-sent copy
  // (a lying peer can only change its own data, shm.h Trust).
  const std::string sent(static_cast<const char*>(m.payload.data()), m.payload.size());
  dist::OutPayload p;
  if (m.payload.size() > 0) {
    p.buf = std::make_shared<dist::SharedBuf>();
    p.buf->msg.rebuild(m.payload.data(), m.payload.size());
    p.nbytes = m.payload.size();
  }
  if (!dist::SendMessage(tx, nullptr, m.h, m.str, p, tx_shm)) Broken("SendMessage of an accepted message failed");
  WaitReadable(rx);
  Message back;
  bool ok = false;
  std::string why;
  if (!dist::RecvMessage(rx, router, &back, &ok, &why, rx_shm) || !ok) Broken("a re-sent message was refused: %s", why.c_str());
  CheckDrained(rx);
  if (std::memcmp(&back.h, &m.h, sizeof(WireHeader)) != 0) Broken("the header changed in a round trip");
  if (back.str != m.str) Broken("the string frame changed in a round trip");
  if (back.payload.size() != sent.size() ||
      (!sent.empty() && std::memcmp(back.payload.data(), sent.data(), sent.size()) != 0)) {
    Broken("the payload changed in a round trip");
  }
}

bool ValidPorts(const std::vector<int>& ports) {
  if (ports.empty() || ports.size() > 64) return false;
  for (int p : ports) {
    if (p < 1 || p > 65535) return false;
  }
  return true;
}

void CheckPorts(const std::string& text) {
  std::vector<int> ports = {-7};
  if (!dist::ParsePorts(text, &ports)) {
    if (ports.size() != 1 || ports[0] != -7) Broken("a refused port list changed the output");
    return;
  }
  if (!ValidPorts(ports)) Broken("ParsePorts accepted %zu ports with an invalid one from \"%.60s\"", ports.size(), text.c_str());
  std::vector<int> again;
  if (!dist::ParsePorts(dist::FormatPorts(ports), &again) || again != ports) Broken("a port list does not survive FormatPorts");
}

void CheckTable(const std::string& text) {
  int w = -7, s = -7;
  std::vector<dist::NodeInfo> servers(1);
  servers[0].rank = -7;
  try {
    dist::ParseTable(text, &w, &s, &servers);
  } catch (const Error& e) {
    if (e.code() != KV_ERR_PROTOCOL) Broken("ParseTable threw code %d: %s", e.code(), e.what());
    if (w != -7 || s != -7 || servers.size() != 1 || servers[0].rank != -7) Broken("a refused node table changed the outputs");
    return;
  }
  ++g_stats.tables;
  if (w <= 0 || s <= 0 || s > 100000 || servers.size() != static_cast<size_t>(s)) Broken("ParseTable accepted %d workers, %d servers, %zu entries", w, s, servers.size());
  for (size_t i = 0; i < servers.size(); ++i) {
    if (servers[i].rank != static_cast<int>(i) || !ValidPorts(servers[i].ports) || servers[i].host.empty()) {
      Broken("ParseTable accepted entry %zu: rank %d, %zu ports, host \"%s\"", i, servers[i].rank, servers[i].ports.size(), servers[i].host.c_str());
    }
  }
  int w2 = 0, s2 = 0;
  std::vector<dist::NodeInfo> again;
  try {
    dist::ParseTable(dist::FormatTable(w, s, servers), &w2, &s2, &again);
  } catch (const Error& e) {
    Broken("an accepted node table does not survive FormatTable: %s", e.what());
  }
  if (w2 != w || s2 != s || again.size() != servers.size()) Broken("a node table changed in FormatTable");
  for (size_t i = 0; i < again.size(); ++i) {
    if (again[i].host != servers[i].host || again[i].ports != servers[i].ports || again[i].rank != servers[i].rank) {
      Broken("node table entry %zu changed in FormatTable", i);
    }
  }
}

void CheckSpec(const std::string& text) {
  optimizer::Spec spec;
  try {
    spec = optimizer::ParseSpec(text);
  } catch (const Error& e) {
    if (e.code() != KV_ERR_INVALID_ARGUMENT) Broken("ParseSpec threw code %d", e.code());
    return;
  }
  ++g_stats.specs;
  auto ident = [](const std::string& s) {
    if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
    for (char c : s) {
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
    }
    return true;
  };
  if (!ident(spec.name)) Broken("ParseSpec accepted the name \"%.40s\"", spec.name.c_str());
  for (const optimizer::SpecParam& p : spec.params) {
    if (!ident(p.key) || !std::isfinite(p.value)) Broken("ParseSpec accepted %.40s=%g", p.key.c_str(), p.value);
  }
}

}  // namespace

std::string EncodeWireInput(uint8_t mode, const std::vector<std::string>& frames) {
  std::string in(1, static_cast<char>(mode));
  for (const std::string& f : frames) {
    const size_t n = std::min<size_t>(f.size(), 0xffff);
    in.push_back(static_cast<char>(n & 0xff));
    in.push_back(static_cast<char>(n >> 8));
    in.append(f, 0, n);
  }
  return in;
}

const WireStats& GetWireStats() { return g_stats; }

void RunWireInput(const uint8_t* data, size_t size) {
  if (size == 0) return;
  const bool router = (data[0] & kModeRouter) != 0;
  const bool shm = (data[0] & kModeShm) != 0;
  const bool unknown_peer = shm && (data[0] & kModeShmUnknownPeer) != 0;
  std::vector<std::string> frames;
  size_t pos = 1;
  while (pos < size && frames.size() < kMaxFrames) {
    size_t n = data[pos];
    if (pos + 1 < size) n |= static_cast<size_t>(data[pos + 1]) << 8;
    pos += 2;
    n = std::min(n, pos < size ? size - pos : 0);
    frames.emplace_back(reinterpret_cast<const char*>(data) + std::min(pos, size), n);
    pos += n;
  }
  if (frames.empty()) frames.emplace_back();
  Sockets& s = Socks();
  zmq::socket_t& tx = router ? s.dealer : s.pair_tx;
  zmq::socket_t& rx = router ? s.router : s.pair_rx;
  bool exact = false;
  dist::ShmDesc sent{};
  const std::string put = shm ? PutShmPayload(router, &frames, &exact, &sent) : std::string();
  dist::ShmPeers* rx_shm = !shm ? nullptr : unknown_peer ? &Shm().none : router ? &Shm().router : &Shm().pair_rx;
  SendFrames(tx, frames);
  WaitReadable(rx);
  Message m;
  bool ok = false;
  std::string why;
  if (!dist::RecvMessage(rx, router, &m, &ok, &why, rx_shm)) Broken("RecvMessage found no message although one arrived");
  CheckDrained(rx);
  if (!put.empty()) {
    ++g_stats.shm_messages;
    if (ok) ++g_stats.shm_accepted;
    if (unknown_peer && ok) Broken("accepted a shared-memory payload from a sender without a segment");
    if (ok && (sent.len != put.size() || sent.offset > kShmRingBytes || sent.len > kShmRingBytes - sent.offset)) {
      Broken("accepted a descriptor of %llu bytes at %llu (header: %zu bytes, ring: %zu)",
             static_cast<unsigned long long>(sent.len), static_cast<unsigned long long>(sent.offset), put.size(),
             kShmRingBytes);
    }
    if (exact && !unknown_peer && !ok &&
        (why.find("descriptor") != std::string::npos || why.find("segment") != std::string::npos)) {
      Broken("refused an exact shared-memory descriptor: %s", why.c_str());
    }
    if (exact && ok && (m.payload.size() != put.size() || std::memcmp(m.payload.data(), put.data(), put.size()) != 0)) {
      Broken("a shared-memory payload of %zu bytes arrived changed", put.size());
    }
  }
  ++g_stats.messages;
  g_stats.frames += frames.size();
  if (ok) {
    ++g_stats.accepted;
    if (!why.empty()) Broken("an accepted message came with a reason: %s", why.c_str());
    CheckAccepted(m, frames.size() - 1, router);
    CheckRoundTrip(m, router, shm && !unknown_peer);
  } else if (why.empty()) {
    Broken("a refused message came without a reason");
  }
  // The text decoders see what a node would hand them: the string frame of an accepted
  // message, else the second frame as it arrived.
  const std::string text = ok ? m.str : frames.size() > 1 ? frames[1] : std::string();
  CheckPorts(text);
  CheckTable(text);
  CheckSpec(text);
}

}  // namespace fuzz
}  // namespace kvstore
