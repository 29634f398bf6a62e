// test_ring_intake.cc - the server's intake of a co-located worker's request whose payload is
// in the worker's shared-memory ring (server.h CopyOutOfRingUnlessValues, shm.h "Data").
//
// The worker's ring is its own memory: nothing keeps it from rewriting a payload's bytes
// while the server reads them. Payloads whose contents are checked and then used again must
// therefore be the server's own copy before the first check: a row_sparse request's row ids
// are checked (TakesRows) and then used as offsets into the stored value, so ids rewritten
// in between could point outside it. Dense values are read once each and stay views of the
// ring (no copy); every other request gets its own copy as well.
//
// Each case sends a request through a real link pair and SendMessage / RecvMessage, as a
// co-located worker's request reaches the server (a view of the ring), takes it in, then
// rewrites the payload's bytes in the ring as a misbehaving sender could and looks at what
// the server's handlers would read. Single-threaded, in-process sockets: deterministic.
//
// Usage: test_ps_ring_intake <case> (the ctest cases unit_ps_ring_intake_<case>).
#include <zmq.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "ps/server.h"
#include "ps/shm.h"
#include "ps/wire.h"
#include "../common/check.h"

using kvstore::dist::Message;
using kvstore::dist::MsgType;
using kvstore::dist::OutPayload;
using kvstore::dist::Role;
using kvstore::dist::SharedBuf;
using kvstore::dist::ShmLink;
using kvstore::dist::ShmPeers;
using kvstore::dist::WireHeader;
using kvstore::dist::server::CopyOutOfRingUnlessValues;

namespace {

// A worker and a server connected as after the SHM_OFFER handshake: the worker's payloads of
// at least kShmMinBytes travel through its ring.
class LinkedPair {
 public:
  LinkedPair() {
    rx_.bind("inproc://ring-intake");
    tx_.connect("inproc://ring-intake");
    std::string why;
    std::unique_ptr<ShmLink> w = ShmLink::Create(kRing, &why);
    REQUIRE(w != nullptr, "worker segment: %s", why.c_str());
    std::unique_ptr<ShmLink> s = ShmLink::Accept(w->offer(), &why);
    REQUIRE(s != nullptr, "server accept: %s", why.c_str());
    w->Answered(true);
    worker_.Add("", 0, std::move(w));
    server_.Add("", 0, std::move(s));
  }

  // Sends `h` with `payload` (and `str`) from the worker; returns the message as the
  // server's loop receives it, its payload a view of the worker's ring.
  Message Arrive(WireHeader h, const std::vector<char>& payload, const std::string& str = "") {
    auto buf = std::make_shared<SharedBuf>();
    buf->msg.rebuild(payload.data(), payload.size());
    REQUIRE(kvstore::dist::SendMessage(tx_, nullptr, h, str, OutPayload{buf, 0, payload.size()}, &worker_),
            "send %s", kvstore::dist::MsgTypeName(h.type));
    zmq::pollitem_t it{static_cast<void*>(rx_), 0, ZMQ_POLLIN, 0};
    zmq::poll(&it, 1, std::chrono::milliseconds(5000));
    Message m;
    bool ok = false;
    std::string why;
    REQUIRE(kvstore::dist::RecvMessage(rx_, false, &m, &ok, &why, &server_) && ok,
            "receive %s: %s", kvstore::dist::MsgTypeName(h.type), why.c_str());
    REQUIRE(m.payload_in_ring && m.payload.size() == payload.size() &&
                std::memcmp(m.payload.data(), payload.data(), payload.size()) == 0,
            "%s: the payload did not arrive as a view of the ring", kvstore::dist::MsgTypeName(h.type));
    return m;
  }

 private:
  static constexpr size_t kRing = 1 << 20;
  zmq::context_t ctx_;
  zmq::socket_t tx_{ctx_, zmq::socket_type::pair}, rx_{ctx_, zmq::socket_type::pair};
  ShmPeers worker_, server_;
};

// What a request's intake leaves for the handlers once the sender rewrote the payload's
// bytes in its ring: whether the payload is still a view of the ring, and whether its bytes
// are still the ones sent.
struct AfterRewrite {
  bool in_ring;
  bool same_bytes;
};

AfterRewrite TakeInThenRewrite(Message* m, const std::vector<char>& sent) {
  // The bytes the view shows are the worker's ring (one shared mapping): the sender's writes.
  char* ring = static_cast<char*>(m->payload.data());
  CopyOutOfRingUnlessValues(m);
  // Every byte becomes 0x7f: row ids of 0x7f7f7f7f7f7f7f7f, far outside any value.
  std::memset(ring, 0x7f, sent.size());
  return {m->payload_in_ring && m->payload.data() == ring,
          m->payload.size() == sent.size() && std::memcmp(m->payload.data(), sent.data(), sent.size()) == 0};
}

WireHeader DataHeader(MsgType type, int dtype, int64_t count) {
  WireHeader h = kvstore::dist::MakeHeader(type, Role::kWorker, 0);
  h.flags = kvstore::dist::kFlagSync;
  h.key = 7;
  h.dtype = dtype;
  h.total = h.count = count;
  return h;
}

std::vector<char> Bytes(const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  return std::vector<char>(c, c + n);
}

// A row_sparse push: the ids it names and its rows stay the ones checked, whatever the
// sender writes into its ring afterwards. (Read in place, before ecda050, the ids became
// 0x7f7f7f7f7f7f7f7f here.)
void RowSparsePushIdsCopied() {
  LinkedPair link;
  constexpr int64_t kRowLen = 4, kRows = 64;  // 64 * 8 + 64 * 4 * 4 = 1536 bytes
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < kRows; ++i) ids.push_back(2 * i + 1);
  std::vector<float> rows(static_cast<size_t>(kRows * kRowLen), 0.5f);
  std::vector<char> payload = Bytes(ids.data(), ids.size() * sizeof(int64_t));
  const std::vector<char> values = Bytes(rows.data(), rows.size() * sizeof(float));
  payload.insert(payload.end(), values.begin(), values.end());
  WireHeader h = DataHeader(MsgType::kPush, KV_FLOAT32, 2 * kRows * kRowLen);
  h.flags |= kvstore::dist::kFlagRowSparse;
  h.arg = static_cast<int32_t>(kRowLen);
  Message m = link.Arrive(h, payload);
  const AfterRewrite a = TakeInThenRewrite(&m, payload);
  CHECK_MSG(!a.in_ring, "a row_sparse push is still read in the sender's ring");
  CHECK_MSG(a.same_bytes, "a row_sparse push's ids and rows changed after they were taken in");
}

// A row_sparse pull: the ids it asks for stay the ones checked.
void RowSparsePullIdsCopied() {
  LinkedPair link;
  constexpr int64_t kRows = 200;  // 1600 bytes of ids
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < kRows; ++i) ids.push_back(5 * i);
  const std::vector<char> payload = Bytes(ids.data(), ids.size() * sizeof(int64_t));
  WireHeader h = DataHeader(MsgType::kPull, KV_FLOAT32, 5 * kRows);
  h.flags |= kvstore::dist::kFlagRowSparse;
  h.arg = 1;
  Message m = link.Arrive(h, payload);
  const AfterRewrite a = TakeInThenRewrite(&m, payload);
  CHECK_MSG(!a.in_ring, "a row_sparse pull is still read in the sender's ring");
  CHECK_MSG(a.same_bytes, "a row_sparse pull's ids changed after they were taken in");
}

// Requests other than data get their own copy: a states file to load (parsed, checked and
// kept), and any payload a command, an optimizer spec or an offer may carry.
void ControlPayloadsCopied() {
  LinkedPair link;
  const MsgType types[] = {MsgType::kLoadStates, MsgType::kCommand, MsgType::kSetOptimizer,
                           MsgType::kShmOffer};
  std::vector<char> payload(4096);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>(i * 37 + 11);
  for (MsgType type : types) {
    WireHeader h = kvstore::dist::MakeHeader(type, Role::kWorker, 0);
    h.arg = type == MsgType::kLoadStates ? 1 : 0;
    Message m = link.Arrive(h, payload, "body");
    const AfterRewrite a = TakeInThenRewrite(&m, payload);
    CHECK_MSG(!a.in_ring && a.same_bytes, "%s: the payload is still read in the sender's ring",
              kvstore::dist::MsgTypeName(static_cast<uint16_t>(type)));
  }
}

// Dense values are read where they are (no copy): init, push, pushpull, a compressed push,
// a float32 sum of a float16 key. A sender rewriting its ring changes only the values.
void DenseValuesReadInPlace() {
  LinkedPair link;
  struct Case {
    const char* what;
    WireHeader h;
    size_t bytes;
  };
  WireHeader packed = DataHeader(MsgType::kPush, KV_FLOAT32, 16 * 300);  // 300 words
  packed.flags |= kvstore::dist::kFlagTwoBit;
  const float threshold = 0.5f;
  std::memcpy(&packed.arg, &threshold, sizeof(threshold));
  WireHeader f32_sum = DataHeader(MsgType::kPush, KV_FLOAT16, 512);
  f32_sum.flags |= kvstore::dist::kFlagFloat32Sum;
  const Case cases[] = {
      {"init", DataHeader(MsgType::kInit, KV_FLOAT32, 1024), 4096},
      {"push", DataHeader(MsgType::kPush, KV_FLOAT32, 1024), 4096},
      {"pushpull", DataHeader(MsgType::kPushPull, KV_FLOAT16, 1024), 2048},
      {"2bit push", packed, 1200},
      {"float32 sum push", f32_sum, 2048},
  };
  for (const Case& c : cases) {
    std::vector<char> payload(c.bytes);
    for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>(i * 13 + 5);
    Message m = link.Arrive(c.h, payload);
    const AfterRewrite a = TakeInThenRewrite(&m, payload);
    CHECK_MSG(a.in_ring && !a.same_bytes, "%s: dense values were copied out of the ring", c.what);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const struct {
    const char* name;
    void (*run)();
  } cases[] = {
      {"row_sparse_push_ids_copied", RowSparsePushIdsCopied},
      {"row_sparse_pull_ids_copied", RowSparsePullIdsCopied},
      {"control_payloads_copied", ControlPayloadsCopied},
      {"dense_values_read_in_place", DenseValuesReadInPlace},
  };
  for (const auto& c : cases) {
    if (argc == 2 && std::strcmp(argv[1], c.name) == 0) {
      c.run();
      return check_summary();
    }
  }
  std::fprintf(stderr, "usage: %s <case>; cases:", argv[0]);
  for (const auto& c : cases) std::fprintf(stderr, " %s", c.name);
  std::fprintf(stderr, "\n");
  return 2;
}
