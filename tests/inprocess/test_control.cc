// test_control.cc - barriers, string keys, commands and an authenticated job, in process.
//
//   barrier_orders_workers   no worker leaves a barrier before every worker reached it
//   string_keys_sharded      string keys: a large one cut over three servers (each server's
//                            updater sees its part under the key's name), a small one whole
//                            on the server its stable hash picks; sums exact
//   commands_reach_servers   a command reaches every server's controller once; a controller
//                            that fails a command is named in the error
//   secret_job_round         with a job secret (CURVE on every socket) a sync round sums
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cases.h"
#include "job.h"
#include "ps/placement.h"
#include "updaters.h"

namespace kvstore {
namespace inprocess {
namespace {

void BarrierOrdersWorkers() {
  Job::Options o;
  o.num_workers = 3;
  o.num_servers = 1;
  Job job(o);
  CHECK(job.formed());
  if (!job.formed()) return;
  constexpr int kPhases = 5;
  std::atomic<int> arrived{0};
  std::vector<std::vector<int>> seen(3);
  job.OnEachWorker("barriers", [&](int rank, Store& s) {
    for (int p = 0; p < kPhases; ++p) {
      arrived.fetch_add(1);
      s.distributed()->Barrier();
      seen[static_cast<size_t>(rank)].push_back(arrived.load());
    }
  });
  for (const auto& per_worker : seen) {
    CHECK(per_worker.size() == kPhases);
    for (size_t p = 0; p < per_worker.size(); ++p) CHECK(per_worker[p] >= 3 * static_cast<int>(p + 1));
  }
  const JobResult& res = job.Finish();
  CHECK_JOB_OK(res);
}

void StringKeysSharded() {
  std::vector<std::shared_ptr<RecordingUpdater>> upd;
  Job::Options o;
  o.num_workers = 2;
  o.num_servers = 3;
  o.bigarray_bound = 8;  // "alpha" (20 elements): parts of 6, 7, 7; "beta" (3): whole
  for (int s = 0; s < o.num_servers; ++s) upd.push_back(std::make_shared<RecordingUpdater>());
  o.server_hooks = [&upd](int s, dist::ServerHooks* h) { h->str_updater = upd[static_cast<size_t>(s)]; };
  Job job(o);
  CHECK(job.formed());
  if (!job.formed()) return;
  std::vector<std::vector<float>> alpha(2), beta(2);
  job.OnEachWorker("string keys", [&](int rank, Store& s) {
    InitKey(s, "alpha", *Filled(20, 0));
    InitKey(s, "beta", *Filled(3, 0));
    PushKey(s, "alpha", *Ramp(20, static_cast<float>(rank * 100)));
    PushKey(s, "beta", *Filled(3, static_cast<float>(rank + 1)));
    auto a = Filled(20, -1), b = Filled(3, -1);
    PullKey(s, "alpha", a.get());
    PullKey(s, "beta", b.get());
    alpha[static_cast<size_t>(rank)] = Values(*a);
    beta[static_cast<size_t>(rank)] = Values(*b);
  });
  std::vector<float> want_alpha;
  for (int i = 0; i < 20; ++i) want_alpha.push_back(100.0f + 2.0f * static_cast<float>(i));
  for (int r = 0; r < 2; ++r) {
    CHECK(alpha[static_cast<size_t>(r)] == want_alpha);
    CHECK(beta[static_cast<size_t>(r)] == std::vector<float>(3, 3));
  }
  const int beta_server = static_cast<int>(dist::StableHash("beta") % 3);
  const size_t part[3] = {6, 7, 7};
  for (int s = 0; s < 3; ++s) {
    size_t alpha_calls = 0, beta_calls = 0;
    for (const auto& c : upd[static_cast<size_t>(s)]->calls()) {
      if (c.str_key == "alpha") {
        ++alpha_calls;
        CHECK(c.recv.size() == part[s]);
      } else if (c.str_key == "beta") {
        ++beta_calls;
      }
    }
    CHECK(alpha_calls == 1);
    CHECK(beta_calls == (s == beta_server ? 1u : 0u));
  }
  const JobResult& res = job.Finish();
  CHECK_JOB_OK(res);
}

// What one server's controller received.
struct Commands {
  std::mutex mu;
  std::vector<std::string> got;  // "head:body"
};

int RecordCommand(int head, const char* body, void* data) {
  auto* c = static_cast<Commands*>(data);
  std::lock_guard<std::mutex> lock(c->mu);
  c->got.push_back(std::to_string(head) + ":" + body);
  return head == 9 ? 1 : 0;  // command 9 fails
}

void CommandsReachServers() {
  Commands per_server[2];
  Job::Options o;
  o.num_workers = 2;
  o.num_servers = 2;
  o.server_hooks = [&per_server](int s, dist::ServerHooks* h) {
    h->controller = &RecordCommand;
    h->controller_data = &per_server[s];
  };
  Job job(o);
  CHECK(job.formed());
  if (!job.formed()) return;
  int code = 0;
  std::string msg;
  job.OnEachWorker("commands", [&](int rank, Store& s) {
    if (rank == 0) s.distributed()->SendCommandToServers(7, "hello");
    if (rank == 1) code = ErrorOf([&] { s.distributed()->SendCommandToServers(9, "fail"); }, &msg);
  });
  for (Commands& c : per_server) {
    std::lock_guard<std::mutex> lock(c.mu);
    CHECK(c.got.size() == 2);
    CHECK(std::count(c.got.begin(), c.got.end(), "7:hello") == 1);
    CHECK(std::count(c.got.begin(), c.got.end(), "9:fail") == 1);
  }
  CHECK(code == KV_ERR_CALLBACK);
  CHECK_HAS(msg, "the controller of server");
  CHECK_HAS(msg, "failed command 9");
  const JobResult& res = job.Finish();
  CHECK_JOB_OK(res);
}

void SecretJobRound() {
  Job::Options o;
  o.num_workers = 2;
  o.num_servers = 1;
  o.job_secret = "0123456789abcdef0123456789abcdef";
  Job job(o);
  CHECK(job.formed());
  if (!job.formed()) return;
  std::vector<std::vector<float>> got(2);
  job.OnEachWorker("an authenticated round", [&](int rank, Store& s) {
    InitKey(s, 0, *Filled(4, 0));
    PushKey(s, 0, *Filled(4, static_cast<float>(rank + 1)));
    auto out = Filled(4, -1);
    PullKey(s, 0, out.get());
    got[static_cast<size_t>(rank)] = Values(*out);
  });
  for (const auto& g : got) CHECK(g == std::vector<float>(4, 3));
  const JobResult& res = job.Finish();
  CHECK_JOB_OK(res);
  CHECK(std::getenv("KVSTORE_JOB_SECRET") == nullptr);  // the harness unset it
}

const Case kCases[] = {
    {"barrier_orders_workers", BarrierOrdersWorkers},
    {"string_keys_sharded", StringKeysSharded},
    {"commands_reach_servers", CommandsReachServers},
    {"secret_job_round", SecretJobRound},
};

}  // namespace
}  // namespace inprocess
}  // namespace kvstore

int main(int argc, char** argv) { return kvstore::inprocess::RunCases(argc, argv, kvstore::inprocess::kCases); }
