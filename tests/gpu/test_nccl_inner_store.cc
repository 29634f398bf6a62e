// test_nccl_inner_store.cc - what the `nccl` store hands to its inner store, checked without
// a GPU (the nccl store itself needs one: tests/gpu/test_gpu_nccl_states.c covers it there).
// The nccl store is a layer over CreateLocalStore("nccl", CreateDeviceComm()); its pushes
// give the inner store one summed value per key, except float16 keys under an updater that
// receives float32 (multi_precision), whose values it passes on unsummed, repeated keys and
// all (store/nccl_store.cc, SumsInner); its optimizer-state save and load are the inner
// store's. On this inner store:
//
//   mixed_push_matches_local  one push mixing a summed float32 key and a float16 key given
//                             as its separate values (2048, 1, 1 and more) gives the local
//                             store's bits, the float16 key 2050 where a float16 sum is 2048
//   states_match_local        saved states are byte for byte the local store's file; a
//                             fresh inner store loads them and continues bit for bit
//   states_errors_name_nccl   no optimizer: NOT_SUPPORTED naming store "nccl"; a file with a
//                             key the store lacks: UNKNOWN_KEY, and the state is unchanged
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

#include "../common/cases.h"
#include "comm/comm.h"
#include "core/dtype.h"
#include "store/store.h"

namespace kvstore {
namespace {

constexpr int kN = 16;
const char* const kSpec = "sgd(learning_rate=0.01,momentum=0.9,wd=0.001,multi_precision=1)";

std::unique_ptr<Store> Inner() { return CreateLocalStore("nccl", CreateDeviceComm()); }

std::unique_ptr<Array> Halves(float base, int step) {
  std::unique_ptr<Array> a = Array::Create({kN}, KV_FLOAT16, Context{});
  auto* p = static_cast<uint16_t*>(a->data());
  for (int i = 0; i < kN; ++i) p[i] = FloatToHalf(base + 0.0625f * static_cast<float>((i * 3 + step) % 7));
  return a;
}

std::unique_ptr<Array> Floats(float base, int step) {
  std::unique_ptr<Array> a = Array::Create({kN}, KV_FLOAT32, Context{});
  auto* p = static_cast<float*>(a->data());
  for (int i = 0; i < kN; ++i) p[i] = base + 0.01f * static_cast<float>((i * 5 + step) % 11);
  return a;
}

void InitBoth(Store& s) {
  const int keys[2] = {1, 2};
  std::unique_ptr<Array> f = Floats(0.5f, 0), h = Halves(0.0f, 0);
  const Array* vals[2] = {f.get(), h.get()};
  s.Init(KeyList::Ints(2, keys), vals);
}

// Step `step` as the local store is pushed it: key 1 (float32) three values, key 2 (float16)
// 2048 and two small values. `as_nccl`: as the nccl store pushes its inner store: key 1 as
// one presummed value, key 2's values unsummed, in call order.
void PushStep(Store& s, int step, bool as_nccl) {
  std::vector<std::unique_ptr<Array>> f, h;
  for (int j = 0; j < 3; ++j) f.push_back(Floats(0.1f * static_cast<float>(j + 1), step + j));
  h.push_back(Halves(2048.0f, step));
  h.push_back(Halves(1.0f, step + 1));
  h.push_back(Halves(1.0f, step + 2));
  std::unique_ptr<Array> f_sum = Array::Create({kN}, KV_FLOAT32, Context{});
  for (int i = 0; i < kN; ++i) {  // exact enough: key 1's sum is formed the same way below
    float acc = 0;
    for (const auto& a : f) acc += static_cast<const float*>(a->data())[i];
    static_cast<float*>(f_sum->data())[i] = acc;
  }
  std::vector<int> keys;
  std::vector<const Array*> vals;
  if (as_nccl) {
    keys.push_back(1);
    vals.push_back(f_sum.get());
  } else {
    for (const auto& a : f) {
      keys.push_back(1);
      vals.push_back(a.get());
    }
  }
  for (const auto& a : h) {
    keys.push_back(2);
    vals.push_back(a.get());
  }
  s.Push(KeyList::Ints(static_cast<int>(keys.size()), keys.data()), vals.data(), 0);
}

std::vector<uint8_t> Pulled(Store& s, int key, int dtype) {
  std::unique_ptr<Array> out = Array::Create({kN}, dtype, Context{});
  Array* outs[1] = {out.get()};
  s.Pull(KeyList::Ints(1, &key), outs, 0);
  const auto* p = static_cast<const uint8_t*>(out->data());
  return std::vector<uint8_t>(p, p + out->nbytes());
}

bool SameWeights(Store& a, Store& b) {
  return Pulled(a, 1, KV_FLOAT32) == Pulled(b, 1, KV_FLOAT32) &&
         Pulled(a, 2, KV_FLOAT16) == Pulled(b, 2, KV_FLOAT16);
}

std::vector<uint8_t> Slurp(const std::string& path) {
  std::vector<uint8_t> bytes;
  if (FILE* f = std::fopen(path.c_str(), "rb")) {
    int c;
    while ((c = std::fgetc(f)) != EOF) bytes.push_back(static_cast<uint8_t>(c));
    std::fclose(f);
  }
  return bytes;
}

std::string TempPath(const char* name) {
  return std::string("/tmp/kvstore_nccl_inner_") + std::to_string(::getpid()) + "_" + name;
}

void MixedPushMatchesLocal() {
  std::unique_ptr<Store> inner = Inner(), local = CreateStore("local");
  for (Store* s : {inner.get(), local.get()}) {
    s->SetOptimizer("test(multi_precision=1)");
    InitBoth(*s);
  }
  PushStep(*inner, 0, true);
  PushStep(*local, 0, false);
  CHECK(SameWeights(*inner, *local));
  // Element 0 of key 2: 0 + (2048 + 1 + 1) in float32 = 2050 (0x6801); float16: 2048.
  const std::vector<uint8_t> h = Pulled(*inner, 2, KV_FLOAT16);
  uint16_t first = 0;
  std::memcpy(&first, h.data(), sizeof first);
  CHECK_MSG(first == 0x6801, "key 2 element 0 is 0x%04x, want 2050 (0x6801)", first);
}

void StatesMatchLocal() {
  const std::string inner_path = TempPath("inner"), local_path = TempPath("local");
  std::unique_ptr<Store> inner = Inner(), local = CreateStore("local"), whole = Inner();
  for (Store* s : {inner.get(), local.get(), whole.get()}) {
    s->SetOptimizer(kSpec);
    InitBoth(*s);
    for (int step = 0; step < 3; ++step) PushStep(*s, step, s != local.get());
  }
  inner->SaveOptimizerStates(inner_path);
  local->SaveOptimizerStates(local_path);
  const std::vector<uint8_t> a = Slurp(inner_path), b = Slurp(local_path);
  CHECK_MSG(!a.empty() && a == b, "the inner store's file (%zu bytes) differs from local's (%zu)",
            a.size(), b.size());
  // A fresh inner store with the weights after 3 steps and the loaded state continues as
  // the uninterrupted one.
  std::unique_ptr<Store> resumed = Inner();
  resumed->SetOptimizer(kSpec);
  {
    const int keys[2] = {1, 2};
    std::unique_ptr<Array> f = Array::Create({kN}, KV_FLOAT32, Context{});
    std::unique_ptr<Array> h = Array::Create({kN}, KV_FLOAT16, Context{});
    Array* outs[2] = {f.get(), h.get()};
    inner->Pull(KeyList::Ints(2, keys), outs, 0);
    const Array* vals[2] = {f.get(), h.get()};
    resumed->Init(KeyList::Ints(2, keys), vals);
  }
  resumed->LoadOptimizerStates(inner_path);
  for (int step = 3; step < 5; ++step) {
    PushStep(*resumed, step, true);
    PushStep(*whole, step, true);
  }
  CHECK_MSG(SameWeights(*resumed, *whole), "resumed after 3 steps: the weights differ from 5 steps");
  std::remove(inner_path.c_str());
  std::remove(local_path.c_str());
}

int CodeOf(const std::function<void()>& fn, std::string* msg) {
  try {
    fn();
  } catch (const Error& e) {
    *msg = e.what();
    return e.code();
  }
  return 0;
}

void StatesErrorsNameNccl() {
  const std::string path = TempPath("errors");
  std::string msg;
  std::unique_ptr<Store> plain = Inner();
  InitBoth(*plain);
  CHECK(CodeOf([&] { plain->SaveOptimizerStates(path); }, &msg) == KV_ERR_NOT_SUPPORTED);
  CHECK_HAS(msg, "store \"nccl\"");
  CHECK(CodeOf([&] { plain->LoadOptimizerStates(path); }, &msg) == KV_ERR_NOT_SUPPORTED);
  CHECK_HAS(msg, "store \"nccl\"");

  std::unique_ptr<Store> s = Inner(), whole = Inner();
  for (Store* t : {s.get(), whole.get()}) {
    t->SetOptimizer(kSpec);
    InitBoth(*t);
    PushStep(*t, 0, true);
  }
  s->SaveOptimizerStates(path);
  std::unique_ptr<Store> fewer = Inner();
  fewer->SetOptimizer(kSpec);
  {
    const int key = 1;
    std::unique_ptr<Array> f = Floats(0.5f, 0);
    const Array* vals[1] = {f.get()};
    fewer->Init(KeyList::Ints(1, &key), vals);
  }
  CHECK(CodeOf([&] { fewer->LoadOptimizerStates(path); }, &msg) == KV_ERR_UNKNOWN_KEY);
  CHECK_HAS(msg, "key 2");
  CHECK_HAS(msg, "store \"nccl\"");
  PushStep(*s, 1, true);
  PushStep(*whole, 1, true);
  CHECK(SameWeights(*s, *whole));
  std::remove(path.c_str());
}

const TestCase kCases[] = {
    {"mixed_push_matches_local", MixedPushMatchesLocal},
    {"states_match_local", StatesMatchLocal},
    {"states_errors_name_nccl", StatesErrorsNameNccl},
};

}  // namespace
}  // namespace kvstore

int main(int argc, char** argv) { return RunCases(argc, argv, kvstore::kCases); }
