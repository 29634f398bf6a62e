// log.cc - Log, RateLimitedLog and the dropped-message log (log.h).
#include "ps/log.h"

#include <cstdio>
#include <ctime>

#include "core/profile.h"
#include "ps/clock.h"

namespace kvstore {
namespace dist {

namespace {

std::mutex g_log_mu;
std::string g_log_prefix = "kvstore";

}  // namespace

void SetLogPrefix(const std::string& prefix) {
  profile::SetNode(prefix);  // the timeline's process name and file suffix
  std::lock_guard<std::mutex> lock(g_log_mu);
  g_log_prefix = prefix;
}

void Log(const char* fmt, ...) {
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  // UTC wall-clock time to the microsecond, comparable across the nodes' logs.
  timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  tm utc;
  gmtime_r(&now.tv_sec, &utc);
  std::lock_guard<std::mutex> lock(g_log_mu);
  std::fprintf(stderr, "[kvstore %s %02d:%02d:%02d.%06ld] %s\n", g_log_prefix.c_str(), utc.tm_hour,
               utc.tm_min, utc.tm_sec, now.tv_nsec / 1000, buf);
  std::fflush(stderr);
}

RateLimitedLog::~RateLimitedLog() {
  if (unreported_ > 0) {
    Log("%llu more %s (%llu in all), the last: %s", static_cast<unsigned long long>(unreported_),
        what_, static_cast<unsigned long long>(total_), latest_.c_str());
  }
}

void RateLimitedLog::Event(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  EventV(fmt, ap);
  va_end(ap);
}

void RateLimitedLog::EventV(const char* fmt, va_list ap) {
  char buf[1024];
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
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

namespace {
// Destroyed at exit, after its last event (the nodes' threads have stopped by then).
RateLimitedLog g_dropped("dropped messages");
}  // namespace

// The message is formatted once, by the log itself.
void LogDropped(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  g_dropped.EventV(fmt, ap);
  va_end(ap);
}

}  // namespace dist
}  // namespace kvstore
