// Unit test of chunked shared-memory payloads (src/ps/shm.h "Chunks", wire.h kFlagShmPart),
// in one process over an inproc PAIR: the offer carries the server's chunk size (and one out
// of range is refused); a payload of at least two chunks leaves as parts, each a message the
// receiver takes in as it arrives (RecvMessage: consumed, nothing to handle, no reason) until
// the last hands over the whole message, its bytes and header intact, in a buffer of its own
// (not the ring), whose memory a later payload of the same size reuses; a smaller payload
// stays one view of the ring; the ring is free again once the parts are in. Sequences that do
// not make one payload are refused with their reason and drop the assembly: a part without
// its beginning, a gap, a second beginning, another header or string, bytes beyond the
// payload or outside the ring, a payload larger than a ring, a part frame of the wrong size,
// a part flag without kFlagShm.
// A link dropped in the middle of an assembly leaks nothing (ASan).
#include <zmq.hpp>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "ps/shm.h"
#include "ps/wire.h"
#include "../common/check.h"

using kvstore::dist::kFlagShm;
using kvstore::dist::kFlagShmPart;
using kvstore::dist::Message;
using kvstore::dist::MsgType;
using kvstore::dist::OutPayload;
using kvstore::dist::Role;
using kvstore::dist::SharedBuf;
using kvstore::dist::ShmLink;
using kvstore::dist::ShmPart;
using kvstore::dist::ShmPeers;
using kvstore::dist::WireHeader;

namespace {

constexpr size_t kRing = 1 << 20;
constexpr size_t kChunk = kvstore::dist::kShmMinChunkBytes;  // 64 KiB: 16 parts fill a ring

std::vector<char> Pattern(size_t n, unsigned seed) {
  std::vector<char> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<char>((i * 131 + seed * 7 + (i >> 9)) & 0xff);
  return v;
}

WireHeader PushHeader(size_t n, int64_t key = 3) {
  WireHeader h = kvstore::dist::MakeHeader(MsgType::kPush, Role::kWorker, 0);
  h.key = key;
  h.dtype = KV_UINT8;
  h.total = h.count = static_cast<int64_t>(n);
  return h;
}

struct Pair {
  zmq::context_t ctx;
  zmq::socket_t tx{ctx, zmq::socket_type::pair}, rx{ctx, zmq::socket_type::pair};
  ShmPeers wp, sp;  // the worker's link (sends ring 0) and the server's (reads it)
  ShmLink* w = nullptr;
  ShmLink* s = nullptr;
  std::string why;

  Pair() {
    rx.bind("inproc://chunks");
    tx.connect("inproc://chunks");
    std::unique_ptr<ShmLink> wl = ShmLink::Create(kRing, &why, kChunk);
    REQUIRE(wl != nullptr, "%s", why.c_str());
    std::unique_ptr<ShmLink> sl = ShmLink::Accept(wl->offer(), &why);
    REQUIRE(sl != nullptr, "%s", why.c_str());
    wl->Answered(true);
    wl->set_chunk_bytes(kChunk);
    w = wl.get();
    s = sl.get();
    wp.Add("", 0, std::move(wl));
    sp.Add("", 0, std::move(sl));
  }
  // One RecvMessage after the next message arrived.
  bool Recv(Message* m, bool* ok) {
    zmq::pollitem_t it{static_cast<void*>(rx), 0, ZMQ_POLLIN, 0};
    zmq::poll(&it, 1, std::chrono::milliseconds(2000));
    why.clear();
    return kvstore::dist::RecvMessage(rx, false, m, ok, &why, &sp);
  }
  // A hand-made part message: `h` with both flags and the frame `d` (of `frame_bytes`).
  void SendPart(WireHeader h, const std::string& str, const ShmPart& d, size_t frame_bytes = sizeof(ShmPart),
                uint32_t flags = kFlagShm | kFlagShmPart) {
    h.flags |= flags;
    h.str_len = static_cast<uint32_t>(str.size());
    h.payload_len = static_cast<uint64_t>(h.count);
    h.num_frames = str.empty() ? 2 : 3;
    tx.send(zmq::const_buffer(&h, sizeof(h)), zmq::send_flags::sndmore);
    if (!str.empty()) tx.send(zmq::buffer(str), zmq::send_flags::sndmore);
    tx.send(zmq::const_buffer(&d, frame_bytes), zmq::send_flags::none);
  }
  // Expects the next message to be refused for `reason`.
  void ExpectRefused(const char* reason) {
    Message m;
    bool ok = true;
    CHECK(Recv(&m, &ok));
    CHECK_MSG(!ok && why.find(reason) != std::string::npos, "refusal '%s' expected, got '%s'", reason, why.c_str());
  }
  // Expects the next message to be a part taken in, with nothing to handle.
  void ExpectTaken() {
    Message m;
    bool ok = true;
    CHECK(Recv(&m, &ok));
    CHECK_MSG(!ok && why.empty(), "a part taken in expected, got ok %d '%s'", ok, why.c_str());
  }
};

void TestOffer() {
  std::string why;
  std::unique_ptr<ShmLink> w = ShmLink::Create(kRing, &why, kChunk);
  REQUIRE(w != nullptr, "%s", why.c_str());
  std::unique_ptr<ShmLink> s = ShmLink::Accept(w->offer(), &why);
  CHECK_MSG(s != nullptr && s->chunk_bytes() == kChunk, "accept: %s", why.c_str());
  CHECK(w->chunk_bytes() == 0);  // the worker's own: set apart (worker_io.cc)
  std::unique_ptr<ShmLink> none = ShmLink::Create(kRing, &why, 0);
  REQUIRE(none != nullptr, "%s", why.c_str());
  s = ShmLink::Accept(none->offer(), &why);
  CHECK(s != nullptr && s->chunk_bytes() == 0);
  const std::string offer = none->offer();
  const std::string base = offer.substr(0, offer.rfind(' ') + 1);
  for (const std::string& bad : {std::to_string(kChunk - 1), std::to_string(kRing + 4096), std::string("x"),
                                 std::to_string(kChunk) + " 1"}) {
    s = ShmLink::Accept(base + bad, &why);
    CHECK_MSG(s == nullptr && (why.find("chunk size out of range") != std::string::npos || why.find("malformed") != std::string::npos),
              "offer with chunk '%s': %s", bad.c_str(), s ? "accepted" : why.c_str());
  }
  s = ShmLink::Accept(base.substr(0, base.size() - 1), &why);  // the old five fields
  CHECK(s == nullptr && why == "malformed offer");
  // The build before chunks parsed offers thus, requiring exactly five fields: it refuses
  // this build's offer, and that connection stays on TCP (no part is ever sent to it).
  char boot[64], nonce[64], tail[2];
  int pid = 0, fd = 0;
  unsigned long long bytes = 0;
  CHECK(std::sscanf(offer.c_str(), "kvshm1 %63s %d %d %llu %63s %1s", boot, &pid, &fd, &bytes, nonce, tail) == 6);
}

void TestRoundTrips() {
  Pair p;
  void* last_buffer = nullptr;
  for (size_t n : {kChunk, 2 * kChunk - 1, 2 * kChunk, 2 * kChunk + 1, size_t{300001}, 5 * kChunk, 5 * kChunk,
                   kRing - 64, kRing}) {
    const std::vector<char> v = Pattern(n, static_cast<unsigned>(n));
    auto buf = std::make_shared<SharedBuf>();
    buf->msg.rebuild(v.data(), v.size());
    const WireHeader h = PushHeader(n);
    REQUIRE(kvstore::dist::SendMessage(p.tx, nullptr, h, "name", OutPayload{buf, 0, n}, &p.wp), "send");
    const size_t parts = n >= 2 * kChunk ? (n + kChunk - 1) / kChunk : 0;
    for (size_t i = 0; i + 1 < parts; ++i) p.ExpectTaken();
    Message m;
    bool ok = false;
    CHECK(p.Recv(&m, &ok) && ok);
    CHECK_MSG(m.payload.size() == n && std::memcmp(m.payload.data(), v.data(), n) == 0, "%zu bytes differ", n);
    CHECK((m.h.flags & (kFlagShm | kFlagShmPart)) == 0 && m.h.key == 3 && m.h.payload_len == n && m.str == "name");
    CHECK_MSG(m.payload_in_ring == (parts == 0), "%zu bytes: in the ring %d", n, m.payload_in_ring);
    if (parts > 0) CHECK(reinterpret_cast<uintptr_t>(m.payload.data()) % 64 == 0);
    // A payload of the size before reuses its buffer (it went back when its message went).
    if (n == 5 * kChunk && last_buffer != nullptr) CHECK(m.payload.data() == last_buffer);
    last_buffer = n == 5 * kChunk ? m.payload.data() : nullptr;
  }
  // Everything was read: a whole ring's payload fits again at once.
  uint64_t puts = 0, misses = 0;
  p.wp.Counts(&puts, &misses);
  CHECK(misses == 0);
  kvstore::dist::ShmDesc d;
  const std::vector<char> full(kRing, 1);
  CHECK(p.w->Put(full.data(), kRing, &d));
}

// Parts made by Reserve and PutPart, then sent (or not) by hand.
void TestRefused() {
  Pair p;
  const size_t n = 3 * kChunk;
  const std::vector<char> v = Pattern(n, 1);
  const WireHeader h = PushHeader(n);
  auto reserve = [&](ShmPart parts[3]) {
    ShmLink::Reservation r;
    REQUIRE(p.w->Reserve(n, &r), "reserve");
    for (size_t i = 0; i < 3; ++i) p.w->PutPart(r, v.data() + i * kChunk, i * kChunk, kChunk, &parts[i]);
  };
  ShmPart a[3];
  reserve(a);
  // A part without its beginning.
  p.SendPart(h, "", a[1]);
  p.ExpectRefused("without its beginning");
  // A gap: the third part right after the first; the dropped assembly refuses the rest.
  p.SendPart(h, "", a[0]);
  p.ExpectTaken();
  p.SendPart(h, "", a[2]);
  p.ExpectRefused("does not continue");
  p.SendPart(h, "", a[1]);
  p.ExpectRefused("without its beginning");
  // A second beginning.
  p.SendPart(h, "", a[0]);
  p.ExpectTaken();
  p.SendPart(h, "", a[0]);
  p.ExpectRefused("began before");
  // Another header, another string.
  p.SendPart(h, "", a[0]);
  p.ExpectTaken();
  p.SendPart(PushHeader(n, 4), "", a[1]);
  p.ExpectRefused("does not continue");
  p.SendPart(h, "k", a[0]);
  p.ExpectTaken();
  p.SendPart(h, "j", a[1]);
  p.ExpectRefused("does not continue");
  // Bytes beyond the payload, outside the ring; a frame of a whole descriptor's size; the
  // part flag alone.
  ShmPart beyond = a[2];
  beyond.len += 1;
  p.SendPart(h, "", a[0]);
  p.ExpectTaken();
  p.SendPart(h, "", a[1]);
  p.ExpectTaken();
  p.SendPart(h, "", beyond);
  p.ExpectRefused("outside the payload");
  ShmPart outside = a[0];
  outside.offset = kRing - 16;
  p.SendPart(h, "", outside);
  p.ExpectRefused("outside the ring");
  p.SendPart(h, "", a[0], sizeof(kvstore::dist::ShmDesc));
  p.ExpectRefused("descriptor frame of 24 bytes");
  p.SendPart(h, "", a[0], sizeof(ShmPart), kFlagShmPart);
  p.ExpectRefused("not in shared memory");
  // A payload larger than a ring (no sender makes one; nothing of its size is allocated).
  p.SendPart(PushHeader(kRing + 64), "", a[0]);
  p.ExpectRefused("larger than the ring");
  // After all that, the parts sent in order make the payload.
  for (int i = 0; i < 2; ++i) {
    p.SendPart(h, "", a[i]);
    p.ExpectTaken();
  }
  p.SendPart(h, "", a[2]);
  Message m;
  bool ok = false;
  CHECK(p.Recv(&m, &ok) && ok);
  CHECK(m.payload.size() == n && std::memcmp(m.payload.data(), v.data(), n) == 0);
  // A link dropped in the middle of an assembly (a dead worker's): nothing leaks.
  p.SendPart(h, "", a[0]);
  p.ExpectTaken();
  p.sp.Remove("");
}

}  // namespace

int main() {
  TestOffer();
  TestRoundTrips();
  TestRefused();
  return check_summary();
}
