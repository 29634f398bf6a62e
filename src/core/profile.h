// profile.h - the profiler: a Chrome-trace / Perfetto timeline of the library's work and
// per-key counters (KVSTORE_PROFILE, KVProfileStart/Stop/GetStats; docs/PROFILING.md).
//
// Off (the default), every hook costs one relaxed atomic load and a branch: the macros below
// build no string and read no clock unless the profiler runs.
//
// On, each thread appends its events to a buffer of its own (one uncontended mutex per
// buffer, taken by Stop too), and the counters go to one map under one lock. Buffers are
// never freed (a thread may record until the process exits); their events are written and
// dropped at Stop. Memory is bounded: past KVSTORE_PROFILE_MAX_EVENTS events (default
// 1,000,000, about 100 bytes each) further events are counted, not kept, and the file and a
// line on stderr say how many were dropped.
//
// Time. Events carry steady-clock nanoseconds; the file gives them in microseconds since
// the profiler started, and its "kvstore" metadata holds the CLOCK_MONOTONIC and
// CLOCK_REALTIME readings of that start, and the host, so that kvstore-launch can put the
// nodes of a job on one time axis (the monotonic clock on one host, the real-time clock
// across hosts).
//
// Keys are named as in messages ("3", "\"weight\""); the JSON writers turn them back into
// an int or a string.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace kvstore {
namespace profile {

extern std::atomic<bool> g_on;
inline bool On() { return g_on.load(std::memory_order_relaxed); }

int64_t NowNs();  // steady clock

// Starts recording (clearing the events and counters of an earlier run). `path` names the
// timeline written at Stop; empty: counters only. Throws INVALID_ARGUMENT when running.
void Start(const std::string& path);
// Stops recording and writes the timeline (if a path was given); returns the file written,
// or "" for none. Also run at exit when the profiler still runs. Throws IO on a write error.
std::string Stop();
// Names this process's node ("worker 0", "server 1", "scheduler"): the timeline's process
// name, and the file suffix (path "t.json" of worker 0 becomes "t.worker0.json").
void SetNode(const std::string& node);
// The counters as JSON: {"node": ..., "running": bool, "keys": [{"key": 3, ...}, ...]}.
std::string StatsJson();

// What a counter counts (the fields of StatsJson's records).
enum class Stat { kNone, kPush, kPull, kRoundWait, kReduce, kApply };

// Adds one event to the calling thread's buffer. `ph` 'X': a span [start, end) on this
// thread; 'b': an asynchronous span (it may overlap others on the thread; Perfetto draws
// it on a track of its own). `detail` (static string or nullptr) is appended to the name.
void Record(char ph, const char* name, const char* detail, int64_t start_ns, int64_t end_ns,
            const std::string& key, int64_t bytes);
// Adds to a key's counters: kPush/kPull count one call and its bytes; the others add time.
void Count(Stat stat, const std::string& key, int64_t bytes, int64_t ns);

// A span on the calling thread, from construction to destruction, with its counter;
// recorded only when Set named its key (a receive that found no message records nothing).
class Scope {
 public:
  explicit Scope(const char* name) : on_(On()), name_(name) {
    if (on_) start_ = NowNs();
  }
  ~Scope() {
    if (set_) Finish();
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;
  bool on() const { return on_; }
  void Set(std::string key, int64_t bytes, Stat stat = Stat::kNone, const char* detail = nullptr) {
    key_ = std::move(key);
    bytes_ = bytes;
    stat_ = stat;
    detail_ = detail;
    set_ = true;
  }

 private:
  void Finish();
  const bool on_;
  bool set_ = false;
  const char* name_;
  const char* detail_ = nullptr;
  int64_t start_ = 0, bytes_ = 0;
  Stat stat_ = Stat::kNone;
  std::string key_;
};

}  // namespace profile
}  // namespace kvstore

#define KV_PROFILE_CAT2_(a, b) a##b
#define KV_PROFILE_CAT_(a, b) KV_PROFILE_CAT2_(a, b)
// KV_PROFILE_SCOPE("apply", key_expr, bytes_expr[, stat[, detail]]): a span to the end of
// the enclosing block; the key and byte expressions are evaluated only when profiling.
#define KV_PROFILE_SCOPE(name, key, ...)                                    \
  ::kvstore::profile::Scope KV_PROFILE_CAT_(kv_profile_scope_, __LINE__)(name); \
  if (KV_PROFILE_CAT_(kv_profile_scope_, __LINE__).on())                   \
  KV_PROFILE_CAT_(kv_profile_scope_, __LINE__).Set(key, __VA_ARGS__)
