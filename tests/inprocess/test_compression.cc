// test_compression.cc - gradient compression wired into the stores, checked bit for bit
// against a scalar model of the reference's rules (the residual and the dequantised value
// of every element, computed here without the kernels), summed in float32 in value order
// (device store) or rank order (servers) and rounded once to the key's dtype.
//
//   device_store_rounds      device store, one key, two values per push (two residuals),
//                            2bit then 1bit, float32 and float16, off between rounds (the
//                            push is then the plain sum) and on again (residuals restart)
//   device_store_optimizer   device store with sgd: the weight moves by the dequantised sum
//   local_store_refuses      local and local_allreduce_cpu: NOT_SUPPORTED naming the store
//                            and the types that compress; bad parameters INVALID_ARGUMENT
//   dist_sync_sharded        W=2, S=2, a float32 and a float16 key both split over the two
//                            servers, 2bit and 1bit, several rounds, off in between; init and
//                            pulls are uncompressed
//   dist_sync_pushpull       a compressed pushpull returns the round's value
//   dist_async_assign        dist_async, one worker: each push is dequantised and assigned
//   dist_multi_precision     float16 key under sgd(multi_precision=1): the servers sum the
//                            dequantised pushes in float32 (+-t exactly, never a half)
//   dist_multi_precision_two_values  the same with two values per push: each worker's
//                            float32 sum of its float16 values (mp_push.h) is what it
//                            quantises
//   wire_refuses_malformed   ValidateHeader refuses compressed messages with a wrong length,
//                            both flags, a bad threshold, an init, a non-float dtype (a
//                            pull may ask for compression: test_compressed_pull.cc)
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cases.h"
#include "compression/compression.h"
#include "core/dtype.h"
#include "job.h"
#include "ps/wire.h"

namespace kvstore {
namespace inprocess {
namespace {

using compression::Compression;

// The reference's rules, one element at a time: returns the dequantised value.
struct Model {
  std::string type;
  float t;
  std::vector<float> r;
  Model(std::string ty, float th, size_t n) : type(std::move(ty)), t(th), r(n, 0.0f) {}
  float Step(size_t i, float g) {
    float& x = r[i];
    x += g;
    if (type == "2bit") {
      if (x >= t) { x -= t; return t; }
      if (x <= -t) { x += t; return -t; }
      return 0.0f;
    }
    if (x > t) { x -= 1.0f; return 1.0f; }
    x += 1.0f;
    return -1.0f;
  }
};

// Gradient element i of value v at round k: a spread of magnitudes around the thresholds.
float Grad(int v, int k, size_t i) {
  return 0.37f * static_cast<float>((static_cast<int>(i) * 7 + v * 3 + k * 5) % 11 - 5) /
         static_cast<float>(1 + (static_cast<int>(i) + k) % 3);
}

// The value gradient v of round k, as the store receives it (float16 rounded).
std::vector<float> GradValues(int v, int k, size_t n, int dtype) {
  std::vector<float> g(n);
  for (size_t i = 0; i < n; ++i) {
    g[i] = Grad(v, k, i);
    if (dtype == KV_FLOAT16) g[i] = HalfToFloat(FloatToHalf(g[i]));
  }
  return g;
}

float RoundTo(float x, int dtype) { return dtype == KV_FLOAT32 ? x : HalfToFloat(FloatToHalf(x)); }

std::optional<Compression> Setting(const std::string& type, const std::string& t = "0.5") {
  return Compression::FromParamsOrNone({{"type", type}, {"threshold", t}});
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
}

// The device store: each of the two values of a push has its own residual.
void DeviceStoreRounds() {
  for (int dtype : {KV_FLOAT32, KV_FLOAT16}) {
    constexpr size_t kN = 45;  // not a multiple of 16 or 32
    std::unique_ptr<Store> s = CreateStore("device");
    InitKey(*s, 3, *FromFloats(std::vector<float>(kN, 0.0f), dtype));
    // Schedule: 2bit x3, off, 2bit again (fresh residuals), 1bit (t = 0.25) x2.
    const std::vector<std::string> types = {"2bit", "2bit", "2bit", "none", "2bit", "1bit", "1bit"};
    std::vector<Model> models;
    std::string current;
    for (int k = 0; k < static_cast<int>(types.size()); ++k) {
      const std::string& ty = types[static_cast<size_t>(k)];
      const std::string t = ty == "1bit" ? "0.25" : "0.5";
      if (ty != current) {
        s->SetGradientCompression(Setting(ty, t));
        current = ty;
        models.assign(2, Model(ty, std::stof(t), kN));
      }
      std::vector<std::unique_ptr<Array>> vals;
      std::vector<float> expect(kN, 0.0f);
      for (int v = 0; v < 2; ++v) {
        const std::vector<float> g = GradValues(v, k, kN, dtype);
        vals.push_back(FromFloats(g, dtype));
        for (size_t i = 0; i < kN; ++i) {
          expect[i] += ty == "none" ? g[i] : models[static_cast<size_t>(v)].Step(i, g[i]);
        }
      }
      for (float& x : expect) x = RoundTo(x, dtype);
      const int keys[2] = {3, 3};
      const Array* ptrs[2] = {vals[0].get(), vals[1].get()};
      s->Push(KeyList::Ints(2, keys), ptrs, 0);
      auto out = FromFloats(std::vector<float>(kN, 0.0f), dtype);
      PullKey(*s, 3, out.get());
      CHECK_MSG(SameBits(Values(*out), expect), "device store, %s, round %d (%s)", DTypeName(dtype), k, ty.c_str());
    }
  }
}

void DeviceStoreOptimizer() {
  constexpr size_t kN = 20;
  std::unique_ptr<Store> s = CreateStore("device");
  s->SetOptimizer("sgd(learning_rate=0.5)");
  s->SetGradientCompression(Setting("2bit", "0.75"));
  InitKey(*s, 0, *FromFloats(std::vector<float>(kN, 1.0f), KV_FLOAT32));
  Model m("2bit", 0.75f, kN);
  std::vector<float> w(kN, 1.0f);
  for (int k = 0; k < 4; ++k) {
    const std::vector<float> g = GradValues(0, k, kN, KV_FLOAT32);
    PushKey(*s, 0, *FromFloats(g, KV_FLOAT32));
    for (size_t i = 0; i < kN; ++i) w[i] = w[i] - 0.5f * m.Step(i, g[i]);
  }
  auto out = FromFloats(std::vector<float>(kN, 0.0f), KV_FLOAT32);
  PullKey(*s, 0, out.get());
  CHECK(SameBits(Values(*out), w));
}

void LocalStoreRefuses() {
  for (const char* type : {"local", "local_allreduce_cpu"}) {
    std::unique_ptr<Store> s = CreateStore(type);
    std::string msg;
    CHECK(ErrorOf([&] { s->SetGradientCompression(Setting("2bit")); }, &msg) == KV_ERR_NOT_SUPPORTED);
    CHECK_HAS(msg, type);
    CHECK_HAS(msg, "dist_*");
  }
  std::string msg;
  CHECK(ErrorOf([] { Setting("3bit"); }, &msg) == KV_ERR_INVALID_ARGUMENT);
  CHECK_HAS(msg, "3bit");
  CHECK(ErrorOf([] { Setting("2bit", "0"); }) == KV_ERR_INVALID_ARGUMENT);
  CHECK(ErrorOf([] { Setting("none", "x"); }) == KV_ERR_INVALID_ARGUMENT);
  CHECK(ErrorOf([] { Compression::FromParamsOrNone({{"type", "none"}, {"treshold", "1"}}); }) ==
        KV_ERR_INVALID_ARGUMENT);
  CHECK(!Setting("none").has_value());
}

// One dist key's plan: its dtype, and per round the compression ("none" = off).
struct DistKey {
  int key;
  int dtype;
  std::vector<std::string> types;
  float threshold;
};

// Runs W=2 S=2 rounds of pushes of `keys` (bound 16: every key of >= 16 elements is split
// over both servers) and checks every pull against the model: rank order, float32 sum,
// rounded once (assign). `pushpull` pushes with pushpull instead of push + pull.
void RunDist(const std::string& type, int workers, const std::vector<DistKey>& keys, bool pushpull,
             const std::string& optimizer = "", float lr = 0, bool two_values = false) {
  constexpr size_t kN = 50;
  Job::Options o;
  o.num_workers = workers;
  o.num_servers = 2;
  o.type = type;
  o.bigarray_bound = 16;
  Job job(o);
  CHECK(job.formed());
  if (!job.formed()) return;
  const size_t rounds = keys[0].types.size();
  // Expected value of each key after each round, from the model.
  std::vector<std::vector<std::vector<float>>> expect(keys.size());
  for (size_t ki = 0; ki < keys.size(); ++ki) {
    const DistKey& dk = keys[ki];
    std::vector<Model> models;
    std::string current;
    std::vector<float> w(kN, optimizer.empty() ? 0.0f : 1.0f);
    for (size_t k = 0; k < rounds; ++k) {
      const std::string& ty = dk.types[k];
      if (ty != current) models.assign(static_cast<size_t>(workers), Model(ty, dk.threshold, kN)), current = ty;
      std::vector<float> sum(kN, 0.0f);
      for (int rank = 0; rank < workers; ++rank) {
        std::vector<float> g = GradValues(rank, static_cast<int>(k) + dk.key, kN, dk.dtype);
        if (two_values) {  // the float32 sum of both (multi-precision keys only)
          const std::vector<float> g2 = GradValues(rank + 2, static_cast<int>(k) + dk.key, kN, dk.dtype);
          for (size_t i = 0; i < kN; ++i) g[i] += g2[i];
        }
        for (size_t i = 0; i < kN; ++i) {
          sum[i] += ty == "none" ? g[i] : models[static_cast<size_t>(rank)].Step(i, g[i]);
        }
      }
      if (optimizer.empty()) {
        for (size_t i = 0; i < kN; ++i) w[i] = RoundTo(sum[i], dk.dtype);
      } else {  // sgd, multi-precision master in float32
        for (size_t i = 0; i < kN; ++i) w[i] = w[i] - lr * sum[i];
      }
      std::vector<float> seen = w;
      for (float& x : seen) x = RoundTo(x, dk.dtype);
      expect[ki].push_back(seen);
    }
  }
  job.OnEachWorker("compressed rounds", [&](int, Store& s) {
    if (!optimizer.empty()) s.SetOptimizer(optimizer);
    for (const DistKey& dk : keys) {
      InitKey(s, dk.key, *FromFloats(std::vector<float>(kN, optimizer.empty() ? 0.0f : 1.0f), dk.dtype));
    }
    std::vector<std::string> current(keys.size());
    for (size_t k = 0; k < rounds; ++k) {
      for (size_t ki = 0; ki < keys.size(); ++ki) {
        const DistKey& dk = keys[ki];
        if (dk.types[k] != current[ki]) {
          // One setting per worker store: the keys of a job share it, so keys change together.
          s.WaitAll();
          s.SetGradientCompression(Setting(dk.types[k], std::to_string(dk.threshold)));
          current.assign(keys.size(), dk.types[k]);
        }
      }
      for (size_t ki = 0; ki < keys.size(); ++ki) {
        const DistKey& dk = keys[ki];
        const int rank = s.distributed()->Rank();
        auto g = FromFloats(GradValues(rank, static_cast<int>(k) + dk.key, kN, dk.dtype), dk.dtype);
        auto out = FromFloats(std::vector<float>(kN, 0.0f), dk.dtype);
        if (pushpull) {
          const Array* v = g.get();
          Array* po = out.get();
          s.PushPull(KeyList::Ints(1, &dk.key), &v, KeyList::Ints(1, &dk.key), &po, 0);
        } else if (two_values) {
          auto g2 = FromFloats(GradValues(rank + 2, static_cast<int>(k) + dk.key, kN, dk.dtype), dk.dtype);
          const int two_keys[2] = {dk.key, dk.key};
          const Array* v[2] = {g.get(), g2.get()};
          s.Push(KeyList::Ints(2, two_keys), v, 0);
          PullKey(s, dk.key, out.get());
        } else {
          PushKey(s, dk.key, *g);
          PullKey(s, dk.key, out.get());
        }
        CHECK_MSG(SameBits(Values(*out), expect[ki][k]), "%s key %d (%s) round %zu (%s)", type.c_str(), dk.key,
                  DTypeName(dk.dtype), k, dk.types[k].c_str());
      }
    }
  });
  CHECK_JOB_OK(job.Finish());
}

void DistSyncSharded() {
  const std::vector<std::string> types = {"2bit", "2bit", "2bit", "none", "2bit", "1bit", "1bit"};
  RunDist("dist_sync", 2, {{0, KV_FLOAT32, types, 0.5f}, {1, KV_FLOAT16, types, 0.5f}}, false);
}

void DistSyncPushPull() {
  RunDist("dist_sync", 2, {{2, KV_FLOAT32, {"2bit", "2bit", "1bit"}, 0.25f}}, true);
}

void DistAsyncAssign() {
  RunDist("dist_async", 1, {{0, KV_FLOAT32, {"2bit", "2bit", "none", "1bit"}, 0.5f},
                            {1, KV_FLOAT16, {"2bit", "2bit", "none", "1bit"}, 0.5f}}, false);
}

void DistMultiPrecision() {
  RunDist("dist_sync", 2, {{0, KV_FLOAT16, {"2bit", "2bit", "2bit"}, 0.3f}}, false,
          "sgd(learning_rate=0.5,multi_precision=1)", 0.5f);
}

void DistMultiPrecisionTwoValues() {
  RunDist("dist_sync", 2, {{0, KV_FLOAT16, {"2bit", "2bit", "none", "1bit"}, 0.3f}}, false,
          "sgd(learning_rate=0.5,multi_precision=1)", 0.5f, true);
}

void WireRefusesMalformed() {
  using dist::WireHeader;
  auto header = [](dist::MsgType type, uint32_t flags, float t, int dtype, int64_t count) {
    WireHeader h = dist::MakeHeader(type, dist::Role::kWorker, 0);
    h.flags = flags;
    std::memcpy(&h.arg, &t, sizeof(t));
    h.dtype = dtype;
    h.key = 1;
    h.total = count;
    h.count = count;
    return h;
  };
  auto check = [](WireHeader h, uint64_t payload, const char* why) {
    h.payload_len = payload;
    h.num_frames = payload > 0 ? 2 : 1;
    const std::string got = dist::ValidateHeader(h, payload > 0 ? 1 : 0, 0, payload);
    if (why == nullptr) {
      CHECK_MSG(got.empty(), "refused: %s", got.c_str());
    } else {
      CHECK_HAS(got, why);
    }
  };
  const uint32_t two = dist::kFlagTwoBit, one = dist::kFlagOneBit;
  check(header(dist::MsgType::kPush, two, 0.5f, KV_FLOAT32, 33), 12, nullptr);  // 3 words
  check(header(dist::MsgType::kPushPull, one, -1.0f, KV_FLOAT16, 33), 8, nullptr);
  check(header(dist::MsgType::kPush, two, 0.5f, KV_FLOAT32, 33), 8, "packed size");
  check(header(dist::MsgType::kPush, two, 0.5f, KV_FLOAT32, 33), 132, "packed size");
  check(header(dist::MsgType::kPush, two | one, 0.5f, KV_FLOAT32, 33), 12, "both");
  check(header(dist::MsgType::kPush, two, 0.0f, KV_FLOAT32, 33), 12, "threshold");
  check(header(dist::MsgType::kPush, one, NAN, KV_FLOAT32, 33), 8, "threshold");
  check(header(dist::MsgType::kPush, two, INFINITY, KV_FLOAT32, 33), 12, "threshold");
  check(header(dist::MsgType::kPush, two, 0.5f, KV_FLOAT64, 33), 12, "float32 or float16");
  check(header(dist::MsgType::kInit, two, 0.5f, KV_FLOAT32, 33), 12, "only a push");
  check(header(dist::MsgType::kPull, two, 0.5f, KV_FLOAT32, 33), 0, nullptr);  // compressed_pull.h
  check(header(dist::MsgType::kPush, two | dist::kFlagFloat32Sum, 0.5f, KV_FLOAT16, 33), 12, "float32 sum");
  WireHeader barrier = dist::MakeHeader(dist::MsgType::kBarrier, dist::Role::kWorker, 0);
  barrier.flags = two;
  check(barrier, 0, "carries no values");
}

}  // namespace
}  // namespace inprocess
}  // namespace kvstore

int main(int argc, char** argv) {
  using namespace kvstore::inprocess;
  static const TestCase kCases[] = {
      {"device_store_rounds", DeviceStoreRounds},
      {"device_store_optimizer", DeviceStoreOptimizer},
      {"local_store_refuses", LocalStoreRefuses},
      {"dist_sync_sharded", DistSyncSharded},
      {"dist_sync_pushpull", DistSyncPushPull},
      {"dist_async_assign", DistAsyncAssign},
      {"dist_multi_precision", DistMultiPrecision},
      {"dist_multi_precision_two_values", DistMultiPrecisionTwoValues},
      {"wire_refuses_malformed", WireRefusesMalformed},
  };
  return RunCases(argc, argv, kCases);
}
