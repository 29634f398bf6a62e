// config.cc - roles, environment variables, Config::Load and host detection (config.h).
#include "ps/config.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string_view>

#include "core/error.h"

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

const char* EnvString(const char* name) {
  const char* v = std::getenv(name);
  return (v != nullptr && *v != '\0') ? v : nullptr;
}

namespace {

// Blanks around a numeric value (see EnvInt in common.h).
constexpr const char* kBlanks = " \t\n\r\v\f";

// The value of `name` without surrounding blanks; false when unset or blank.
bool EnvNumberText(const char* name, std::string_view* out) {
  const char* v = EnvString(name);
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

Config Config::Load() {
  Config c;
  c.role = RoleFromEnv();
  const char* uri = EnvString("DMLC_PS_ROOT_URI");
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
  if (const char* b = EnvString("KVSTORE_SCHEDULER_BIND")) c.scheduler_bind = b;
  c.shm = EnvInt("KVSTORE_SHM", 1, 0, 1, false) != 0;
  c.shm_ring_bytes = EnvInt("KVSTORE_SHM_RING_BYTES", c.shm_ring_bytes, 1 << 20, int64_t{4} << 30, false);
  c.spin_us = static_cast<int>(EnvInt("KVSTORE_SPIN_US", c.spin_us, 0, 10000, false));
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

std::string DetectHost(const std::string& root_uri) {
  if (const char* h = EnvString("DMLC_NODE_HOST")) return h;
  const char* iface = EnvString("DMLC_INTERFACE");
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
