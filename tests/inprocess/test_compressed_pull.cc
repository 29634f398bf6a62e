// test_compressed_pull.cc - compressed pulls (ps/compressed_pull.h, the "pull" parameter of
// gradient compression), checked bit for bit against a scalar model of the rules: per
// (key, worker) a float32 view; the first pull under a setting is exact (view = w), each
// later one moves every value of the view by +t, -t or 0 (quantise(w - view) from a zero
// residual), and the pull returns the view rounded to the key's dtype. Pushes go through the
// push compression of the same setting (one residual per worker), summed in rank order.
//
//   pull_sync_sharded        W=2, S=2, a float32 and a float16 key split over both servers,
//                            rounds of push + two pulls; off ("none": exact pulls, views
//                            dropped), on again and under another threshold (exact again)
//   pull_async_own_keys      dist_async, W=2: each worker pushes its own key and pulls both
//   pull_plan_refuses        a worker refuses a packed reply to a pull that did not ask for
//                            one, to an exact pull, with another threshold, or after a pull
//                            of the part failed; a refused or failed pull makes the next one
//                            exact
//   pull_parameter_rules     "pull" is "0" or "1" (or "1.0"), 2bit only; the wire rules
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "cases.h"
#include "compression/compression.h"
#include "core/dtype.h"
#include "job.h"
#include "ps/compressed_pull.h"
#include "ps/wire.h"

namespace kvstore {
namespace inprocess {
namespace {

using compression::Compression;
constexpr size_t kN = 50;

float RoundTo(float x, int dtype) { return dtype == KV_FLOAT32 ? x : HalfToFloat(FloatToHalf(x)); }

float Q2(float& r, float g, float t) {  // the 2bit rule with error feedback
  r += g;
  if (r >= t) { r -= t; return t; }
  if (r <= -t) { r += t; return -t; }
  return 0.0f;
}

float Grad(int rank, int k, size_t i) {
  return 0.41f * static_cast<float>((static_cast<int>(i) * 5 + rank * 3 + k * 7) % 13 - 6) /
         static_cast<float>(1 + (static_cast<int>(i) + k) % 2);
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

// A round's setting: "none", or 2bit with pull=1 at threshold t.
struct Setting {
  bool on;
  float t;
  std::optional<Compression> FromFloats() const {
    if (!on) return std::nullopt;
    return Compression::FromParams({{"type", "2bit"}, {"threshold", std::to_string(t)}, {"pull", "1"}});
  }
};

// One worker's model of one key: its push residual and pull view.
struct WorkerModel {
  std::vector<float> residual, view;
  void Reset() {
    residual.assign(kN, 0.0f);
    view.clear();
  }
  // What the worker pushes (dequantised) for gradient g.
  std::vector<float> Push(const std::vector<float>& g, const Setting& s) {
    if (!s.on) return g;
    std::vector<float> q(kN);
    for (size_t i = 0; i < kN; ++i) q[i] = Q2(residual[i], g[i], s.t);
    return q;
  }
  // What a pull of the stored value w (values of the key's dtype) returns.
  std::vector<float> Pull(const std::vector<float>& w, const Setting& s, int dtype) {
    if (!s.on) {
      view.clear();
      return w;
    }
    if (view.empty()) {  // exact, a reset
      view = w;
      return w;
    }
    std::vector<float> out(kN);
    for (size_t i = 0; i < kN; ++i) {
      const float d = w[i] - view[i];
      view[i] += d >= s.t ? s.t : d <= -s.t ? -s.t : 0.0f;
      out[i] = RoundTo(view[i], dtype);
    }
    return out;
  }
};

std::vector<float> Grads(int rank, int k, int dtype) {
  std::vector<float> g(kN);
  for (size_t i = 0; i < kN; ++i) g[i] = RoundTo(Grad(rank, k, i), dtype);
  return g;
}

// expect[rank][round] = the two pulls of that round, for one key pushed by `pushers`
// (ranks, summed in rank order; assign) and pulled by every rank in `pullers`.
std::vector<std::vector<std::vector<float>>> Expect(const std::vector<Setting>& rounds, int dtype, int key,
                                                    const std::vector<int>& pushers, int workers) {
  std::vector<WorkerModel> m(static_cast<size_t>(workers));
  for (auto& w : m) w.Reset();
  std::vector<std::vector<std::vector<float>>> out(static_cast<size_t>(workers));
  std::vector<float> w(kN, 0.0f);
  for (size_t k = 0; k < rounds.size(); ++k) {
    const Setting& s = rounds[k];
    if (k > 0 && (s.on != rounds[k - 1].on || s.t != rounds[k - 1].t)) {
      for (auto& wm : m) wm.Reset();
    }
    std::vector<float> sum(kN, 0.0f);
    for (size_t p = 0; p < pushers.size(); ++p) {
      const int r = pushers[p];
      const std::vector<float> q = m[static_cast<size_t>(r)].Push(Grads(r, static_cast<int>(k) + key, dtype), s);
      for (size_t i = 0; i < kN; ++i) sum[i] = p == 0 ? q[i] : sum[i] + q[i];
    }
    for (size_t i = 0; i < kN; ++i) w[i] = RoundTo(sum[i], dtype);
    for (int r = 0; r < workers; ++r) {
      const std::vector<float> a = m[static_cast<size_t>(r)].Pull(w, s, dtype);
      const std::vector<float> b = m[static_cast<size_t>(r)].Pull(w, s, dtype);
      out[static_cast<size_t>(r)].push_back(a);
      out[static_cast<size_t>(r)].push_back(b);
    }
  }
  return out;
}

struct PullKeyPlan {
  int key;
  int dtype;
};

// Rounds of push + two pulls on every worker; in sync mode every worker pushes every key,
// in async mode worker r pushes and pulls only key keys[r].
void RunPulls(const std::string& type, const std::vector<PullKeyPlan>& keys, const std::vector<Setting>& rounds) {
  const bool sync = type == "dist_sync";
  Job::Options o;
  o.num_workers = 2;
  o.num_servers = 2;
  o.type = type;
  o.bigarray_bound = 16;
  Job job(o);
  CHECK(job.formed());
  if (!job.formed()) return;
  std::vector<std::vector<std::vector<std::vector<float>>>> expect;
  for (size_t ki = 0; ki < keys.size(); ++ki) {
    std::vector<int> pushers = sync ? std::vector<int>{0, 1} : std::vector<int>{static_cast<int>(ki)};
    expect.push_back(Expect(rounds, keys[ki].dtype, keys[ki].key, pushers, 2));
  }
  job.OnEachWorker("compressed pulls", [&](int rank, Store& s) {
    for (const PullKeyPlan& pk : keys) InitKey(s, pk.key, *FromFloats(std::vector<float>(kN, 0.0f), pk.dtype));
    for (size_t k = 0; k < rounds.size(); ++k) {
      if (k == 0 || rounds[k].on != rounds[k - 1].on || rounds[k].t != rounds[k - 1].t) {
        s.WaitAll();
        s.SetGradientCompression(rounds[k].FromFloats());
      }
      for (size_t ki = 0; ki < keys.size(); ++ki) {
        if (!sync && static_cast<int>(ki) != rank) continue;
        const PullKeyPlan& pk = keys[ki];
        PushKey(s, pk.key, *FromFloats(Grads(rank, static_cast<int>(k) + pk.key, pk.dtype), pk.dtype));
        for (int p = 0; p < 2; ++p) {
          auto out = FromFloats(std::vector<float>(kN, 7.0f), pk.dtype);
          PullKey(s, pk.key, out.get());
          CHECK_MSG(SameBits(Values(*out), expect[ki][static_cast<size_t>(rank)][2 * k + static_cast<size_t>(p)]),
                    "%s worker %d key %d (%s) round %zu pull %d", type.c_str(), rank, pk.key,
                    DTypeName(pk.dtype), k, p);
        }
      }
    }
  });
  CHECK_JOB_OK(job.Finish());
}

const std::vector<Setting> kRounds = {{true, 0.5f}, {true, 0.5f}, {true, 0.5f}, {true, 0.5f}, {false, 0.5f},
                                      {true, 0.5f}, {true, 0.5f}, {true, 0.25f}, {true, 0.25f}};

void PullSyncSharded() { RunPulls("dist_sync", {{0, KV_FLOAT32}, {1, KV_FLOAT16}}, kRounds); }

void PullAsyncOwnKeys() { RunPulls("dist_async", {{3, KV_FLOAT32}, {4, KV_FLOAT16}}, kRounds); }

// Plans and replies of one worker, without a job.
void PullPlanRefuses() {
  using dist::Message;
  dist::WorkerKey k;
  k.display = "5";
  k.dtype = KV_FLOAT32;
  k.size = 20;
  k.parts = {{0, 0, 20}};
  dist::Op op;
  op.type = dist::MsgType::kPull;
  op.key = &k;
  dist::PullCompressor pc;
  pc.Set(Compression::FromParams({{"type", "2bit"}, {"pull", "1"}}));
  auto reply = [&](bool packed, float t) {
    Message m;
    m.h.flags = packed ? dist::kFlagTwoBit : 0u;
    std::memcpy(&m.h.arg, &t, sizeof(t));
    m.h.count = 20;
    m.h.dtype = KV_FLOAT32;
    m.payload = zmq::message_t(packed ? 8 : 80);
    std::memset(m.payload.data(), 0, m.payload.size());
    return m;
  };
  auto plan = pc.Plan(op);
  CHECK(plan && plan->exact[0]);
  Message m = reply(true, 0.5f);
  CHECK_HAS(plan->Receive(k, k.parts[0], 0, &m), "exact pull");
  plan = pc.Plan(op);
  CHECK(plan->exact[0]);  // still: the refusal left no view
  m = reply(false, 0.5f);
  CHECK(plan->Receive(k, k.parts[0], 0, &m).empty());
  plan = pc.Plan(op);
  CHECK(!plan->exact[0]);
  m = reply(true, 0.25f);
  CHECK_HAS(plan->Receive(k, k.parts[0], 0, &m), "another threshold");
  CHECK(pc.Plan(op)->exact[0]);
  plan = pc.Plan(op);
  m = reply(false, 0.5f);
  CHECK(plan->Receive(k, k.parts[0], 0, &m).empty());
  plan = pc.Plan(op);
  m = reply(true, 0.5f);
  CHECK(plan->Receive(k, k.parts[0], 0, &m).empty());
  CHECK(m.payload.size() == 80 && (m.h.flags & dist::kFlagTwoBit) == 0);
  plan = pc.Plan(op);
  auto later = pc.Plan(op);  // sent before the first one fails
  CHECK(!later->exact[0]);
  CHECK(plan->Receive(k, k.parts[0], KV_ERR_TIMEOUT, nullptr).empty());  // a failed pull
  CHECK(pc.Plan(op)->exact[0]);
  m = reply(true, 0.5f);  // the server's view may be ahead of this worker's: refused
  CHECK_HAS(later->Receive(k, k.parts[0], 0, &m), "not current");
  // An op without a plan (pull compression off) refuses a packed reply.
  dist::Op plain;
  plain.type = dist::MsgType::kPull;
  plain.key = &k;
  plain.remaining = 1;
  m = reply(true, 0.5f);
  plain.CompletePart(k.parts[0], 0, 0, "", &m);
  CHECK(plain.status == KV_ERR_PROTOCOL);
  pc.Set(Compression::FromParams({{"type", "2bit"}}));  // pull=0: no plans
  CHECK(pc.Plan(op) == nullptr);
}

void PullParameterRules() {
  CHECK(Compression::FromParams({{"type", "2bit"}, {"pull", "1"}}).pull());
  CHECK(!Compression::FromParams({{"type", "2bit"}, {"pull", "0"}}).pull());
  CHECK(!Compression::FromParams({{"type", "2bit"}}).pull());
  CHECK(Compression::FromParams({{"type", "2bit"}, {"pull", "1.0"}}).pull());  // Python's 1
  CHECK(ErrorOf([] { Compression::FromParams({{"type", "2bit"}, {"pull", "0.5"}}); }) == KV_ERR_INVALID_ARGUMENT);
  CHECK(ErrorOf([] { Compression::FromParams({{"type", "2bit"}, {"pull", "yes"}}); }) == KV_ERR_INVALID_ARGUMENT);
  CHECK(ErrorOf([] { Compression::FromParams({{"type", "1bit"}, {"pull", "1"}}); }) == KV_ERR_INVALID_ARGUMENT);
  CHECK(!Compression::FromParamsOrNone({{"type", "none"}, {"pull", "1"}}).has_value());
  CHECK(ErrorOf([] { Compression::FromParamsOrNone({{"type", "none"}, {"pull", "2"}}); }) == KV_ERR_INVALID_ARGUMENT);
  using dist::WireHeader;
  auto check = [](dist::MsgType type, uint32_t flags, int status, uint64_t payload, const char* why) {
    WireHeader h = dist::MakeHeader(type, dist::Role::kWorker, 0);
    h.flags = flags;
    const float t = 0.5f;
    std::memcpy(&h.arg, &t, sizeof(t));
    h.dtype = KV_FLOAT32;
    h.key = 1;
    h.total = h.count = 33;
    h.status = status;
    h.payload_len = payload;
    h.num_frames = payload > 0 ? 2 : 1;
    const std::string got = dist::ValidateHeader(h, payload > 0 ? 1 : 0, 0, payload);
    if (why == nullptr) CHECK_MSG(got.empty(), "refused: %s", got.c_str());
    else CHECK_HAS(got, why);
  };
  const uint32_t two = dist::kFlagTwoBit, exact = dist::kFlagExactPull;
  check(dist::MsgType::kPull, two, 0, 0, nullptr);
  check(dist::MsgType::kPull, two | exact, 0, 0, nullptr);
  check(dist::MsgType::kPull, dist::kFlagOneBit, 0, 0, "2bit only");
  check(dist::MsgType::kPull, two, 0, 12, "no payload");
  check(dist::MsgType::kPull, exact, 0, 0, "not a compressed pull");
  check(dist::MsgType::kPush, two | exact, 0, 12, "only a pull");
  check(dist::MsgType::kReply, two, 0, 12, nullptr);
  check(dist::MsgType::kReply, two, 0, 8, "packed size");
  check(dist::MsgType::kReply, two | exact, 0, 12, "no values");
  check(dist::MsgType::kReply, two, KV_ERR_INTERNAL, 12, "no values");
  check(dist::MsgType::kReply, dist::kFlagOneBit, 0, 8, "2bit only");
}

}  // namespace
}  // namespace inprocess
}  // namespace kvstore

int main(int argc, char** argv) {
  using namespace kvstore::inprocess;
  static const TestCase kCases[] = {
      {"pull_sync_sharded", PullSyncSharded},
      {"pull_async_own_keys", PullAsyncOwnKeys},
      {"pull_plan_refuses", PullPlanRefuses},
      {"pull_parameter_rules", PullParameterRules},
  };
  return RunCases(argc, argv, kCases);
}
