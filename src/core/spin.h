// spin.h - a bounded look for an event, without sleeping, before a thread sleeps until it:
// for waits that usually end within tens of microseconds (a small pull's reply, the next
// message of a node's I/O loop).
//
// Why. On a VM whose idle vCPUs halt (this project's machines: cpuidle haltpoll with no halt
// polling), waking a sleeping thread costs up to about 50 us, and a small distributed push +
// pull passes through about a dozen hand-offs between threads. A thread that is still
// looking finds the event at once, and keeps its vCPU awake for the threads it wakes.
//
// When. Only while the machine has a vCPU to spare: while every vCPU is wanted, a spinning
// thread takes the CPU from the threads that produce what it waits for, and spends the
// precedence the scheduler gives a thread that slept (a dist 4 KiB push + pull on 2 vCPUs
// at load 6 took 150-270 us with unconditional spins, 55-65 us without). SpinWorthwhile
// reads the number of running threads (/proc/loadavg, field 4, which counts the reader),
// at most once per millisecond per process, and allows spins while it, less this process's
// threads spinning at the time, is at most the number of vCPUs (a job's own spinners on a
// quiet machine must not turn its spins off).
//
// Bounds. A spin lasts at most its budget (KVSTORE_SPIN_US for the distributed stores) and
// yields the vCPU between looks, so an idle thread spends at most one budget per wait.
#pragma once

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>

namespace kvstore {

// This process's threads in SpinUntil's loop now.
inline std::atomic<int>& SpinningThreads() {
  static std::atomic<int> n{0};
  return n;
}

// Whether a spin may help now (see above). Thread-safe; cheap (an atomic load) between
// samples.
inline bool SpinWorthwhile() {
  using Clock = std::chrono::steady_clock;
  static const int fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
  static const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  static std::atomic<int64_t> next_sample_ns{0};
  static std::atomic<bool> worthwhile{false};
  if (fd < 0) return false;
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
  int64_t next = next_sample_ns.load(std::memory_order_relaxed);
  // One thread samples (the one that moves next_sample_ns); the others use the last answer.
  if (now >= next && next_sample_ns.compare_exchange_strong(next, now + 1000000, std::memory_order_relaxed)) {
    char buf[128];
    const ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);  // "0.74 0.18 0.06 3/456 12345\n"
    long running = 0;
    if (n > 0) {
      buf[n] = '\0';
      const char* p = buf;
      for (int field = 0; field < 3 && p != nullptr; ++field) {
        p = std::strchr(p, ' ');
        if (p != nullptr) ++p;
      }
      if (p != nullptr) running = std::strtol(p, nullptr, 10);
    }
    running -= SpinningThreads().load(std::memory_order_relaxed);
    worthwhile.store(n > 0 && running <= cpus, std::memory_order_relaxed);
  }
  return worthwhile.load(std::memory_order_relaxed);
}

// Looks for pred() for up to `spin_us` microseconds, yielding the vCPU between looks; true
// as soon as it holds, false when the time is up. Looks once when spin_us <= 0 or
// SpinWorthwhile() says no.
template <typename Pred>
bool SpinUntil(Pred&& pred, int spin_us) {
  if (pred()) return true;
  if (spin_us <= 0 || !SpinWorthwhile()) return false;
  const auto end = std::chrono::steady_clock::now() + std::chrono::microseconds(spin_us);
  struct Counted {  // in SpinningThreads while in the loop, whatever pred() throws
    Counted() { SpinningThreads().fetch_add(1, std::memory_order_relaxed); }
    ~Counted() { SpinningThreads().fetch_sub(1, std::memory_order_relaxed); }
  } counted;
  do {
    sched_yield();
    if (pred()) return true;
  } while (std::chrono::steady_clock::now() < end);
  return false;
}

}  // namespace kvstore
