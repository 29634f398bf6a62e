// log.h - the nodes' log: one line per call on stderr, prefixed with the node's name and
// the UTC time of day to the microsecond ("[kvstore worker 0 14:03:07.123456] ...").
//
// Invariants. Lines are written whole (one lock around each write) and flushed at once, so
// the lines of the threads of a node, and of the nodes sharing a terminal, do not mix.
// Events a peer can repeat at will go through a RateLimitedLog (LogDropped for dropped
// messages), so that no peer can make a node write more than a few lines a period.
#pragma once

#include <cstdarg>
#include <cstdint>
#include <mutex>
#include <string>

namespace kvstore {
namespace dist {

void SetLogPrefix(const std::string& prefix);
void Log(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// A log of one kind of event that a peer can repeat at will (dropped messages, refused
// connections): the first kFirst events are logged in full; later ones are counted, and one
// line per kPeriodSec (written at the next event) and one at exit give the count since the
// last line, with the latest event's text. Thread-safe.
class RateLimitedLog {
 public:
  static constexpr uint64_t kFirst = 5;
  static constexpr double kPeriodSec = 10;
  explicit RateLimitedLog(const char* what) : what_(what) {}
  ~RateLimitedLog();  // the unreported count, if any
  void Event(const char* fmt, ...) __attribute__((format(printf, 2, 3), nonnull(2)));
  // Event with the arguments in a va_list (for loggers of their own, such as LogDropped).
  void EventV(const char* fmt, va_list ap) __attribute__((format(printf, 2, 0), nonnull(2)));

 private:
  const char* what_;  // "dropped messages"
  std::mutex mu_;
  uint64_t total_ = 0, unreported_ = 0;
  double last_line_ = 0;
  std::string latest_;
};

// Logs a message that a node dropped (malformed, unexpected, from an unknown sender), at
// most RateLimitedLog's rate: a flood of bad messages writes a few lines, not one per message.
void LogDropped(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace dist
}  // namespace kvstore
