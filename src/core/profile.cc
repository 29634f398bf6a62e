// profile.cc - the profiler's buffers, counters and JSON writers (profile.h).
#include "core/profile.h"

#include <sys/syscall.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "core/error.h"

namespace kvstore {
namespace profile {

std::atomic<bool> g_on{false};

namespace {

struct Event {
  char ph;
  const char* name;
  const char* detail;
  int64_t start, end, bytes;
  std::string key;
};

// One thread's events. The thread appends under `mu`; Stop takes them under it too.
struct ThreadBuf {
  std::mutex mu;
  std::vector<Event> events;
  long tid = 0;
  std::string thread_name;
};

struct Counters {
  int64_t pushes = 0, pulls = 0, bytes_pushed = 0, bytes_pulled = 0;
  int64_t waits = 0, wait_ns = 0, reduce_ns = 0, applies = 0, apply_ns = 0;
};

// The profiler's state: allocated once and never freed, so that threads still running at
// exit (and the exit-time Stop) never see it destroyed.
struct State {
  std::mutex mu;  // guards everything below except the atomics; never held while a buffer's is taken by its thread
  bool running = false;
  std::string path, node;
  int64_t steady0 = 0, real0 = 0;
  std::atomic<int64_t> max_events{1000000};
  std::vector<ThreadBuf*> bufs;
  std::mutex stats_mu;  // guards stats
  std::map<std::string, Counters> stats;
  std::atomic<int64_t> kept{0}, dropped{0};
};

State& S() {
  static State* s = new State;
  return *s;
}

thread_local ThreadBuf* t_buf = nullptr;

ThreadBuf* ThisThread() {
  if (t_buf != nullptr) return t_buf;
  auto* b = new ThreadBuf;
  b->tid = static_cast<long>(syscall(SYS_gettid));
  char name[32] = {0};
  if (pthread_getname_np(pthread_self(), name, sizeof(name)) == 0) b->thread_name = name;
  std::lock_guard<std::mutex> lock(S().mu);
  S().bufs.push_back(b);
  t_buf = b;
  return b;
}

int64_t ClockNs(clockid_t id) {
  timespec ts;
  clock_gettime(id, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void AppendJsonString(std::string* out, const std::string& s) {
  out->push_back('"');
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(static_cast<char>(c));
    } else if (c < 0x20) {
      char esc[8];
      std::snprintf(esc, sizeof(esc), "\\u%04x", c);
      out->append(esc);
    } else {
      out->push_back(static_cast<char>(c));
    }
  }
  out->push_back('"');
}

// A key as named in messages ("3", "\"w\"") as JSON: 3 or "w".
void AppendKey(std::string* out, const std::string& display) {
  if (display.size() >= 2 && display.front() == '"' && display.back() == '"') {
    AppendJsonString(out, display.substr(1, display.size() - 2));
  } else if (!display.empty() && display.find_first_not_of("-0123456789") == std::string::npos) {
    out->append(display);
  } else {
    AppendJsonString(out, display);
  }
}

void AppendF(std::string* out, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void AppendF(std::string* out, const char* fmt, ...) {
  char buf[256];
  va_list ap;
  va_start(ap, fmt);
  const int n = std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  out->append(buf, static_cast<size_t>(std::min(n, static_cast<int>(sizeof(buf)) - 1)));
}

// "t.json" of node "worker 0" -> "t.worker0.json"; no node (not a distributed node): `path`.
std::string NodePath(const std::string& path, const std::string& node) {
  if (node.empty()) return path;
  std::string suffix;
  for (char c : node) {
    if (c != ' ') suffix.push_back(c);
  }
  const bool json = path.size() > 5 && path.compare(path.size() - 5, 5, ".json") == 0;
  return (json ? path.substr(0, path.size() - 5) : path) + "." + suffix + ".json";
}

void AppendEvent(std::string* out, const Event& e, long pid, long tid, int64_t origin, uint64_t id) {
  std::string name = e.name;
  if (e.detail != nullptr) name += std::string(" ") + e.detail;
  const double ts = static_cast<double>(e.start - origin) / 1e3;
  std::string args = "{\"key\":";
  if (e.key.empty()) args += "null";
  else AppendKey(&args, e.key);
  AppendF(&args, ",\"bytes\":%" PRId64 "}", e.bytes);
  std::string head = "{\"name\":";
  AppendJsonString(&head, name);
  AppendF(&head, ",\"cat\":\"kvstore\",\"pid\":%ld,\"tid\":%ld,", pid, tid);
  if (e.ph == 'X') {
    out->append(head);
    AppendF(out, "\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"args\":", ts, static_cast<double>(e.end - e.start) / 1e3);
    out->append(args);
    out->append("},\n");
    return;
  }
  out->append(head);
  AppendF(out, "\"ph\":\"b\",\"id\":\"0x%" PRIx64 "\",\"ts\":%.3f,\"args\":", id, ts);
  out->append(args);
  out->append("},\n");
  out->append(head);
  AppendF(out, "\"ph\":\"e\",\"id\":\"0x%" PRIx64 "\",\"ts\":%.3f},\n", id, static_cast<double>(e.end - origin) / 1e3);
}

// Writes the timeline of the events taken from the buffers. Called with S().mu held.
void WriteTimeline(const std::string& file, std::vector<std::pair<ThreadBuf*, std::vector<Event>>>& taken) {
  State& s = S();
  const long pid = static_cast<long>(getpid());
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  std::string out = "{\"traceEvents\":[\n";
  out += "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" + std::to_string(pid) + ",\"tid\":0,\"args\":{\"name\":";
  AppendJsonString(&out, s.node.empty() ? std::string("kvstore ") + std::to_string(pid) : s.node);
  out += "}},\n";
  uint64_t id = 0;
  for (auto& t : taken) {
    if (t.second.empty()) continue;
    AppendF(&out, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%ld,\"tid\":%ld,\"args\":{\"name\":", pid, t.first->tid);
    AppendJsonString(&out, t.first->thread_name.empty() ? "thread" : t.first->thread_name);
    out += "}},\n";
    for (const Event& e : t.second) AppendEvent(&out, e, pid, t.first->tid, s.steady0, ++id);
  }
  if (out.back() == '\n' && out[out.size() - 2] == ',') out.resize(out.size() - 2);
  out += "\n],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":{\"kvstore_node\":";
  AppendJsonString(&out, s.node);
  out += ",\"host\":";
  AppendJsonString(&out, host);
  AppendF(&out, ",\"pid\":%ld,\"monotonic_origin_ns\":%" PRId64 ",\"realtime_origin_ns\":%" PRId64
          ",\"events\":%" PRId64 ",\"dropped_events\":%" PRId64 ",\"max_events\":%" PRId64 "}}\n",
          pid, s.steady0, s.real0, std::min(s.kept.load(), s.max_events.load()), s.dropped.load(), s.max_events.load());
  FILE* f = std::fopen(file.c_str(), "w");
  KV_CHECK(f != nullptr, KV_ERR_INVALID_ARGUMENT, "profile: cannot write '%s': %s", file.c_str(), std::strerror(errno));
  const size_t written = std::fwrite(out.data(), 1, out.size(), f);
  const bool closed = std::fclose(f) == 0;
  KV_CHECK(written == out.size() && closed, KV_ERR_INVALID_ARGUMENT, "profile: writing '%s' failed",
           file.c_str());
}

// KVSTORE_PROFILE starts the profiler when the library is loaded; whatever still runs at
// exit is written then.
struct AtLoad {
  AtLoad() {
    const char* p = std::getenv("KVSTORE_PROFILE");
    if (p == nullptr || *p == '\0') return;
    try {
      Start(p);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "[kvstore] KVSTORE_PROFILE ignored: %s\n", e.what());
    }
  }
  ~AtLoad() {
    try {
      if (On()) Stop();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "[kvstore] %s\n", e.what());
    }
  }
} g_at_load;

}  // namespace

int64_t NowNs() { return ClockNs(CLOCK_MONOTONIC); }

void Start(const std::string& path) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  KV_CHECK(!s.running, KV_ERR_INVALID_ARGUMENT, "the profiler already runs (writing '%s')", s.path.c_str());
  if (!path.empty()) {
    const size_t slash = path.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
    KV_CHECK(access(dir.c_str(), W_OK) == 0, KV_ERR_INVALID_ARGUMENT,
             "profile path '%s': the folder '%s' is not writable: %s", path.c_str(), dir.c_str(),
             std::strerror(errno));
  }
  const char* cap = std::getenv("KVSTORE_PROFILE_MAX_EVENTS");
  int64_t max_events = 1000000;
  if (cap != nullptr && *cap != '\0') {
    char* end = nullptr;
    const long long v = std::strtoll(cap, &end, 10);
    KV_CHECK(*end == '\0' && v >= 0, KV_ERR_INVALID_ARGUMENT,
             "KVSTORE_PROFILE_MAX_EVENTS='%s' is not a count", cap);
    max_events = v;
  }
  s.max_events = max_events;
  for (ThreadBuf* b : s.bufs) {
    std::lock_guard<std::mutex> bl(b->mu);
    b->events.clear();
  }
  {
    std::lock_guard<std::mutex> sl(s.stats_mu);
    s.stats.clear();
  }
  s.kept = 0;
  s.dropped = 0;
  s.path = path;
  s.steady0 = ClockNs(CLOCK_MONOTONIC);
  s.real0 = ClockNs(CLOCK_REALTIME);
  s.running = true;
  g_on.store(true, std::memory_order_release);
}

std::string Stop() {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.running) return "";
  g_on.store(false, std::memory_order_release);
  s.running = false;
  std::vector<std::pair<ThreadBuf*, std::vector<Event>>> taken;
  for (ThreadBuf* b : s.bufs) {
    std::lock_guard<std::mutex> bl(b->mu);
    taken.emplace_back(b, std::move(b->events));
    b->events.clear();
  }
  if (s.dropped.load() > 0) {
    std::fprintf(stderr,
                 "[kvstore] profile: %" PRId64 " events were dropped after the first %" PRId64
                 " (KVSTORE_PROFILE_MAX_EVENTS); the timeline ends early\n",
                 s.dropped.load(), s.max_events.load());
  }
  if (s.path.empty()) return "";
  const std::string file = NodePath(s.path, s.node);
  WriteTimeline(file, taken);
  return file;
}

void SetNode(const std::string& node) {
  std::lock_guard<std::mutex> lock(S().mu);
  S().node = node;
}

void Record(char ph, const char* name, const char* detail, int64_t start_ns, int64_t end_ns,
            const std::string& key, int64_t bytes) {
  if (!On()) return;
  State& s = S();
  if (s.kept.fetch_add(1, std::memory_order_relaxed) >= s.max_events) {
    s.dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  ThreadBuf* b = ThisThread();
  std::lock_guard<std::mutex> lock(b->mu);
  b->events.push_back(Event{ph, name, detail, start_ns, end_ns, bytes, key});
}

void Count(Stat stat, const std::string& key, int64_t bytes, int64_t ns) {
  if (!On() || stat == Stat::kNone) return;
  State& s = S();
  std::lock_guard<std::mutex> lock(s.stats_mu);
  Counters& c = s.stats[key];
  switch (stat) {
    case Stat::kPush: ++c.pushes; c.bytes_pushed += bytes; break;
    case Stat::kPull: ++c.pulls; c.bytes_pulled += bytes; break;
    case Stat::kRoundWait: ++c.waits; c.wait_ns += ns; break;
    case Stat::kReduce: c.reduce_ns += ns; break;
    case Stat::kApply: ++c.applies; c.apply_ns += ns; break;
    case Stat::kNone: break;
  }
}

std::string StatsJson() {
  State& s = S();
  std::string out = "{\"node\":";
  {
    std::lock_guard<std::mutex> lock(s.mu);
    AppendJsonString(&out, s.node);
    out += s.running ? ",\"running\":true" : ",\"running\":false";
  }
  out += ",\"keys\":[";
  std::lock_guard<std::mutex> lock(s.stats_mu);
  bool first = true;
  for (const auto& kv : s.stats) {
    const Counters& c = kv.second;
    out += first ? "\n{\"key\":" : ",\n{\"key\":";
    first = false;
    AppendKey(&out, kv.first);
    AppendF(&out, ",\"pushes\":%" PRId64 ",\"pulls\":%" PRId64 ",\"bytes_pushed\":%" PRId64
            ",\"bytes_pulled\":%" PRId64, c.pushes, c.pulls, c.bytes_pushed, c.bytes_pulled);
    AppendF(&out, ",\"round_waits\":%" PRId64 ",\"round_wait_us\":%.3f,\"reduce_us\":%.3f"
            ",\"applies\":%" PRId64 ",\"apply_us\":%.3f}", c.waits, static_cast<double>(c.wait_ns) / 1e3,
            static_cast<double>(c.reduce_ns) / 1e3, c.applies, static_cast<double>(c.apply_ns) / 1e3);
  }
  out += "]}";
  return out;
}

void Scope::Finish() {
  const int64_t end = NowNs();
  Record('X', name_, detail_, start_, end, key_, bytes_);
  Count(stat_, key_, bytes_, end - start_);
}

}  // namespace profile
}  // namespace kvstore
