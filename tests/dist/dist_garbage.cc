// dist_garbage.cc - a server must survive malformed traffic.
//
// Run by kvstore-launch with one server listening on a known port (PORT=...). Worker 0
// connects its own ZeroMQ DEALER and a raw TCP socket to that server and sends garbage:
// random frames, a header with the wrong magic or version, frame counts and lengths that
// disagree with the header, element ranges outside the value, absurd counts, an unknown
// sender rank, a truncated header. Then every worker runs normal sync rounds and checks the
// values: the server answered them, so it survived and kept its state.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <zmq.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ps/wire.h"  // the documented wire header layout
#include "../common/check.h"
#include "kvstore/kvstore.h"

using kvstore::dist::MsgType;
using kvstore::dist::Role;
using kvstore::dist::WireHeader;

namespace {

// The header as the wire format documents it (built here: the library exports nothing
// but the C ABI).
WireHeader TestHeader(MsgType type, Role role, int rank) {
  WireHeader h;
  std::memset(&h, 0, sizeof(h));
  h.magic = kvstore::dist::kWireMagic;
  h.version = kvstore::dist::kWireVersion;
  h.type = static_cast<uint16_t>(type);
  h.sender_role = static_cast<int32_t>(role);
  h.sender_rank = rank;
  return h;
}

void SendFrames(zmq::socket_t& s, const std::vector<std::string>& frames) {
  for (size_t i = 0; i < frames.size(); ++i) {
    s.send(zmq::buffer(frames[i]), i + 1 < frames.size() ? zmq::send_flags::sndmore
                                                         : zmq::send_flags::none);
  }
}

std::string Bytes(const WireHeader& h) { return std::string(reinterpret_cast<const char*>(&h), sizeof(h)); }

void SendGarbage(const std::string& endpoint, int num_workers) {
  zmq::context_t ctx(1);
  zmq::socket_t s(ctx, zmq::socket_type::dealer);
  s.set(zmq::sockopt::linger, 1000);
  s.connect(endpoint);
  std::mt19937_64 rng(12345);
  auto random_bytes = [&](size_t n) {
    std::string b(n, '\0');
    for (auto& c : b) c = static_cast<char>(rng());
    return b;
  };
  // 1. Random frames of random sizes, including 88-byte ones.
  for (int i = 0; i < 200; ++i) {
    std::vector<std::string> frames;
    const int nf = 1 + static_cast<int>(rng() % 5);
    for (int f = 0; f < nf; ++f) {
      frames.push_back(random_bytes(rng() % 3 == 0 ? sizeof(WireHeader) : rng() % 300));
    }
    SendFrames(s, frames);
  }
  // 2. Structured lies: a valid-looking push with each field broken in turn.
  auto base = [&] {
    WireHeader h = TestHeader(MsgType::kPush, Role::kWorker, 0);
    h.key = 3;
    h.dtype = KV_FLOAT32;
    h.total = 10;
    h.count = 10;
    h.offset = 0;
    h.flags = 2;  // sync
    h.payload_len = 40;
    h.num_frames = 2;
    return h;
  };
  const std::string payload(40, '\x01');
  std::vector<std::pair<WireHeader, std::vector<std::string>>> cases;
  { WireHeader h = base(); h.magic ^= 1; cases.push_back({h, {payload}}); }
  { WireHeader h = base(); h.version = 99; cases.push_back({h, {payload}}); }
  { WireHeader h = base(); h.type = 999; cases.push_back({h, {payload}}); }
  { WireHeader h = base(); h.payload_len = 1ull << 40; cases.push_back({h, {payload}}); }
  { WireHeader h = base(); h.count = 1ll << 62; h.total = 1ll << 62; h.payload_len = 40; cases.push_back({h, {payload}}); }
  { WireHeader h = base(); h.offset = 5; cases.push_back({h, {payload}}); }  // beyond total
  { WireHeader h = base(); h.offset = -1; cases.push_back({h, {payload}}); }
  { WireHeader h = base(); h.dtype = 77; cases.push_back({h, {payload}}); }
  { WireHeader h = base(); h.num_frames = 7; cases.push_back({h, {payload}}); }
  { WireHeader h = base(); cases.push_back({h, {}}); }                     // payload missing
  { WireHeader h = base(); cases.push_back({h, {payload, payload}}); }     // extra frame
  { WireHeader h = base(); h.str_len = 0xffffffffu; cases.push_back({h, {payload}}); }
  { WireHeader h = base(); h.sender_rank = num_workers + 5; cases.push_back({h, {payload}}); }
  { WireHeader h = base(); h.sender_role = 7; cases.push_back({h, {payload}}); }
  { WireHeader h = base(); h.flags = 0x80; cases.push_back({h, {payload}}); }
  { WireHeader h = base(); h.key = -5; cases.push_back({h, {payload}}); }  // unknown key
  { WireHeader h = base(); h.flags |= 1; cases.push_back({h, {payload}}); }  // str key w/o name
  {  // a pull that carries a payload
    WireHeader h = base();
    h.type = static_cast<uint16_t>(MsgType::kPull);
    cases.push_back({h, {payload}});
  }
  {  // a reply sent to a server
    WireHeader h = base();
    h.type = static_cast<uint16_t>(MsgType::kReply);
    cases.push_back({h, {payload}});
  }
  {  // a well-formed push from a rank that is not this connection's worker, for a key that
     // does not exist: answered with an error, not applied
    WireHeader h = base();
    h.key = 987654;
    cases.push_back({h, {payload}});
  }
  for (auto& c : cases) {
    std::vector<std::string> frames{Bytes(c.first)};
    frames.insert(frames.end(), c.second.begin(), c.second.end());
    SendFrames(s, frames);
  }
  // 3. A truncated header.
  SendFrames(s, {Bytes(base()).substr(0, 50), payload});
  zmq::message_t reply;
  // Drain whatever the server answered (errors for the well-formed ones).
  s.set(zmq::sockopt::rcvtimeo, 500);
  int replies = 0;
  while (s.recv(reply)) ++replies;
  std::printf("garbage sent; %d reply frames received\n", replies);
}

void SendRawTcp(const std::string& host, int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0, "socket");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, host.c_str(), &a.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) {
    std::mt19937 rng(7);
    char buf[4096];
    for (auto& c : buf) c = static_cast<char>(rng());
    for (int i = 0; i < 16; ++i) {
      if (send(fd, buf, sizeof(buf), MSG_NOSIGNAL) < 0) break;  // the server may hang up
    }
  }
  close(fd);
}

}  // namespace

int main() {
  KVStoreHandle kv = nullptr;
  if (!KVIsWorkerNode()) {
    REQUIRE_OK(KVStoreCreate("dist_sync", &kv));
    const int rc = KVStoreRunServer(kv, nullptr, nullptr);
    if (rc != 0) std::fprintf(stderr, "RunServer: %s\n", KVGetLastError());
    KVStoreFree(kv);
    return rc == 0 ? 0 : 1;
  }
  REQUIRE_OK(KVStoreCreate("dist_sync", &kv));
  int rank = 0, n = 0;
  REQUIRE_OK(KVStoreGetRank(kv, &rank));
  REQUIRE_OK(KVStoreGetGroupSize(kv, &n));
  const char* port = std::getenv("TEST_SERVER_PORT");
  REQUIRE(port != nullptr, "TEST_SERVER_PORT is not set");
  const int key = 3;
  int64_t len = 10;
  KVArrayHandle v = nullptr, o = nullptr;
  REQUIRE_OK(KVArrayCreate(&len, 1, KV_FLOAT32, KV_CPU, 0, &v));
  REQUIRE_OK(KVArrayCreate(&len, 1, KV_FLOAT32, KV_CPU, 0, &o));
  REQUIRE_OK(KVStoreInit(kv, 1, &key, &v));
  if (rank == 0) {
    SendRawTcp("127.0.0.1", std::atoi(port));
    SendGarbage(std::string("tcp://127.0.0.1:") + port, n);
    SendRawTcp("127.0.0.1", std::atoi(port));
  }
  REQUIRE_OK(KVStoreBarrier(kv));
  for (int r = 0; r < 3; ++r) {
    REQUIRE_OK(KVArrayFill(v, rank + 1.0));
    REQUIRE_OK(KVStorePush(kv, 1, &key, &v, 0));
    REQUIRE_OK(KVStorePull(kv, 1, &key, &o, 0));
    float got[10];
    REQUIRE_OK(KVArrayCopyToHost(o, got, sizeof(got)));
    for (float g : got) REQUIRE(g == n * (n + 1) / 2.0f, "round %d: %g", r, g);
  }
  KVArrayFree(v);
  KVArrayFree(o);
  REQUIRE_OK(KVStoreFree(kv));
  std::printf("PASS garbage rank %d\n", rank);
  return 0;
}
