// test_rounds.cc - sync rounds and async merges, seen from the servers' updaters.
//
//   sync_sharded_sum             W=2, S=2: a key cut over both servers sums exactly (assign)
//   sync_updater_once_per_round  W=3, S=2: the updater runs once per round and key part, with
//                                the sum of every worker's push, whatever the pipelining
//   async_each_push_applied      dist_async: every push is its own update, none summed
//   sync_pushpull_round_value    a pushpull answers with the value its round produced, and
//                                a worker's later pushpull with the next round's
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "cases.h"
#include "job.h"
#include "updaters.h"

namespace kvstore {
namespace inprocess {
namespace {

// Each server gets a RecordingUpdater; `updaters` receives them by rank.
Job::Options WithRecorders(Job::Options o, std::vector<std::shared_ptr<RecordingUpdater>>* updaters) {
  updaters->clear();
  for (int s = 0; s < o.num_servers; ++s) updaters->push_back(std::make_shared<RecordingUpdater>());
  o.server_hooks = [updaters](int s, dist::ServerHooks* h) {
    h->updater = (*updaters)[static_cast<size_t>(s)];
  };
  return o;
}

void SyncShardedSum() {
  Job::Options o;
  o.num_workers = 2;
  o.num_servers = 2;
  o.bigarray_bound = 10;  // key 3 (101 elements) is cut in two; key 4 (5) is whole
  Job job(o);
  CHECK(job.formed());
  if (!job.formed()) return;
  constexpr int64_t kBig = 101, kSmall = 5;
  std::vector<std::vector<float>> init(2), big(2), small(2);
  job.OnEachWorker("a sync round", [&](int rank, Store& s) {
    InitKey(s, 3, *Ramp(kBig, 7));  // rank 0's value is the one stored
    InitKey(s, 4, *Filled(kSmall, 1));
    auto out = Filled(kBig, -1);
    PullKey(s, 3, out.get());
    init[static_cast<size_t>(rank)] = Values(*out);
    // Worker r pushes (r + 1) * 1000 + i: the round stores 3000 + 2i.
    std::unique_ptr<Array> v = Ramp(kBig, static_cast<float>((rank + 1) * 1000));
    PushKey(s, 3, *v);
    PushKey(s, 4, *Filled(kSmall, static_cast<float>(rank + 1) / 4));
    auto out_small = Filled(kSmall, -1);
    PullKey(s, 3, out.get());
    PullKey(s, 4, out_small.get());
    s.WaitAll();
    big[static_cast<size_t>(rank)] = Values(*out);
    small[static_cast<size_t>(rank)] = Values(*out_small);
  });
  for (int r = 0; r < 2; ++r) {
    for (int64_t i = 0; i < kBig; ++i) {
      CHECK(init[static_cast<size_t>(r)][static_cast<size_t>(i)] == 7.0f + static_cast<float>(i));
      CHECK(big[static_cast<size_t>(r)][static_cast<size_t>(i)] == 3000.0f + 2.0f * static_cast<float>(i));
    }
    CHECK(small[static_cast<size_t>(r)] == std::vector<float>(kSmall, 0.75f));
  }
  const JobResult& res = job.Finish();
  CHECK_JOB_OK(res);
}

void SyncUpdaterOncePerRound() {
  std::vector<std::shared_ptr<RecordingUpdater>> upd;
  Job::Options o;
  o.num_workers = 3;
  o.num_servers = 2;
  o.bigarray_bound = 16;  // key 0 (64 elements): 32 on each server; key 1 (3): server 1
  Job job(WithRecorders(o, &upd));
  CHECK(job.formed());
  if (!job.formed()) return;
  constexpr int kRounds = 4;
  std::vector<std::vector<float>> k0(3), k1(3);
  job.OnEachWorker("pipelined sync rounds", [&](int rank, Store& s) {
    InitKey(s, 0, *Filled(64, 0.5f));
    InitKey(s, 1, *Filled(3, 0));
    // Every push of every round is queued before any round completes.
    std::vector<std::unique_ptr<Array>> vals;
    for (int j = 0; j < kRounds; ++j) {
      vals.push_back(Filled(64, static_cast<float>((rank + 1) * (j + 1))));
      PushKey(s, 0, *vals.back());
      vals.push_back(Filled(3, static_cast<float>(rank + 1)));
      PushKey(s, 1, *vals.back());
    }
    s.WaitAll();
    auto a = Filled(64, -1), b = Filled(3, -1);
    PullKey(s, 0, a.get());
    PullKey(s, 1, b.get());
    k0[static_cast<size_t>(rank)] = Values(*a);
    k1[static_cast<size_t>(rank)] = Values(*b);
  });
  // Round j of key 0 received sum_r (r + 1)(j + 1) = 6(j + 1) on each 32-element part.
  for (int s = 0; s < 2; ++s) {
    const auto calls = upd[static_cast<size_t>(s)]->calls_of(0);
    CHECK(calls.size() == kRounds);
    for (size_t j = 0; j < calls.size(); ++j) {
      CHECK(calls[j].recv == std::vector<float>(32, 6.0f * static_cast<float>(j + 1)));
    }
  }
  // Key 1 lives on server 1 only (1 % 2); each round received 1 + 2 + 3.
  CHECK(upd[0]->calls_of(1).empty());
  const auto calls1 = upd[1]->calls_of(1);
  CHECK(calls1.size() == kRounds);
  for (const auto& c : calls1) CHECK(c.recv == std::vector<float>(3, 6.0f));
  for (int r = 0; r < 3; ++r) {
    CHECK(k0[static_cast<size_t>(r)] == std::vector<float>(64, 0.5f + 6.0f * (1 + 2 + 3 + 4)));
    CHECK(k1[static_cast<size_t>(r)] == std::vector<float>(3, 6.0f * kRounds));
  }
  const JobResult& res = job.Finish();
  CHECK_JOB_OK(res);
}

void AsyncEachPushApplied() {
  std::vector<std::shared_ptr<RecordingUpdater>> upd;
  Job::Options o;
  o.type = "dist_async";
  o.num_workers = 2;
  o.num_servers = 1;
  Job job(WithRecorders(o, &upd));
  CHECK(job.formed());
  if (!job.formed()) return;
  constexpr int kPushes = 5;
  std::vector<std::vector<float>> final_values(2);
  job.OnEachWorker("async pushes", [&](int rank, Store& s) {
    InitKey(s, 5, *Filled(4, 0));
    std::vector<std::unique_ptr<Array>> vals;
    for (int j = 0; j < kPushes; ++j) {
      vals.push_back(Filled(4, static_cast<float>(100 * (rank + 1) + j)));
      PushKey(s, 5, *vals.back());
    }
    s.WaitAll();
    s.distributed()->Barrier();  // both workers' pushes are applied
    auto out = Filled(4, -1);
    PullKey(s, 5, out.get());
    final_values[static_cast<size_t>(rank)] = Values(*out);
  });
  // One update per push, each with one worker's value; a worker's pushes in its order.
  const auto calls = upd[0]->calls_of(5);
  CHECK(calls.size() == 2 * kPushes);
  std::vector<float> seen[2];
  for (const auto& c : calls) {
    CHECK(c.recv.size() == 4 && std::count(c.recv.begin(), c.recv.end(), c.recv[0]) == 4);
    if (c.recv.empty()) continue;
    const int rank = c.recv[0] >= 200 ? 1 : 0;
    seen[rank].push_back(c.recv[0]);
  }
  float total = 0;
  for (int r = 0; r < 2; ++r) {
    std::vector<float> want;
    for (int j = 0; j < kPushes; ++j) want.push_back(static_cast<float>(100 * (r + 1) + j));
    CHECK(seen[r] == want);
    for (float v : want) total += v;
  }
  for (int r = 0; r < 2; ++r) CHECK(final_values[static_cast<size_t>(r)] == std::vector<float>(4, total));
  const JobResult& res = job.Finish();
  CHECK_JOB_OK(res);
}

void SyncPushPullRoundValue() {
  std::vector<std::shared_ptr<RecordingUpdater>> upd;
  Job::Options o;
  o.num_workers = 2;
  o.num_servers = 2;
  o.bigarray_bound = 8;  // key 9 (20 elements) is cut in two
  Job job(WithRecorders(o, &upd));
  CHECK(job.formed());
  if (!job.formed()) return;
  constexpr int kRounds = 3;
  std::vector<std::vector<std::vector<float>>> got(2);
  job.OnEachWorker("pushpulls", [&](int rank, Store& s) {
    InitKey(s, 9, *Filled(20, 1));
    const int key = 9;
    std::vector<std::unique_ptr<Array>> outs;
    for (int j = 0; j < kRounds; ++j) {
      std::unique_ptr<Array> v = Ramp(20, static_cast<float>(10 * (rank + 1)));
      const Array* vals[1] = {v.get()};
      outs.push_back(Filled(20, -1));
      Array* out[1] = {outs.back().get()};
      s.PushPull(KeyList::Ints(1, &key), vals, KeyList::Ints(1, &key), out, j % 2 == 0 ? 5 : -5);
    }
    for (auto& out : outs) got[static_cast<size_t>(rank)].push_back(Values(*out));
  });
  // Round j adds (10 + i) + (20 + i) to element i: 1 + (j + 1)(30 + 2i) after it.
  for (const auto& per_worker : got) {
    CHECK(per_worker.size() == kRounds);
    for (size_t j = 0; j < per_worker.size(); ++j) {
      std::vector<float> want;
      for (int i = 0; i < 20; ++i) want.push_back(1.0f + static_cast<float>(j + 1) * (30.0f + 2.0f * static_cast<float>(i)));
      CHECK_MSG(per_worker[j] == want, "pushpull %zu: element 0 is %g, want %g", j, per_worker[j][0], want[0]);
    }
  }
  for (const auto& u : upd) CHECK(u->calls_of(9).size() == kRounds);
  const JobResult& res = job.Finish();
  CHECK_JOB_OK(res);
}

const Case kCases[] = {
    {"sync_sharded_sum", SyncShardedSum},
    {"sync_updater_once_per_round", SyncUpdaterOncePerRound},
    {"async_each_push_applied", AsyncEachPushApplied},
    {"sync_pushpull_round_value", SyncPushPullRoundValue},
};

}  // namespace
}  // namespace inprocess
}  // namespace kvstore

int main(int argc, char** argv) { return kvstore::inprocess::RunCases(argc, argv, kvstore::inprocess::kCases); }
