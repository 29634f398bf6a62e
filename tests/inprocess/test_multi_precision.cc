// test_multi_precision.cc - optimizers with multi_precision=1 on the servers: float16 keys
// keep a float32 master copy, the workers' float16 pushes are summed in float32, and pulls
// return the master rounded to float16. The spec reaches the servers the way a job sends it,
// through every worker's SetOptimizer.
//
//   sync_sums_in_float32      W=2, S=2, a float16 key cut over both servers: worker 0
//                             pushes 1024, worker 1 0.5; the float32 sums (1024.5 a round)
//                             accumulate in the master and the pulls are its float16
//                             rounding, where a float16-rounded sum would lose every 0.5
//   sync_matches_local_store  W=2, S=2, sgd/adam with multi_precision: every bit of the
//                             servers' float16 weights equals a `local` store's (itself
//                             checked against the float32 reference in tests/optimizer)
//                             given both workers' gradients in one push; a float32 key
//                             of the same job is unaffected
//   async_master_keeps_small_steps  dist_async, one worker: pushes below half a float16 ulp
//                             add up in the master and show once they reach the weight
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cases.h"
#include "core/dtype.h"
#include "job.h"

namespace kvstore {
namespace inprocess {
namespace {

std::unique_ptr<Array> Halves(const std::vector<uint16_t>& bits) {
  std::unique_ptr<Array> a =
      Array::Create({static_cast<int64_t>(bits.size())}, KV_FLOAT16, Context{});
  if (!bits.empty()) std::memcpy(a->data(), bits.data(), bits.size() * sizeof(uint16_t));
  return a;
}

std::vector<uint16_t> HalfValues(Array& a) {
  a.WaitPendingWrites();
  const auto* p = static_cast<const uint16_t*>(a.data());
  return std::vector<uint16_t>(p, p + a.size());
}

// Runs a W=2 S=2 dist_sync job (`bound` = bigarray_bound) in which both workers set `spec`,
// init float16 key 0 to `w0`, and for each round r push grads[rank][r]; returns what each
// worker pulled after each round: pulled[rank][round].
std::vector<std::vector<std::vector<uint16_t>>> SyncRounds(
    const std::string& spec, const std::vector<uint16_t>& w0,
    const std::vector<std::vector<std::vector<uint16_t>>>& grads, int64_t bound) {
  Job::Options o;
  o.num_workers = 2;
  o.num_servers = 2;
  o.bigarray_bound = bound;
  Job job(o);
  CHECK(job.formed());
  std::vector<std::vector<std::vector<uint16_t>>> pulled(2);
  if (!job.formed()) return pulled;
  job.OnEachWorker("multi-precision rounds", [&](int rank, Store& s) {
    s.SetOptimizer(spec);
    InitKey(s, 0, *Halves(w0));
    for (const auto& g : grads[static_cast<size_t>(rank)]) {
      PushKey(s, 0, *Halves(g));
      std::unique_ptr<Array> out = Halves(std::vector<uint16_t>(w0.size()));
      PullKey(s, 0, out.get());
      pulled[static_cast<size_t>(rank)].push_back(HalfValues(*out));
    }
  });
  const JobResult& res = job.Finish();
  CHECK_JOB_OK(res);
  return pulled;
}

void SyncSumsInFloat32() {
  // test(multi_precision=1) adds the round's sum to the master: 1024 + 0.5 = 1024.5 in
  // float32 each round. Master 1024.5, 2049, 3073.5; float16 (spacing 1 in [1024, 2048),
  // 2 in [2048, 4096)): 1024 (tie, even) = 0x6400, 2048 (tie, even) = 0x6800, 3074 = 0x6A01.
  // Without multi_precision the float16 sum rounds to 1024 each round: 0x6A00 after three.
  constexpr size_t kN = 40;  // bigarray_bound 16: 20 elements on each server
  const std::vector<uint16_t> w0(kN, 0);
  std::vector<std::vector<std::vector<uint16_t>>> grads(2);
  for (int round = 0; round < 3; ++round) {
    grads[0].push_back(std::vector<uint16_t>(kN, 0x6400));  // 1024
    grads[1].push_back(std::vector<uint16_t>(kN, 0x3800));  // 0.5
  }
  const auto mp = SyncRounds("test(multi_precision=1)", w0, grads, 16);
  const uint16_t want[3] = {0x6400, 0x6800, 0x6A01};
  for (const auto& per_worker : mp) {
    CHECK(per_worker.size() == 3);
    for (size_t r = 0; r < per_worker.size(); ++r) {
      CHECK_MSG(per_worker[r] == std::vector<uint16_t>(kN, want[r]),
                "round %zu: element 0 is 0x%04x, want 0x%04x", r + 1, per_worker[r][0], want[r]);
    }
  }
  const auto plain = SyncRounds("test", w0, grads, 16);
  for (const auto& per_worker : plain) {
    CHECK(per_worker.size() == 3 && per_worker[2] == std::vector<uint16_t>(kN, 0x6A00));
  }
}

void SyncMatchesLocalStore() {
  constexpr size_t kN = 301;  // bigarray_bound 100: cut over both servers
  constexpr int kRounds = 4;
  std::vector<uint16_t> w0(kN);
  for (size_t i = 0; i < kN; ++i) {
    w0[i] = FloatToHalf(static_cast<float>(2.0 * std::sin(0.37 * static_cast<double>(i))));
  }
  std::vector<std::vector<std::vector<uint16_t>>> grads(2);
  for (int rank = 0; rank < 2; ++rank) {
    for (int r = 0; r < kRounds; ++r) {
      std::vector<uint16_t> g(kN);
      for (size_t i = 0; i < kN; ++i) {
        const double x = static_cast<double>(i) * 0.91 + 1.7 * r + 0.5 * rank;
        g[i] = FloatToHalf(static_cast<float>(std::cos(x) * std::pow(10.0, std::fmod(x, 4.5) - 4.0)));
      }
      grads[static_cast<size_t>(rank)].push_back(g);
    }
  }
  for (const char* spec : {"sgd(lr=0.01,momentum=0.9,wd=0.01,multi_precision=1)",
                           "adam(lr=0.01,epsilon=1e-3,multi_precision=1)"}) {
    const auto got = SyncRounds(spec, w0, grads, 100);
    // The same rounds in a local store: both workers' gradients in one push, rank order.
    std::unique_ptr<Store> local = CreateStore("local");
    local->SetOptimizer(spec);
    InitKey(*local, 0, *Halves(w0));
    for (int r = 0; r < kRounds; ++r) {
      std::unique_ptr<Array> g0 = Halves(grads[0][static_cast<size_t>(r)]);
      std::unique_ptr<Array> g1 = Halves(grads[1][static_cast<size_t>(r)]);
      const Array* vals[2] = {g0.get(), g1.get()};
      const int keys[2] = {0, 0};
      local->Push(KeyList::Ints(2, keys), vals, 0);
      std::unique_ptr<Array> out = Halves(std::vector<uint16_t>(kN));
      PullKey(*local, 0, out.get());
      const std::vector<uint16_t> want = HalfValues(*out);
      for (int rank = 0; rank < 2; ++rank) {
        CHECK_MSG(got[static_cast<size_t>(rank)].size() == kRounds &&
                      got[static_cast<size_t>(rank)][static_cast<size_t>(r)] == want,
                  "%s round %d worker %d: the servers' float16 weights differ from the local "
                  "store's", spec, r + 1, rank);
      }
    }
  }
}

void AsyncMasterKeepsSmallSteps() {
  // test(multi_precision=1), w0 = 1, each push 2^-12 (a quarter of binary16's spacing 2^-10
  // above 1): master 1 + 2^-12 -> 1; 1 + 2^-11 -> 1 (tie, even); 1 + 3 * 2^-12 -> 1 + 2^-10
  // = 0x3C01; 1 + 2^-10 -> 0x3C01. Without multi_precision each push rounds back to 1.
  for (bool multi_precision : {true, false}) {
    Job::Options o;
    o.type = "dist_async";
    Job job(o);
    CHECK(job.formed());
    if (!job.formed()) return;
    std::vector<uint16_t> pulled;
    job.OnEachWorker("async pushes", [&](int, Store& s) {
      s.SetOptimizer(multi_precision ? "test(multi_precision=1)" : "test");
      InitKey(s, 0, *Halves({0x3C00}));
      for (int i = 0; i < 4; ++i) {
        PushKey(s, 0, *Halves({0x0C00}));  // 2^-12
        std::unique_ptr<Array> out = Halves({0});
        PullKey(s, 0, out.get());
        pulled.push_back(HalfValues(*out)[0]);
      }
    });
    const std::vector<uint16_t> want = multi_precision
                                           ? std::vector<uint16_t>{0x3C00, 0x3C00, 0x3C01, 0x3C01}
                                           : std::vector<uint16_t>{0x3C00, 0x3C00, 0x3C00, 0x3C00};
    CHECK_MSG(pulled == want, "multi_precision=%d: pulled 0x%04x 0x%04x 0x%04x 0x%04x",
              multi_precision ? 1 : 0, pulled.size() > 0 ? pulled[0] : 0,
              pulled.size() > 1 ? pulled[1] : 0, pulled.size() > 2 ? pulled[2] : 0,
              pulled.size() > 3 ? pulled[3] : 0);
    const JobResult& res = job.Finish();
    CHECK_JOB_OK(res);
  }
}

const Case kCases[] = {
    {"sync_sums_in_float32", SyncSumsInFloat32},
    {"sync_matches_local_store", SyncMatchesLocalStore},
    {"async_master_keeps_small_steps", AsyncMasterKeepsSmallSteps},
};

}  // namespace
}  // namespace inprocess
}  // namespace kvstore

int main(int argc, char** argv) { return kvstore::inprocess::RunCases(argc, argv, kvstore::inprocess::kCases); }
