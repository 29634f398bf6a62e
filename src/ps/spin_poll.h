// spin_poll.h - zmq_poll that first looks without sleeping for a while (core/spin.h: why,
// when and how long), then blocks for the rest of its wait. Used by the I/O loops of
// workers and servers: a message that follows the last one within KVSTORE_SPIN_US finds the
// loop awake. spin_us 0: one blocking zmq_poll.
#pragma once

#include <zmq.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/spin.h"
#include "ps/clock.h"

namespace kvstore {
namespace dist {

// Polls `items` for up to `wait_sec`; returns zmq_poll's result (the number of ready items)
// and throws zmq::error_t as zmq::poll does.
inline int SpinPoll(zmq::pollitem_t* items, size_t n, double wait_sec, int spin_us) {
  // Without a vCPU to spare, no extra look: a zero-timeout zmq_poll costs system calls per
  // socket.
  if (wait_sec > 0 && spin_us > 0 && SpinWorthwhile()) {
    const double start = NowSec();
    int ready = 0;
    if (SpinUntil([&] { return (ready = zmq::poll(items, n, std::chrono::milliseconds(0))) > 0; },
                  static_cast<int>(std::min(wait_sec * 1e6, static_cast<double>(spin_us))))) {
      return ready;
    }
    wait_sec -= NowSec() - start;
    if (wait_sec <= 0) return zmq::poll(items, n, std::chrono::milliseconds(0));
  }
  // Whole milliseconds rounded up: a positive rest (a 1 ms wait less a 50 us spin) blocks for
  // 1 ms and never becomes a 0 ms look, which would turn the caller's loop into a busy one.
  const long ms = wait_sec > 0 ? static_cast<long>(std::ceil(wait_sec * 1000)) : 0;
  return zmq::poll(items, n, std::chrono::milliseconds(ms));
}

}  // namespace dist
}  // namespace kvstore
