// fuzz_wire.cc - bounded random-frame driver of the wire decoder target (wire_target.h),
// for any compiler: the test suite runs it where libFuzzer is not available.
//
// Each message is generated from (seed, index) alone. Most start from a well-formed message
// of a random type (a header whose lengths agree with its frames, a key name, node table or
// optimizer spec in the string frame, a payload of count * dtype-size bytes) and then get
// a few mutations: a header field set to a boundary value or random bits, a frame cut,
// grown, dropped, duplicated or added, bytes of the string flipped. The rest are random
// frames. Three in ten arrive on a shared-memory connection (wire_target.h mode bit 1), where
// most messages with a payload carry it as a descriptor (kFlagShm): exact, or with its
// offset, length or ring position moved (by one, past the ring, to a boundary value), in a
// frame of the wrong size, on a message without a payload, or from a sender the receiver
// has no segment for; their payloads are larger (up to 16 KiB: rings of 64 KiB wrap). A property violation aborts; the driver then names the message, and
// `fuzz_wire --seed S --only I --dump FILE` writes its input for a debugger or libFuzzer.
//
// --server-flood TYPE: the same messages go to a live parameter server instead, from the
// worker of a 1 x 1 open job (run_dist_test.py garbage: TEST_SERVER_PORT names the server's
// port). Most claim to come from worker 0 and name the job's keys, so they reach the
// server's request handlers (element ranges against the stored parts, dtypes, optimizer
// specs, commands) rather than only its header check. A forged request may legitimately
// change a value, so the test is that the server survives every message (sanitizers watch
// it) and then still serves the worker's own init, push, pull and wait.
#include <kvstore/kvstore.h>

#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <string>
#include <unistd.h>
#include <vector>

#include <zmq.hpp>

#include "../common/check.h"
#include "core/dtype.h"
#include "ps/wire.h"
#include "rng.h"
#include "wire_target.h"

using kvstore::dist::MsgType;
using kvstore::dist::WireHeader;

extern "C" void __sanitizer_set_death_callback(void (*)(void)) __attribute__((weak));

namespace {

using kvstore_fuzz::Mix;
using kvstore_fuzz::Rng;

bool g_flood = false;  // bias messages towards a server's handlers (see --server-flood)

int64_t Boundary(Rng& r) {
  static const int64_t v[] = {0, 1, -1, 2, 7, 8, 64, 255, 256, 1000, 65535, 65536, INT32_MAX, INT32_MIN,
                              static_cast<int64_t>(UINT32_MAX), INT64_MAX, INT64_MIN, INT64_MAX / 2,
                              INT64_MAX / 8 + 1, (INT64_C(1) << 62) + 1};
  return r.Chance(80) ? v[r.Int(0, static_cast<int>(sizeof(v) / sizeof(v[0])) - 1)]
                      : static_cast<int64_t>(r.Next());
}

std::string RandomBytes(Rng& r, size_t n) {
  std::string b(n, '\0');
  for (char& c : b) c = static_cast<char>(r.Next());
  return b;
}

std::string NodeTable(Rng& r) {
  std::string t = std::to_string(r.Int(1, 4)) + " ";
  const int s = r.Int(1, 3);
  t += std::to_string(s) + "\n";
  for (int i = 0; i < s; ++i) {
    std::string ports;
    for (int p = r.Int(1, 3); p > 0; --p) ports += (ports.empty() ? "" : ",") + std::to_string(r.Int(1, 65535));
    t += "server " + std::to_string(r.Chance(90) ? i : r.Int(-1, s)) + " 127.0.0." + std::to_string(r.Int(1, 9)) + " " + ports + "\n";
  }
  return t;
}

std::string Spec(Rng& r) {
  static const char* specs[] = {"sgd", "sgd(learning_rate=0.1,momentum=0.9)", "adam( beta1 = 0.5 )", "test(rescale_grad=2)",
                                "nag(lr=1e-3,wd=+0.5)", "rmsprop(gamma1=0.9,clip_weights=1)", "adagrad()"};
  return specs[r.Int(0, 6)];
}

// Flips, inserts or deletes a few bytes of text.
void Mangle(Rng& r, std::string* s) {
  for (int k = r.Int(1, 3); k > 0; --k) {
    const size_t at = s->empty() ? 0 : static_cast<size_t>(r.Int(0, static_cast<int>(s->size()) - 1));
    switch (r.Int(0, 2)) {
      case 0: if (!s->empty()) (*s)[at] = static_cast<char>(r.Next()); break;
      case 1: s->insert(at, 1, "0123456789 ,\n-+e.x("[r.Int(0, 19)]); break;
      default: if (!s->empty()) s->erase(at, 1); break;
    }
  }
}

std::string Generate(uint64_t seed, uint64_t index) {
  Rng r{Mix(seed, index)};
  const bool router = r.Chance(50);
  const bool shm = !g_flood && r.Chance(30);
  if (r.Chance(10)) {  // random frames
    std::vector<std::string> frames(static_cast<size_t>(r.Int(1, 6)));
    for (std::string& f : frames) f = RandomBytes(r, static_cast<size_t>(r.Chance(30) ? sizeof(WireHeader) : r.Int(0, 120)));
    return kvstore::fuzz::EncodeWireInput(router, frames);
  }
  // A well-formed message first.
  WireHeader h;
  std::memset(&h, 0, sizeof(h));
  h.magic = kvstore::dist::kWireMagic;
  h.version = kvstore::dist::kWireVersion;
  h.type = static_cast<uint16_t>(r.Int(1, static_cast<int>(MsgType::kMaxType) - 1));
  h.sender_role = r.Int(0, 2);
  h.sender_rank = r.Int(-1, 3);
  h.req_id = r.Next();
  h.key = r.Int(-2, 100);
  h.dtype = r.Int(0, 6) == 5 ? 0 : r.Int(0, 6);
  h.count = shm && r.Chance(50) ? r.Int(100, 2000) : r.Int(0, 40);
  h.offset = r.Int(0, 10);
  h.total = h.offset + h.count + r.Int(0, 10);
  h.arg = r.Int(-2, 5);
  h.flags = static_cast<uint32_t>(r.Int(0, 3));
  if (shm && r.Chance(60)) {  // messages that carry values, which is what rings carry
    static const MsgType kValues[] = {MsgType::kInit, MsgType::kPush, MsgType::kPushPull};
    h.type = static_cast<uint16_t>(kValues[r.Int(0, 2)]);
    if (r.Chance(80)) h.dtype = r.Int(0, 4);
  }
  if (g_flood && r.Chance(85)) {  // worker 0 of the job, about its keys (int 0..3, f32 (4,))
    static const MsgType kToServer[] = {MsgType::kInit, MsgType::kPush, MsgType::kPull, MsgType::kPushPull,
                                        MsgType::kCommand, MsgType::kSetOptimizer,
                                        MsgType::kSaveStates, MsgType::kLoadStates};
    if (r.Chance(90)) h.type = static_cast<uint16_t>(kToServer[r.Int(0, 7)]);
    if (r.Chance(70)) h.flags &= ~kvstore::dist::kFlagStrKey;
    h.sender_role = 2;
    h.sender_rank = 0;
    h.flags |= kvstore::dist::kFlagSync;
    if (r.Chance(60)) h.key = r.Int(0, 3);
    if (r.Chance(50)) h.dtype = 0;
    if (r.Chance(50)) {
      h.offset = 0;
      h.total = 4;
      h.count = r.Chance(80) ? 4 : r.Int(0, 4);
    }
  }
  std::string str;
  switch (r.Int(0, 4)) {
    case 0: str = ""; break;
    case 1: str = "weight" + std::to_string(r.Int(0, 9)); break;
    case 2: str = NodeTable(r); break;
    case 3: str = Spec(r); break;
    default: str = std::to_string(r.Int(1, 65535)) + "," + std::to_string(r.Int(0, 70000)); break;
  }
  if (r.Chance(30)) Mangle(r, &str);
  if ((h.flags & kvstore::dist::kFlagStrKey) && str.empty()) str = "k";
  std::string payload;
  const bool data = h.type >= static_cast<uint16_t>(MsgType::kInit) && h.type <= static_cast<uint16_t>(MsgType::kPushPull);
  // A compressed push (ps/compressed_push.h): a 2bit or 1bit flag (now and then both), the
  // threshold's bits in arg (now and then one a server must refuse) and the packed bytes.
  // Also a compressed pull (2bit; now and then exact: kFlagExactPull) and a compressed
  // pull's reply (ps/compressed_pull.h), now and then with a flag or status it must not have.
  const bool reply = h.type == static_cast<uint16_t>(MsgType::kReply);
  const bool packed = (data || reply) && r.Chance(25);
  if (packed) {
    static const float kThresholds[] = {0.5f, 1e-3f, 2.0f, 0.0f, -1.0f, std::nanf(""), INFINITY};
    h.flags |= r.Chance(50) ? kvstore::dist::kFlagTwoBit : kvstore::dist::kFlagOneBit;
    if (r.Chance(5)) h.flags |= kvstore::dist::kFlagTwoBit | kvstore::dist::kFlagOneBit;
    const float t = kThresholds[r.Chance(80) ? r.Int(0, 2) : r.Int(0, 6)];
    std::memcpy(&h.arg, &t, sizeof(t));
    if (r.Chance(80)) h.dtype = r.Chance(50) ? KV_FLOAT32 : KV_FLOAT16;
    if (r.Chance(h.type == static_cast<uint16_t>(MsgType::kPull) ? 30 : 3)) h.flags |= kvstore::dist::kFlagExactPull;
    if (reply && r.Chance(80)) h.status = 0;
    if (reply && r.Chance(50)) h.offset = 0, h.count = r.Int(0, 40), h.total = h.count;
  }
  // A rows message (wire.h kFlagRowSparse): the row length in arg (now and then a bad one),
  // row ids (now and then out of order or outside the part: the server must refuse them),
  // and a push's rows.
  const bool rows = data && !packed && r.Chance(20);
  if (!packed && r.Chance(2)) h.flags |= kvstore::dist::kFlagExactPull;
  if (rows) {
    h.flags |= kvstore::dist::kFlagRowSparse;
    h.arg = r.Chance(80) ? 1 : r.Int(-1, 3);
  }
  const bool push_or_pull = h.type == static_cast<uint16_t>(MsgType::kPush) || h.type == static_cast<uint16_t>(MsgType::kPull);
  if (rows && h.arg > 0 && push_or_pull) {
    const int64_t n = r.Int(0, static_cast<int>(h.count / h.arg));
    for (int64_t i = 0; i < n; ++i) {
      const int64_t id = r.Chance(80) ? h.offset / h.arg + i : r.Int(-2, 50);
      payload.append(reinterpret_cast<const char*>(&id), sizeof(id));
    }
    if (h.type == static_cast<uint16_t>(MsgType::kPush)) {
      payload += RandomBytes(r, static_cast<size_t>(n * h.arg) * kvstore::DTypeSize(h.dtype));
    }
  } else if (packed && h.type != static_cast<uint16_t>(MsgType::kPull)) {
    const size_t per = (h.flags & kvstore::dist::kFlagOneBit) ? 32 : 16;
    payload = RandomBytes(r, (static_cast<size_t>(h.count) + per - 1) / per * 4);
  } else if (data && h.type != static_cast<uint16_t>(MsgType::kPull)) {
    payload = RandomBytes(r, static_cast<size_t>(h.count) * kvstore::DTypeSize(h.dtype));
  } else if (!data && r.Chance(20)) {
    payload = RandomBytes(r, static_cast<size_t>(r.Int(1, 64)));
  }
  // Shared memory (wire.h kFlagShm): the payload frame becomes a delta to the descriptor of
  // the payload the target puts into the ring (wire_target.h); payload_len stays.
  uint64_t payload_len = payload.size();
  uint8_t mode = router ? kvstore::fuzz::kModeRouter : 0;
  if (shm) {
    mode |= kvstore::fuzz::kModeShm;
    if (r.Chance(8)) mode |= kvstore::fuzz::kModeShmUnknownPeer;
    if (!payload.empty() && r.Chance(75)) {
      h.flags |= kvstore::dist::kFlagShm;
      uint64_t delta[3] = {0, 0, 0};  // offset, len, end (kvstore::dist::ShmDesc)
      if (r.Chance(45)) {
        // A forged ring position (end) turns the writer's ring off, which the target then
        // replaces: rarer, so that most segments live long enough to wrap.
        const int field = r.Chance(85) ? r.Int(0, 1) : 2;
        switch (r.Int(0, 3)) {
          case 0: delta[field] = static_cast<uint64_t>(r.Int(-64, 64)); break;
          case 1: delta[field] = kvstore::fuzz::kShmRingBytes * static_cast<uint64_t>(r.Int(1, 3)); break;
          case 2: delta[field] = static_cast<uint64_t>(-static_cast<int64_t>(payload_len)); break;
          default: delta[field] = static_cast<uint64_t>(Boundary(r)); break;
        }
      }
      payload.assign(reinterpret_cast<const char*>(delta), sizeof(delta));
      if (r.Chance(5)) payload.resize(r.Chance(50) ? sizeof(delta) - 1 : sizeof(delta) + 1);
    } else if (payload.empty() && r.Chance(10)) {
      h.flags |= kvstore::dist::kFlagShm;  // a descriptor of nothing
    }
  }
  h.str_len = static_cast<uint32_t>(str.size());
  h.payload_len = payload_len;
  h.num_frames = 1 + (str.empty() ? 0 : 1) + (payload.empty() ? 0 : 1);
  // Header mutations.
  for (int k = r.Chance(g_flood ? 60 : 30) ? 0 : r.Int(1, 3); k > 0; --k) {
    const int64_t b = Boundary(r);
    switch (r.Int(0, 13)) {
      case 0: h.magic = r.Chance(50) ? static_cast<uint32_t>(b) : h.magic ^ (1u << r.Int(0, 31)); break;
      case 1: h.version = static_cast<uint16_t>(r.Int(0, 3)); break;
      case 2: h.type = static_cast<uint16_t>(r.Chance(50) ? r.Int(0, 40) : static_cast<int>(b)); break;
      case 3: h.sender_role = static_cast<int32_t>(r.Chance(50) ? r.Int(-2, 4) : b); break;
      case 4: h.flags = static_cast<uint32_t>(r.Chance(50) ? r.Int(0, 16) : r.Chance(50) ? h.flags ^ kvstore::dist::kFlagShm : b); break;
      case 5: h.key = b; break;
      case 6: h.offset = b; break;
      case 7: h.total = b; break;
      case 8: h.count = b; break;
      case 9: h.dtype = static_cast<int32_t>(r.Chance(50) ? r.Int(-2, 9) : b); break;
      case 10: h.str_len = static_cast<uint32_t>(r.Chance(50) ? h.str_len + static_cast<uint32_t>(r.Int(-1, 1)) : b); break;
      case 11: h.num_frames = static_cast<uint32_t>(r.Chance(50) ? r.Int(0, 5) : b); break;
      case 12: h.payload_len = r.Chance(50) ? h.payload_len + static_cast<uint64_t>(r.Int(-1, 1)) : static_cast<uint64_t>(b); break;
      default: h.sender_rank = static_cast<int32_t>(b); break;
    }
  }
  std::vector<std::string> frames;
  frames.emplace_back(reinterpret_cast<const char*>(&h), sizeof(h));
  if (!str.empty()) frames.push_back(str);
  if (!payload.empty()) frames.push_back(payload);
  // Frame mutations.
  if (r.Chance(25)) {
    const size_t j = static_cast<size_t>(r.Int(0, static_cast<int>(frames.size()) - 1));
    switch (r.Int(0, 4)) {
      case 0: frames[j].resize(frames[j].size() > 0 ? static_cast<size_t>(r.Int(0, static_cast<int>(frames[j].size()) - 1)) : 0); break;
      case 1: frames[j] += RandomBytes(r, static_cast<size_t>(r.Int(1, 9))); break;
      case 2: if (frames.size() > 1) frames.erase(frames.begin() + static_cast<long>(j)); break;
      case 3: frames.insert(frames.begin() + static_cast<long>(j), frames[j]); break;
      default: frames.push_back(RandomBytes(r, static_cast<size_t>(r.Int(0, 16)))); break;
    }
  }
  return kvstore::fuzz::EncodeWireInput(mode, frames);
}

uint64_t g_seed = 0, g_index = 0;

void SayWhich() {
  char buf[200];
  const int n = std::snprintf(buf, sizeof(buf),
                              "fuzz_wire: failed on message %llu of seed %llu; input: fuzz_wire --seed %llu --only %llu --dump FILE\n",
                              static_cast<unsigned long long>(g_index), static_cast<unsigned long long>(g_seed),
                              static_cast<unsigned long long>(g_seed), static_cast<unsigned long long>(g_index));
  if (n > 0) {
    ssize_t w = write(2, buf, static_cast<size_t>(n));
    (void)w;
  }
}

void OnAbort(int) {
  SayWhich();
  std::signal(SIGABRT, SIG_DFL);
  std::abort();
}

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Reads every reply the server sent to the flood's socket (they are not checked).
void Drain(zmq::socket_t& s) {
  zmq::message_t part;
  while (s.recv(part, zmq::recv_flags::dontwait)) {
  }
}

// The job's own traffic: four int keys of float32 (4,), pushed and pulled.
void WorkerRound(KVStoreHandle kv, KVArrayHandle v, KVArrayHandle o, int round) {
  for (int key = 0; key < 4; ++key) {
    REQUIRE_OK(KVArrayFill(v, round + key));
    REQUIRE_OK(KVStorePush(kv, 1, &key, &v, 0));
    REQUIRE_OK(KVStorePull(kv, 1, &key, &o, 0));
    REQUIRE_OK(KVArrayWaitToRead(o));
  }
  REQUIRE_OK(KVStoreWaitAll(kv));
}

int ServerFlood(const char* type, uint64_t seed, uint64_t messages, double seconds) {
  const char* port = std::getenv("TEST_SERVER_PORT");
  if (port == nullptr) {
    std::fprintf(stderr, "fuzz_wire: --server-flood needs TEST_SERVER_PORT (run_dist_test.py garbage)\n");
    return 2;
  }
  g_flood = true;
  KVStoreHandle kv = nullptr;
  REQUIRE_OK(KVStoreCreate(type, &kv));
  const int64_t len = 4;
  KVArrayHandle v = nullptr, o = nullptr;
  REQUIRE_OK(KVArrayCreate(&len, 1, KV_FLOAT32, KV_CPU, 0, &v));
  REQUIRE_OK(KVArrayCreate(&len, 1, KV_FLOAT32, KV_CPU, 0, &o));
  const int keys[4] = {0, 1, 2, 3};
  const KVArrayHandle vals[4] = {v, v, v, v};
  REQUIRE_OK(KVStoreInit(kv, 4, keys, vals));
  WorkerRound(kv, v, o, 0);
  zmq::context_t ctx(1);
  zmq::socket_t s(ctx, zmq::socket_type::dealer);
  s.set(zmq::sockopt::linger, 0);
  s.set(zmq::sockopt::sndhwm, 0);
  s.connect(std::string("tcp://127.0.0.1:") + port);
  const double start = Now();
  uint64_t sent = 0;
  for (g_index = 0; g_index < messages; ++g_index) {
    if (seconds > 0 && (g_index & 255) == 0 && Now() - start >= seconds) break;
    const std::string in = Generate(seed, g_index);
    std::vector<std::string> frames;  // the input format of wire_target.h
    for (size_t pos = 1; pos + 2 <= in.size() && frames.size() < kvstore::fuzz::kMaxFrames;) {
      const size_t n = static_cast<uint8_t>(in[pos]) | static_cast<size_t>(static_cast<uint8_t>(in[pos + 1])) << 8;
      frames.push_back(in.substr(pos + 2, n));
      pos += 2 + n;
    }
    if (frames.empty()) continue;
    for (size_t i = 0; i < frames.size(); ++i) {
      s.send(zmq::buffer(frames[i]), i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
    }
    ++sent;
    if ((g_index & 63) == 63) Drain(s);
    // Every 4096 messages the job's own round must still complete.
    if ((g_index & 4095) == 4095) WorkerRound(kv, v, o, static_cast<int>(g_index >> 12));
  }
  // A pull of key 0 as worker 0 on the flood's connection: the server handles one
  // connection's messages in order, so its reply means every flood message was handled.
  WireHeader h = kvstore::dist::MakeHeader(MsgType::kPull, kvstore::dist::Role::kWorker, 0);
  h.req_id = 0xF100D0E5ull;
  h.flags = kvstore::dist::kFlagSync;
  h.key = 0;
  h.dtype = KV_FLOAT32;
  h.offset = 0;
  h.total = h.count = 4;
  h.num_frames = 1;
  s.send(zmq::const_buffer(&h, sizeof(h)), zmq::send_flags::none);
  bool answered = false;
  for (const double deadline = Now() + 60; !answered && Now() < deadline;) {
    zmq::pollitem_t item = {static_cast<void*>(s), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, std::chrono::milliseconds(500));
    zmq::message_t part;
    while (!answered && s.recv(part, zmq::recv_flags::dontwait)) {
      WireHeader rh;
      if (part.size() != sizeof(rh)) continue;
      std::memcpy(&rh, part.data(), sizeof(rh));
      answered = rh.type == static_cast<uint16_t>(MsgType::kReply) && rh.req_id == h.req_id;
    }
  }
  if (!answered) {
    std::fprintf(stderr, "fuzz_wire: the server did not answer a pull after the flood within 60 s\n");
    return 1;
  }
  WorkerRound(kv, v, o, -1);
  KVArrayFree(v);
  KVArrayFree(o);
  REQUIRE_OK(KVStoreFree(kv));
  std::printf("PASS fuzz_wire --server-flood %s: seed %llu, %llu messages to the server in %.1f s; it served the job throughout\n",
              type, static_cast<unsigned long long>(seed), static_cast<unsigned long long>(sent), Now() - start);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t seed = static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
  uint64_t max_messages = 200000;
  double seconds = 0;
  int64_t only = -1;
  const char* dump = nullptr;
  const char* flood = nullptr;
  std::vector<const char*> replay;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has = i + 1 < argc;
    if (a == "--seed" && has) seed = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--messages" && has) max_messages = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--seconds" && has) seconds = std::atof(argv[++i]);
    else if (a == "--only" && has) only = std::atoll(argv[++i]);
    else if (a == "--dump" && has) dump = argv[++i];
    else if (a == "--server-flood" && has) flood = argv[++i];
    else if (a[0] != '-') replay.push_back(argv[i]);
    else {
      std::fprintf(stderr,
                   "usage: fuzz_wire [--seed N] [--messages N] [--seconds S] [--only I [--dump FILE]] [INPUT...]\n"
                   "       fuzz_wire --server-flood TYPE [--seed N] [--messages N] [--seconds S]\n"
                   "  Decodes N generated messages (default 200000) or for S seconds; INPUT files\n"
                   "  (libFuzzer artifacts, --dump output) are run as they are. --server-flood sends\n"
                   "  them to the server of a 1 x 1 job instead (see the top of fuzz_wire.cc).\n");
      return 2;
    }
  }
  g_seed = seed;
  std::signal(SIGABRT, OnAbort);
  if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(SayWhich);
  if (flood) return ServerFlood(flood, seed, max_messages, seconds);
  if (!replay.empty()) {
    for (const char* path : replay) {
      FILE* f = std::fopen(path, "rb");
      if (!f) {
        std::perror(path);
        return 2;
      }
      std::string in;
      char buf[4096];
      size_t n;
      while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) in.append(buf, n);
      std::fclose(f);
      kvstore::fuzz::RunWireInput(reinterpret_cast<const uint8_t*>(in.data()), in.size());
    }
    std::printf("fuzz_wire: %zu inputs passed\n", replay.size());
    return 0;
  }
  if (only >= 0) {
    g_index = static_cast<uint64_t>(only);
    const std::string in = Generate(seed, g_index);
    if (dump) {
      FILE* f = std::fopen(dump, "wb");
      if (!f || std::fwrite(in.data(), 1, in.size(), f) != in.size()) {
        std::perror(dump);
        return 2;
      }
      std::fclose(f);
    }
    kvstore::fuzz::RunWireInput(reinterpret_cast<const uint8_t*>(in.data()), in.size());
    std::printf("fuzz_wire: message %lld of seed %llu passed\n", static_cast<long long>(only),
                static_cast<unsigned long long>(seed));
    return 0;
  }
  std::printf("fuzz_wire: seed %llu\n", static_cast<unsigned long long>(seed));
  std::fflush(stdout);
  const double start = Now();
  for (g_index = 0; g_index < max_messages; ++g_index) {
    if (seconds > 0 && (g_index & 1023) == 0 && Now() - start >= seconds) break;
    const std::string in = Generate(seed, g_index);
    kvstore::fuzz::RunWireInput(reinterpret_cast<const uint8_t*>(in.data()), in.size());
  }
  const kvstore::fuzz::WireStats& st = kvstore::fuzz::GetWireStats();
  std::printf("fuzz_wire: seed %llu: %llu messages (%llu frames; %llu accepted and re-sent), %llu node tables "
              "and %llu specs accepted; %llu shared-memory descriptors (%llu accepted, %llu segments), in %.1f s; "
              "0 violations\n",
              static_cast<unsigned long long>(seed), static_cast<unsigned long long>(st.messages),
              static_cast<unsigned long long>(st.frames), static_cast<unsigned long long>(st.accepted),
              static_cast<unsigned long long>(st.tables), static_cast<unsigned long long>(st.specs),
              static_cast<unsigned long long>(st.shm_messages), static_cast<unsigned long long>(st.shm_accepted),
              static_cast<unsigned long long>(st.shm_segments), Now() - start);
  return 0;
}
