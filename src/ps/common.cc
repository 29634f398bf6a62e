// common.cc - configuration, logging, wire format, placement.
#include "ps/common.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <unistd.h>

#include <charconv>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <sstream>
#include <string_view>

#include "core/dtype.h"
#include "ps/security.h"

namespace kvstore {
namespace dist {

const char* RoleName(Role r) {
  switch (r) {
    case Role::kScheduler: return "scheduler";
    case Role::kServer: return "server";
    case Role::kWorker: return "worker";
  }
  return "unknown";
}

Role RoleFromEnv() {
  const char* v = std::getenv("DMLC_ROLE");
  if (v == nullptr || *v == '\0' || std::strcmp(v, "worker") == 0) return Role::kWorker;
  if (std::strcmp(v, "server") == 0) return Role::kServer;
  if (std::strcmp(v, "scheduler") == 0) return Role::kScheduler;
  KV_FAIL(KV_ERR_INVALID_ARGUMENT,
          "DMLC_ROLE='%s' is not one of worker, server, scheduler", v);
}

namespace {

const char* Env(const char* name) {
  const char* v = std::getenv(name);
  return (v != nullptr && *v != '\0') ? v : nullptr;
}

// Blanks around a numeric value (see EnvInt in common.h).
constexpr const char* kBlanks = " \t\n\r\v\f";

// The value of `name` without surrounding blanks; false when unset or blank.
bool EnvNumberText(const char* name, std::string_view* out) {
  const char* v = Env(name);
  if (v == nullptr) return false;
  std::string_view t(v);
  const size_t b = t.find_first_not_of(kBlanks);
  if (b == std::string_view::npos) return false;
  *out = t.substr(b, t.find_last_not_of(kBlanks) - b + 1);
  return true;
}

// The value as an error message quotes it: at most 40 bytes, control characters as '?'.
std::string QuoteValue(const char* name) {
  const char* v = std::getenv(name);
  std::string q;
  for (const char* p = v; p != nullptr && *p != '\0'; ++p) {
    if (q.size() == 40) return "'" + q + "...'";
    q += (static_cast<unsigned char>(*p) < 0x20 || *p == 0x7f) ? '?' : *p;
  }
  return "'" + q + "'";
}

[[noreturn]] void MissingVariable(const char* name) {
  KV_FAIL(KV_ERR_INVALID_ARGUMENT,
          "%s is not set; the distributed stores need DMLC_ROLE, DMLC_PS_ROOT_URI, "
          "DMLC_PS_ROOT_PORT, DMLC_NUM_WORKER and DMLC_NUM_SERVER (see kvstore-launch)",
          name);
}

}  // namespace

// std::from_chars ignores the C locale, so a host that switched LC_NUMERIC to a comma locale
// still reads "0.25"; it also takes no '+', no leading blank and no hex prefix.
int64_t EnvInt(const char* name, int64_t dflt, int64_t lo, int64_t hi, bool required) {
  std::string_view t;
  if (!EnvNumberText(name, &t)) {
    if (required) MissingVariable(name);
    return dflt;
  }
  int64_t x = 0;
  const auto r = std::from_chars(t.data(), t.data() + t.size(), x, 10);
  KV_CHECK(r.ec == std::errc() && r.ptr == t.data() + t.size() && x >= lo && x <= hi,
           KV_ERR_INVALID_ARGUMENT, "%s=%s is not an integer in [%lld, %lld]", name,
           QuoteValue(name).c_str(), static_cast<long long>(lo), static_cast<long long>(hi));
  return x;
}

double EnvSeconds(const char* name, double dflt, double lo, double hi, const char* zero_means) {
  std::string_view t;
  if (!EnvNumberText(name, &t)) return dflt;
  double x = 0;
  const auto r = std::from_chars(t.data(), t.data() + t.size(), x, std::chars_format::general);
  const bool parsed = r.ec == std::errc() && r.ptr == t.data() + t.size();
  // Written so that NaN fails both comparisons.
  KV_CHECK(parsed && ((x >= lo && x <= hi) || (x == 0 && zero_means != nullptr)),
           KV_ERR_INVALID_ARGUMENT, "%s=%s is not a number of seconds in [%.17g, %.17g]%s%s%s",
           name, QuoteValue(name).c_str(), lo, hi, zero_means != nullptr ? " or 0 (" : "",
           zero_means != nullptr ? zero_means : "", zero_means != nullptr ? ")" : "");
  return x;
}

namespace {

std::mutex g_log_mu;
std::string g_log_prefix = "kvstore";

}  // namespace

Config Config::Load() {
  Config c;
  c.role = RoleFromEnv();
  const char* uri = Env("DMLC_PS_ROOT_URI");
  KV_CHECK(uri != nullptr, KV_ERR_INVALID_ARGUMENT,
           "DMLC_PS_ROOT_URI is not set; the distributed stores need DMLC_ROLE, "
           "DMLC_PS_ROOT_URI, DMLC_PS_ROOT_PORT, DMLC_NUM_WORKER and DMLC_NUM_SERVER "
           "(see kvstore-launch)");
  c.root_uri = uri;
  c.root_port = static_cast<int>(EnvInt("DMLC_PS_ROOT_PORT", 0, 1, 65535, true));
  c.num_workers = static_cast<int>(EnvInt("DMLC_NUM_WORKER", 0, 1, 100000, true));
  c.num_servers = static_cast<int>(EnvInt("DMLC_NUM_SERVER", 0, 1, 100000, true));
  c.port = static_cast<int>(EnvInt("PORT", 0, 0, 65535, false));
  c.verbose = static_cast<int>(EnvInt("PS_VERBOSE", 0, 0, 10, false));
  if (c.role == Role::kWorker) {
    c.requested_rank =
        static_cast<int>(EnvInt("DMLC_WORKER_ID", -1, -1, c.num_workers - 1, false));
  } else if (c.role == Role::kServer) {
    c.requested_rank =
        static_cast<int>(EnvInt("DMLC_SERVER_ID", -1, -1, c.num_servers - 1, false));
  }
  const int64_t kMaxBound = std::numeric_limits<int64_t>::max();
  c.bigarray_bound = EnvInt("KVSTORE_BIGARRAY_BOUND", 1000000, 1, kMaxBound, false);
  c.bigarray_bound = EnvInt("MXNET_KVSTORE_BIGARRAY_BOUND", c.bigarray_bound, 1, kMaxBound, false);
  c.io_threads = static_cast<int>(EnvInt("KVSTORE_IO_THREADS", 0, 0, 64, false));
  if (const char* b = Env("KVSTORE_SCHEDULER_BIND")) c.scheduler_bind = b;
  // Durations: at most 10^7 s (116 days); the heartbeat interval at most an hour; none
  // shorter than 1 ms. ps-lite's names are honoured when positive (0 is ps-lite's "no
  // heartbeats", which this implementation does not offer: the defaults apply); ours win
  // when both are set.
  const double kMaxSec = 1e7;
  c.timeout_sec = EnvSeconds("KVSTORE_TIMEOUT_SEC", 60, 0.001, kMaxSec, "wait forever");
  const double ps_int = EnvSeconds("PS_HEARTBEAT_INTERVAL", 0, 0.001, 3600, "the default");
  const double ps_to = EnvSeconds("PS_HEARTBEAT_TIMEOUT", 0, 0.001, kMaxSec, "the default");
  c.heartbeat_interval_sec =
      EnvSeconds("KVSTORE_HEARTBEAT_INTERVAL_SEC", ps_int > 0 ? ps_int : 1, 0.001, 3600, nullptr);
  c.heartbeat_timeout_sec =
      EnvSeconds("KVSTORE_HEARTBEAT_TIMEOUT_SEC", ps_to > 0 ? ps_to : 10, 0.001, kMaxSec, nullptr);
  // A node is declared dead only after missing at least two heartbeats.
  if (c.heartbeat_timeout_sec < 2 * c.heartbeat_interval_sec) {
    c.heartbeat_timeout_sec = 2 * c.heartbeat_interval_sec;
  }
  c.host = DetectHost(c.root_uri);
  return c;
}

std::string Config::SchedulerEndpoint() const {
  return "tcp://" + root_uri + ":" + std::to_string(root_port);
}

int Config::IoThreads() const {
  if (io_threads > 0) return io_threads;
  const int peers = role == Role::kServer ? num_workers : role == Role::kWorker ? num_servers : 1;
  return std::max(1, std::min(peers, 4));
}

void SetLogPrefix(const std::string& prefix) {
  std::lock_guard<std::mutex> lock(g_log_mu);
  g_log_prefix = prefix;
}

void Log(const char* fmt, ...) {
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  std::lock_guard<std::mutex> lock(g_log_mu);
  std::fprintf(stderr, "[kvstore %s] %s\n", g_log_prefix.c_str(), buf);
  std::fflush(stderr);
}

RateLimitedLog::~RateLimitedLog() {
  if (unreported_ > 0) {
    Log("%llu more %s (%llu in all), the last: %s", static_cast<unsigned long long>(unreported_),
        what_, static_cast<unsigned long long>(total_), latest_.c_str());
  }
}

void RateLimitedLog::Event(const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  std::lock_guard<std::mutex> lock(mu_);
  ++total_;
  const double now = NowSec();
  if (total_ <= kFirst) {
    last_line_ = now;
    Log("%s%s", buf, total_ == kFirst ? " (further ones are counted, not logged)" : "");
    return;
  }
  ++unreported_;
  latest_ = buf;
  if (now - last_line_ < kPeriodSec) return;
  Log("%llu more %s in the last %.0f s (%llu in all), the last: %s",
      static_cast<unsigned long long>(unreported_), what_, now - last_line_,
      static_cast<unsigned long long>(total_), buf);
  unreported_ = 0;
  last_line_ = now;
}

double DeadlineAfter(double sec) {
  if (sec <= 0) return std::numeric_limits<double>::infinity();
  return NowSec() + sec;
}

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
  if (IsDataType(h.type)) {
    if (!IsValidDType(h.dtype)) return "invalid dtype";
    if (h.total < 0 || h.offset < 0 || h.count < 0 || h.offset > h.total ||
        h.count > h.total - h.offset) {
      return "element range outside the value";
    }
    const uint64_t esize = DTypeSize(h.dtype);
    if (static_cast<uint64_t>(h.count) > std::numeric_limits<uint64_t>::max() / esize) {
      return "element count overflows";
    }
    const uint64_t bytes = static_cast<uint64_t>(h.count) * esize;
    const bool has_values = h.type != static_cast<uint16_t>(MsgType::kPull);
    if (has_values && h.payload_len != bytes) return "payload length differs from count*dtype";
    if (!has_values && h.payload_len != 0) return "a pull carries no payload";
    if ((h.flags & kFlagStrKey) != 0 && h.str_len == 0) return "string key without a name";
  }
  return "";
}

namespace {
// Destroyed at exit, after its last event (the nodes' threads have stopped by then).
RateLimitedLog g_dropped("dropped messages");
}  // namespace

void LogDropped(const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  g_dropped.Event("%s", buf);
}

bool RecvValidMessage(zmq::socket_t& sock, bool router, const char* peer, Message* out) {
  for (int dropped = 0; dropped < 64; ++dropped) {
    bool ok = false;
    std::string why;
    if (!RecvMessage(sock, router, out, &ok, &why)) return false;
    if (ok) return true;
    LogDropped("dropped a malformed message from %s: %s", peer, why.c_str());
  }
  return false;
}

bool RecvMessage(zmq::socket_t& sock, bool router, Message* out, bool* ok, std::string* why) {
  *ok = false;
  std::vector<zmq::message_t> frames;
  for (;;) {
    zmq::message_t part;
    zmq::recv_result_t r;
    try {
      r = sock.recv(part, frames.empty() ? zmq::recv_flags::dontwait : zmq::recv_flags::none);
    } catch (const zmq::error_t& e) {
      *why = std::string("receive failed: ") + e.what();
      return !frames.empty();
    }
    if (!r) return !frames.empty();
    const bool more = part.more();
    // Bound memory use of a hostile peer: at most routing id + 3 frames are kept.
    if (frames.size() < 5) frames.push_back(std::move(part));
    if (!more) break;
  }
  size_t i = 0;
  if (router) {
    out->routing_id.assign(frames[0].data<char>(), frames[0].size());
    i = 1;
  }
  if (frames.size() > 4 + (router ? 1 : 0) || i >= frames.size()) {
    *why = "wrong number of frames";
    return true;
  }
  if (frames[i].size() != sizeof(WireHeader)) {
    *why = "header frame of " + std::to_string(frames[i].size()) + " bytes";
    return true;
  }
  std::memcpy(&out->h, frames[i].data(), sizeof(WireHeader));
  const size_t after = frames.size() - i - 1;
  size_t str_size = 0, payload_size = 0;
  size_t next = i + 1;
  if (out->h.str_len > 0 && next < frames.size()) str_size = frames[next++].size();
  if (out->h.payload_len > 0 && next < frames.size()) payload_size = frames[next++].size();
  *why = ValidateHeader(out->h, after, str_size, payload_size);
  if (!why->empty()) return true;
  next = i + 1;
  out->str.clear();
  if (out->h.str_len > 0) {
    out->str.assign(frames[next].data<char>(), frames[next].size());
    ++next;
  }
  if (out->h.payload_len > 0) out->payload = std::move(frames[next]);
  *ok = true;
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
                 const std::string& str, const OutPayload& payload) {
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
    if (payload.nbytes > 0) {
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

// CurveZMQ's MESSAGE command adds a fixed overhead to every frame on the wire (command name,
// nonce, flags, MAC: 33 bytes); ZMQ_MAXMSGSIZE bounds the wire frame.
constexpr int64_t kCurveFrameOverhead = 64;

void ConfigureSocket(zmq::socket_t& sock, Link link) {
  sock.set(zmq::sockopt::sndhwm, 0);
  sock.set(zmq::sockopt::rcvhwm, 0);
  sock.set(zmq::sockopt::linger, 2000);
  const bool sched = link == Link::kSchedulerListen || link == Link::kToScheduler;
  const int64_t bound = sched ? int64_t{kMaxStringFrame} : MaxMessageBytes();
  sock.set(zmq::sockopt::maxmsgsize, bound + kCurveFrameOverhead);
  std::shared_ptr<const JobKeys> keys = ProcessJobKeys();
  if (!keys) return;
  const bool listen = link == Link::kSchedulerListen || link == Link::kServerListen;
  if (listen) {
    sock.set(zmq::sockopt::curve_server, true);
    sock.set(zmq::sockopt::curve_secretkey, zmq::const_buffer(keys->listen_secret, 32));
    sock.set(zmq::sockopt::zap_domain, "kvstore");
  } else {
    sock.set(zmq::sockopt::curve_serverkey, zmq::const_buffer(keys->listen_public, 32));
    sock.set(zmq::sockopt::curve_publickey, zmq::const_buffer(keys->member_public, 32));
    sock.set(zmq::sockopt::curve_secretkey, zmq::const_buffer(keys->member_secret, 32));
  }
}

std::string FormatPorts(const std::vector<int>& ports) {
  std::string out;
  for (int p : ports) out += (out.empty() ? "" : ",") + std::to_string(p);
  return out;
}

bool ParsePorts(const std::string& text, std::vector<int>* ports) {
  std::vector<int> out;
  size_t pos = 0;
  while (pos <= text.size() && out.size() < 64) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    const std::string item = text.substr(pos, comma - pos);
    if (item.empty() || item.size() > 5 || item.find_first_not_of("0123456789") != std::string::npos) {
      return false;
    }
    const int p = std::atoi(item.c_str());
    if (p <= 0 || p > 65535) return false;
    out.push_back(p);
    pos = comma + 1;
  }
  if (pos <= text.size()) return false;  // more than 64 ports
  *ports = std::move(out);
  return true;
}

std::string FormatTable(int num_workers, int num_servers, const std::vector<NodeInfo>& servers) {
  std::ostringstream os;
  os << num_workers << ' ' << num_servers << '\n';
  for (const auto& s : servers) {
    os << "server " << s.rank << ' ' << s.host << ' ' << FormatPorts(s.ports) << '\n';
  }
  return os.str();
}

void ParseTable(const std::string& text, int* num_workers, int* num_servers,
                std::vector<NodeInfo>* servers) {
  std::istringstream is(text);
  int w = 0, s = 0;
  KV_CHECK((is >> w >> s) && w > 0 && s > 0 && s <= 100000, KV_ERR_PROTOCOL,
           "malformed node table header");
  std::vector<NodeInfo> out(static_cast<size_t>(s));
  std::vector<bool> seen(static_cast<size_t>(s), false);
  for (int i = 0; i < s; ++i) {
    std::string tag, ports;
    NodeInfo n;
    n.role = Role::kServer;
    KV_CHECK((is >> tag >> n.rank >> n.host >> ports) && tag == "server" && n.rank >= 0 &&
                 n.rank < s && !seen[static_cast<size_t>(n.rank)] && ParsePorts(ports, &n.ports),
             KV_ERR_PROTOCOL, "malformed node table entry %d", i);
    seen[static_cast<size_t>(n.rank)] = true;
    out[static_cast<size_t>(n.rank)] = n;
  }
  *num_workers = w;
  *num_servers = s;
  *servers = std::move(out);
}

uint64_t StableHash(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::vector<PartPlan> PlanParts(bool str_key, int64_t int_key, const std::string& name,
                                int64_t total, int num_servers, int64_t bound) {
  std::vector<PartPlan> parts;
  if (total < bound || num_servers == 1) {
    const uint64_t h = str_key ? StableHash(name) : static_cast<uint64_t>(int_key);
    parts.push_back({static_cast<int>(h % static_cast<uint64_t>(num_servers)), 0, total});
    return parts;
  }
  // 128-bit products: total * i cannot overflow.
  for (int i = 0; i < num_servers; ++i) {
    const int64_t b = static_cast<int64_t>((static_cast<__int128>(total) * i) / num_servers);
    const int64_t e = static_cast<int64_t>((static_cast<__int128>(total) * (i + 1)) / num_servers);
    parts.push_back({i, b, e - b});
  }
  return parts;
}

void CheckPartsFit(const std::vector<PartPlan>& parts, size_t esize, const std::string& key) {
  const int64_t bound = MaxMessageBytes();
  for (const PartPlan& p : parts) {
    const uint64_t bytes = static_cast<uint64_t>(p.count) * esize;
    KV_CHECK(bytes <= static_cast<uint64_t>(bound), KV_ERR_INVALID_ARGUMENT,
             "key %s: its part on server %d is %llu bytes, more than the %lld bytes a node "
             "accepts in one message (KVSTORE_MAX_MESSAGE_BYTES; set it on every node of the "
             "job, or add servers to split large keys further)",
             key.c_str(), p.server, static_cast<unsigned long long>(bytes),
             static_cast<long long>(bound));
  }
}

std::string NodeName(Role role, int rank) {
  if (role == Role::kScheduler) return "scheduler";
  return std::string(RoleName(role)) + " " + std::to_string(rank);
}

std::string DetectHost(const std::string& root_uri) {
  if (const char* h = Env("DMLC_NODE_HOST")) return h;
  const char* iface = Env("DMLC_INTERFACE");
  const bool loopback_root = root_uri.rfind("127.", 0) == 0 || root_uri == "localhost";
  std::string found;
  struct ifaddrs* ifs = nullptr;
  if (getifaddrs(&ifs) == 0) {
    for (struct ifaddrs* p = ifs; p != nullptr; p = p->ifa_next) {
      if (p->ifa_addr == nullptr || p->ifa_addr->sa_family != AF_INET) continue;
      char buf[INET_ADDRSTRLEN];
      auto* sin = reinterpret_cast<struct sockaddr_in*>(p->ifa_addr);
      if (inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof(buf)) == nullptr) continue;
      if (iface != nullptr) {
        if (std::strcmp(p->ifa_name, iface) == 0) {
          found = buf;
          break;
        }
        continue;
      }
      if (loopback_root) continue;
      if ((p->ifa_flags & IFF_LOOPBACK) == 0 && found.empty()) found = buf;
    }
    freeifaddrs(ifs);
  }
  if (iface != nullptr) {
    KV_CHECK(!found.empty(), KV_ERR_NETWORK,
             "DMLC_INTERFACE='%s' has no IPv4 address on this host", iface);
    return found;
  }
  if (loopback_root || found.empty()) return "127.0.0.1";
  return found;
}

}  // namespace dist
}  // namespace kvstore
