// test_optimizer_states.cc - KVStoreSaveOptimizerStates / KVStoreLoadOptimizerStates on the
// in-process stores, through the public C API.
//
// The property every case checks: a job that trains N steps, saves, and goes on in a fresh
// store (same optimizer, weights initialised from the first job's, states loaded) for M
// steps ends with weights bit-identical to one job that trained N+M steps. A load that fails
// (corrupt, truncated, wrong optimizer, unknown key, wrong shape or dtype) must leave the
// state as it was: the store that refused it trains on and still matches the uninterrupted
// job; the bad files carry state different from the store's, so a partial load would show.
//
// Usage: test_optimizer_states [case]   (no argument runs every case)
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "../common/arrays.h"
#include "../common/cases.h"
#include "../common/check.h"
#include "kvstore/kvstore.h"

namespace {

// One key of a job: an int key (or a string key when `name` is set), its shape and dtype.
struct KeyDef {
  int key;
  const char* name;
  std::vector<int64_t> shape;
  int dtype;
};

int64_t Elements(const KeyDef& k) {
  int64_t n = 1;
  for (int64_t d : k.shape) n *= d;
  return n;
}

// A value of element type `dtype` from the double v (float16 as its bits, v is exact).
void PutElem(std::vector<uint8_t>* buf, int dtype, int64_t i, double v) {
  switch (dtype) {
    case KV_FLOAT64: reinterpret_cast<double*>(buf->data())[i] = v; break;
    case KV_INT32: reinterpret_cast<int32_t*>(buf->data())[i] = static_cast<int32_t>(v); break;
    case KV_FLOAT16:
      reinterpret_cast<uint16_t*>(buf->data())[i] = half_from_exact_float(static_cast<float>(v));
      break;
    default: reinterpret_cast<float*>(buf->data())[i] = static_cast<float>(v); break;
  }
}

size_t ElemSize(int dtype) { return dtype == KV_FLOAT64 ? 8 : dtype == KV_FLOAT16 ? 2 : 4; }

KVArrayHandle MakeArray(const KeyDef& k, double seed) {
  KVArrayHandle a = nullptr;
  REQUIRE_OK(KVArrayCreate(k.shape.data(), static_cast<int>(k.shape.size()), k.dtype, KV_CPU, 0, &a));
  const int64_t n = Elements(k);
  std::vector<uint8_t> buf(static_cast<size_t>(n) * ElemSize(k.dtype));
  for (int64_t i = 0; i < n; ++i) {
    // Gradients of mixed sign and magnitude, different per key, step and element.
    double v = ((i * 7 + static_cast<int64_t>(seed * 13)) % 11 - 5) * 0.125 + seed * 0.01;
    if (k.dtype == KV_INT32) v = static_cast<double>((i + static_cast<int64_t>(seed)) % 5);
    // float16: multiples of 1/8 (exact); small ones, so that updates fall below an ulp.
    if (k.dtype == KV_FLOAT16) v = ((i * 7 + static_cast<int64_t>(seed * 8)) % 11 - 5) * 0.125;
    PutElem(&buf, k.dtype, i, v);
  }
  REQUIRE_OK(KVArrayCopyFromHost(a, buf.data(), buf.size()));
  return a;
}

// A store with an optimizer and keys, trained step by step with deterministic gradients.
struct Job {
  KVStoreHandle h = nullptr;
  std::vector<KeyDef> keys;
  int step = 0;

  Job(const char* type, const char* spec, std::vector<KeyDef> defs, const Job* weights_from = nullptr)
      : keys(std::move(defs)) {
    REQUIRE_OK(KVStoreCreate(type, &h));
    if (spec) REQUIRE_OK(KVStoreSetOptimizer(h, spec));
    for (size_t i = 0; i < keys.size(); ++i) {
      KVArrayHandle a = MakeArray(keys[i], 0.5 + static_cast<double>(i));
      if (weights_from) REQUIRE_OK(weights_from->PullInto(i, a));
      REQUIRE_OK(InitKey(i, a));
      KVArrayFree(a);
    }
  }
  ~Job() { KVStoreFree(h); }
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  int InitKey(size_t i, KVArrayHandle a) {
    const KeyDef& k = keys[i];
    return k.name ? KVStoreInitStr(h, 1, &k.name, &a) : KVStoreInit(h, 1, &k.key, &a);
  }
  int PullInto(size_t i, KVArrayHandle a) const {
    const KeyDef& k = keys[i];
    return k.name ? KVStorePullStr(h, 1, &k.name, &a, 0) : KVStorePull(h, 1, &k.key, &a, 0);
  }
  // One training step: a gradient for every key (the last key only every other step, so
  // keys have different update counts).
  void Step() {
    for (size_t i = 0; i < keys.size(); ++i) {
      if (i + 1 == keys.size() && keys.size() > 1 && step % 2 == 1) continue;
      const KeyDef& k = keys[i];
      KVArrayHandle g = MakeArray(k, 1.0 + step * 3 + static_cast<double>(i));
      const int rc = k.name ? KVStorePushStr(h, 1, &k.name, &g, 0) : KVStorePush(h, 1, &k.key, &g, 0);
      CHECK_MSG(rc == 0, "step %d key %zu: %s", step, i, KVGetLastError());
      KVArrayFree(g);
    }
    ++step;
  }
  void Train(int n) {
    for (int i = 0; i < n; ++i) Step();
  }
  // Every stored value's bytes, keys in order.
  std::vector<uint8_t> Weights() const {
    std::vector<uint8_t> all;
    for (size_t i = 0; i < keys.size(); ++i) {
      KVArrayHandle a = MakeArray(keys[i], 0);
      REQUIRE_OK(PullInto(i, a));
      std::vector<uint8_t> buf(static_cast<size_t>(Elements(keys[i])) * ElemSize(keys[i].dtype));
      REQUIRE_OK(KVArrayCopyToHost(a, buf.data(), buf.size()));
      all.insert(all.end(), buf.begin(), buf.end());
      KVArrayFree(a);
    }
    return all;
  }
};

std::string TempPath(const char* name) {
  return std::string("/tmp/kv_states_") + std::to_string(::getpid()) + "_" + name + ".kvos";
}

std::vector<KeyDef> MixedKeys() {
  return {{0, nullptr, {5}, KV_FLOAT32}, {3, nullptr, {2, 3}, KV_FLOAT64}, {7, nullptr, {4}, KV_FLOAT32}};
}

// N steps, save, fresh store, load, M steps == N+M steps, bit for bit.
void CheckResume(const char* type, const char* spec, const std::vector<KeyDef>& keys, int n, int m) {
  check_set_context("%s %s", type, spec);
  const std::string path = TempPath("resume");
  Job whole(type, spec, keys);
  whole.Train(n + m);

  Job first(type, spec, keys);
  first.Train(n);
  CHECK_OK(KVStoreSaveOptimizerStates(first.h, path.c_str()));
  Job second(type, spec, keys, &first);
  second.step = n;
  CHECK_OK(KVStoreLoadOptimizerStates(second.h, path.c_str()));
  second.Train(m);
  CHECK_MSG(second.Weights() == whole.Weights(), "resumed weights differ from the uninterrupted run");

  // Without the load the resumed run differs: the states matter in this scenario.
  Job blank(type, spec, keys, &first);
  blank.step = n;
  blank.Train(m);
  if (std::strstr(spec, "test") == nullptr && std::strcmp(spec, "sgd(learning_rate=0.1)") != 0) {
    CHECK_MSG(blank.Weights() != whole.Weights(), "the scenario does not depend on the state");
  }
  std::remove(path.c_str());
  check_set_context("%s", "");
}

void resume_sgd_momentum() {
  CheckResume("local", "sgd(learning_rate=0.1,momentum=0.9,wd=0.01)", MixedKeys(), 3, 4);
}
void resume_adam() { CheckResume("local", "adam(learning_rate=0.01,wd=0.001)", MixedKeys(), 4, 3); }
void resume_every_optimizer() {
  for (const char* spec : {"sgd(learning_rate=0.1)", "nag(learning_rate=0.1,momentum=0.8)",
                           "adagrad(learning_rate=0.1)", "rmsprop(learning_rate=0.01)",
                           "rmsprop(learning_rate=0.01,centered=1)", "test(rescale_grad=1)"}) {
    CheckResume("local", spec, MixedKeys(), 3, 3);
  }
  CheckResume("local", "test(rescale_grad=1)", {{1, nullptr, {3}, KV_INT32}}, 2, 2);
}
// The float32 master copy of float16 weights is state: saved and loaded with the slots.
void resume_multi_precision() {
  const std::vector<KeyDef> keys = {{0, nullptr, {6}, KV_FLOAT16}, {1, nullptr, {3}, KV_FLOAT32},
                                    {2, nullptr, {2, 2}, KV_FLOAT16}};
  CheckResume("local", "sgd(learning_rate=0.001,momentum=0.9,multi_precision=1)", keys, 3, 3);
  CheckResume("local", "adam(learning_rate=0.001,multi_precision=1)", keys, 3, 3);
  // A file without the master (saved without multi_precision) does not fit a store with it.
  const std::string path = TempPath("mp");
  Job plain("local", "sgd(learning_rate=0.001,momentum=0.9)", keys);
  plain.Train(1);
  CHECK_OK(KVStoreSaveOptimizerStates(plain.h, path.c_str()));
  Job mp("local", "sgd(learning_rate=0.001,momentum=0.9,multi_precision=1)", keys);
  CHECK_ERR(KVStoreLoadOptimizerStates(mp.h, path.c_str()), KV_ERR_INVALID_ARGUMENT,
            "key 0 has 1 state arrays but optimizer sgd keeps 2 for a float16 weight");
  std::remove(path.c_str());
}

void resume_string_keys() {
  CheckResume("local", "adam(learning_rate=0.01)",
              {{0, "w", {4}, KV_FLOAT32}, {0, "bias", {2}, KV_FLOAT64}, {0, "emb", {3, 2}, KV_FLOAT32}}, 3, 3);
}
void resume_device_store() {
  CheckResume("device", "sgd(learning_rate=0.1,momentum=0.9)", MixedKeys(), 3, 2);
  CheckResume("device", "adam(learning_rate=0.01)", MixedKeys(), 2, 3);
}

// Saving twice gives the same bytes (the file depends only on the state), and a store that
// loads its own file goes on unchanged.
void save_is_deterministic() {
  const std::string a = TempPath("a"), b = TempPath("b");
  Job job("local", "adam(learning_rate=0.01)", MixedKeys());
  job.Train(3);
  CHECK_OK(KVStoreSaveOptimizerStates(job.h, a.c_str()));
  CHECK_OK(KVStoreSaveOptimizerStates(job.h, b.c_str()));
  FILE* fa = std::fopen(a.c_str(), "rb");
  FILE* fb = std::fopen(b.c_str(), "rb");
  REQUIRE(fa && fb, "cannot open the saved files");
  std::vector<char> ba(1 << 16), bb(1 << 16);
  const size_t na = std::fread(ba.data(), 1, ba.size(), fa), nb = std::fread(bb.data(), 1, bb.size(), fb);
  std::fclose(fa);
  std::fclose(fb);
  CHECK(na == nb && na > 32 && std::memcmp(ba.data(), bb.data(), na) == 0);
  CHECK(std::memcmp(ba.data(), "KVOSTATE", 8) == 0);
  Job whole("local", "adam(learning_rate=0.01)", MixedKeys());
  whole.Train(5);
  CHECK_OK(KVStoreLoadOptimizerStates(job.h, a.c_str()));
  job.Train(2);
  CHECK(job.Weights() == whole.Weights());
  // An existing file is replaced whole; no temporary file stays behind.
  CHECK_OK(KVStoreSaveOptimizerStates(job.h, a.c_str()));
  CHECK(::access((a + ".tmp." + std::to_string(::getpid())).c_str(), F_OK) != 0);
  std::remove(a.c_str());
  std::remove(b.c_str());
}

std::vector<char> ReadFile(const std::string& path) {
  std::vector<char> bytes;
  FILE* f = std::fopen(path.c_str(), "rb");
  REQUIRE(f != nullptr, "cannot open %s", path.c_str());
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) bytes.insert(bytes.end(), buf, buf + n);
  std::fclose(f);
  return bytes;
}

void WriteFile(const std::string& path, const std::vector<char>& bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  REQUIRE(f != nullptr, "cannot open %s", path.c_str());
  if (!bytes.empty()) REQUIRE(std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size(), "short write");
  std::fclose(f);
}

// A store trained `n` steps (the victim of a bad load), the run it must still match after
// the failed load and `m` more steps, and a file of state that differs from the victim's.
struct BadLoad {
  const char* spec;
  Job victim;
  Job whole;
  std::string path;
  BadLoad(const char* s, const std::vector<KeyDef>& keys, int n, const char* name)
      : spec(s), victim("local", s, keys), whole("local", s, keys), path(TempPath(name)) {
    victim.Train(n);
    whole.Train(n + 2);
  }
  ~BadLoad() { std::remove(path.c_str()); }
  // The failed load changed nothing: training on matches the uninterrupted run.
  void CheckUnchanged() {
    victim.Train(2);
    CHECK_MSG(victim.Weights() == whole.Weights(), "a failed load changed the state");
  }
};

// A valid file of another store's state (trained one step) to damage.
std::vector<char> OtherState(const char* spec, const std::vector<KeyDef>& keys, const std::string& path) {
  Job other("local", spec, keys);
  other.Train(1);
  REQUIRE_OK(KVStoreSaveOptimizerStates(other.h, path.c_str()));
  return ReadFile(path);
}

void corrupt_file() {
  const char* spec = "adam(learning_rate=0.01)";
  BadLoad t(spec, MixedKeys(), 3, "corrupt");
  const std::vector<char> good = OtherState(spec, MixedKeys(), t.path);
  // One flipped bit anywhere: magic, version, length, checksums, names, keys, state bytes.
  for (size_t at : {size_t{0}, size_t{9}, size_t{17}, size_t{25}, size_t{30}, size_t{40},
                    good.size() / 2, good.size() - 1}) {
    std::vector<char> bad = good;
    bad[at] ^= 0x10;
    WriteFile(t.path, bad);
    CHECK_ERR(KVStoreLoadOptimizerStates(t.victim.h, t.path.c_str()), KV_ERR_INVALID_ARGUMENT, t.path.c_str());
  }
  // The body's checksum catches a change that keeps the structure valid.
  std::vector<char> bad = good;
  bad[good.size() - 1] ^= 0x01;
  WriteFile(t.path, bad);
  CHECK_ERR(KVStoreLoadOptimizerStates(t.victim.h, t.path.c_str()), KV_ERR_INVALID_ARGUMENT,
            "corrupt: the body checksum does not match");
  bad = good;
  bad[20] ^= 0x01;  // the body length
  WriteFile(t.path, bad);
  CHECK_ERR(KVStoreLoadOptimizerStates(t.victim.h, t.path.c_str()), KV_ERR_INVALID_ARGUMENT,
            "corrupt: the header checksum does not match");
  WriteFile(t.path, std::vector<char>{'h', 'e', 'l', 'l', 'o'});
  CHECK_ERR(KVStoreLoadOptimizerStates(t.victim.h, t.path.c_str()), KV_ERR_INVALID_ARGUMENT,
            "is not an optimizer states file");
  CHECK_ERR(KVStoreLoadOptimizerStates(t.victim.h, "/nonexistent/dir/states.kvos"), KV_ERR_INVALID_ARGUMENT,
            "cannot open");
  t.CheckUnchanged();
}

void truncated_file() {
  const char* spec = "sgd(learning_rate=0.1,momentum=0.9)";
  BadLoad t(spec, MixedKeys(), 3, "truncated");
  const std::vector<char> good = OtherState(spec, MixedKeys(), t.path);
  for (size_t keep : {size_t{0}, size_t{8}, size_t{31}, size_t{32}, good.size() / 2, good.size() - 1}) {
    WriteFile(t.path, std::vector<char>(good.begin(), good.begin() + static_cast<long>(keep)));
    CHECK_ERR(KVStoreLoadOptimizerStates(t.victim.h, t.path.c_str()), KV_ERR_INVALID_ARGUMENT, t.path.c_str());
  }
  WriteFile(t.path, std::vector<char>(good.begin(), good.end() - 4));
  CHECK_ERR(KVStoreLoadOptimizerStates(t.victim.h, t.path.c_str()), KV_ERR_INVALID_ARGUMENT, "is truncated");
  std::vector<char> longer = good;
  longer.push_back(0);
  WriteFile(t.path, longer);
  CHECK_ERR(KVStoreLoadOptimizerStates(t.victim.h, t.path.c_str()), KV_ERR_INVALID_ARGUMENT,
            "longer than written");
  t.CheckUnchanged();
}

void wrong_spec() {
  const char* spec = "sgd(learning_rate=0.1,momentum=0.9)";
  BadLoad t(spec, MixedKeys(), 3, "spec");
  OtherState("adam(learning_rate=0.01)", MixedKeys(), t.path);
  CHECK_ERR(KVStoreLoadOptimizerStates(t.victim.h, t.path.c_str()), KV_ERR_INVALID_ARGUMENT,
            "holds the state of adam(");
  // The same optimizer with another number of state arrays (no momentum: none).
  OtherState("sgd(learning_rate=0.1)", MixedKeys(), t.path);
  CHECK_ERR(KVStoreLoadOptimizerStates(t.victim.h, t.path.c_str()), KV_ERR_INVALID_ARGUMENT,
            "has 0 state arrays but optimizer sgd keeps 1");
  t.CheckUnchanged();
  // Hyper-parameters may differ: a schedule changes the learning rate.
  OtherState("sgd(learning_rate=0.5,momentum=0.9)", MixedKeys(), t.path);
  CHECK_OK(KVStoreLoadOptimizerStates(t.victim.h, t.path.c_str()));
}

void missing_key() {
  const char* spec = "adam(learning_rate=0.01)";
  BadLoad t(spec, MixedKeys(), 3, "missing");
  std::vector<KeyDef> more = MixedKeys();
  more.push_back({9, nullptr, {2}, KV_FLOAT32});
  OtherState(spec, more, t.path);
  CHECK_ERR(KVStoreLoadOptimizerStates(t.victim.h, t.path.c_str()), KV_ERR_UNKNOWN_KEY,
            "has state for key 9, which is not initialised");
  OtherState(spec, {{0, "w", {5}, KV_FLOAT32}}, t.path);
  CHECK_ERR(KVStoreLoadOptimizerStates(t.victim.h, t.path.c_str()), KV_ERR_KEY_KIND_MISMATCH, "string keys");
  t.CheckUnchanged();
  // Fewer keys in the file is fine: the others start afresh (as a fresh store's would).
  Job fewer("local", spec, {{0, nullptr, {5}, KV_FLOAT32}});
  CHECK_OK(KVStoreSaveOptimizerStates(fewer.h, t.path.c_str()));
  CHECK_OK(KVStoreLoadOptimizerStates(t.victim.h, t.path.c_str()));
}

void wrong_shape() {
  const char* spec = "adam(learning_rate=0.01)";
  BadLoad t(spec, MixedKeys(), 3, "shape");
  std::vector<KeyDef> reshaped = MixedKeys();
  reshaped[1].shape = {3, 2};  // same size, other shape
  OtherState(spec, reshaped, t.path);
  CHECK_ERR(KVStoreLoadOptimizerStates(t.victim.h, t.path.c_str()), KV_ERR_SHAPE_MISMATCH,
            "key 3 was saved for a weight of shape (3,2) but the stored value has shape (2,3)");
  std::vector<KeyDef> retyped = MixedKeys();
  retyped[2].dtype = KV_FLOAT64;
  OtherState(spec, retyped, t.path);
  CHECK_ERR(KVStoreLoadOptimizerStates(t.victim.h, t.path.c_str()), KV_ERR_DTYPE_MISMATCH,
            "key 7 was saved for a float64 weight but the stored value is float32");
  t.CheckUnchanged();
}

int AddUpdater(int, KVArrayHandle, KVArrayHandle, void*) { return 0; }

void not_supported() {
  const std::string path = TempPath("unsupported");
  Job none("local", nullptr, MixedKeys());
  CHECK_ERR(KVStoreSaveOptimizerStates(none.h, path.c_str()), KV_ERR_NOT_SUPPORTED, "has no optimizer");
  CHECK_ERR(KVStoreLoadOptimizerStates(none.h, path.c_str()), KV_ERR_NOT_SUPPORTED, "has no optimizer");
  CHECK_OK(KVStoreSetUpdater(none.h, AddUpdater, nullptr, nullptr));
  CHECK_ERR(KVStoreSaveOptimizerStates(none.h, path.c_str()), KV_ERR_NOT_SUPPORTED, "a callback updater");
  CHECK(::access(path.c_str(), F_OK) != 0);
  CHECK_ERR(KVStoreSaveOptimizerStates(nullptr, path.c_str()), KV_ERR_NULL_POINTER, NULL);
  CHECK_ERR(KVStoreSaveOptimizerStates(none.h, nullptr), KV_ERR_NULL_POINTER, "path");
  CHECK_ERR(KVStoreLoadOptimizerStates(none.h, nullptr), KV_ERR_NULL_POINTER, "path");
  // A file that cannot be written: nothing is left behind.
  Job job("local", "sgd(learning_rate=0.1)", MixedKeys());
  CHECK_ERR(KVStoreSaveOptimizerStates(job.h, "/nonexistent/dir/states.kvos"), KV_ERR_INVALID_ARGUMENT,
            "/nonexistent/dir/states.kvos");
}

// Saves and loads while other threads push: each call holds every key, so pushes wait and
// nothing deadlocks; a file saved mid-training is a consistent state (it loads).
void concurrent_pushes() {
  const std::string path = TempPath("concurrent");
  Job job("local", "adam(learning_rate=0.01)", MixedKeys());
  job.Train(1);
  std::atomic<bool> stop{false};
  std::vector<std::thread> pushers;
  for (size_t i = 0; i < job.keys.size(); ++i) {
    pushers.emplace_back([&job, &stop, i] {
      const KeyDef& k = job.keys[i];
      int pushes = 0;
      while (!stop.load() || pushes < 50) {
        KVArrayHandle g = MakeArray(k, 0.25 * pushes++);
        CHECK_OK(KVStorePush(job.h, 1, &k.key, &g, 0));
        KVArrayFree(g);
        if (pushes > 100000) break;
      }
    });
  }
  for (int round = 0; round < 50; ++round) {
    CHECK_OK(KVStoreSaveOptimizerStates(job.h, path.c_str()));
    CHECK_OK(KVStoreLoadOptimizerStates(job.h, path.c_str()));
  }
  stop.store(true);
  for (std::thread& t : pushers) t.join();
  std::remove(path.c_str());
}

const TestCase kCases[] = {
    {"resume_sgd_momentum", resume_sgd_momentum}, {"resume_adam", resume_adam},
    {"resume_every_optimizer", resume_every_optimizer}, {"resume_string_keys", resume_string_keys},
    {"resume_multi_precision", resume_multi_precision},
    {"resume_device_store", resume_device_store}, {"save_is_deterministic", save_is_deterministic},
    {"corrupt_file", corrupt_file}, {"truncated_file", truncated_file}, {"wrong_spec", wrong_spec},
    {"missing_key", missing_key}, {"wrong_shape", wrong_shape}, {"not_supported", not_supported},
    {"concurrent_pushes", concurrent_pushes},
};

}  // namespace

int main(int argc, char** argv) { return RunCases(argc, argv, kCases); }
