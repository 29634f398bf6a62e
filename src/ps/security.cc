// security.cc - job keys, the ZAP handler and the handshake log (see security.h).
#include "ps/security.h"

#include <fcntl.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "core/error.h"
#include "ps/config.h"
#include "ps/log.h"
#include "ps/wire.h"

namespace kvstore {
namespace dist {

JobKeys::~JobKeys() {
  sodium_memzero(listen_secret, sizeof(listen_secret));
  sodium_memzero(member_secret, sizeof(member_secret));
}

void DeriveJobKeys(const std::string& secret, JobKeys* out) {
  KV_CHECK(sodium_init() >= 0, KV_ERR_INTERNAL, "libsodium failed to initialise");
  static_assert(crypto_kdf_KEYBYTES == 32 && crypto_scalarmult_BYTES == 32, "key sizes");
  uint8_t master[crypto_kdf_KEYBYTES];
  crypto_generichash(master, sizeof(master), reinterpret_cast<const uint8_t*>(secret.data()),
                     secret.size(), nullptr, 0);
  static const char kContext[crypto_kdf_CONTEXTBYTES + 1] = "kvstore1";
  crypto_kdf_derive_from_key(out->listen_secret, 32, 1, kContext, master);
  crypto_kdf_derive_from_key(out->member_secret, 32, 2, kContext, master);
  sodium_memzero(master, sizeof(master));
  KV_CHECK(crypto_scalarmult_base(out->listen_public, out->listen_secret) == 0 &&
               crypto_scalarmult_base(out->member_public, out->member_secret) == 0,
           KV_ERR_INTERNAL, "deriving the job's public keys failed");
}

namespace {

// The secret held in `path`: a regular file that only its owner can read.
std::string ReadSecretFile(const char* path) {
  const int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
  KV_CHECK(fd >= 0, KV_ERR_INVALID_ARGUMENT, "KVSTORE_JOB_SECRET_FILE=%s cannot be opened: %s",
           path, std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{fd};
  struct stat st;
  KV_CHECK(fstat(fd, &st) == 0 && S_ISREG(st.st_mode), KV_ERR_INVALID_ARGUMENT,
           "KVSTORE_JOB_SECRET_FILE=%s is not a regular file", path);
  KV_CHECK((st.st_mode & (S_IRWXG | S_IRWXO)) == 0, KV_ERR_INVALID_ARGUMENT,
           "KVSTORE_JOB_SECRET_FILE=%s can be accessed by its group or others (mode %04o); "
           "the job secret must be readable by its owner only (chmod 600 %s)",
           path, static_cast<unsigned>(st.st_mode & 07777), path);
  std::string secret;
  char buf[512];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    KV_CHECK(n >= 0, KV_ERR_INVALID_ARGUMENT, "KVSTORE_JOB_SECRET_FILE=%s cannot be read: %s",
             path, std::strerror(errno));
    if (n == 0) break;
    secret.append(buf, static_cast<size_t>(n));
    KV_CHECK(secret.size() <= kMaxSecretBytes + 2, KV_ERR_INVALID_ARGUMENT,
             "KVSTORE_JOB_SECRET_FILE=%s holds more than %zu bytes", path, kMaxSecretBytes);
  }
  sodium_memzero(buf, sizeof(buf));
  if (!secret.empty() && secret.back() == '\n') secret.pop_back();
  if (!secret.empty() && secret.back() == '\r') secret.pop_back();
  return secret;
}

struct CachedKeys {
  std::mutex mu;
  std::string source;  // the variables the keys came from
  std::shared_ptr<const JobKeys> keys;
  bool warned_open = false;
};

CachedKeys& Cache() {
  static CachedKeys c;
  return c;
}

}  // namespace

std::shared_ptr<const JobKeys> ProcessJobKeys() {
  const char* direct = EnvString("KVSTORE_JOB_SECRET");
  const char* file = EnvString("KVSTORE_JOB_SECRET_FILE");
  CachedKeys& c = Cache();
  std::lock_guard<std::mutex> lock(c.mu);
  if (direct == nullptr && file == nullptr) {
    if (!c.warned_open) {
      c.warned_open = true;
      Log("warning: KVSTORE_JOB_SECRET is not set, so this job is open: its traffic is "
          "neither authenticated nor encrypted and anyone who can reach its ports can read and "
          "change its values; set KVSTORE_JOB_SECRET or KVSTORE_JOB_SECRET_FILE on every node "
          "(kvstore-launch does; see docs/SECURITY.md)");
    }
    return nullptr;
  }
  KV_CHECK(direct == nullptr || file == nullptr, KV_ERR_INVALID_ARGUMENT,
           "both KVSTORE_JOB_SECRET and KVSTORE_JOB_SECRET_FILE are set; set one");
  // The cache key holds the secret itself only as its hash.
  std::string secret = direct != nullptr ? std::string(direct) : ReadSecretFile(file);
  uint8_t digest[32];
  crypto_generichash(digest, sizeof(digest), reinterpret_cast<const uint8_t*>(secret.data()),
                     secret.size(), nullptr, 0);
  const std::string source(reinterpret_cast<const char*>(digest), sizeof(digest));
  const char* var = direct != nullptr ? "KVSTORE_JOB_SECRET" : "KVSTORE_JOB_SECRET_FILE";
  if (!c.keys || c.source != source) {
    const size_t len = secret.size();
    if (len < kMinSecretBytes || len > kMaxSecretBytes) {
      sodium_memzero(&secret[0], secret.size());
      KV_FAIL(KV_ERR_INVALID_ARGUMENT,
              "the job secret from %s is %zu bytes; it must have %zu to %zu (kvstore-launch "
              "generates 64 random hex digits)",
              var, len, kMinSecretBytes, kMaxSecretBytes);
    }
    KV_CHECK(zmq_has("curve") != 0, KV_ERR_NOT_SUPPORTED,
             "%s is set but this libzmq was built without CURVE security", var);
    auto keys = std::make_shared<JobKeys>();
    DeriveJobKeys(secret, keys.get());
    c.keys = std::move(keys);
    c.source = source;
  }
  if (!secret.empty()) sodium_memzero(&secret[0], secret.size());
  return c.keys;
}

int64_t MaxMessageBytes() {
  return EnvInt("KVSTORE_MAX_MESSAGE_BYTES", kDefaultMaxMessageBytes, kMaxStringFrame,
                int64_t{1} << 62);
}

// ---------------------------------------------------------------------------------------
// AuthGuard
// ---------------------------------------------------------------------------------------

namespace {

RateLimitedLog& Refusals() {
  // A function-local static: destroyed before the logging state it uses.
  static RateLimitedLog log("refused connections");
  return log;
}

constexpr int kWatchedEvents = ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
                               ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                               ZMQ_EVENT_HANDSHAKE_FAILED_AUTH;

std::atomic<uint64_t> g_monitor_seq{0};

std::string ProtocolError(uint32_t code) {
  switch (code) {
    case ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH:
      return "the peer does not use CURVE (no KVSTORE_JOB_SECRET)";
    case ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC:
      return "cryptographic check failed (the peer holds a different job secret)";
    default: {
      char buf[64];
      std::snprintf(buf, sizeof(buf), "handshake protocol error 0x%08x", code);
      return buf;
    }
  }
}

}  // namespace

AuthGuard::AuthGuard(zmq::context_t& ctx, zmq::socket_t& listener, const char* node)
    : keys_(ProcessJobKeys()), node_(node) {
  if (!keys_) return;
  // RFC 27: the handler of a context answers on this inproc endpoint; it must be bound
  // before the first handshake, or libzmq admits CURVE clients without asking.
  zap_ = std::make_unique<zmq::socket_t>(ctx, zmq::socket_type::rep);
  zap_->set(zmq::sockopt::linger, 0);
  zap_->bind("inproc://zeromq.zap.01");
  const std::string ep = "inproc://kvstore-handshakes-" + std::to_string(g_monitor_seq++);
  KV_CHECK(zmq_socket_monitor(listener.handle(), ep.c_str(), kWatchedEvents) == 0, KV_ERR_NETWORK,
           "cannot watch the handshakes of the %s: %s", node, zmq_strerror(zmq_errno()));
  monitor_ = std::make_unique<zmq::socket_t>(ctx, zmq::socket_type::pair);
  monitor_->set(zmq::sockopt::linger, 0);
  monitor_->connect(ep);
  // The sockets are handed to the thread (thread creation orders the accesses).
  thread_ = std::thread([this] { Loop(); });
}

AuthGuard::~AuthGuard() {
  if (!thread_.joinable()) return;
  stop_.store(true, std::memory_order_release);
  thread_.join();
}

void AuthGuard::Loop() {
  while (!stop_.load(std::memory_order_acquire)) {
    zmq::pollitem_t items[2] = {{static_cast<void*>(*zap_), 0, ZMQ_POLLIN, 0},
                                {static_cast<void*>(*monitor_), 0, ZMQ_POLLIN, 0}};
    try {
      zmq::poll(items, 2, std::chrono::milliseconds(100));
      if (items[0].revents & ZMQ_POLLIN) AnswerZap();
      if (items[1].revents & ZMQ_POLLIN) ReadMonitor();
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) break;
      Log("authentication handler: %s", e.what());
    }
  }
  zap_.reset();
  monitor_.reset();
}

// RFC 27 request: version, request id, domain, address, identity, mechanism, credentials
// (CURVE: the client's long-term public key, which CurveZMQ has proved the client holds).
// Admitted iff the mechanism is CURVE and the key is the job's member key.
void AuthGuard::AnswerZap() {
  std::vector<zmq::message_t> req;
  for (;;) {
    zmq::message_t part;
    if (!zap_->recv(part, zmq::recv_flags::dontwait)) break;
    const bool more = part.more();
    if (req.size() < 8) req.push_back(std::move(part));
    if (!more) break;
  }
  if (req.empty()) return;
  const bool well_formed = req.size() >= 7 && req[0].to_string() == "1.0";
  const bool admitted = well_formed && req[5].to_string() == "CURVE" && req[6].size() == 32 &&
                        sodium_memcmp(req[6].data(), keys_->member_public, 32) == 0;
  const std::string request_id = req.size() > 1 ? req[1].to_string() : std::string();
  const std::string address = req.size() > 3 ? req[3].to_string() : std::string("?");
  zap_->send(zmq::str_buffer("1.0"), zmq::send_flags::sndmore);
  zap_->send(zmq::buffer(request_id), zmq::send_flags::sndmore);
  zap_->send(admitted ? zmq::str_buffer("200") : zmq::str_buffer("400"), zmq::send_flags::sndmore);
  zap_->send(admitted ? zmq::str_buffer("OK") : zmq::str_buffer("not a member of this job"),
             zmq::send_flags::sndmore);
  zap_->send(zmq::str_buffer(""), zmq::send_flags::sndmore);  // user id
  zap_->send(zmq::str_buffer(""), zmq::send_flags::none);     // metadata
  if (!admitted) {
    Refusals().Event("the %s refused a connection from %s: its key is not this job's (it "
                     "knows the job's listening key but not the job secret)",
                     node_.c_str(), address.c_str());
  }
}

// libzmq monitor event: [uint16 event, uint32 value][endpoint]. AUTH failures were logged
// by AnswerZap with the peer's address.
void AuthGuard::ReadMonitor() {
  for (;;) {
    zmq::message_t head, addr;
    if (!monitor_->recv(head, zmq::recv_flags::dontwait)) return;
    if (head.more()) (void)monitor_->recv(addr);
    if (head.size() < 6) continue;
    uint16_t event = 0;
    uint32_t value = 0;
    std::memcpy(&event, head.data(), 2);
    std::memcpy(&value, head.data<char>() + 2, 4);
    const std::string where = addr.to_string();
    if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL) {
      Refusals().Event("the %s refused a connection on %s: %s", node_.c_str(), where.c_str(),
                       ProtocolError(value).c_str());
    } else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) {
      Refusals().Event("the %s refused a connection on %s: the handshake failed (%s)",
                       node_.c_str(), where.c_str(), zmq_strerror(static_cast<int>(value)));
    }
  }
}

}  // namespace dist
}  // namespace kvstore
