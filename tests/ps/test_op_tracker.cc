// test_op_tracker.cc - the worker's completion of operations (src/ps/op.h OpTracker), without
// sockets: WaitAll returns once every operation begun before it has finished, its output's
// pending write ended first, while another thread (the I/O thread's place) finishes them; a
// failed push is reported once by the next WaitAll and fails later pulls of its key only,
// until a later push of the key succeeds or a WaitAll reported it.
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/array.h"
#include "core/error.h"
#include "ps/op.h"

extern "C" {
#include "../common/check.h"
}

using kvstore::Error;
using kvstore::dist::MsgType;
using kvstore::dist::Op;
using kvstore::dist::OpTracker;
using kvstore::dist::WorkerKey;

namespace {

std::unique_ptr<WorkerKey> Key(const char* name) {
  auto k = std::make_unique<WorkerKey>();
  k->display = name;
  return k;
}

std::unique_ptr<Op> MakeOp(MsgType type, WorkerKey* key, KVArray_* out = nullptr) {
  auto op = std::make_unique<Op>();
  op->type = type;
  op->key = key;
  op->remaining = 1;
  if (out != nullptr) {
    out->BeginPendingWrite();
    op->outs.push_back(out);
  }
  return op;
}

// Returns WaitAll's error code (0: none) and its message in *msg.
int WaitAll(OpTracker& t, std::string* msg = nullptr) {
  try {
    t.WaitAll();
    return 0;
  } catch (const Error& e) {
    if (msg != nullptr) *msg = e.what();
    return e.code();
  }
}

// Rounds of many operations finished by a second thread, one by one, while this thread
// waits: WaitAll returns only once the last one finished, and sees its output's write ended.
void TestWaitAllWaitsForEveryOp() {
  constexpr int kRounds = 200, kOps = 500;
  auto key = Key("1");
  std::unique_ptr<KVArray_> out = KVArray_::Create({1}, KV_FLOAT32, kvstore::Context{});
  for (int round = 0; round < kRounds; ++round) {
    OpTracker t;
    std::vector<std::unique_ptr<Op>> ops;
    for (int i = 0; i < kOps; ++i) {
      ops.push_back(MakeOp(i % 2 == 0 ? MsgType::kPush : MsgType::kPull, key.get(), i % 2 == 0 ? nullptr : out.get()));
      t.Begin(*ops.back());
    }
    std::atomic<int> finished{0};
    std::thread io([&] {
      for (auto& op : ops) {
        if (round % 2 == 0) std::this_thread::yield();  // a waiter asleep, or still looking
        t.Finish(*op);
        finished.fetch_add(1, std::memory_order_relaxed);
      }
    });
    const int code = WaitAll(t);
    // Finish counted the last op out after everything else it does: the pending writes ended.
    CHECK(code == 0);
    CHECK(out->quiet());
    io.join();
    CHECK(finished.load() == kOps);
  }
}

// A failed push: the pull queued after it fails, naming it; a pull queued before it does
// not; WaitAll reports the push once; a pull after that WaitAll succeeds.
void TestFailedPushFailsLaterPulls() {
  OpTracker t;
  auto key = Key("7");
  auto other = Key("8");
  auto early_pull = MakeOp(MsgType::kPull, key.get());
  t.Begin(*early_pull);
  auto push = MakeOp(MsgType::kPush, key.get());
  t.Begin(*push);
  auto pull = MakeOp(MsgType::kPull, key.get());
  t.Begin(*pull);
  auto other_pull = MakeOp(MsgType::kPull, other.get());
  t.Begin(*other_pull);
  t.Finish(*early_pull);
  push->status = KV_ERR_TIMEOUT;
  push->msg = "push of key 7 (server 0): no reply";
  t.Finish(*push);
  t.Finish(*pull);
  t.Finish(*other_pull);
  CHECK(early_pull->status == 0);
  CHECK(pull->status == KV_ERR_TIMEOUT);
  CHECK(pull->msg.find("pull of key 7 follows a failed push of the key") != std::string::npos);
  CHECK(other_pull->status == 0);
  std::string msg;
  CHECK(WaitAll(t, &msg) == KV_ERR_TIMEOUT);
  CHECK(msg == "push of key 7 (server 0): no reply");
  CHECK(WaitAll(t) == 0);  // reported once
  auto after = MakeOp(MsgType::kPull, key.get());
  t.Begin(*after);
  t.Finish(*after);
  CHECK(after->status == 0);
}

// A later successful push of the key clears its failed state for the pulls after it.
void TestLaterPushClears() {
  OpTracker t;
  auto key = Key("9");
  auto bad = MakeOp(MsgType::kPush, key.get());
  t.Begin(*bad);
  auto good = MakeOp(MsgType::kPush, key.get());
  t.Begin(*good);
  auto pull = MakeOp(MsgType::kPull, key.get());
  t.Begin(*pull);
  bad->status = KV_ERR_PEER_DEAD;
  bad->msg = "server 1 is dead";
  t.Finish(*bad);
  t.Finish(*good);
  t.Finish(*pull);
  CHECK(pull->status == 0);
  CHECK(WaitAll(t) == KV_ERR_PEER_DEAD);
}

}  // namespace

// A tracker destroyed as soon as WaitAll returns, while the thread that finished the last
// operation may still be inside Finish: Finish must be done with the tracker before WaitAll
// can see the count at zero (a use after free otherwise, which the sanitizer builds report;
// CI runs this test under TSan).
void TestDestroyedRightAfterWaitAll() {
  constexpr int kRounds = 5000;
  auto key = Key("7");
  for (int r = 0; r < kRounds; ++r) {
    auto tracker = std::make_unique<OpTracker>();
    auto op = MakeOp(MsgType::kPull, key.get());
    tracker->Begin(*op);
    OpTracker* t = tracker.get();
    std::thread io([&] { t->Finish(*op); });
    CHECK(WaitAll(*tracker) == 0);
    tracker.reset();
    io.join();
  }
}

int main() {
  TestDestroyedRightAfterWaitAll();
  TestWaitAllWaitsForEveryOp();
  TestFailedPushFailsLaterPulls();
  TestLaterPushClears();
  return check_summary();
}
