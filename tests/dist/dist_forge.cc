// dist_forge.cc - a peer without the job secret can neither act on a job nor read from it;
// every socket bounds the frames it accepts; dropped messages are logged at a bounded rate.
// Driven by run_security_test.py (which says what each case checks and how the job is
// started).
//
//   dist_forge register HOST PORT SECONDS
//       an outsider (no credentials) sends REGISTER as a server to the scheduler at
//       HOST:PORT and waits SECONDS for an answer; exit 1 if it got the node table (it would
//       have become that server), 0 if nothing came back
//   dist_forge forge        (every role; the job has a secret; one server on TEST_SERVER_PORT)
//       servers install a controller that fails the server if a forged command (head 666)
//       ever runs. Worker 0 forges, as an outsider, from three kinds of socket: plain (no
//       CURVE), CURVE with a foreign key pair (another job's secret), and CURVE with the job's
//       listening key but a foreign member key (the ZAP handler's case): INIT of a new key,
//       PUSH claiming every worker rank (a whole sync round), SET_OPTIMIZER, COMMAND, PULL.
//       Then it checks that nothing answered, that the stored value is unchanged, that the
//       forged key does not exist, and every worker runs exact sync rounds.
//   dist_forge bounds       (every role; open job; one server on TEST_SERVER_PORT;
//                            KVSTORE_MAX_MESSAGE_BYTES set to TEST_MAX_BYTES)
//       worker 0 declares frames larger than the bound to the scheduler and to the server over
//       raw ZMTP and requires each to close the connection; a frame within the bound keeps it
//       open. A key whose part exceeds the bound fails at init naming the variable. Then a
//       flood of malformed messages to the scheduler and the server (the driver counts the
//       log lines), and exact sync rounds.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <zmq.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ps/wire.h"  // the documented wire header layout
#include "ps/security.h"  // the job's key derivation (the ZAP case needs the listening key)
#include "../common/check.h"
#include "kvstore/kvstore.h"

using kvstore::dist::MsgType;
using kvstore::dist::Role;
using kvstore::dist::WireHeader;

namespace {

constexpr int kForgedCommand = 666;
constexpr int kKey = 3;
constexpr int kForgedKey = 77;
constexpr int64_t kLen = 10;

WireHeader Header(MsgType type, int rank) {
  WireHeader h;
  std::memset(&h, 0, sizeof(h));
  h.magic = kvstore::dist::kWireMagic;
  h.version = kvstore::dist::kWireVersion;
  h.type = static_cast<uint16_t>(type);
  h.sender_role = static_cast<int32_t>(rank < 0 ? Role::kServer : Role::kWorker);
  h.sender_rank = rank;
  h.key = -1;
  h.dtype = -1;
  h.num_frames = 1;
  return h;
}

// Sends [header][str][payload] with the header's lengths and frame count filled in.
void Send(zmq::socket_t& s, WireHeader h, const std::string& str, const std::string& payload) {
  h.str_len = static_cast<uint32_t>(str.size());
  h.payload_len = payload.size();
  h.num_frames = 1 + (str.empty() ? 0 : 1) + (payload.empty() ? 0 : 1);
  const bool more = h.num_frames > 1;
  s.send(zmq::const_buffer(&h, sizeof(h)), more ? zmq::send_flags::sndmore : zmq::send_flags::none);
  if (!str.empty()) s.send(zmq::buffer(str), payload.empty() ? zmq::send_flags::none : zmq::send_flags::sndmore);
  if (!payload.empty()) s.send(zmq::buffer(payload), zmq::send_flags::none);
}

// Frames that arrive on `s` within `ms` milliseconds (or, with `first`, until one arrives).
int CountReplies(zmq::socket_t& s, int ms, bool first = false) {
  int frames = 0;
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
    if (left.count() <= 0) return frames;
    zmq::pollitem_t item{static_cast<void*>(s), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, left);
    zmq::message_t m;
    while (s.recv(m, zmq::recv_flags::dontwait)) ++frames;
    if (first && frames > 0) return frames;
  }
}

int Register(const char* host, const char* port, double seconds) {
  zmq::context_t ctx(1);
  zmq::socket_t s(ctx, zmq::socket_type::dealer);
  s.set(zmq::sockopt::linger, 0);
  s.set(zmq::sockopt::routing_id, "forger");
  s.connect(std::string("tcp://") + host + ":" + port);
  WireHeader h = Header(MsgType::kRegister, -1);
  h.arg = 0;  // requests rank 0
  Send(s, h, "127.0.0.1:1", "");
  const int frames = CountReplies(s, static_cast<int>(seconds * 1000));
  if (frames > 0) {
    std::printf("FORGED REGISTER ANSWERED: %d frames from the scheduler\n", frames);
    return 1;
  }
  std::printf("forged REGISTER: no answer in %.1f s\n", seconds);
  return 0;
}

int ForgeController(int head, const char* body, void*) {
  if (head == kForgedCommand) {
    std::printf("FORGED COMMAND RAN: %s\n", body);
    std::fflush(stdout);
    std::_Exit(3);  // the server fails the job: a command from outside the job was executed
  }
  return 0;
}

int RunServer(bool forge) {
  KVStoreHandle kv = nullptr;
  REQUIRE_OK(KVStoreCreate("dist_sync", &kv));
  const int rc = KVStoreRunServer(kv, forge ? ForgeController : nullptr, nullptr);
  if (rc != 0) std::fprintf(stderr, "RunServer: %s\n", KVGetLastError());
  KVStoreFree(kv);
  return rc == 0 ? 0 : 1;
}

// One forging socket: plain, or CURVE with the given keys (binary, 32 bytes).
struct Forger {
  const char* what;
  bool curve;
  uint8_t server_key[32], public_key[32], secret_key[32];
};

void Z85Pair(uint8_t* pub, uint8_t* sec) {
  char zp[41], zs[41];
  REQUIRE(zmq_curve_keypair(zp, zs) == 0, "zmq_curve_keypair");
  REQUIRE(zmq_z85_decode(pub, zp) != nullptr && zmq_z85_decode(sec, zs) != nullptr, "z85");
}

// Forges every message kind from one socket; returns the reply frames it received.
int Forge(const Forger& f, const std::string& endpoint, int num_workers) {
  zmq::context_t ctx(1);
  zmq::socket_t s(ctx, zmq::socket_type::dealer);
  s.set(zmq::sockopt::linger, 0);
  if (f.curve) {
    s.set(zmq::sockopt::curve_serverkey, zmq::const_buffer(f.server_key, 32));
    s.set(zmq::sockopt::curve_publickey, zmq::const_buffer(f.public_key, 32));
    s.set(zmq::sockopt::curve_secretkey, zmq::const_buffer(f.secret_key, 32));
  }
  s.connect(endpoint);
  const std::string big(kLen * 4, '\0');
  std::vector<float> thousand(kLen, 1000.0f);
  const std::string forged_values(reinterpret_cast<const char*>(thousand.data()), kLen * 4);
  auto data = [&](MsgType t, int rank, int key) {
    WireHeader h = Header(t, rank);
    h.key = key;
    h.dtype = KV_FLOAT32;
    h.total = kLen;
    h.count = kLen;
    h.flags = 2;  // sync
    return h;
  };
  Send(s, data(MsgType::kInit, 0, kForgedKey), "", forged_values);
  for (int r = 0; r < num_workers; ++r) Send(s, data(MsgType::kPush, r, kKey), "", forged_values);
  Send(s, Header(MsgType::kSetOptimizer, 0), "sgd learning_rate=1000", "");
  {
    WireHeader h = Header(MsgType::kCommand, 0);
    h.arg = kForgedCommand;
    Send(s, h, "forged", "");
  }
  Send(s, data(MsgType::kPull, 0, kKey), "", "");
  const int frames = CountReplies(s, 1500);
  std::printf("forger (%s): %d reply frames\n", f.what, frames);
  return frames;
}

// Raw ZMTP 3.0 (NULL mechanism, as a DEALER) to host:port, then one message frame that
// declares `declared` bytes, followed by `send` bytes of it. Returns true when the peer
// closed the connection within `wait_ms` of the last byte.
bool PeerClosesOnFrame(int port, uint64_t declared, size_t send, int wait_ms) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0, "socket");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0, "connect to port %d", port);
  std::string out;
  // Greeting: signature, version 3.0, mechanism "NULL" (20 bytes), as-server 0, filler.
  out += '\xff';
  out.append(8, '\0');
  out += '\x7f';
  out += '\x03';
  out += '\x00';
  std::string mech = "NULL";
  mech.resize(20, '\0');
  out += mech;
  out += '\x00';
  out.append(31, '\0');
  // READY command with Socket-Type=DEALER.
  std::string body = "\x05READY";
  body += static_cast<char>(11);
  body += "Socket-Type";
  body += std::string("\x00\x00\x00\x06", 4);
  body += "DEALER";
  out += '\x04';
  out += static_cast<char>(body.size());
  out += body;
  // A message frame with a 64-bit size.
  out += '\x02';
  for (int i = 7; i >= 0; --i) out += static_cast<char>((declared >> (8 * i)) & 0xff);
  bool closed = false;
  auto pump = [&](const char* p, size_t n) {
    while (n > 0 && !closed) {
      const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
      if (w <= 0) {
        closed = true;
        break;
      }
      p += w;
      n -= static_cast<size_t>(w);
    }
  };
  pump(out.data(), out.size());
  const std::string chunk(64 << 10, 'x');
  for (size_t sent = 0; sent < send && !closed; sent += chunk.size()) {
    pump(chunk.data(), std::min(chunk.size(), send - sent));
  }
  // Read what the peer sent (its greeting and READY) until it closes or the wait ends.
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  char buf[4096];
  while (!closed) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    const ssize_t r = recv(fd, buf, sizeof(buf), 0);
    if (r <= 0) closed = true;
  }
  close(fd);
  return closed;
}

// A flood of malformed messages (a bad magic) from an open DEALER, then `probe`, a message
// the node answers: a node handles one connection's messages in order, so once the answer is
// here every message of the flood has been handled (and counted) by the node.
void Flood(const std::string& endpoint, int count, WireHeader probe) {
  zmq::context_t ctx(1);
  zmq::socket_t s(ctx, zmq::socket_type::dealer);
  s.set(zmq::sockopt::linger, 0);
  s.connect(endpoint);
  WireHeader h = Header(MsgType::kHeartbeat, 0);
  h.magic ^= 1;
  for (int i = 0; i < count; ++i) s.send(zmq::const_buffer(&h, sizeof(h)), zmq::send_flags::none);
  Send(s, probe, probe.type == static_cast<uint16_t>(MsgType::kRegister) ? "127.0.0.1" : "", "");
  REQUIRE(CountReplies(s, 20000, true) > 0, "no answer from %s after the flood", endpoint.c_str());
}

std::vector<float> PullKey(KVStoreHandle kv, KVArrayHandle out) {
  REQUIRE_OK(KVStorePull(kv, 1, &kKey, &out, 0));
  std::vector<float> got(kLen);
  REQUIRE_OK(KVArrayCopyToHost(out, got.data(), got.size() * sizeof(float)));
  return got;
}

}  // namespace

int main(int argc, char** argv) {
  REQUIRE(argc >= 2, "usage: dist_forge register|forge|bounds ...");
  const std::string mode = argv[1];
  if (mode == "register") {
    REQUIRE(argc == 5, "usage: dist_forge register HOST PORT SECONDS");
    return Register(argv[2], argv[3], std::atof(argv[4]));
  }
  REQUIRE(mode == "forge" || mode == "bounds", "unknown mode %s", mode.c_str());
  if (!KVIsWorkerNode()) return RunServer(mode == "forge");
  KVStoreHandle kv = nullptr;
  REQUIRE_OK(KVStoreCreate("dist_sync", &kv));
  int rank = 0, n = 0;
  REQUIRE_OK(KVStoreGetRank(kv, &rank));
  REQUIRE_OK(KVStoreGetGroupSize(kv, &n));
  const char* port = std::getenv("TEST_SERVER_PORT");
  REQUIRE(port != nullptr, "TEST_SERVER_PORT is not set");
  const std::string server_ep = std::string("tcp://127.0.0.1:") + port;
  const std::string sched_ep = std::string("tcp://") + std::getenv("DMLC_PS_ROOT_URI") + ":" +
                               std::getenv("DMLC_PS_ROOT_PORT");
  int64_t len = kLen;
  KVArrayHandle v = nullptr, o = nullptr;
  REQUIRE_OK(KVArrayCreate(&len, 1, KV_FLOAT32, KV_CPU, 0, &v));
  REQUIRE_OK(KVArrayCreate(&len, 1, KV_FLOAT32, KV_CPU, 0, &o));
  std::vector<float> init(kLen);
  for (int i = 0; i < kLen; ++i) init[static_cast<size_t>(i)] = static_cast<float>(i);
  REQUIRE_OK(KVArrayCopyFromHost(v, init.data(), init.size() * sizeof(float)));
  REQUIRE_OK(KVStoreInit(kv, 1, &kKey, &v));

  if (mode == "forge" && rank == 0) {
    std::vector<Forger> forgers;
    forgers.push_back({"no credentials", false, {}, {}, {}});
    Forger other{"another job's keys", true, {}, {}, {}};
    uint8_t unused[32];
    Z85Pair(other.server_key, unused);
    Z85Pair(other.public_key, other.secret_key);
    forgers.push_back(other);
    // Knows the job's listening key (it is public in CurveZMQ's model) but not the secret:
    // the handshake completes and the ZAP handler must refuse the member key.
    const char* secret = std::getenv("KVSTORE_JOB_SECRET");
    REQUIRE(secret != nullptr && *secret != '\0', "the forge case needs a job secret");
    kvstore::dist::JobKeys keys;
    kvstore::dist::DeriveJobKeys(secret, &keys);
    Forger zap{"the job's listening key, a foreign member key", true, {}, {}, {}};
    std::memcpy(zap.server_key, keys.listen_public, 32);
    Z85Pair(zap.public_key, zap.secret_key);
    forgers.push_back(zap);
    for (const Forger& f : forgers) {
      REQUIRE(Forge(f, server_ep, n) == 0, "a forger (%s) read an answer from the server", f.what);
      std::vector<float> got = PullKey(kv, o);
      for (int i = 0; i < kLen; ++i) {
        REQUIRE(got[static_cast<size_t>(i)] == init[static_cast<size_t>(i)],
              "after the forger (%s) element %d is %g, want %g (a forged push was applied)",
              f.what, i, got[static_cast<size_t>(i)], init[static_cast<size_t>(i)]);
      }
    }
    // The forged INIT created nothing: the job's own init of that key succeeds.
    REQUIRE_OK(KVStoreInit(kv, 1, &kForgedKey, &v));
  } else if (mode == "forge") {
    REQUIRE_OK(KVStoreInit(kv, 1, &kForgedKey, &v));
  }

  if (mode == "bounds" && rank == 0) {
    const int64_t bound = std::atoll(std::getenv("TEST_MAX_BYTES"));
    const int sched_port = std::atoi(std::getenv("DMLC_PS_ROOT_PORT"));
    const int server_port = std::atoi(port);
    // The scheduler accepts no frame above 1 MiB, the server none above the bound: a
    // declared 1 GiB frame is refused at its size, before the bytes arrive.
    REQUIRE(PeerClosesOnFrame(sched_port, 1ull << 30, 256 << 10, 3000),
          "the scheduler kept a connection that declared a 1 GiB frame");
    REQUIRE(PeerClosesOnFrame(server_port, 1ull << 30, 256 << 10, 3000),
          "the server kept a connection that declared a 1 GiB frame");
    REQUIRE(PeerClosesOnFrame(server_port, static_cast<uint64_t>(bound) + 4096, 256 << 10, 3000),
          "the server kept a connection that declared a frame above KVSTORE_MAX_MESSAGE_BYTES");
    REQUIRE(!PeerClosesOnFrame(server_port, static_cast<uint64_t>(bound) / 2,
                             static_cast<size_t>(bound) / 2, 1000),
          "the server closed a connection whose frame is within KVSTORE_MAX_MESSAGE_BYTES");
    // A key whose part exceeds the bound fails at init, and nothing of it is stored.
    const int big_key = 5;
    int64_t big_len = bound / 4 + 16;
    KVArrayHandle big = nullptr;
    REQUIRE_OK(KVArrayCreate(&big_len, 1, KV_FLOAT32, KV_CPU, 0, &big));
    const int rc = KVStoreInit(kv, 1, &big_key, &big);
    REQUIRE(rc == KV_ERR_INVALID_ARGUMENT && std::strstr(KVGetLastError(), "KVSTORE_MAX_MESSAGE_BYTES"),
          "init of a key above the bound: %s: %s", KVErrorName(rc), KVGetLastError());
    KVArrayFree(big);
    REQUIRE_OK(KVStoreInit(kv, 1, &big_key, &v));  // the key was not taken
    // The scheduler answers a REGISTER after the rendezvous with ABORT; the server answers
    // a pull (the job is open, so the flood's socket may speak as worker 0).
    Flood(sched_ep, 3000, Header(MsgType::kRegister, 0));
    WireHeader pull = Header(MsgType::kPull, 0);
    pull.key = kKey;
    pull.dtype = KV_FLOAT32;
    pull.total = kLen;
    pull.count = kLen;
    pull.flags = 2;  // sync
    Flood(server_ep, 3000, pull);
  } else if (mode == "bounds") {
    const int big_key = 5;
    REQUIRE_OK(KVStoreInit(kv, 1, &big_key, &v));
  }

  REQUIRE_OK(KVStoreBarrier(kv));
  for (int r = 0; r < 3; ++r) {
    REQUIRE_OK(KVArrayFill(v, rank + 1.0));
    REQUIRE_OK(KVStorePush(kv, 1, &kKey, &v, 0));
    std::vector<float> got = PullKey(kv, o);
    for (float g : got) REQUIRE(g == n * (n + 1) / 2.0f, "round %d: %g, want %g", r, g, n * (n + 1) / 2.0);
  }
  KVArrayFree(v);
  KVArrayFree(o);
  REQUIRE_OK(KVStoreFree(kv));
  std::printf("PASS %s rank %d\n", mode.c_str(), rank);
  return 0;
}
