// test_failures.cc - failures belong to the operations they hit, and name what failed.
//
//   updater_failure_named        an updater that throws on a server fails that round's pushes:
//                                WaitAll names the key and the server, a pull queued behind
//                                the push fails too, other keys and later rounds work
//   round_timeout_names_missing  a sync round one worker never joins times out on the server,
//                                naming the missing and the pushing workers
//   init_twice                   a second init of a key is DUPLICATE_KEY; the job goes on
//   killed_server                a server stopped mid-job (Job::KillServer): pushes to it fail
//                                with PEER_DEAD naming it, keys on the other server keep
//                                working, and every node's exit reports the loss
//   killed_worker                a worker that dies while a sync round waits for it
//                                (Job::KillWorker of a silent worker): the parked pushes fail
//                                with PEER_DEAD naming it and the round's missing ranks, as do
//                                later pushes and barriers; every node's exit reports it;
//                                its host, which contains "%s", is quoted verbatim
#include <memory>
#include <string>
#include <vector>

#include "cases.h"
#include "job.h"
#include "updaters.h"

namespace kvstore {
namespace inprocess {
namespace {

// Node `node` ended with `code` and an error message containing `part`.
void CheckEnded(const JobResult& res, const char* node, int code, const char* part) {
  const NodeResult* n = res.Find(node);
  CHECK_MSG(n != nullptr && n->code == code && n->error.find(part) != std::string::npos,
            "%s ended with %s \"%s\", want %s and \"%s\"", node,
            n != nullptr ? KVErrorName(n->code) : "nothing", n != nullptr ? n->error.c_str() : "",
            KVErrorName(code), part);
}

// Node `node` was killed by the harness.
void CheckKilled(const JobResult& res, const char* node) {
  const NodeResult* n = res.Find(node);
  CHECK_MSG(n != nullptr && n->killed, "%s was not killed:\n%s", node, res.Describe().c_str());
}

void UpdaterFailureNamed() {
  std::vector<std::shared_ptr<RecordingUpdater>> upd;
  Job::Options o;
  o.num_workers = 2;
  o.num_servers = 2;
  // The first round of key 3 (server 1) receives 1 + 2 = 3 and is refused.
  for (int s = 0; s < 2; ++s) {
    upd.push_back(std::make_shared<RecordingUpdater>([](const RecordingUpdater::Call& c, int) {
      if (c.key == 3 && c.recv[0] == 3) KV_FAIL(KV_ERR_INVALID_ARGUMENT, "refusing key 3 (test)");
    }));
  }
  o.server_hooks = [&upd](int s, dist::ServerHooks* h) { h->updater = upd[static_cast<size_t>(s)]; };
  Job job(o);
  CHECK(job.formed());
  if (!job.formed()) return;
  struct Seen {
    int pull_code = 0, wait_code = 0, second_wait_code = -1;
    std::string pull_msg, wait_msg;
    std::vector<float> key2, key3, key3_later;
  };
  std::vector<Seen> seen(2);
  job.OnEachWorker("a refused round", [&](int rank, Store& s) {
    Seen& me = seen[static_cast<size_t>(rank)];
    InitKey(s, 2, *Filled(4, 1));
    InitKey(s, 3, *Filled(4, 1));
    const float v = static_cast<float>(rank + 1);
    PushKey(s, 3, *Filled(4, v));
    PushKey(s, 2, *Filled(4, v));
    auto behind = Filled(4, -1);
    PullKey(s, 3, behind.get());
    me.pull_code = ErrorOf([&] { Values(*behind); }, &me.pull_msg);
    me.wait_code = ErrorOf([&] { s.WaitAll(); }, &me.wait_msg);
    auto a = Filled(4, -1), b = Filled(4, -1);
    PullKey(s, 2, a.get());
    PullKey(s, 3, b.get());
    me.key2 = Values(*a);
    me.key3 = Values(*b);
    PushKey(s, 3, *Filled(4, 10 * v));
    me.second_wait_code = ErrorOf([&] { s.WaitAll(); });
    PullKey(s, 3, b.get());
    me.key3_later = Values(*b);
  });
  for (const Seen& me : seen) {
    CHECK(me.wait_code == KV_ERR_CALLBACK);
    CHECK_HAS(me.wait_msg, "push of key 3 (server 1)");
    CHECK_HAS(me.wait_msg, "the updater on server 1 failed: refusing key 3 (test)");
    CHECK(me.pull_code == KV_ERR_CALLBACK);
    CHECK_HAS(me.pull_msg, "pull of key 3 follows a failed push of the key");
    CHECK(me.key2 == std::vector<float>(4, 4));   // 1 + (1 + 2): key 2's round went through
    CHECK(me.key3 == std::vector<float>(4, 1));   // the refused round left key 3 as it was
    CHECK(me.second_wait_code == 0);
    CHECK(me.key3_later == std::vector<float>(4, 31));  // 1 + (10 + 20)
  }
  // Server 1 ran key 3's updater twice (refused, then applied); server 0 never saw key 3.
  CHECK(upd[1]->calls_of(3).size() == 2);
  CHECK(upd[0]->calls_of(3).empty());
  const JobResult& res = job.Finish();
  CHECK_JOB_OK(res);
}

void RoundTimeoutNamesMissing() {
  Job::Options o;
  o.num_workers = 2;
  o.num_servers = 1;
  o.timeout_sec = 1;
  Job job(o);
  CHECK(job.formed());
  if (!job.formed()) return;
  int code = 0;
  std::string msg;
  job.OnEachWorker("a round that worker 1 never joins", [&](int rank, Store& s) {
    InitKey(s, 0, *Filled(2, 0));
    if (rank != 0) return;
    PushKey(s, 0, *Filled(2, 1));
    code = ErrorOf([&] { s.WaitAll(); }, &msg);
  });
  CHECK(code == KV_ERR_TIMEOUT);
  CHECK_HAS(msg, "the sync round of key 0 on server 0 timed out");
  CHECK_HAS(msg, "missing: worker 1; pushed: worker 0");
  const JobResult& res = job.Finish();
  CHECK_JOB_OK(res);
}

void InitTwice() {
  Job::Options o;
  o.num_workers = 2;
  o.num_servers = 1;
  Job job(o);
  CHECK(job.formed());
  if (!job.formed()) return;
  std::vector<int> codes(2), kind_codes(2);
  std::vector<std::string> msgs(2);
  std::vector<std::vector<float>> kept(2), after(2);
  job.OnEachWorker("init twice", [&](int rank, Store& s) {
    const size_t r = static_cast<size_t>(rank);
    InitKey(s, 1, *Filled(3, 5));
    codes[r] = ErrorOf([&] { InitKey(s, 1, *Filled(3, 6)); }, &msgs[r]);
    kind_codes[r] = ErrorOf([&] { InitKey(s, "one", *Filled(3, 6)); });
    auto out = Filled(3, -1);
    PullKey(s, 1, out.get());
    kept[r] = Values(*out);
    PushKey(s, 1, *Filled(3, 1));
    PullKey(s, 1, out.get());
    after[r] = Values(*out);
  });
  for (size_t r = 0; r < 2; ++r) {
    CHECK(codes[r] == KV_ERR_DUPLICATE_KEY);
    CHECK_HAS(msgs[r], "key 1 is already initialised");
    CHECK(kind_codes[r] == KV_ERR_KEY_KIND_MISMATCH);
    CHECK(kept[r] == std::vector<float>(3, 5));   // the first init's value
    CHECK(after[r] == std::vector<float>(3, 2));  // and the job goes on
  }
  const JobResult& res = job.Finish();
  CHECK_JOB_OK(res);
}

void KilledServer() {
  Job::Options o;
  o.num_workers = 2;
  o.num_servers = 2;
  o.killable_servers = true;
  o.heartbeat_interval_sec = 0.2;
  o.heartbeat_timeout_sec = 3;
  Job job(o);
  CHECK(job.formed());
  if (!job.formed()) return;
  // Key 0 lives on server 0, key 1 on server 1.
  job.OnEachWorker("a round before the kill", [&](int, Store& s) {
    InitKey(s, 0, *Filled(2, 0));
    InitKey(s, 1, *Filled(2, 0));
    PushKey(s, 0, *Filled(2, 1));
    PushKey(s, 1, *Filled(2, 1));
    s.WaitAll();
  });
  job.KillServer(1);
  std::vector<int> codes(2);
  std::vector<std::string> msgs(2);
  std::vector<std::vector<float>> key0(2);
  job.OnEachWorker("rounds after the kill", [&](int rank, Store& s) {
    PushKey(s, 1, *Filled(2, 1));
    codes[static_cast<size_t>(rank)] = ErrorOf([&] { s.WaitAll(); }, &msgs[static_cast<size_t>(rank)]);
    PushKey(s, 0, *Filled(2, 5));
    auto out = Filled(2, -1);
    PullKey(s, 0, out.get());
    key0[static_cast<size_t>(rank)] = Values(*out);
  });
  for (int r = 0; r < 2; ++r) {
    CHECK(codes[static_cast<size_t>(r)] == KV_ERR_PEER_DEAD);
    CHECK_HAS(msgs[static_cast<size_t>(r)], "push of key 1 (server 1)");
    CHECK_HAS(msgs[static_cast<size_t>(r)], "server 1 (127.0.0.1:");
    CHECK(key0[static_cast<size_t>(r)] == std::vector<float>(2, 10));  // assigned 5 + 5
  }
  const JobResult& res = job.Finish();
  CheckKilled(res, "server 1");
  CheckEnded(res, "scheduler", KV_ERR_PEER_DEAD, "the job finished without: server 1");
  CheckEnded(res, "server 0", KV_ERR_PEER_DEAD, "server 0 stopped after server 1 died");
  CheckEnded(res, "worker 0", KV_ERR_PEER_DEAD, "the job lost server 1");
  CheckEnded(res, "worker 1", KV_ERR_PEER_DEAD, "the job lost server 1");
}

void KilledWorker() {
  Job::Options o;
  o.num_workers = 2;
  o.silent_workers = 1;  // worker 2
  o.num_servers = 1;
  o.heartbeat_interval_sec = 0.2;
  o.heartbeat_timeout_sec = 3;
  // Worker 2 advertises a host with conversion specifications: the scheduler quotes it in
  // the death notice, and the server once used that notice as a format string (it crashed
  // with SIGSEGV here). The text must reach the parked pushes verbatim.
  o.tweak_config = [](dist::Config* c) {
    if (c->role == dist::Role::kWorker && c->requested_rank == 2) c->host = "127.0.0.1%s%s%s%s%n%s";
  };
  Job job(o);
  CHECK(job.formed());
  if (!job.formed()) return;
  job.OnEachWorker("a round that waits for worker 2", [&](int, Store& s) {
    InitKey(s, 0, *Filled(2, 0));
    PushKey(s, 0, *Filled(2, 1));  // parked on server 0 until worker 2 pushes
  });
  job.KillWorker(2);
  struct Seen {
    int wait_code = 0, later_code = 0, first_barrier = 0, barrier_code = 0, dead = -1;
    std::string wait_msg, later_msg, barrier_msg;
  };
  std::vector<Seen> seen(2);
  job.OnEachWorker("after worker 2 died", [&](int rank, Store& s) {
    Seen& me = seen[static_cast<size_t>(rank)];
    me.wait_code = ErrorOf([&] { s.WaitAll(); }, &me.wait_msg);
    PushKey(s, 0, *Filled(2, 1));
    me.later_code = ErrorOf([&] { s.WaitAll(); }, &me.later_msg);
    // A silent worker waits at every barrier; the arrival it made before it died counts
    // (the scheduler completes a barrier that every member reached), so the first barrier
    // may complete. The next one cannot.
    me.first_barrier = ErrorOf([&] { s.distributed()->Barrier(); });
    me.barrier_code = ErrorOf([&] { s.distributed()->Barrier(); }, &me.barrier_msg);
    me.dead = s.distributed()->NumDeadNodes(KV_NODE_WORKERS, 60);
  });
  for (const Seen& me : seen) {
    CHECK(me.wait_code == KV_ERR_PEER_DEAD);
    CHECK_HAS(me.wait_msg, "push of key 0 (server 0): worker 2 died");
    CHECK_HAS(me.wait_msg, "the sync round of key 0 cannot complete");
    CHECK_HAS(me.wait_msg, "missing: worker 2; pushed: worker 0, worker 1");
    CHECK_HAS(me.wait_msg, "127.0.0.1%s%s%s%s%n%s");
    CHECK(me.later_code == KV_ERR_PEER_DEAD);
    CHECK_HAS(me.later_msg, "key 0: the sync round cannot complete because worker 2 died");
    CHECK(me.first_barrier == 0 || me.first_barrier == KV_ERR_PEER_DEAD);
    CHECK(me.barrier_code == KV_ERR_PEER_DEAD);
    CHECK_HAS(me.barrier_msg, "barrier cannot complete: worker 2 died or left the job");
    CHECK(me.dead == 1);
  }
  const JobResult& res = job.Finish();
  CheckKilled(res, "worker 2");
  CheckEnded(res, "scheduler", KV_ERR_PEER_DEAD, "the job finished without: worker 2");
  CheckEnded(res, "server 0", KV_ERR_PEER_DEAD, "server 0 stopped after worker 2 died");
  // Their exit barrier cannot complete; the one that fails second also names the worker that
  // finished first.
  for (const char* w : {"worker 0", "worker 1"}) {
    CheckEnded(res, w, KV_ERR_PEER_DEAD, "barrier cannot complete: ");
    CheckEnded(res, w, KV_ERR_PEER_DEAD, "worker 2");
  }
}

const Case kCases[] = {
    {"updater_failure_named", UpdaterFailureNamed},
    {"round_timeout_names_missing", RoundTimeoutNamesMissing},
    {"init_twice", InitTwice},
    {"killed_server", KilledServer},
    {"killed_worker", KilledWorker},
};

}  // namespace
}  // namespace inprocess
}  // namespace kvstore

int main(int argc, char** argv) { return kvstore::inprocess::RunCases(argc, argv, kvstore::inprocess::kCases); }
