// clock.h - the monotonic clock every node measures deadlines, heartbeats and timeouts with.
//
// Times are seconds (double) on std::chrono::steady_clock; a deadline of +inf means "wait
// forever" and compares greater than every NowSec().
#pragma once

#include <chrono>
#include <limits>

namespace kvstore {
namespace dist {

using Clock = std::chrono::steady_clock;
inline double NowSec() {
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}
// A deadline `sec` from now; +inf when sec <= 0 (wait forever).
inline double DeadlineAfter(double sec) {
  if (sec <= 0) return std::numeric_limits<double>::infinity();
  return NowSec() + sec;
}

}  // namespace dist
}  // namespace kvstore
