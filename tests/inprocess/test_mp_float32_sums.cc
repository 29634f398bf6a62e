// test_mp_float32_sums.cc - a worker that pushes several float16 values of one key in one
// call (one per device, or the key repeated) under multi_precision=1 sends their float32
// sum (ps/mp_push.h), so the servers' result is bit for bit the `local` store's, which
// converts every value and sums in float32. The values make the difference visible:
// 2048 + 1 + 1 is 2050 in float32 but 2048 in float16 (spacing 2 above 2048, ties to even).
//
//   sync_several_values_match_local  dist_sync, W=1, S=2, the key cut over both servers:
//                             rounds of 3, 1 and 2 values by push and by pushpull, with
//                             test and sgd (momentum): every pulled bit equals a local
//                             store's given the same calls (1 value: unchanged)
//   async_several_values_match_local  the same on dist_async, one server
//   device_sync_several_values_match_local  the same on dist_device_sync (values summed by
//                             the device comm without the multi-precision rule before)
//   sync_mixed_round_matches_local  W=2: worker 0 pushes 3 values (a float32 sum), worker 1
//                             one (float16); the round adds them in float32 in rank order,
//                             as a local store given the four values
//   refused_without_multi_precision  the servers' optimizer changed to one without
//                             multi_precision after worker 0 set it: its float32 sum is
//                             refused (DTYPE_MISMATCH, naming the key) and changes nothing
//   round_after_optimizer_change  a float32 sum waiting in a sync round when the optimizer
//                             changes to one without multi_precision is rounded to float16
//                             with the round's other pushes
//   float32_sum_header_rules  the wire: kFlagFloat32Sum only on PUSH/PUSHPULL of a float16
//                             key, with count float32 elements
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cases.h"
#include "core/dtype.h"
#include "job.h"
#include "ps/wire.h"

namespace kvstore {
namespace inprocess {
namespace {

using Halves = std::vector<uint16_t>;
// rounds[r] = the values one participant pushes for key 0 in round r (one call).
using Rounds = std::vector<std::vector<Halves>>;

std::unique_ptr<Array> HalfArray(const Halves& bits) {
  std::unique_ptr<Array> a = Array::Create({static_cast<int64_t>(bits.size())}, KV_FLOAT16, Context{});
  if (!bits.empty()) std::memcpy(a->data(), bits.data(), bits.size() * sizeof(uint16_t));
  return a;
}

Halves HalfValues(Array& a) {
  a.WaitPendingWrites();
  const auto* p = static_cast<const uint16_t*>(a.data());
  return Halves(p, p + a.size());
}

// Sets `spec`, inits key 0 to w0, then per round pushes that round's values in one call
// (even rounds: push then pull; odd rounds: pushpull) and returns the pulled weights.
std::vector<Halves> Drive(Store& s, const std::string& spec, const Halves& w0, const Rounds& rounds) {
  s.SetOptimizer(spec);
  InitKey(s, 0, *HalfArray(w0));
  std::vector<Halves> pulled;
  for (size_t r = 0; r < rounds.size(); ++r) {
    std::vector<std::unique_ptr<Array>> owned;
    std::vector<const Array*> vals;
    for (const Halves& v : rounds[r]) {
      owned.push_back(HalfArray(v));
      vals.push_back(owned.back().get());
    }
    const std::vector<int> keys(vals.size(), 0);
    std::unique_ptr<Array> out = HalfArray(Halves(w0.size()));
    Array* outs[1] = {out.get()};
    const int okey = 0;
    if (r % 2 == 0) {
      s.Push(KeyList::Ints(static_cast<int>(keys.size()), keys.data()), vals.data(), 0);
      PullKey(s, 0, out.get());
    } else {
      s.PushPull(KeyList::Ints(static_cast<int>(keys.size()), keys.data()), vals.data(),
                 KeyList::Ints(1, &okey), outs, 0);
    }
    pulled.push_back(HalfValues(*out));
  }
  return pulled;
}

std::vector<Halves> DriveLocal(const std::string& spec, const Halves& w0, const Rounds& rounds) {
  std::unique_ptr<Store> local = CreateStore("local");
  return Drive(*local, spec, w0, rounds);
}

// A value whose float16 sums round: a large value and two small ones per element.
Halves Big(size_t n, int round) {
  Halves v(n);
  for (size_t i = 0; i < n; ++i) v[i] = FloatToHalf(2048.0f + 64.0f * static_cast<float>((i + round) % 5));
  return v;
}
Halves Small(size_t n, int round, double phase) {
  Halves v(n);
  for (size_t i = 0; i < n; ++i) {
    v[i] = FloatToHalf(static_cast<float>(1.0 + 0.25 * std::sin(0.7 * static_cast<double>(i) + round + phase)));
  }
  return v;
}

// Rounds of 3, 1 and 2 values, then 3 again.
Rounds SeveralValueRounds(size_t n) {
  Rounds rounds;
  rounds.push_back({Big(n, 0), Small(n, 0, 0), Small(n, 0, 1)});
  rounds.push_back({Small(n, 1, 0)});
  rounds.push_back({Big(n, 2), Small(n, 2, 0)});
  rounds.push_back({Big(n, 3), Small(n, 3, 0), Small(n, 3, 1)});
  rounds[0][0][0] = 0x6800;  // 2048
  rounds[0][1][0] = rounds[0][2][0] = 0x3C00;  // 1
  return rounds;
}

const char* const kSpecs[] = {"test(multi_precision=1)",
                              "sgd(lr=0.001,momentum=0.9,wd=0.01,multi_precision=1)"};

// Runs `rounds` on a one-worker job of `type` and checks every pulled bit against `local`.
void CheckOneWorkerJob(const std::string& type, int num_servers, int64_t bound, size_t n) {
  const Rounds rounds = SeveralValueRounds(n);
  const Halves w0(n, 0);
  for (const char* spec : kSpecs) {
    Job::Options o;
    o.type = type;
    o.num_servers = num_servers;
    o.bigarray_bound = bound;
    Job job(o);
    CHECK(job.formed());
    if (!job.formed()) return;
    std::vector<Halves> got;
    job.OnEachWorker("pushes of several values", [&](int, Store& s) { got = Drive(s, spec, w0, rounds); });
    const JobResult& res = job.Finish();
    CHECK_JOB_OK(res);
    const std::vector<Halves> want = DriveLocal(spec, w0, rounds);
    CHECK(got.size() == want.size());
    for (size_t r = 0; r < got.size() && r < want.size(); ++r) {
      size_t diff = 0;
      while (diff < n && got[r][diff] == want[r][diff]) ++diff;
      CHECK_MSG(diff == n, "%s on %s, round %zu (%zu values): element %zu is 0x%04x, the local store's 0x%04x",
                spec, type.c_str(), r + 1, rounds[r].size(), diff, diff < n ? got[r][diff] : 0,
                diff < n ? want[r][diff] : 0);
    }
    // test adds the sum to 0: element 0 of round 1 is 2048 + 1 + 1 = 2050 (0x6801); a
    // float16 sum would have stopped at 2048 (0x6800).
    if (std::string(spec).rfind("test", 0) == 0 && !got.empty()) {
      CHECK_MSG(got[0][0] == 0x6801, "%s: round 1 element 0 is 0x%04x, want 2050 (0x6801)",
                type.c_str(), got[0][0]);
    }
  }
}

void SyncSeveralValuesMatchLocal() { CheckOneWorkerJob("dist_sync", 2, 16, 37); }

void AsyncSeveralValuesMatchLocal() { CheckOneWorkerJob("dist_async", 1, 1000000, 37); }

void DeviceSyncSeveralValuesMatchLocal() { CheckOneWorkerJob("dist_device_sync", 2, 16, 37); }

void SyncMixedRoundMatchesLocal() {
  constexpr size_t kN = 33;
  const Halves w0(kN, 0);
  Rounds w0_rounds, w1_rounds, all;
  for (int r = 0; r < 3; ++r) {
    w0_rounds.push_back({Big(kN, r), Small(kN, r, 0), Small(kN, r, 1)});
    w1_rounds.push_back({Small(kN, r, 2)});
    all.push_back({Big(kN, r), Small(kN, r, 0), Small(kN, r, 1), Small(kN, r, 2)});
  }
  for (const char* spec : kSpecs) {
    Job::Options o;
    o.num_workers = 2;
    o.num_servers = 2;
    o.bigarray_bound = 10;
    Job job(o);
    CHECK(job.formed());
    if (!job.formed()) return;
    std::vector<std::vector<Halves>> got(2);
    job.OnEachWorker("mixed rounds", [&](int rank, Store& s) {
      got[static_cast<size_t>(rank)] = Drive(s, spec, w0, rank == 0 ? w0_rounds : w1_rounds);
    });
    const JobResult& res = job.Finish();
    CHECK_JOB_OK(res);
    const std::vector<Halves> want = DriveLocal(spec, w0, all);
    for (int rank = 0; rank < 2; ++rank) {
      CHECK_MSG(got[static_cast<size_t>(rank)] == want,
                "%s: worker %d's weights differ from the local store's", spec, rank);
    }
  }
}

void RefusedWithoutMultiPrecision() {
  Job::Options o;
  o.type = "dist_async";
  o.num_workers = 2;
  Job job(o);
  CHECK(job.formed());
  if (!job.formed()) return;
  job.OnEachWorker("refused float32 sum", [&](int rank, Store& s) {
    s.SetOptimizer("test(multi_precision=1)");
    InitKey(s, 0, *HalfArray({0x3C00, 0x3C00}));
    s.distributed()->Barrier();
    if (rank == 1) s.SetOptimizer("test");  // the servers' optimizer now has no master copy
    s.distributed()->Barrier();
    if (rank == 0) {
      std::unique_ptr<Array> a = HalfArray({0x6800, 0x6800});
      std::unique_ptr<Array> b = HalfArray({0x3C00, 0x3C00});
      const Array* vals[2] = {a.get(), b.get()};
      const int keys[2] = {0, 0};
      std::string msg;
      const int code = ErrorOf([&] {
        s.Push(KeyList::Ints(2, keys), vals, 0);
        s.WaitAll();
      }, &msg);
      CHECK_MSG(code == KV_ERR_DTYPE_MISMATCH, "code %d: %s", code, msg.c_str());
      CHECK_HAS(msg, "float32 sum");
      CHECK_HAS(msg, "key 0");
      std::unique_ptr<Array> out = HalfArray({0, 0});
      PullKey(s, 0, out.get());
      CHECK(HalfValues(*out) == Halves({0x3C00, 0x3C00}));
    }
  });
  const JobResult& res = job.Finish();
  CHECK_JOB_OK(res);
}

void RoundAfterOptimizerChange() {
  Job::Options o;
  o.num_workers = 2;
  Job job(o);
  CHECK(job.formed());
  if (!job.formed()) return;
  Halves pulled;
  job.OnEachWorker("optimizer change mid-round", [&](int rank, Store& s) {
    s.SetOptimizer("test(multi_precision=1)");
    InitKey(s, 0, *HalfArray({0}));
    InitKey(s, 1, *HalfArray({0}));
    if (rank == 0) {
      // 2048 + 1 + 1 as a float32 sum, waiting for worker 1 in key 0's round; the pull of
      // key 1 (same server, same connection) returns once the push has arrived.
      std::unique_ptr<Array> a = HalfArray({0x6800}), b = HalfArray({0x3C00});
      const Array* vals[3] = {a.get(), b.get(), b.get()};
      const int keys[3] = {0, 0, 0};
      s.Push(KeyList::Ints(3, keys), vals, 0);
      std::unique_ptr<Array> out = HalfArray({0});
      PullKey(s, 1, out.get());
      HalfValues(*out);
    }
    s.distributed()->Barrier();
    if (rank == 1) {
      s.SetOptimizer("test");
      PushKey(s, 0, *HalfArray({0}));  // completes the round
    }
    std::unique_ptr<Array> out = HalfArray({0});
    PullKey(s, 0, out.get());
    const Halves mine = HalfValues(*out);  // every worker waits for its pull
    if (rank == 0) pulled = mine;
  });
  const JobResult& res = job.Finish();
  CHECK_JOB_OK(res);
  // float16(2050 + 0) = 2050 = 0x6801, added to 0 by test without a master copy.
  CHECK_MSG(pulled == Halves({0x6801}), "pulled 0x%04x", pulled.empty() ? 0 : pulled[0]);
}

void Float32SumHeaderRules() {
  auto header = [](dist::MsgType type, int dtype, uint64_t payload_len) {
    dist::WireHeader h = dist::MakeHeader(type, dist::Role::kWorker, 0);
    h.flags = dist::kFlagSync | dist::kFlagFloat32Sum;
    h.dtype = dtype;
    h.total = 10;
    h.offset = 2;
    h.count = 4;
    h.num_frames = payload_len > 0 ? 2 : 1;
    h.payload_len = payload_len;
    return h;
  };
  auto why = [](const dist::WireHeader& h) {
    return dist::ValidateHeader(h, h.num_frames - 1, 0, static_cast<size_t>(h.payload_len));
  };
  CHECK(why(header(dist::MsgType::kPush, KV_FLOAT16, 16)).empty());
  CHECK(why(header(dist::MsgType::kPushPull, KV_FLOAT16, 16)).empty());
  CHECK_HAS(why(header(dist::MsgType::kPush, KV_FLOAT16, 8)), "payload length");
  CHECK_HAS(why(header(dist::MsgType::kPush, KV_FLOAT32, 16)), "float32 sum");
  CHECK_HAS(why(header(dist::MsgType::kInit, KV_FLOAT16, 16)), "float32 sum");
  CHECK_HAS(why(header(dist::MsgType::kPull, KV_FLOAT16, 0)), "float32 sum");
}

const Case kCases[] = {
    {"sync_several_values_match_local", SyncSeveralValuesMatchLocal},
    {"async_several_values_match_local", AsyncSeveralValuesMatchLocal},
    {"device_sync_several_values_match_local", DeviceSyncSeveralValuesMatchLocal},
    {"sync_mixed_round_matches_local", SyncMixedRoundMatchesLocal},
    {"refused_without_multi_precision", RefusedWithoutMultiPrecision},
    {"round_after_optimizer_change", RoundAfterOptimizerChange},
    {"float32_sum_header_rules", Float32SumHeaderRules},
};

}  // namespace
}  // namespace inprocess
}  // namespace kvstore

int main(int argc, char** argv) { return kvstore::inprocess::RunCases(argc, argv, kvstore::inprocess::kCases); }
