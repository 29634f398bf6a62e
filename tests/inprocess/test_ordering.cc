// test_ordering.cc - a worker's requests of one key keep their order across priorities.
//
// The worker's send queue runs higher priorities first, but a request never overtakes an
// earlier request of its key (worker.cc, "Ordering"); the server answers a pull only after
// the worker's earlier pushes of the key were applied. So a pull queued right after push j
// observes exactly pushes 1..j of every worker (sync: round j, which cannot complete
// without this worker's push j, and round j + 1 cannot start before this worker's push
// j + 1, queued after the pull), and the server's updater receives the pushes in the order
// they were made, whatever priorities they were queued with.
//
//   sync_pull_sees_own_pushes   dist_sync, W=2, S=2, sharded and whole keys
//   async_pull_sees_own_pushes  dist_async, W=1, S=2
//   high_priority_overtakes     behind a full pull window, a key queued last at a higher
//                               priority leaves first (the server sees its push first)
#include <memory>
#include <string>
#include <vector>

#include "cases.h"
#include "job.h"
#include "updaters.h"

namespace kvstore {
namespace inprocess {
namespace {

constexpr int kKeys = 6;
constexpr int kSteps = 12;

int64_t KeySize(int key) { return key % 2 == 0 ? 32 : 3; }  // even keys are sharded

// Priorities that jump around: later pushes often outrank earlier ones, and the pull behind
// a push is queued at the opposite extreme (a pull at +100 behind a push at -5 would be
// sent first if the queue ignored keys).
int PushPriority(int step, int key) { return (step * 7 + key * 3) % 11 - 5; }
int PullPriority(int step, int key) { return PushPriority(step, key) < 0 ? 100 : -100; }

struct PullRecord {
  int key;
  int step;
  std::unique_ptr<Array> out;
};

void PullSeesOwnPushes(const std::string& type, int workers) {
  std::vector<std::shared_ptr<RecordingUpdater>> upd;
  Job::Options o;
  o.type = type;
  o.num_workers = workers;
  o.num_servers = 2;
  o.bigarray_bound = 16;
  for (int s = 0; s < o.num_servers; ++s) upd.push_back(std::make_shared<RecordingUpdater>());
  o.server_hooks = [&upd](int s, dist::ServerHooks* h) { h->updater = upd[static_cast<size_t>(s)]; };
  Job job(o);
  CHECK(job.formed());
  if (!job.formed()) return;
  std::vector<std::vector<PullRecord>> pulls(static_cast<size_t>(workers));
  job.OnEachWorker("pushes and pulls at mixed priorities", [&](int rank, Store& s) {
    for (int k = 0; k < kKeys; ++k) InitKey(s, k, *Filled(KeySize(k), 0));
    std::vector<std::unique_ptr<Array>> vals;
    for (int j = 1; j <= kSteps; ++j) {
      for (int k = 0; k < kKeys; ++k) {
        vals.push_back(Filled(KeySize(k), static_cast<float>(j)));
        PushKey(s, k, *vals.back(), PushPriority(j, k));
        if ((j + k) % 3 == 0) {
          PullRecord r{k, j, Filled(KeySize(k), -1)};
          PullKey(s, k, r.out.get(), PullPriority(j, k));
          pulls[static_cast<size_t>(rank)].push_back(std::move(r));
        }
      }
    }
    s.WaitAll();
    for (PullRecord& r : pulls[static_cast<size_t>(rank)]) r.out->WaitPendingWrites();
  });
  // After push j of every worker: sum_{i <= j} W * i.
  const auto after = [workers](int j) { return static_cast<float>(workers * j * (j + 1) / 2); };
  for (const auto& per_worker : pulls) {
    for (const PullRecord& r : per_worker) {
      const std::vector<float> got = Values(*r.out);
      CHECK_MSG(got == std::vector<float>(static_cast<size_t>(KeySize(r.key)), after(r.step)),
                "pull of key %d after step %d: got %g, want %g", r.key, r.step, got[0], after(r.step));
    }
  }
  // Each part of each key saw one update per step (sync: the round's sum), in step order.
  for (int k = 0; k < kKeys; ++k) {
    for (int s = 0; s < 2; ++s) {
      const bool holds = KeySize(k) >= 16 || k % 2 == s;
      const auto calls = upd[static_cast<size_t>(s)]->calls_of(k);
      std::vector<float> got, want;
      for (const auto& c : calls) got.push_back(c.recv.empty() ? -1 : c.recv[0]);
      const bool async = type.find("async") != std::string::npos;
      for (int j = 1; holds && j <= kSteps; ++j) {
        for (int w = 0; w < (async ? workers : 1); ++w) {
          want.push_back(static_cast<float>(async ? j : workers * j));
        }
      }
      CHECK(got == want);
    }
  }
  const JobResult& res = job.Finish();
  CHECK_JOB_OK(res);
}

// With the pull window full (two 32 MiB pulls in flight, far longer than queueing the rest
// takes), a key whose requests were queued last at priority 10 leaves before the keys
// queued earlier at priority 0. Each key queues a pull, which the window holds back, then a
// push, which waits behind its key's pull; the server's updater (dist_async: one call per
// push, in arrival order) sees the pushes in the order their keys left.
void HighPriorityOvertakes() {
  auto upd = std::make_shared<RecordingUpdater>();
  Job::Options o;
  o.type = "dist_async";
  o.server_hooks = [&upd](int, dist::ServerHooks* h) { h->updater = upd; };
  Job job(o);
  CHECK(job.formed());
  if (!job.formed()) return;
  constexpr int kBig = 2, kLow = 6, kHigh = kBig + kLow;  // keys 0-1 big, 2-7 low, 8 high
  job.OnEachWorker("a high-priority key queued behind a full pull window", [&](int, Store& s) {
    std::vector<std::unique_ptr<Array>> vals, outs;
    for (int k = 0; k <= kHigh; ++k) {
      vals.push_back(Filled(k < kBig ? int64_t{1} << 23 : 1024, static_cast<float>(k)));
      outs.push_back(Filled(vals.back()->size(), -1));
      InitKey(s, k, *vals.back());
    }
    for (int k = 0; k < kBig; ++k) PullKey(s, k, outs[static_cast<size_t>(k)].get(), 0);
    for (int k = kBig; k <= kHigh; ++k) {
      const int priority = k == kHigh ? 10 : 0;
      PullKey(s, k, outs[static_cast<size_t>(k)].get(), priority);
      PushKey(s, k, *vals[static_cast<size_t>(k)], priority);
    }
    s.WaitAll();
    for (auto& out : outs) out->WaitPendingWrites();
  });
  std::vector<int> order;
  for (const auto& c : upd->calls()) order.push_back(c.key);
  CHECK_MSG(order.size() == static_cast<size_t>(kLow + 1) && order[0] == kHigh,
            "the server applied %zu pushes, the first of key %d; want %d, the first of key %d",
            order.size(), order.empty() ? -1 : order[0], kLow + 1, kHigh);
  const JobResult& res = job.Finish();
  CHECK_JOB_OK(res);
}

void SyncPullSeesOwnPushes() { PullSeesOwnPushes("dist_sync", 2); }
void AsyncPullSeesOwnPushes() { PullSeesOwnPushes("dist_async", 1); }

const Case kCases[] = {
    {"sync_pull_sees_own_pushes", SyncPullSeesOwnPushes},
    {"async_pull_sees_own_pushes", AsyncPullSeesOwnPushes},
    {"high_priority_overtakes", HighPriorityOvertakes},
};

}  // namespace
}  // namespace inprocess
}  // namespace kvstore

int main(int argc, char** argv) { return kvstore::inprocess::RunCases(argc, argv, kvstore::inprocess::kCases); }
