// test_spin.cc - the bounded spins of the data path's waits (core/spin.h, ps/spin_poll.h,
// Array::WaitPendingWrites): a spin ends when its event comes or its budget is spent, never
// shortens a wait, never loses a producer's error, and leaves no thread counted as spinning.
// Whether a spin happens depends on the machine's load (SpinWorthwhile), so every check
// holds either way.
#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

#include <zmq.hpp>

#include "core/array.h"
#include "core/error.h"
#include "core/spin.h"
#include "ps/spin_poll.h"

extern "C" {
#include "../common/check.h"
}

using Clock = std::chrono::steady_clock;
static double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

static void TestSpinUntil() {
  int looks = 0;
  CHECK(kvstore::SpinUntil([&] { return ++looks > 0; }, 50));
  CHECK(looks == 1);
  looks = 0;
  CHECK(!kvstore::SpinUntil([&] { ++looks; return false; }, 0));  // no budget: one look
  CHECK(looks == 1);
  // An event that never comes: the spin gives up within its budget (plus scheduling slack).
  const auto t = Clock::now();
  CHECK(!kvstore::SpinUntil([] { return false; }, 2000));
  CHECK_MSG(Since(t) < 1.0, "a 2 ms spin lasted %.3f s", Since(t));
  // An event from another thread ends the spin (or is seen by the first look after it).
  std::atomic<bool> flag{false};
  std::thread setter([&] { flag.store(true); });
  setter.join();
  CHECK(kvstore::SpinUntil([&] { return flag.load(); }, 50));
  // A look that throws leaves no thread counted as spinning.
  looks = 0;
  try {
    kvstore::SpinUntil([&]() -> bool { if (++looks > 1) throw std::runtime_error("x"); return false; }, 100000);
  } catch (const std::runtime_error&) {
  }
  CHECK(kvstore::SpinningThreads().load() == 0);
}

// A pull's wait with a spin budget still returns only once the write ended, and throws the
// producer's error.
static void TestArrayWait() {
  KVArray_::SetWaitSpinUs(1000);
  for (int code : {0, static_cast<int>(KV_ERR_TIMEOUT)}) {
    for (int delay_us : {0, 300, 20000}) {  // within the spin, at its end, well after it
      auto a = KVArray_::Create({4}, KV_FLOAT32, kvstore::Context{});
      a->BeginPendingWrite();
      std::atomic<bool> ended{false};
      std::thread producer([&] {
        std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
        ended.store(true);
        a->EndPendingWrite(code, "the producer failed");
      });
      int got = 0;
      try {
        a->WaitPendingWrites();
      } catch (const kvstore::Error& e) {
        got = e.code();
      }
      CHECK_MSG(ended.load(), "the wait returned before the write ended (delay %d us)", delay_us);
      CHECK_MSG(got == code, "delay %d us: got code %d, want %d", delay_us, got, code);
      producer.join();
    }
  }
  KVArray_::SetWaitSpinUs(0);
}

// SpinPoll finds a message that comes during or after its spin, and otherwise waits its
// whole wait (the spin is part of it, not an addition or a shortcut).
static void TestSpinPoll() {
  zmq::context_t ctx;
  zmq::socket_t rx(ctx, zmq::socket_type::pair), tx(ctx, zmq::socket_type::pair);
  rx.bind("inproc://spin");
  tx.connect("inproc://spin");
  for (int delay_us : {0, 20, 5000}) {
    std::thread sender([&] {
      std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
      tx.send(zmq::str_buffer("m"), zmq::send_flags::none);
    });
    zmq::pollitem_t item{static_cast<void*>(rx), 0, ZMQ_POLLIN, 0};
    int ready = 0;
    const auto t = Clock::now();
    while (ready == 0 && Since(t) < 5) ready = kvstore::dist::SpinPoll(&item, 1, 1.0, 50);
    CHECK_MSG(ready == 1 && (item.revents & ZMQ_POLLIN), "delay %d us: the message was not found", delay_us);
    zmq::message_t m;
    CHECK(rx.recv(m, zmq::recv_flags::dontwait).has_value());
    sender.join();
  }
  zmq::pollitem_t item{static_cast<void*>(rx), 0, ZMQ_POLLIN, 0};
  const auto t = Clock::now();
  CHECK(kvstore::dist::SpinPoll(&item, 1, 0.05, 20) == 0);
  CHECK_MSG(Since(t) >= 0.045 && Since(t) < 2.0, "a 50 ms poll with a 20 us spin took %.4f s", Since(t));
  CHECK(kvstore::SpinningThreads().load() == 0);
}

// A wait shorter than a millisecond still blocks: the rest of a 1 ms wait after a 50 us spin
// (the worker I/O loop's wait while a server's ring is full), and a 0.9 ms wait with no spin
// (so the check holds whether SpinWorthwhile allows the spin or not), round up to a 1 ms
// zmq_poll, never down to a 0 ms look that turns the loop into a busy one.
static void TestSpinPollShortWait() {
  zmq::context_t ctx;
  zmq::socket_t rx(ctx, zmq::socket_type::pair);
  rx.bind("inproc://spin-short");
  struct Case {
    double wait_sec;
    int spin_us;
  };
  for (const Case c : {Case{0.001, 50}, Case{0.0009, 0}}) {
    zmq::pollitem_t item{static_cast<void*>(rx), 0, ZMQ_POLLIN, 0};
    const auto t = Clock::now();
    CHECK(kvstore::dist::SpinPoll(&item, 1, c.wait_sec, c.spin_us) == 0);
    CHECK_MSG(Since(t) >= 0.0009 && Since(t) < 2.0, "a %.4f s poll with a %d us spin took %.6f s",
              c.wait_sec, c.spin_us, Since(t));
  }
}

int main() {
  TestSpinUntil();
  TestArrayWait();
  TestSpinPoll();
  TestSpinPollShortWait();
  return check_summary();
}
