// job.h - a whole distributed job in one process: the scheduler and S servers on threads of
// their own, W worker stores used directly through the Store interface, so that white-box
// tests of the parameter-server logic (ordering, rounds, failures) run in a fraction of a
// second beside the multi-process jobs of tests/dist.
//
// Lifecycle. The constructor picks free loopback ports, starts the scheduler thread and the
// server threads (RunScheduler / RunServer with a Config built here, never from the
// environment), creates the W worker stores concurrently (their constructors block for the
// rendezvous) and returns once the job has formed or failed to (formed(), error()). Finish()
// closes the workers concurrently (their exit barrier needs all of them) and joins every node,
// returning what each one ended with; the destructor runs it when the test did not.
//
// Deadlines. Every wait of the harness (formation, OnEachWorker, KillServer, KillWorker,
// Finish) is bounded by one job-wide deadline (Options::deadline_sec). A node that has not finished by then
// cannot be stopped from outside (its thread is blocked inside the library), so the harness
// prints which nodes and which step did not finish and ends the process with status 1: a
// hanging test fails naming the node, it never waits for the ctest timeout.
//
// Ranks. Worker i requests rank i and server i rank i (Config::requested_rank), so worker(i)
// has rank i and "server i" holds int key k when k % S == i (unsharded keys).
//
// Killing a server. KillServer(s) makes server s's thread leave RunServer by an exception
// thrown from inside the server's own loop: the harness sends server s a COMMAND with a
// reserved head (kKillHead) on its listening port, and the controller the harness installs
// in every server throws on it. The server's sockets close as its stack unwinds, its heartbeats
// stop, and the scheduler declares it dead after the heartbeat timeout, as for a crashed
// process. This relies on the server calling its controller outside any handler that would
// catch the exception (server.cc, HandleWorker), which is what a library hook for stopping a
// server would make explicit. Only servers started with Options::killable_servers can be
// killed (the harness's controller stands in for the test's, so a job without it keeps the
// library's answer to a command that no controller handles).
//
// Killing a worker. A worker store cannot be killed: none of its hooks runs on its I/O thread
// (which sends its heartbeats), and destroying it runs the graceful exit protocol. A job can
// instead have silent workers (Options::silent_workers, the ranks after the stores'): nodes
// run by the harness that join the job, heartbeat, and wait at every barrier of the workers,
// but never init, push or pull, so a sync round waits for them until KillWorker stops one
// (its socket closes, its heartbeats stop, the scheduler declares it dead).
//
// Process-wide state. The job secret is read from KVSTORE_JOB_SECRET (or _FILE) by every node
// as it creates its sockets: the constructor sets the variable to Options::job_secret, or
// unsets both for an open job, before the first node starts, and Finish() unsets it after the
// last one ended. Nodes read the environment from their threads, so the jobs of one process
// must run one after the other, never side by side. The log prefix
// (SetLogPrefix) is one per process: log lines of an in-process job carry the name of
// whichever node set it last.
#pragma once

#include <atomic>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ps/ps.h"
#include "store/store.h"

namespace kvstore {
namespace inprocess {

// How one node ended. `code` is 0 (finished cleanly) or the KV_ERR_* code of the error it
// ended with; `killed` is set for nodes stopped by KillServer or KillWorker.
struct NodeResult {
  std::string node;  // "scheduler", "server 1", "worker 0"
  int code = 0;
  std::string error;
  bool killed = false;
};

struct JobResult {
  std::vector<NodeResult> nodes;  // scheduler, servers 0..S-1, workers 0..W-1
  // Every node finished without an error.
  bool ok() const;
  // The node named `node`, or nullptr.
  const NodeResult* Find(const std::string& node) const;
  // One line per node, for failure messages.
  std::string Describe() const;
};

class Job {
 public:
  // The COMMAND head that KillServer sends; the harness's controller never forwards it.
  static constexpr int kKillHead = 0x4B494C4C;

  struct Options {
    int num_workers = 1;                // worker stores, ranks 0..num_workers-1
    int silent_workers = 0;             // silent workers, the ranks after them
    int num_servers = 1;
    std::string type = "dist_sync";     // worker store type: dist_sync, dist_async, ...
    int64_t bigarray_bound = 1000000;   // keys of at least this many elements are sharded
    double timeout_sec = 20;            // Config::timeout_sec of every node
    double heartbeat_interval_sec = 0.2;
    double heartbeat_timeout_sec = 10;  // generous: sanitizer builds stall threads for seconds
    int io_threads = 1;                 // ZeroMQ I/O threads per node (Config::io_threads)
    int verbose = 0;                    // Config::verbose (PS_VERBOSE)
    double deadline_sec = 45;           // every wait of the harness, from the constructor on
    std::string job_secret;             // "" = an open job (KVSTORE_JOB_SECRET unset)
    bool killable_servers = false;      // install the controller that KillServer needs
    // Called for each server before it starts, with its rank and the hooks it will run:
    // set the updater, optimizer spec, controller here. Hooks belong to the server thread
    // once it runs; a test reads what its updater recorded under its own lock.
    std::function<void(int server, dist::ServerHooks* hooks)> server_hooks;
    // Last edit of each node's Config before the node starts (ports, timeouts, ...).
    std::function<void(dist::Config* cfg)> tweak_config;
  };

  explicit Job(Options opts);
  ~Job();
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  // Whether every worker store was created (the rendezvous completed); error() says why not.
  bool formed() const { return formed_; }
  const std::string& error() const { return error_; }

  int num_workers() const { return opts_.num_workers; }
  int num_servers() const { return opts_.num_servers; }
  // Worker `rank`'s store (0 <= rank < num_workers); valid until Finish(). Null when it could
  // not be created.
  Store* worker(int rank) { return workers_[static_cast<size_t>(rank)].store.get(); }
  Distributed* dist(int rank) { return worker(rank)->distributed(); }

  // Runs fn(rank, store) for every worker at once, one thread each, and returns when all
  // returned. An exception of fn is rethrown here (the lowest rank's); a worker still
  // running at the deadline ends the process naming it and `step`.
  void OnEachWorker(const std::string& step, const std::function<void(int rank, Store& s)>& fn);

  // Stops server `rank` as a crash would (see the file comment) and returns when its thread
  // has left RunServer. The scheduler notices after heartbeat_timeout_sec.
  void KillServer(int rank);
  // Stops silent worker `rank` (num_workers <= rank < num_workers + silent_workers) as a
  // crash would; returns when its thread has ended.
  void KillWorker(int rank);

  // Closes every worker store (concurrently), then waits for the servers and the scheduler.
  // Runs once; later calls return the same result.
  const JobResult& Finish();

 private:
  // A thread of the harness and how it ended.
  struct Node {
    std::string name;
    std::thread thread;
    bool done = false;  // under mu_
    NodeResult result;
    std::exception_ptr exception;  // what the thread's body threw, if anything
  };
  struct Worker {
    std::unique_ptr<Store> store;
    NodeResult result;
  };
  // Per server: its hooks, and what the harness's controller needs on the server thread.
  struct ServerSlot {
    int port = 0;  // its first listening port (Config::port)
    std::atomic<bool> kill{false};
    dist::ServerHooks hooks;
    KVController user_controller = nullptr;
    void* user_data = nullptr;
  };

  dist::Config NodeConfig(dist::Role role, int rank, int port) const;
  // The steps of the constructor: server s on ports[s], the silent workers, the stores.
  void StartServers(const std::vector<int>& ports);
  void StartSilentWorkers();
  void JoinWorkers();
  // Starts `body` on a thread recorded as `node`; its exception becomes node->result.
  void Launch(Node* node, std::function<void()> body);
  // Waits until every node in `nodes` is done; past the deadline, reports `step` and the
  // unfinished nodes and ends the process.
  void AwaitOrDie(const std::vector<Node*>& nodes, const std::string& step);
  static int Controller(int head, const char* body, void* slot);
  // The body of a silent worker's thread.
  static void RunSilentWorker(const dist::Config& cfg, const std::atomic<int>* state);

  Options opts_;
  double deadline_ = 0;  // dist::NowSec() time
  int root_port_ = 0;
  bool formed_ = false;
  bool finished_ = false;
  bool set_secret_ = false;
  std::string error_;
  std::mutex mu_;
  std::condition_variable cv_;
  Node scheduler_;
  std::vector<std::unique_ptr<Node>> servers_;
  std::vector<std::unique_ptr<ServerSlot>> slots_;
  std::vector<Worker> workers_;
  // Silent workers: their threads, and what they are told (kRun, kKill, kFinish).
  enum SilentState { kRun = 0, kKill = 1, kFinish = 2 };
  std::vector<std::unique_ptr<Node>> silent_;
  std::vector<std::unique_ptr<std::atomic<int>>> silent_state_;
  JobResult result_;
};

// Float32 helpers for tests: a CPU array of `n` elements filled with `value` (or with
// value + i at element i); a CPU array of `dtype` (KV_FLOAT32, or KV_FLOAT16 with each value
// rounded to half) holding `v`; and the elements of a float32 or float16 array (widened
// exactly) once its pending writes (pulls) completed (throwing the pull's error).
std::unique_ptr<Array> Filled(int64_t n, float value);
std::unique_ptr<Array> Ramp(int64_t n, float value);
std::unique_ptr<Array> FromFloats(const std::vector<float>& v, int dtype);
std::vector<float> Values(Array& a);

// One-key calls on a store, for int keys and string keys.
void InitKey(Store& s, int key, const Array& value);
void InitKey(Store& s, const std::string& key, const Array& value);
void PushKey(Store& s, int key, const Array& value, int priority = 0);
void PushKey(Store& s, const std::string& key, const Array& value, int priority = 0);
void PullKey(Store& s, int key, Array* out, int priority = 0);
void PullKey(Store& s, const std::string& key, Array* out, int priority = 0);

// Runs `fn`; returns 0, or the code of the kvstore::Error it threw (its message in *msg).
int ErrorOf(const std::function<void()>& fn, std::string* msg = nullptr);

}  // namespace inprocess
}  // namespace kvstore
