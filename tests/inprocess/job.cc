// job.cc - the in-process job (job.h).
#include "job.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "kvstore/kvstore.h"
#include "ps/clock.h"
#include "ps/transport.h"

namespace kvstore {
namespace inprocess {

namespace {

// Thrown by the harness's controller on the server thread that KillServer stops. Not an
// std::exception, so that no handler of the server's request path takes it for a failed
// request: it unwinds RunServer as a crash ends the process.
struct KilledByHarness {};

// `n` distinct loopback ports that were free a moment ago (the sockets that found them are
// open together, so the ports differ, and closed before the nodes bind them).
std::vector<int> FreePorts(int n) {
  std::vector<int> fds, ports;
  for (int i = 0; i < n; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    KV_CHECK(fd >= 0, KV_ERR_NETWORK, "socket: %s", std::strerror(errno));
    fds.push_back(fd);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    KV_CHECK(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
                 getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0,
             KV_ERR_NETWORK, "no free loopback port: %s", std::strerror(errno));
    ports.push_back(ntohs(a.sin_port));
  }
  for (int fd : fds) close(fd);
  return ports;
}

// Keeps one ZeroMQ context for the life of the process. Debian's libzmq initialises OpenPGM
// (pgm_init) when the process's first context is created and shuts it down (pgm_shutdown)
// when the last one is destroyed, under a reference count whose atomics ThreadSanitizer
// cannot see (libpgm is not instrumented): when the nodes' contexts come and go on several
// threads, TSan reports libpgm's global mutex as initialised on one thread and destroyed on
// another (and two jobs in a row could really overlap a shutdown with an init). With this
// context alive, libpgm is initialised once, on the thread that starts the first job.
// The pointer lives in a global the optimiser cannot drop, so LeakSanitizer sees the context
// as reachable (a function-local static that is never read was optimised away, and ASan
// builds with detect_leaks=1 reported the context as leaked at every job's exit).
zmq::context_t* g_held_zmq = nullptr;
void HoldZmqForProcess() {
  if (g_held_zmq == nullptr) g_held_zmq = new zmq::context_t(1);  // no sockets: no threads
}

}  // namespace

bool JobResult::ok() const {
  for (const NodeResult& n : nodes) {
    if (n.code != 0 || n.killed) return false;
  }
  return true;
}

const NodeResult* JobResult::Find(const std::string& node) const {
  for (const NodeResult& n : nodes) {
    if (n.node == node) return &n;
  }
  return nullptr;
}

std::string JobResult::Describe() const {
  std::string out;
  for (const NodeResult& n : nodes) {
    out += "  " + n.node + ": ";
    if (n.killed) out += "killed by the harness";
    else if (n.code == 0) out += "finished";
    else out += StrFormat("%s: %s", KVErrorName(n.code), n.error.c_str());
    out += "\n";
  }
  return out;
}

Job::Job(Options opts) : opts_(std::move(opts)) {
  deadline_ = dist::NowSec() + opts_.deadline_sec;
  HoldZmqForProcess();
  // Environment first, while no node thread can read it.
  unsetenv("KVSTORE_JOB_SECRET_FILE");
  if (opts_.job_secret.empty()) {
    unsetenv("KVSTORE_JOB_SECRET");
  } else {
    setenv("KVSTORE_JOB_SECRET", opts_.job_secret.c_str(), 1);
    set_secret_ = true;
  }
  const std::vector<int> ports = FreePorts(1 + opts_.num_servers);
  root_port_ = ports[0];
  scheduler_.name = "scheduler";
  const dist::Config sched_cfg = NodeConfig(dist::Role::kScheduler, -1, 0);
  Launch(&scheduler_, [sched_cfg] { dist::RunScheduler(sched_cfg); });
  StartServers(std::vector<int>(ports.begin() + 1, ports.end()));
  StartSilentWorkers();
  JoinWorkers();
}

Job::~Job() { Finish(); }

void Job::StartServers(const std::vector<int>& ports) {
  for (int s = 0; s < opts_.num_servers; ++s) {
    auto slot = std::make_unique<ServerSlot>();
    slot->port = ports[static_cast<size_t>(s)];
    if (opts_.server_hooks) opts_.server_hooks(s, &slot->hooks);
    if (opts_.killable_servers) {
      slot->user_controller = slot->hooks.controller;
      slot->user_data = slot->hooks.controller_data;
      slot->hooks.controller = &Job::Controller;
      slot->hooks.controller_data = slot.get();
    }
    auto node = std::make_unique<Node>();
    node->name = dist::NodeName(dist::Role::kServer, s);
    const dist::Config cfg = NodeConfig(dist::Role::kServer, s, slot->port);
    dist::ServerHooks* hooks = &slot->hooks;
    Launch(node.get(), [cfg, hooks] { dist::RunServer(cfg, hooks); });
    slots_.push_back(std::move(slot));
    servers_.push_back(std::move(node));
  }
}

void Job::StartSilentWorkers() {
  for (int i = 0; i < opts_.silent_workers; ++i) {
    const int rank = opts_.num_workers + i;
    silent_state_.push_back(std::make_unique<std::atomic<int>>(kRun));
    silent_.push_back(std::make_unique<Node>());
    silent_.back()->name = dist::NodeName(dist::Role::kWorker, rank);
    const dist::Config cfg = NodeConfig(dist::Role::kWorker, rank, 0);
    const std::atomic<int>* state = silent_state_.back().get();
    Launch(silent_.back().get(), [cfg, state] { RunSilentWorker(cfg, state); });
  }
}

// The worker stores join concurrently: each constructor returns once every node has
// registered with the scheduler.
void Job::JoinWorkers() {
  workers_.resize(static_cast<size_t>(opts_.num_workers));
  std::vector<std::unique_ptr<Node>> joins;
  std::vector<Node*> waiting;
  for (int w = 0; w < opts_.num_workers; ++w) {
    joins.push_back(std::make_unique<Node>());
    joins.back()->name = dist::NodeName(dist::Role::kWorker, w);
    const dist::Config cfg = NodeConfig(dist::Role::kWorker, w, 0);
    std::unique_ptr<Store>* slot = &workers_[static_cast<size_t>(w)].store;
    const std::string type = opts_.type;
    Launch(joins.back().get(), [cfg, slot, type] { *slot = dist::CreateWorkerStore(type, cfg); });
    waiting.push_back(joins.back().get());
  }
  AwaitOrDie(waiting, "joining the job");
  formed_ = true;
  for (int w = 0; w < opts_.num_workers; ++w) {
    Node& n = *joins[static_cast<size_t>(w)];
    n.thread.join();
    if (n.result.code != 0) {
      formed_ = false;
      workers_[static_cast<size_t>(w)].result = n.result;
      error_ += (error_.empty() ? "" : "; ") + n.name + ": " + n.result.error;
    }
  }
}

dist::Config Job::NodeConfig(dist::Role role, int rank, int port) const {
  dist::Config c;
  c.role = role;
  c.root_uri = "127.0.0.1";
  c.root_port = root_port_;
  c.num_workers = opts_.num_workers + opts_.silent_workers;
  c.num_servers = opts_.num_servers;
  c.host = "127.0.0.1";
  c.port = port;
  c.requested_rank = rank;
  c.verbose = opts_.verbose;
  c.bigarray_bound = opts_.bigarray_bound;
  c.timeout_sec = opts_.timeout_sec;
  c.heartbeat_interval_sec = opts_.heartbeat_interval_sec;
  // As Config::Load: a node is declared dead only after missing two heartbeats.
  c.heartbeat_timeout_sec = std::max(opts_.heartbeat_timeout_sec, 2 * opts_.heartbeat_interval_sec);
  c.io_threads = opts_.io_threads;
  if (opts_.tweak_config) opts_.tweak_config(&c);
  return c;
}

void Job::Launch(Node* node, std::function<void()> body) {
  node->thread = std::thread([this, node, body = std::move(body)] {
    NodeResult r;
    r.node = node->name;
    std::exception_ptr ex;
    try {
      body();
    } catch (const KilledByHarness&) {
      r.killed = true;
    } catch (const Error& e) {
      r.code = e.code();
      r.error = e.what();
      ex = std::current_exception();
    } catch (const std::exception& e) {
      r.code = KV_ERR_INTERNAL;
      r.error = e.what();
      ex = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(mu_);
    node->result = std::move(r);
    node->exception = ex;
    node->done = true;
    cv_.notify_all();
  });
}

void Job::AwaitOrDie(const std::vector<Node*>& nodes, const std::string& step) {
  std::unique_lock<std::mutex> lock(mu_);
  const auto all_done = [&] {
    for (const Node* n : nodes) {
      if (!n->done) return false;
    }
    return true;
  };
  while (!all_done()) {
    const double left = deadline_ - dist::NowSec();
    if (left <= 0) {
      std::string missing;
      for (const Node* n : nodes) {
        if (!n->done) missing += (missing.empty() ? "" : ", ") + n->name;
      }
      std::fprintf(stderr,
                   "inprocess job: %s did not finish %s within the job's deadline of %.0f s; "
                   "ending the process (its threads cannot be stopped)\n",
                   missing.c_str(), step.c_str(), opts_.deadline_sec);
      std::fflush(stderr);
      std::_Exit(1);
    }
    cv_.wait_for(lock, std::chrono::duration<double>(std::min(left, 1.0)));
  }
}

void Job::OnEachWorker(const std::string& step,
                       const std::function<void(int rank, Store& s)>& fn) {
  std::vector<std::unique_ptr<Node>> nodes;
  std::vector<Node*> waiting;
  for (int w = 0; w < opts_.num_workers; ++w) {
    KV_CHECK(worker(w) != nullptr, KV_ERR_INVALID_ARGUMENT, "%s: worker %d has no store (%s)",
             step.c_str(), w, finished_ ? "the job has finished" : "it did not join the job");
  }
  for (int w = 0; w < opts_.num_workers; ++w) {
    Store* s = worker(w);
    nodes.push_back(std::make_unique<Node>());
    nodes.back()->name = dist::NodeName(dist::Role::kWorker, w);
    Launch(nodes.back().get(), [&fn, w, s] { fn(w, *s); });
    waiting.push_back(nodes.back().get());
  }
  AwaitOrDie(waiting, step);
  for (auto& n : nodes) n->thread.join();
  for (auto& n : nodes) {
    if (n->exception) std::rethrow_exception(n->exception);
  }
}

int Job::Controller(int head, const char* body, void* data) {
  auto* slot = static_cast<ServerSlot*>(data);
  if (head == kKillHead) {
    if (slot->kill.load()) throw KilledByHarness{};
    return 0;
  }
  if (slot->user_controller == nullptr) return -1;  // as a controller that knows no command
  return slot->user_controller(head, body, slot->user_data);
}

void Job::KillServer(int rank) {
  ServerSlot& slot = *slots_.at(static_cast<size_t>(rank));
  KV_CHECK(opts_.killable_servers, KV_ERR_INVALID_ARGUMENT,
           "KillServer(%d): the job was started without Options::killable_servers", rank);
  slot.kill.store(true);
  {
    // A COMMAND as worker 0 would send it, on the server's first port (Config::port).
    zmq::context_t ctx(1);
    zmq::socket_t sock(ctx, zmq::socket_type::dealer);
    dist::ConfigureSocket(sock, dist::Link::kToServer);
    sock.set(zmq::sockopt::linger, 1000);
    sock.connect("tcp://127.0.0.1:" + std::to_string(slot.port));
    dist::WireHeader h = dist::MakeHeader(dist::MsgType::kCommand, dist::Role::kWorker, 0);
    h.arg = kKillHead;
    KV_CHECK(dist::SendMessage(sock, nullptr, h, "", dist::OutPayload{}), KV_ERR_NETWORK,
             "KillServer(%d): cannot send the command", rank);
    AwaitOrDie({servers_[static_cast<size_t>(rank)].get()},
               "leaving RunServer after KillServer");
  }
}

// A silent worker speaks the protocol of a worker with the scheduler only: it registers,
// sends heartbeats, keeps a BARRIER(workers) pending at all times (so every barrier of the
// workers completes without it taking part) until a barrier fails, and at kFinish sends FINISH
// and waits for the acknowledgement as a closing store does.
void Job::RunSilentWorker(const dist::Config& cfg, const std::atomic<int>* state) {
  using dist::MsgType;
  zmq::context_t ctx(1);
  zmq::socket_t sched(ctx, zmq::socket_type::dealer);
  dist::ConfigureSocket(sched, dist::Link::kToScheduler);
  const dist::JoinResult j = dist::JoinJob(sched, cfg, {});
  uint64_t req = 0;
  const auto send = [&](MsgType t, int arg) {
    dist::WireHeader h = dist::MakeHeader(t, dist::Role::kWorker, j.rank);
    h.arg = arg;
    h.req_id = ++req;
    dist::SendMessage(sched, nullptr, h, "", dist::OutPayload{});
  };
  send(MsgType::kBarrier, KV_NODE_WORKERS);
  double next_hb = 0, finish_deadline = 0;
  for (;;) {
    const int st = state->load();
    if (st == kKill) {
      sched.set(zmq::sockopt::linger, 0);
      throw KilledByHarness{};
    }
    if (st == kFinish && finish_deadline == 0) {
      send(MsgType::kFinish, 0);
      finish_deadline = dist::NowSec() + cfg.timeout_sec;
    }
    KV_CHECK(finish_deadline == 0 || dist::NowSec() < finish_deadline, KV_ERR_TIMEOUT,
             "the scheduler did not acknowledge FINISH");
    if (dist::NowSec() >= next_hb) {
      send(MsgType::kHeartbeat, 0);
      next_hb = dist::NowSec() + cfg.heartbeat_interval_sec;
    }
    zmq::pollitem_t item{static_cast<void*>(sched), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, std::chrono::milliseconds(20));
    dist::Message m;
    while (dist::RecvValidMessage(sched, false, "the scheduler", &m)) {
      const auto type = static_cast<MsgType>(m.h.type);
      if (type == MsgType::kFinishAck) return;
      if (type == MsgType::kAbort) KV_FAIL(KV_ERR_PEER_DEAD, "the scheduler aborted the job: %s", m.str.c_str());
      if (type == MsgType::kBarrierDone && m.h.status == 0 && finish_deadline == 0) {
        send(MsgType::kBarrier, KV_NODE_WORKERS);
      }
    }
  }
}

void Job::KillWorker(int rank) {
  const int i = rank - opts_.num_workers;
  KV_CHECK(i >= 0 && i < opts_.silent_workers, KV_ERR_INVALID_ARGUMENT,
           "KillWorker(%d): only silent workers (ranks %d..%d) can be killed", rank,
           opts_.num_workers, opts_.num_workers + opts_.silent_workers - 1);
  silent_state_[static_cast<size_t>(i)]->store(kKill);
  AwaitOrDie({silent_[static_cast<size_t>(i)].get()}, "ending after KillWorker");
}

const JobResult& Job::Finish() {
  if (finished_) return result_;
  finished_ = true;
  // Workers first: every store runs its exit barrier, so they close together.
  std::vector<std::unique_ptr<Node>> closes(workers_.size());
  std::vector<Node*> waiting;
  for (size_t w = 0; w < workers_.size(); ++w) {
    if (!workers_[w].store) continue;
    closes[w] = std::make_unique<Node>();
    closes[w]->name = dist::NodeName(dist::Role::kWorker, static_cast<int>(w));
    std::unique_ptr<Store>* store = &workers_[w].store;
    Launch(closes[w].get(), [store] {
      struct Free {
        std::unique_ptr<Store>* s;
        ~Free() { s->reset(); }
      } free_store{store};
      (*store)->Close();
    });
    waiting.push_back(closes[w].get());
  }
  AwaitOrDie(waiting, "closing its store");
  for (size_t w = 0; w < workers_.size(); ++w) {
    if (!closes[w]) continue;
    closes[w]->thread.join();
    workers_[w].result = closes[w]->result;
  }
  // Then the silent workers (those not killed), which were waiting at the exit barrier.
  waiting.clear();
  for (size_t i = 0; i < silent_.size(); ++i) {
    int expected = kRun;
    silent_state_[i]->compare_exchange_strong(expected, kFinish);
    waiting.push_back(silent_[i].get());
  }
  AwaitOrDie(waiting, "finishing");
  for (auto& n : silent_) n->thread.join();
  waiting = {&scheduler_};
  for (auto& s : servers_) waiting.push_back(s.get());
  AwaitOrDie(waiting, "stopping after the workers closed");
  for (Node* n : waiting) n->thread.join();
  if (set_secret_) unsetenv("KVSTORE_JOB_SECRET");

  result_.nodes.push_back(scheduler_.result);
  for (auto& s : servers_) result_.nodes.push_back(s->result);
  for (size_t w = 0; w < workers_.size(); ++w) {
    NodeResult r = workers_[w].result;
    r.node = dist::NodeName(dist::Role::kWorker, static_cast<int>(w));
    result_.nodes.push_back(r);
  }
  for (auto& n : silent_) result_.nodes.push_back(n->result);
  return result_;
}

std::unique_ptr<Array> Filled(int64_t n, float value) {
  std::unique_ptr<Array> a = Array::Create({n}, KV_FLOAT32, Context{});
  auto* p = static_cast<float*>(a->data());
  for (int64_t i = 0; i < n; ++i) p[i] = value;
  return a;
}

std::unique_ptr<Array> Ramp(int64_t n, float value) {
  std::unique_ptr<Array> a = Filled(n, value);
  auto* p = static_cast<float*>(a->data());
  for (int64_t i = 0; i < n; ++i) p[i] += static_cast<float>(i);
  return a;
}

std::unique_ptr<Array> FromFloats(const std::vector<float>& v, int dtype) {
  KV_CHECK(dtype == KV_FLOAT32 || dtype == KV_FLOAT16, KV_ERR_INVALID_ARGUMENT,
           "FromFloats: dtype %d is neither float32 nor float16", dtype);
  auto a = Array::Create({static_cast<int64_t>(v.size())}, dtype, Context{});
  for (size_t i = 0; i < v.size(); ++i) {
    if (dtype == KV_FLOAT32) static_cast<float*>(a->data())[i] = v[i];
    else static_cast<uint16_t*>(a->data())[i] = FloatToHalf(v[i]);
  }
  return a;
}

std::vector<float> Values(Array& a) {
  a.WaitPendingWrites();
  KV_CHECK(a.dtype() == KV_FLOAT32 || a.dtype() == KV_FLOAT16, KV_ERR_INVALID_ARGUMENT,
           "Values: %s is neither float32 nor float16", a.Describe().c_str());
  std::vector<float> out(static_cast<size_t>(a.size()));
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = a.dtype() == KV_FLOAT32 ? static_cast<const float*>(a.data())[i]
                                     : HalfToFloat(static_cast<const uint16_t*>(a.data())[i]);
  }
  return out;
}

void InitKey(Store& s, int key, const Array& value) {
  const Array* v = &value;
  s.Init(KeyList::Ints(1, &key), &v);
}

void InitKey(Store& s, const std::string& key, const Array& value) {
  const Array* v = &value;
  const char* k = key.c_str();
  s.Init(KeyList::Strs(1, &k), &v);
}

void PushKey(Store& s, int key, const Array& value, int priority) {
  const Array* v = &value;
  s.Push(KeyList::Ints(1, &key), &v, priority);
}

void PushKey(Store& s, const std::string& key, const Array& value, int priority) {
  const Array* v = &value;
  const char* k = key.c_str();
  s.Push(KeyList::Strs(1, &k), &v, priority);
}

void PullKey(Store& s, int key, Array* out, int priority) {
  s.Pull(KeyList::Ints(1, &key), &out, priority);
}

void PullKey(Store& s, const std::string& key, Array* out, int priority) {
  const char* k = key.c_str();
  s.Pull(KeyList::Strs(1, &k), &out, priority);
}

int ErrorOf(const std::function<void()>& fn, std::string* msg) {
  try {
    fn();
  } catch (const Error& e) {
    if (msg != nullptr) *msg = e.what();
    return e.code();
  }
  if (msg != nullptr) msg->clear();
  return 0;
}

}  // namespace inprocess
}  // namespace kvstore
