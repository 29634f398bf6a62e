// test_dist_states.cc - save_optimizer_states / load_optimizer_states on distributed
// stores (ps/dist_states.h): the servers' state of every key part is gathered into one file
// by the saving worker and sent back part by part on load.
//
//   sync_resume_sharded   W=2, S=2, adam, a key cut over both servers, two whole keys
//                         (float32, float64): N rounds, worker 0 saves; a fresh job
//                         initialised with the saved weights loads and runs M rounds; its
//                         weights equal those of one job that ran N+M rounds, bit for bit
//                         (and a local store loads the file and saves the same bytes)
//   async_resume          the same with dist_async and one worker (sgd with momentum)
//   sync_resume_string_keys  the same with string keys (one split) and centred rmsprop
//   refused_load_changes_nothing  a file of another optimizer passes the worker's checks
//                         but every server refuses it in the check phase: no server's state
//                         changes (training on matches the uninterrupted run); a truncated
//                         file and an unknown key are refused by the worker
//   no_optimizer          servers without an optimizer: NOT_SUPPORTED naming the server
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "cases.h"
#include "core/error.h"
#include "job.h"

namespace kvstore {
namespace inprocess {
namespace {

struct KeyDef {
  int key;
  int64_t n;
  int dtype;
  const char* name;  // the string key, in jobs with string keys
};
const std::vector<KeyDef> kKeys = {{0, 40, KV_FLOAT32, "emb"}, {1, 5, KV_FLOAT32, "w"},
                                   {2, 3, KV_FLOAT64, "b"}};
bool g_str_keys = false;  // the jobs use the keys' names

void Init(Store& s, const KeyDef& k, const Array& v) {
  if (g_str_keys) InitKey(s, std::string(k.name), v);
  else InitKey(s, k.key, v);
}
void Push(Store& s, const KeyDef& k, const Array& v) {
  if (g_str_keys) PushKey(s, std::string(k.name), v);
  else PushKey(s, k.key, v);
}
void PullInto(Store& s, const KeyDef& k, Array* out) {
  if (g_str_keys) PullKey(s, std::string(k.name), out);
  else PullKey(s, k.key, out);
}

std::unique_ptr<Array> Values(const KeyDef& k, double seed) {
  std::unique_ptr<Array> a = Array::Create({k.n}, k.dtype, Context{});
  for (int64_t i = 0; i < k.n; ++i) {
    const double v = std::sin(static_cast<double>(i + 1) * (seed + 1.0)) * 0.5;
    if (k.dtype == KV_FLOAT64) static_cast<double*>(a->data())[i] = v;
    else static_cast<float*>(a->data())[i] = static_cast<float>(v);
  }
  return a;
}

using Weights = std::vector<std::vector<char>>;  // bytes per key

Weights Pull(Store& s) {
  Weights w;
  for (const KeyDef& k : kKeys) {
    std::unique_ptr<Array> out = Values(k, 0);
    PullInto(s, k, out.get());
    out->WaitPendingWrites();
    const char* p = static_cast<const char*>(out->data());
    w.emplace_back(p, p + out->nbytes());
  }
  return w;
}

std::unique_ptr<Array> FromBytes(const KeyDef& k, const std::vector<char>& bytes) {
  std::unique_ptr<Array> a = Values(k, 0);
  std::memcpy(a->data(), bytes.data(), bytes.size());
  return a;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::string TempPath(const char* name) {
  return std::string("/tmp/kv_dist_states_") + std::to_string(::getpid()) + "_" + name + ".kvos";
}

struct Run {
  std::string type = "dist_sync";
  int workers = 2;
  std::string spec = "adam(learning_rate=0.01,wd=0.001)";
  const Weights* start = nullptr;  // initial weights (nullptr: Values(k, 0.5))
  std::string load;                // loaded by worker 0 before the rounds ("" none)
  int first_round = 0, rounds = 0;
  std::string save;                // saved by worker 0 after the rounds ("" none)
};

// One job: every worker sets the optimizer and inits the keys, worker 0 loads, every worker
// pushes a gradient per key per round, worker 0 saves; returns worker 0's final weights.
Weights RunJob(const Run& r) {
  Job::Options o;
  o.type = r.type;
  o.num_workers = r.workers;
  o.num_servers = 2;
  o.bigarray_bound = 16;  // key 0 (40 elements) is cut over both servers
  Job job(o);
  CHECK(job.formed());
  Weights result;
  if (!job.formed()) return result;
  job.OnEachWorker("optimizer states job", [&](int rank, Store& s) {
    s.SetOptimizer(r.spec);
    for (size_t i = 0; i < kKeys.size(); ++i) {
      Init(s, kKeys[i], r.start ? *FromBytes(kKeys[i], (*r.start)[i]) : *Values(kKeys[i], 0.5));
    }
    s.distributed()->Barrier();
    if (rank == 0 && !r.load.empty()) s.LoadOptimizerStates(r.load);
    s.distributed()->Barrier();
    for (int round = r.first_round; round < r.first_round + r.rounds; ++round) {
      for (const KeyDef& k : kKeys) Push(s, k, *Values(k, 3.0 * round + rank + k.key));
      s.WaitAll();
      if (r.type != "dist_sync") s.distributed()->Barrier();  // async: rounds in step
    }
    s.distributed()->Barrier();
    if (rank == 0) {
      if (!r.save.empty()) s.SaveOptimizerStates(r.save);
      result = Pull(s);
    }
  });
  CHECK_JOB_OK(job.Finish());
  return result;
}

void CheckResume(const std::string& type, int workers, const std::string& spec) {
  const std::string path = TempPath("resume");
  Run whole;
  whole.type = type;
  whole.workers = workers;
  whole.spec = spec;
  whole.rounds = 5;
  const Weights want = RunJob(whole);

  Run first = whole;
  first.rounds = 3;
  first.save = path;
  const Weights saved = RunJob(first);

  Run second = whole;
  second.start = &saved;
  second.load = path;
  second.first_round = 3;
  second.rounds = 2;
  CHECK_MSG(RunJob(second) == want, "%s: the resumed job's weights differ from the uninterrupted job's",
            type.c_str());
  Run blank = second;
  blank.load.clear();
  CHECK_MSG(RunJob(blank) != want, "%s: the scenario does not depend on the state", type.c_str());

  // The file does not depend on how keys were split: a local store loads it and saves the
  // same bytes.
  std::unique_ptr<Store> local = CreateStore("local");
  local->SetOptimizer(spec);
  for (size_t i = 0; i < kKeys.size(); ++i) Init(*local, kKeys[i], *FromBytes(kKeys[i], saved[i]));
  const std::string again = TempPath("again");
  local->LoadOptimizerStates(path);
  local->SaveOptimizerStates(again);
  CHECK_MSG(ReadAll(again) == ReadAll(path) && !ReadAll(path).empty(),
            "a local store's save of a distributed job's file differs from it");
  std::remove(again.c_str());
  std::remove(path.c_str());
}

void SyncResumeSharded() { CheckResume("dist_sync", 2, "adam(learning_rate=0.01,wd=0.001)"); }
void AsyncResume() { CheckResume("dist_async", 1, "sgd(learning_rate=0.1,momentum=0.9)"); }
void SyncResumeStringKeys() {
  g_str_keys = true;
  CheckResume("dist_sync", 2, "rmsprop(learning_rate=0.01,centered=1)");
  g_str_keys = false;
}

void RefusedLoadChangesNothing() {
  const std::string other = TempPath("other"), bad = TempPath("bad");
  Run sgd;
  sgd.spec = "sgd(learning_rate=0.1,momentum=0.9)";
  sgd.rounds = 1;
  sgd.save = other;
  RunJob(sgd);
  std::ifstream in(other, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::ofstream(bad, std::ios::binary) << bytes.substr(0, bytes.size() - 5);

  Run whole;
  whole.rounds = 4;
  const Weights want = RunJob(whole);

  Job::Options o;
  o.num_workers = 2;
  o.num_servers = 2;
  o.bigarray_bound = 16;
  Job job(o);
  CHECK(job.formed());
  if (!job.formed()) return;
  Weights got;
  job.OnEachWorker("refused loads", [&](int rank, Store& s) {
    s.SetOptimizer(whole.spec);
    for (const KeyDef& k : kKeys) InitKey(s, k.key, *Values(k, 0.5));
    for (int round = 0; round < 4; ++round) {
      if (round == 2 && rank == 0) {
        try {
          s.LoadOptimizerStates(other);
          CHECK_MSG(0, "an sgd file loaded into adam servers");
        } catch (const Error& e) {
          CHECK(e.code() == KV_ERR_INVALID_ARGUMENT);
          CHECK_HAS(std::string(e.what()), "holds the state of sgd(");
        }
        try {
          s.LoadOptimizerStates(bad);
          CHECK_MSG(0, "a truncated file loaded");
        } catch (const Error& e) {
          CHECK(e.code() == KV_ERR_INVALID_ARGUMENT);
          CHECK_HAS(std::string(e.what()), "truncated");
        }
      }
      s.distributed()->Barrier();
      for (const KeyDef& k : kKeys) Push(s, k, *Values(k, 3.0 * round + rank + k.key));
      s.WaitAll();
    }
    s.distributed()->Barrier();
    if (rank == 0) got = Pull(s);
  });
  CHECK_JOB_OK(job.Finish());
  CHECK_MSG(got == want, "a refused load changed the servers' state");
  std::remove(other.c_str());
  std::remove(bad.c_str());
}

void NoOptimizer() {
  Job::Options o;
  o.num_servers = 2;
  Job job(o);
  CHECK(job.formed());
  if (!job.formed()) return;
  job.OnEachWorker("no optimizer", [&](int, Store& s) {
    InitKey(s, 1, *Values(kKeys[1], 0.5));
    try {
      s.SaveOptimizerStates(TempPath("none"));
      CHECK_MSG(0, "saved without an optimizer");
    } catch (const Error& e) {
      CHECK(e.code() == KV_ERR_NOT_SUPPORTED);
      CHECK_HAS(std::string(e.what()), "has no optimizer");
    }
  });
  CHECK_JOB_OK(job.Finish());
}

const Case kCases[] = {
    {"sync_resume_sharded", SyncResumeSharded},
    {"async_resume", AsyncResume},
    {"sync_resume_string_keys", SyncResumeStringKeys},
    {"refused_load_changes_nothing", RefusedLoadChangesNothing},
    {"no_optimizer", NoOptimizer},
};

}  // namespace
}  // namespace inprocess
}  // namespace kvstore

int main(int argc, char** argv) { return kvstore::inprocess::RunCases(argc, argv, kvstore::inprocess::kCases); }
