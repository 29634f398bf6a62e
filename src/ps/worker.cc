// worker.cc - the worker side of the distributed stores (KVStoreCreate("dist_*") in a
// process whose DMLC_ROLE is worker).
//
// Threads. Application threads validate, prepare each push's payload (TakePayload: the
// caller's own array for one large CPU value, otherwise a per-key send buffer that the
// devices' values are summed or copied into), and queue requests; one I/O thread owns every
// socket, sends the queue in priority order, receives replies and completes operations.
// Application threads never touch a socket; the I/O thread never blocks on anything but
// zmq_poll.
//
// Ordering. The send queue is ordered by (priority desc, sequence asc) but requests of one
// key leave in the order they were queued: popping a request first sends the older
// requests of its key (they inherit its priority). A server receives one worker's requests
// in send order, and it answers a pull only after that worker's earlier pushes of the key
// were applied, so a pull always observes the worker's previous pushes.
//
// Pending writes and reads. Pull/pushpull call BeginPendingWrite on every output before
// returning; the I/O thread copies each reply part into place (or hands a whole reply to
// the output, AdoptReply) and calls EndPendingWrite (with the error, if any) once every
// part arrived. Readers of the outputs wait for it. A zero-copy push holds a pending read
// on its value until the op completes (FinishOp); writers of the value wait for it.
//
// Failures belong to operations. A failed push is reported by the next KVStoreWaitAll (its
// wait), naming the push, the key and the server; it does not fail later calls on other
// keys. A pull of a key whose latest earlier push by this worker failed fails too (it
// cannot contain that push), until a later push of the key succeeds or a wait reported
// the failure. Pushes and pulls of one key complete in the order they were queued (per-key
// send order, one connection per server, replies in order), so when a pull completes the
// outcome of every earlier push of its key is known.
//
// Deadlines. Every request carries a deadline (the round timeout plus the heartbeat
// timeout plus slack): a server that never answers fails the request with TIMEOUT naming
// the server and the key. The scheduler reports dead servers (PEER_DEAD at once).
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "comm/comm.h"
#include "core/cpu/kernels.h"
#include "core/dtype.h"
#include "ps/ps.h"
#include "ps/send_queue.h"
#include "optimizer/optimizer.h"

namespace kvstore {
namespace dist {

namespace {

// Completion of a blocking control request (init, barrier, command, ...).
struct Waiter {
  std::mutex mu;
  std::condition_variable cv;
  int remaining = 0;
  int status = 0;
  std::string msg;
  int64_t value = 0;

  explicit Waiter(int n) : remaining(n) {}
  void Complete(int st, const std::string& m, int64_t v = 0) {
    std::lock_guard<std::mutex> lock(mu);
    if (st != 0 && status == 0) {
      status = st;
      msg = m;
    }
    value += v;
    if (--remaining == 0) cv.notify_all();
  }
  // Throws the first error, or TIMEOUT with `what` when the deadline passes.
  int64_t Wait(double deadline_sec, const std::string& what) {
    std::unique_lock<std::mutex> lock(mu);
    while (remaining > 0) {
      const double left = deadline_sec - NowSec();
      if (left <= 0) KV_FAIL(KV_ERR_TIMEOUT, "%s", what.c_str());
      cv.wait_for(lock, std::chrono::duration<double>(std::min(left, 3600.0)));
    }
    if (status != 0) KV_FAIL(status, "%s", msg.c_str());
    return value;
  }
};

struct KeyMeta {
  std::string display;
  bool is_str = false;
  int64_t int_key = 0;
  std::string name;
  uint64_t order_id = 0;
  Shape shape;
  int dtype = 0;
  int64_t size = 0;
  size_t nbytes = 0;
  std::vector<PartPlan> parts;
  std::vector<std::shared_ptr<SharedBuf>> pool;  // send buffers (app threads, under mu_)
  mutable size_t lent_pushes = 0;  // zero-copy pushes not yet completed (under mu_)
  // Push ordering (under mu_): pushes and pushpulls queued so far, and the latest failed
  // one that later pulls must not pretend to contain (0: none, or superseded/reported).
  uint64_t pushes_queued = 0;
  uint64_t failed_push_seq = 0;
  int failed_push_code = 0;
  std::string failed_push_msg;
};

// One user-visible operation on one key, spread over its parts.
struct Op {
  MsgType type;
  const KeyMeta* meta;
  int remaining = 0;
  int status = 0;
  std::string msg;
  std::vector<Array*> outs;
  std::unique_ptr<Array> staging;  // host copy when an output is not on the CPU
  std::shared_ptr<SharedBuf> payload;
  std::shared_ptr<Waiter> waiter;
  // A push or pushpull: its place among the key's pushes. A pull: the number of pushes of
  // the key queued before it.
  uint64_t push_seq = 0;
  uint64_t after_pushes = 0;
};

// A push failure not yet cleared by a wait. A failed pushpull was already reported on its
// outputs: the wait only clears its key's failed state.
struct PushFailure {
  KeyMeta* meta;
  int code;
  std::string msg;
  bool reported;
};

struct OutMsg {
  int dest = -1;  // server rank, or -1 for the scheduler
  WireHeader h{};
  std::string str;
  OutPayload payload;
  std::shared_ptr<Op> op;
  PartPlan part{};
  std::shared_ptr<Waiter> waiter;
  uint64_t order_key = 0;  // 0: unordered (control)
};

// The send queue (send_queue.h). Its pull window bounds the pulls in flight: deeper
// pipelines only make ZeroMQ allocate more receive buffers (cold memory, page faults)
// without moving more bytes.
using Queue = SendQueue<OutMsg>;

struct Outstanding {
  std::shared_ptr<Op> op;
  std::shared_ptr<Waiter> waiter;
  int dest = -1;
  PartPlan part{};
  double deadline = 0;
  MsgType type;
  Queue::Ticket ticket;  // given back (Done) when the request completes
};

// "push", "pull", ... for error messages.
const char* OpVerb(MsgType t) {
  switch (t) {
    case MsgType::kInit: return "init";
    case MsgType::kPush: return "push";
    case MsgType::kPull: return "pull";
    case MsgType::kPushPull: return "pushpull";
    default: return MsgTypeName(static_cast<uint16_t>(t));
  }
}

class WorkerStore : public Store, public Distributed {
 public:
  WorkerStore(const std::string& type, const Config& cfg);
  ~WorkerStore() override;

  void Init(const KeyList& keys, const Array* const* vals) override;
  void Push(const KeyList& keys, const Array* const* vals, int priority) override;
  void Pull(const KeyList& keys, Array* const* outs, int priority) override;
  void PushPull(const KeyList& vkeys, const Array* const* vals, const KeyList& okeys,
                Array* const* outs, int priority) override;
  void SetUpdater(std::shared_ptr<Updater>) override {
    KV_FAIL(KV_ERR_NOT_SUPPORTED,
            "store \"%s\": a worker cannot run updaters; use KVStoreSetOptimizer (shipped to the "
            "servers) or set the updater in the server program",
            type().c_str());
  }
  void SetStrUpdater(std::shared_ptr<Updater> u) override { SetUpdater(std::move(u)); }
  void SetOptimizer(const std::string& spec) override;
  int Rank() const override { return rank_; }
  int GroupSize() const override { return num_workers_; }
  void Barrier() override;
  void WaitAll() override;
  int NumDeadNodes(int node_group, int timeout_sec) override;
  void SetBarrierBeforeExit(bool enabled) override { barrier_before_exit_ = enabled; }
  void Close() override;
  void SendCommandToServers(int head, const std::string& body) override;
  void RunServer(KVController, void*) override {
    KV_FAIL(KV_ERR_NOT_SUPPORTED,
            "store \"%s\" cannot run a server: create a dist store in a process whose "
            "DMLC_ROLE is server or scheduler",
            type().c_str());
  }
  Distributed* distributed() override { return this; }

 private:
  // Application side.
  KeyMeta* FindKey(const KeyList& keys, int i);
  template <typename A>
  std::vector<std::pair<KeyMeta*, std::vector<A*>>> GroupByKey(const KeyList& keys,
                                                               A* const* arrays, const char* op,
                                                               const char* noun);
  void CheckKind(const KeyList& keys);
  template <typename Groups>
  void CheckPushable(const Groups& groups) const;
  std::string KeyId(const KeyList& keys, int i) const;
  std::shared_ptr<SharedBuf> TakePayload(KeyMeta* m, Array* lender);
  std::shared_ptr<SharedBuf> Gather(KeyMeta* m, const std::vector<const Array*>& vals);
  // Drops an op's reference to its payload (and ends the lender's pending read).
  void ReleaseOpRef(const KeyMeta* m, SharedBuf& b);
  // Gather for every group (meta_of(g), vals_of(g)) after waiting for pending writes into its
  // values; all or nothing: on failure the buffers already taken are released.
  template <typename Groups, typename MetaOf, typename ValsOf>
  std::vector<std::shared_ptr<SharedBuf>> GatherAll(const Groups& groups, MetaOf meta_of, ValsOf vals_of);
  // StartDataOp for every group with its payload; when one fails, the payloads of the groups
  // not started yet are released (ops already queued go on) and the error is rethrown.
  template <typename Groups, typename MetaOf, typename OutsOf>
  void StartAll(MsgType type, const Groups& groups,
                const std::vector<std::shared_ptr<SharedBuf>>& bufs, MetaOf meta_of,
                OutsOf outs_of, int priority);
  void Enqueue(std::vector<OutMsg>& msgs, int priority);
  void StartDataOp(MsgType type, KeyMeta* m, std::shared_ptr<SharedBuf> payload,
                   std::vector<Array*> outs, const std::shared_ptr<Waiter>& waiter, int priority);
  void ControlToScheduler(MsgType type, int arg, int64_t key, const std::shared_ptr<Waiter>& w);
  void ToAllServers(MsgType type, int arg, const std::string& str, const std::shared_ptr<Waiter>& w);
  double ControlDeadline() const {
    return DeadlineAfter(cfg_.timeout_sec > 0 ? cfg_.timeout_sec + cfg_.heartbeat_timeout_sec + 2 : 0);
  }
  WireHeader Header(MsgType t) const { return MakeHeader(t, Role::kWorker, rank_); }
  // Runs the exit protocol once; returns the first error of draining or of the exit barrier
  // (nullptr when both succeeded).
  std::exception_ptr Shutdown();
  // "server 1, worker 2" for the nodes known dead, or "".
  std::string DeadNodes();

  // I/O thread.
  void IoLoop();
  void SendQueued();
  void SendOne(OutMsg& m, const Queue::Ticket& ticket);
  void HandleReply(int server, Message& m);
  void HandleScheduler(Message& m);
  void CompletePart(Outstanding& o, int status, const std::string& msg, Message* reply);
  static bool AdoptReply(Array* out, Message* reply);
  void FinishOp(Op& op);
  void CheckDeadlines();
  void FailServer(int server, int code, const std::string& why);
  void FailAll(int code, const std::string& why);

  Config cfg_;
  bool sync_;
  std::unique_ptr<Comm> comm_;
  int rank_ = -1;
  int num_workers_ = 0;
  int num_servers_ = 0;
  bool barrier_before_exit_ = true;
  bool shut_down_ = false;  // Shutdown ran (from Close or the destructor)

  zmq::context_t ctx_;
  zmq::socket_t sched_;
  std::vector<zmq::socket_t> servers_;
  std::vector<std::string> server_names_;  // "server <rank>", for log lines
  int wake_fd_ = -1;
  std::thread io_;

  // Shared state (mu_).
  std::mutex mu_;
  KeyKind kind_ = KeyKind::kNone;
  std::unordered_map<std::string, KeyMeta> keys_;
  uint64_t next_order_id_ = 1;
  bool stop_ = false;
  int inflight_ops_ = 0;
  std::condition_variable idle_cv_;
  std::vector<PushFailure> push_failures_;  // reported and cleared by WaitAll
  std::shared_ptr<Updater> optimizer_;  // the servers' optimizer, to vet pushed dtypes
  bool scheduler_dead_ = false;
  std::vector<bool> server_dead_;
  std::vector<bool> worker_dead_;

  // I/O-thread-only state.
  uint64_t next_req_ = 1;
  std::unordered_map<uint64_t, Outstanding> outstanding_;
  double last_sched_ = 0;

  Queue queue_;  // its own lock
};

WorkerStore::WorkerStore(const std::string& type, const Config& cfg)
    : Store(type), cfg_(cfg), sync_(type.find("_async") == std::string::npos),
      ctx_(cfg.IoThreads()), sched_(ctx_, zmq::socket_type::dealer) {
  comm_ = type.find("device") != std::string::npos ? CreateDeviceComm() : CreateCpuComm();
  ConfigureSocket(sched_, Link::kToScheduler);
  JoinResult j = JoinJob(sched_, cfg_, {});
  rank_ = j.rank;
  num_workers_ = j.num_workers;
  num_servers_ = j.num_servers;
  SetLogPrefix("worker " + std::to_string(rank_));
  server_dead_.assign(static_cast<size_t>(num_servers_), false);
  worker_dead_.assign(static_cast<size_t>(num_workers_), false);
  for (const auto& s : j.servers) {
    servers_.emplace_back(ctx_, zmq::socket_type::dealer);
    server_names_.push_back("server " + std::to_string(servers_.size() - 1));
    zmq::socket_t& sk = servers_.back();
    ConfigureSocket(sk, Link::kToServer);
    // Server s is served by I/O thread s mod IoThreads (ZeroMQ would otherwise put the
    // connections, made back to back, on whichever thread looked least loaded at the time);
    // on the server, this worker uses the port of the server's I/O thread for its rank.
    const int io_threads = cfg_.IoThreads();
    if (io_threads > 1) {
      sk.set(zmq::sockopt::affinity, uint64_t{1} << ((servers_.size() - 1) % static_cast<size_t>(io_threads)));
    }
    const int port = s.ports[static_cast<size_t>(rank_) % s.ports.size()];
    const std::string ep = "tcp://" + s.host + ":" + std::to_string(port);
    try {
      sk.connect(ep);
    } catch (const zmq::error_t& e) {
      KV_FAIL(KV_ERR_NETWORK, "worker %d cannot connect to server %d at %s: %s", rank_, s.rank,
              ep.c_str(), e.what());
    }
    if (cfg_.verbose >= 1) Log("connected to server %d at %s", s.rank, ep.c_str());
  }
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  KV_CHECK(wake_fd_ >= 0, KV_ERR_INTERNAL, "eventfd failed: %s", std::strerror(errno));
  last_sched_ = NowSec();
  io_ = std::thread([this] { IoLoop(); });
}

WorkerStore::~WorkerStore() { Shutdown(); }

// KVStoreFree: the same exit protocol, with its first error reported to the caller.
void WorkerStore::Close() {
  if (std::exception_ptr first = Shutdown()) std::rethrow_exception(first);
}

// Exit protocol: drain, optional barrier of all workers, FINISH to the scheduler (which
// stops the servers once every worker finished), then stop the I/O thread. Every step runs
// even when an earlier one failed, each is bounded by a deadline, and errors are logged and
// returned, never thrown. A second call does nothing.
std::exception_ptr WorkerStore::Shutdown() {
  if (shut_down_) return nullptr;
  shut_down_ = true;
  std::exception_ptr first;
  try {
    WaitAll();
  } catch (const Error& e) {
    Log("pending operations failed at exit: %s", e.what());
    first = std::current_exception();
  }
  if (barrier_before_exit_) {
    try {
      Barrier();
    } catch (const Error& e) {
      Log("exit barrier failed: %s", e.what());
      if (!first) first = std::current_exception();
    }
  }
  if (!first) {
    // A job that lost a node did not finish as it should, even when this worker's own
    // calls all succeeded: KVStoreFree says so, naming the dead nodes.
    const std::string dead = DeadNodes();
    if (!dead.empty()) {
      first = std::make_exception_ptr(
          Error(KV_ERR_PEER_DEAD, StrFormat("worker %d: the job lost %s", rank_, dead.c_str())));
    }
  }
  try {
    auto w = std::make_shared<Waiter>(1);
    ControlToScheduler(MsgType::kFinish, 0, 0, w);
    w->Wait(DeadlineAfter(std::max(2.0, std::min(cfg_.heartbeat_timeout_sec, 10.0))),
            "the scheduler did not acknowledge FINISH");
  } catch (const Error& e) {
    Log("%s", e.what());
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  uint64_t one = 1;
  if (write(wake_fd_, &one, sizeof(one)) < 0) {
  }
  if (io_.joinable()) io_.join();
  for (auto& s : servers_) s.set(zmq::sockopt::linger, 200);
  sched_.set(zmq::sockopt::linger, 200);
  close(wake_fd_);
  return first;
}

std::string WorkerStore::DeadNodes() {
  std::lock_guard<std::mutex> lock(mu_);
  std::string list = scheduler_dead_ ? "the scheduler" : "";
  for (int s = 0; s < num_servers_; ++s) {
    if (server_dead_[static_cast<size_t>(s)]) list += (list.empty() ? "" : ", ") + NodeName(Role::kServer, s);
  }
  for (int w = 0; w < num_workers_; ++w) {
    if (worker_dead_[static_cast<size_t>(w)]) list += (list.empty() ? "" : ", ") + NodeName(Role::kWorker, w);
  }
  return list;
}

std::string WorkerStore::KeyId(const KeyList& keys, int i) const {
  if (keys.kind == KeyKind::kStr) return std::string("s") + keys.strs[i];
  std::string id("i");
  const int64_t k = keys.ints[i];
  id.append(reinterpret_cast<const char*>(&k), sizeof(k));
  return id;
}

void WorkerStore::CheckKind(const KeyList& keys) {
  if (keys.size == 0) return;
  if (kind_ == KeyKind::kNone) return;
  KV_CHECK(kind_ == keys.kind, KV_ERR_KEY_KIND_MISMATCH,
           "key %s: this store uses %s keys; int and string keys cannot be mixed",
           keys.Name(0).c_str(), kind_ == KeyKind::kInt ? "int" : "string");
}

KeyMeta* WorkerStore::FindKey(const KeyList& keys, int i) {
  auto it = keys_.find(KeyId(keys, i));
  KV_CHECK(it != keys_.end(), KV_ERR_UNKNOWN_KEY, "key %s is not initialised (init it first)",
           keys.Name(i).c_str());
  return &it->second;
}

void WorkerStore::Init(const KeyList& keys, const Array* const* vals) {
  std::vector<KeyMeta*> added;
  {
    std::lock_guard<std::mutex> lock(mu_);
    CheckKind(keys);
    std::vector<std::string> ids;
    for (int i = 0; i < keys.size; ++i) {
      const std::string id = KeyId(keys, i);
      KV_CHECK(std::find(ids.begin(), ids.end(), id) == ids.end(), KV_ERR_INVALID_ARGUMENT,
               "key %s appears twice in one init", keys.Name(i).c_str());
      KV_CHECK(keys_.count(id) == 0, KV_ERR_DUPLICATE_KEY, "key %s is already initialised",
               keys.Name(i).c_str());
      // The wire names a string key by its text, so the text cannot be empty.
      KV_CHECK(keys.kind != KeyKind::kStr || keys.strs[i][0] != '\0', KV_ERR_INVALID_ARGUMENT,
               "key \"\": a distributed store needs non-empty string keys");
      KV_CHECK(vals[i]->ctx().is_cpu() || vals[i]->ctx().is_gpu(), KV_ERR_DEVICE, "bad context");
      CheckPartsFit(PlanParts(keys.kind == KeyKind::kStr, keys.kind == KeyKind::kStr ? 0 : keys.ints[i],
                              keys.kind == KeyKind::kStr ? keys.strs[i] : std::string(),
                              vals[i]->size(), num_servers_, cfg_.bigarray_bound),
                    DTypeSize(vals[i]->dtype()), keys.Name(i));
      ids.push_back(id);
    }
    if (keys.size > 0) kind_ = keys.kind;
    for (int i = 0; i < keys.size; ++i) {
      KeyMeta& m = keys_[ids[static_cast<size_t>(i)]];
      m.is_str = keys.kind == KeyKind::kStr;
      m.int_key = m.is_str ? 0 : keys.ints[i];
      m.name = m.is_str ? keys.strs[i] : std::string();
      m.display = keys.Name(i);
      m.order_id = next_order_id_++;
      m.shape = vals[i]->shape();
      m.dtype = vals[i]->dtype();
      m.size = vals[i]->size();
      m.nbytes = vals[i]->nbytes();
      m.parts = PlanParts(m.is_str, m.int_key, m.name, m.size, num_servers_, cfg_.bigarray_bound);
      added.push_back(&m);
    }
  }
  // Rank 0 writes the initial values; every worker then meets in a barrier so that no
  // worker can push or pull a key before the servers have it.
  int status = 0;
  std::string msg;
  if (rank_ == 0 && keys.size > 0) {
    auto w = std::make_shared<Waiter>(keys.size);
    for (int i = 0; i < keys.size; ++i) {
      auto* m = added[static_cast<size_t>(i)];
      StartDataOp(MsgType::kInit, m, Gather(m, {vals[i]}), {}, w, INT32_MAX);
    }
    try {
      w->Wait(ControlDeadline(), "init: the servers did not acknowledge the initial values");
    } catch (const Error& e) {
      status = e.code();
      msg = e.what();
    }
  }
  Barrier();
  KV_CHECK(status == 0, status, "%s", msg.c_str());
}

// Flow control of pushes: a key has at most kMaxPushPayloads payloads in use, counting its
// send buffers still in flight and its zero-copy pushes not yet answered. A push that finds
// them all busy waits for one (memory stays bounded, nothing is allocated per push, and a
// fast worker cannot pile up pushes on a server); the wait ends when an operation of the
// key completes or ZeroMQ releases a buffer, and is bounded by the request deadline.
//
// With `lender` (a single CPU value of at least kZeroCopyMinBytes) the payload is the
// caller's own storage: the array gets a pending read until the op completes, so writers
// wait and KVArrayFree defers, and the storage stays alive until ZeroMQ releases it.
// Otherwise it is a send buffer of the key, for the caller to fill.
std::shared_ptr<SharedBuf> WorkerStore::TakePayload(KeyMeta* m, Array* lender) {
  constexpr size_t kMaxPushPayloads = 8;
  const double deadline = ControlDeadline();
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (lender != nullptr && m->lent_pushes < kMaxPushPayloads) {
      auto b = std::make_shared<SharedBuf>();
      b->borrowed = lender->storage();
      b->borrowed_bytes = m->nbytes;
      b->lender = lender;
      b->in_flight.store(1, std::memory_order_release);
      lender->BeginPendingRead();
      ++m->lent_pushes;
      return b;
    }
    if (lender == nullptr) {
      for (auto& b : m->pool) {
        if (b->Idle()) {
          b->in_flight.fetch_add(1, std::memory_order_acq_rel);
          return b;
        }
      }
      if (m->pool.size() < kMaxPushPayloads) break;
    }
    KV_CHECK(NowSec() < deadline, KV_ERR_TIMEOUT,
             "push of key %s: %zu earlier pushes are still in flight after %.0f s",
             m->display.c_str(), kMaxPushPayloads, cfg_.timeout_sec);
    // Completions notify idle_cv_; ZeroMQ's release does not, hence the short timeout.
    idle_cv_.wait_for(lock, std::chrono::milliseconds(1));
  }
  auto b = std::make_shared<SharedBuf>();
  b->array = Array::Create(m->shape, m->dtype, Context{});
  b->in_flight.store(1, std::memory_order_release);
  m->pool.push_back(b);
  return b;
}

// The payload of a push or pushpull (see TakePayload), with the op's reference held
// (in_flight): several values (devices) are summed into a send buffer, a small or non-CPU
// value is copied into one, a large CPU value is sent from its own storage.
std::shared_ptr<SharedBuf> WorkerStore::Gather(KeyMeta* m, const std::vector<const Array*>& vals) {
  if (vals.size() == 1 && vals[0]->ctx().is_cpu() && m->nbytes >= kZeroCopyMinBytes) {
    return TakePayload(m, const_cast<Array*>(vals[0]));
  }
  std::shared_ptr<SharedBuf> b = TakePayload(m, nullptr);
  try {
    if (vals.size() == 1) {
      CopyArray(b->array.get(), *vals[0]);
    } else {
      comm_->Reduce(vals, b->array.get());
    }
  } catch (...) {
    ReleaseOpRef(m, *b);
    throw;
  }
  return b;
}

void WorkerStore::ReleaseOpRef(const KeyMeta* m, SharedBuf& b) {
  if (b.lender != nullptr) {
    Array* lender = b.lender;
    b.lender = nullptr;
    lender->EndPendingRead();  // may delete a released array; only its storage lives on
    std::lock_guard<std::mutex> lock(mu_);
    --m->lent_pushes;
  }
  b.in_flight.fetch_sub(1, std::memory_order_acq_rel);
}

template <typename Groups, typename MetaOf, typename ValsOf>
std::vector<std::shared_ptr<SharedBuf>> WorkerStore::GatherAll(const Groups& groups, MetaOf meta_of,
                                                               ValsOf vals_of) {
  std::vector<std::shared_ptr<SharedBuf>> bufs;
  bufs.reserve(groups.size());
  try {
    for (const auto& g : groups) {
      for (const Array* v : vals_of(g)) const_cast<Array*>(v)->WaitPendingWrites();
      bufs.push_back(Gather(meta_of(g), vals_of(g)));
    }
  } catch (...) {
    for (size_t i = 0; i < bufs.size(); ++i) ReleaseOpRef(meta_of(groups[i]), *bufs[i]);
    throw;
  }
  return bufs;
}

// Builds and queues one operation. Everything that can fail (allocations) happens before
// any side effect: on failure the op's payload reference is released and no output was
// marked pending, so nothing is left waiting for an op that never started.
void WorkerStore::StartDataOp(MsgType type, KeyMeta* m, std::shared_ptr<SharedBuf> payload,
                              std::vector<Array*> outs, const std::shared_ptr<Waiter>& waiter,
                              int priority) {
  std::shared_ptr<Op> op;
  std::vector<OutMsg> msgs;
  try {
    op = std::make_shared<Op>();
    op->type = type;
    op->meta = m;
    op->remaining = static_cast<int>(m->parts.size());
    op->payload = payload;
    op->outs = std::move(outs);
    op->waiter = waiter;
    bool need_staging = false;
    for (Array* o : op->outs) need_staging |= !o->ctx().is_cpu();
    if (need_staging) op->staging = Array::Create({m->size}, m->dtype, Context{});
    const size_t esize = DTypeSize(m->dtype);
    for (const PartPlan& p : m->parts) {
      OutMsg om;
      om.dest = p.server;
      om.h = Header(type);
      om.h.flags = (m->is_str ? kFlagStrKey : 0u) | (sync_ ? kFlagSync : 0u);
      om.h.key = m->is_str ? 0 : m->int_key;
      om.h.offset = p.offset;
      om.h.count = p.count;
      om.h.total = m->size;
      om.h.dtype = m->dtype;
      if (m->is_str) om.str = m->name;
      if (type != MsgType::kPull && p.count > 0) {
        om.payload.buf = op->payload;
        om.payload.offset_bytes = static_cast<size_t>(p.offset) * esize;
        om.payload.nbytes = static_cast<size_t>(p.count) * esize;
      }
      om.op = op;
      om.part = p;
      om.order_key = m->order_id;
      msgs.push_back(std::move(om));
    }
  } catch (...) {
    if (payload) ReleaseOpRef(m, *payload);
    throw;
  }
  for (Array* o : op->outs) o->BeginPendingWrite();
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++inflight_ops_;
    if (type == MsgType::kPush || type == MsgType::kPushPull) op->push_seq = ++m->pushes_queued;
    op->after_pushes = m->pushes_queued;
  }
  Enqueue(msgs, priority);
}

template <typename Groups, typename MetaOf, typename OutsOf>
void WorkerStore::StartAll(MsgType type, const Groups& groups,
                           const std::vector<std::shared_ptr<SharedBuf>>& bufs, MetaOf meta_of,
                           OutsOf outs_of, int priority) {
  for (size_t i = 0; i < groups.size(); ++i) {
    try {
      StartDataOp(type, meta_of(groups[i]), bufs[i], outs_of(groups[i]), nullptr, priority);
    } catch (...) {
      for (size_t j = i + 1; j < groups.size(); ++j) ReleaseOpRef(meta_of(groups[j]), *bufs[j]);
      throw;
    }
  }
}

void WorkerStore::Enqueue(std::vector<OutMsg>& msgs, int priority) {
  std::vector<Queue::Entry> entries(msgs.size());
  for (size_t i = 0; i < msgs.size(); ++i) {
    OutMsg& m = msgs[i];
    Queue::Entry& e = entries[i];
    e.key = m.order_key;
    if (m.op && m.op->type == MsgType::kPull) {
      e.kind = SendKind::kPull;
      e.reply_bytes = static_cast<size_t>(m.part.count) * DTypeSize(m.op->meta->dtype);
    } else if (m.op) {
      e.kind = SendKind::kPush;
    }
    e.item = std::move(m);
  }
  // The I/O thread drains the whole queue once woken, so only the request that finds the
  // queue empty needs to wake it.
  const bool wake = queue_.Push(entries, priority);
  uint64_t one = 1;
  if (wake && write(wake_fd_, &one, sizeof(one)) < 0) {
    // The counter cannot overflow in practice; a failed wake-up is caught by the poll
    // timeout of the I/O thread.
  }
}

// Checks every array against its key's shape and dtype and groups the arrays by key, keys
// in first-appearance order (the order their operations are queued in); linear in the
// number of arrays. Called under mu_.
template <typename A>
std::vector<std::pair<KeyMeta*, std::vector<A*>>> WorkerStore::GroupByKey(const KeyList& keys,
                                                                         A* const* arrays,
                                                                         const char* op,
                                                                         const char* noun) {
  std::vector<std::pair<KeyMeta*, std::vector<A*>>> groups;
  std::unordered_map<const KeyMeta*, size_t> index;
  for (int i = 0; i < keys.size; ++i) {
    KeyMeta* m = FindKey(keys, i);
    A* a = arrays[i];
    KV_CHECK(a->shape() == m->shape, KV_ERR_SHAPE_MISMATCH,
             "%s of key %s: the %s has shape %s, the stored value %s", op, m->display.c_str(), noun,
             ShapeToString(a->shape()).c_str(), ShapeToString(m->shape).c_str());
    KV_CHECK(a->dtype() == m->dtype, KV_ERR_DTYPE_MISMATCH,
             "%s of key %s: the %s is %s, the stored value %s", op, m->display.c_str(), noun,
             DTypeName(a->dtype()), DTypeName(m->dtype));
    auto added = index.emplace(m, groups.size());
    if (added.second) groups.push_back({m, {a}});
    else groups[added.first->second].second.push_back(a);
  }
  return groups;
}

void WorkerStore::Push(const KeyList& keys, const Array* const* vals, int priority) {
  std::vector<std::pair<KeyMeta*, std::vector<const Array*>>> groups;
  {
    std::lock_guard<std::mutex> lock(mu_);
    CheckKind(keys);
    groups = GroupByKey(keys, vals, "push", "value");
    CheckPushable(groups);
  }
  // Small values are copied now; large CPU values are read in place until the push completes
  // (their writers wait, see TakePayload).
  std::vector<std::shared_ptr<SharedBuf>> bufs =
      GatherAll(groups, [](const auto& g) { return g.first; }, [](const auto& g) -> const auto& { return g.second; });
  StartAll(MsgType::kPush, groups, bufs, [](const auto& g) { return g.first; },
           [](const auto&) { return std::vector<Array*>(); }, priority);
}

void WorkerStore::Pull(const KeyList& keys, Array* const* outs, int priority) {
  std::vector<std::pair<KeyMeta*, std::vector<Array*>>> groups;
  {
    std::lock_guard<std::mutex> lock(mu_);
    CheckKind(keys);
    groups = GroupByKey(keys, outs, "pull", "output");
  }
  for (auto& g : groups) StartDataOp(MsgType::kPull, g.first, nullptr, g.second, nullptr, priority);
}

void WorkerStore::PushPull(const KeyList& vkeys, const Array* const* vals, const KeyList& okeys,
                           Array* const* outs, int priority) {
  struct Group {
    KeyMeta* m;
    std::vector<const Array*> vals;
    std::vector<Array*> outs;
  };
  std::vector<Group> groups;
  {
    std::lock_guard<std::mutex> lock(mu_);
    CheckKind(vkeys);
    CheckKind(okeys);
    KV_CHECK(vkeys.size == 0 || okeys.size == 0 || vkeys.kind == okeys.kind,
             KV_ERR_KEY_KIND_MISMATCH, "pushpull mixes int and string keys");
    auto pushed = GroupByKey(vkeys, vals, "pushpull", "value");
    auto pulled = GroupByKey(okeys, outs, "pushpull", "output");
    std::unordered_map<const KeyMeta*, size_t> index;
    for (auto& g : pushed) {
      index.emplace(g.first, groups.size());
      groups.push_back({g.first, std::move(g.second), {}});
    }
    for (auto& g : pulled) {
      auto it = index.find(g.first);
      KV_CHECK(it != index.end(), KV_ERR_INVALID_ARGUMENT,
               "pushpull: output key %s is not among the pushed keys", g.first->display.c_str());
      groups[it->second].outs = std::move(g.second);
    }
    for (const Group& g : groups) {
      KV_CHECK(!g.outs.empty(), KV_ERR_INVALID_ARGUMENT,
               "pushpull: pushed key %s has no output", g.m->display.c_str());
    }
    CheckPushable(pushed);  // after the argument checks, as in-process stores order them
  }
  std::vector<std::shared_ptr<SharedBuf>> bufs =
      GatherAll(groups, [](const Group& g) { return g.m; }, [](const Group& g) -> const auto& { return g.vals; });
  StartAll(MsgType::kPushPull, groups, bufs, [](const Group& g) { return g.m; },
           [](const Group& g) { return g.outs; }, priority);
}

void WorkerStore::ControlToScheduler(MsgType type, int arg, int64_t key,
                                     const std::shared_ptr<Waiter>& w) {
  OutMsg om;
  om.dest = -1;
  om.h = Header(type);
  om.h.arg = arg;
  om.h.key = key;
  om.waiter = w;
  std::vector<OutMsg> v;
  v.push_back(std::move(om));
  Enqueue(v, INT32_MAX);
}

void WorkerStore::ToAllServers(MsgType type, int arg, const std::string& str,
                               const std::shared_ptr<Waiter>& w) {
  std::vector<OutMsg> v;
  for (int s = 0; s < num_servers_; ++s) {
    OutMsg om;
    om.dest = s;
    om.h = Header(type);
    om.h.arg = arg;
    om.str = str;
    om.waiter = w;
    v.push_back(std::move(om));
  }
  Enqueue(v, INT32_MAX);
}

void WorkerStore::Barrier() {
  auto w = std::make_shared<Waiter>(1);
  ControlToScheduler(MsgType::kBarrier, KV_NODE_WORKERS, 0, w);
  w->Wait(ControlDeadline(), StrFormat("worker %d: barrier: no answer from the scheduler", rank_));
}

// Reports the pushes that failed since the last wait: the first one's code, every one's
// message (up to a few). Pulls of those keys may then succeed again (see the file comment).
void WorkerStore::WaitAll() {
  std::vector<PushFailure> failures;
  {
    std::unique_lock<std::mutex> lock(mu_);
    idle_cv_.wait(lock, [&] { return inflight_ops_ == 0; });
    for (PushFailure& f : push_failures_) {
      f.meta->failed_push_seq = 0;
      if (!f.reported) failures.push_back(std::move(f));
    }
    push_failures_.clear();
  }
  if (failures.empty()) return;
  constexpr size_t kListed = 4;
  std::string msg = failures.size() == 1 ? std::string() : StrFormat("%zu pushes failed: ", failures.size());
  for (size_t i = 0; i < failures.size() && i < kListed; ++i) {
    msg += (i > 0 ? "; " : "") + failures[i].msg;
  }
  if (failures.size() > kListed) msg += StrFormat("; and %zu more", failures.size() - kListed);
  KV_FAIL(failures[0].code, "%s", msg.c_str());
}

int WorkerStore::NumDeadNodes(int node_group, int timeout_sec) {
  bool sched_dead;
  int known = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    sched_dead = scheduler_dead_;
    if (node_group & KV_NODE_SERVERS) known += static_cast<int>(std::count(server_dead_.begin(), server_dead_.end(), true));
    if (node_group & KV_NODE_WORKERS) known += static_cast<int>(std::count(worker_dead_.begin(), worker_dead_.end(), true));
  }
  int count = 0;
  if (node_group & KV_NODE_SCHEDULER) {
    std::lock_guard<std::mutex> lock(mu_);
    if (sched_dead) count += 1;
  }
  if ((node_group & (KV_NODE_SERVERS | KV_NODE_WORKERS)) == 0) return count;
  if (sched_dead) return count + known;
  auto w = std::make_shared<Waiter>(1);
  ControlToScheduler(MsgType::kQueryDead, node_group & (KV_NODE_SERVERS | KV_NODE_WORKERS),
                     static_cast<int64_t>(timeout_sec) * 1000, w);
  try {
    count += static_cast<int>(w->Wait(DeadlineAfter(std::max(2.0, cfg_.heartbeat_timeout_sec)),
                                      "no answer from the scheduler"));
  } catch (const Error&) {
    count += known + ((node_group & KV_NODE_SCHEDULER) && !sched_dead ? 1 : 0);
  }
  return count;
}

void WorkerStore::SendCommandToServers(int head, const std::string& body) {
  KV_CHECK(head >= 0, KV_ERR_INVALID_ARGUMENT, "command head %d is reserved", head);
  auto w = std::make_shared<Waiter>(num_servers_);
  ToAllServers(MsgType::kCommand, head, body, w);
  w->Wait(ControlDeadline(), StrFormat("command %d: not every server answered", head));
}

void WorkerStore::SetOptimizer(const std::string& spec) {
  // Parse locally first so that a bad spec fails with INVALID_ARGUMENT on every worker; the
  // local copy then vets the dtypes of pushes (CheckPushable).
  std::shared_ptr<Updater> local = CreateOptimizer(spec);
  auto w = std::make_shared<Waiter>(num_servers_);
  ToAllServers(MsgType::kSetOptimizer, 0, spec, w);
  w->Wait(ControlDeadline(), "set_optimizer: not every server answered");
  std::lock_guard<std::mutex> lock(mu_);
  optimizer_ = std::move(local);
}

// A push call whose keys the servers' optimizer would refuse fails here, before any key of
// it leaves, so a failed call changes no value and no optimizer state on any server.
// Called under mu_.
template <typename Groups>
void WorkerStore::CheckPushable(const Groups& groups) const {
  if (!optimizer_) return;
  for (const auto& g : groups) optimizer_->CheckDType(g.first->dtype, g.first->display);
}

// ---------------------------------------------------------------------------------------
// I/O thread
// ---------------------------------------------------------------------------------------

void WorkerStore::IoLoop() {
  double next_hb = NowSec();
  double next_scan = NowSec() + 0.1;
  std::vector<zmq::pollitem_t> items;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) break;
    }
    items.clear();
    items.push_back({nullptr, wake_fd_, ZMQ_POLLIN, 0});
    items.push_back({static_cast<void*>(sched_), 0, ZMQ_POLLIN, 0});
    for (auto& s : servers_) items.push_back({static_cast<void*>(s), 0, ZMQ_POLLIN, 0});
    double wait = std::min(next_hb, next_scan) - NowSec();
    if (wait < 0) wait = 0;
    try {
      zmq::poll(items.data(), items.size(), std::chrono::milliseconds(static_cast<long>(wait * 1000)));
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) Log("poll failed: %s", e.what());
    }
    if (items[0].revents & ZMQ_POLLIN) {
      uint64_t v;
      if (read(wake_fd_, &v, sizeof(v)) < 0) {
      }
    }
    SendQueued();
    // Only sockets that zmq_poll found readable are read: an empty non-blocking receive
    // costs a poll of ZeroMQ's command mailbox (a system call), per socket and per loop.
    while (items[1].revents & ZMQ_POLLIN) {
      Message m;
      if (!RecvValidMessage(sched_, false, "the scheduler", &m)) break;
      last_sched_ = NowSec();
      HandleScheduler(m);
    }
    for (int s = 0; s < num_servers_; ++s) {
      if (!(items[static_cast<size_t>(2 + s)].revents & ZMQ_POLLIN)) continue;
      for (int budget = 0; budget < 1024; ++budget) {
        Message m;
        if (!RecvValidMessage(servers_[static_cast<size_t>(s)], false, server_names_[static_cast<size_t>(s)].c_str(), &m)) {
          break;
        }
        HandleReply(s, m);
      }
    }
    SendQueued();  // replies may have opened the send window
    const double now = NowSec();
    if (now >= next_hb) {
      SendMessage(sched_, nullptr, Header(MsgType::kHeartbeat), "", OutPayload{});
      next_hb = now + cfg_.heartbeat_interval_sec;
    }
    if (now >= next_scan) {
      next_scan = now + 0.1;
      bool newly_dead = false;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (!scheduler_dead_ && now - last_sched_ > cfg_.heartbeat_timeout_sec) {
          scheduler_dead_ = true;
          newly_dead = true;
        }
      }
      if (newly_dead) {
        // Without the scheduler the job cannot go on: nobody reports dead nodes any more,
        // barriers cannot complete, and the servers stop when they notice it too. Everything
        // queued or outstanding fails now, and every later request at once (SendOne).
        const std::string why = StrFormat("the scheduler sent nothing for %.1f s and is considered dead",
                                          now - last_sched_);
        Log("%s", why.c_str());
        FailAll(KV_ERR_PEER_DEAD, why);
      }
      CheckDeadlines();
    }
  }
  // Stopping: whatever is still outstanding fails (the store is being destroyed).
  FailAll(KV_ERR_NETWORK, "the store was closed before the reply arrived");
}

// Sends what the send queue lets leave now (priority order, per-key order, the pull window).
void WorkerStore::SendQueued() {
  OutMsg m;
  Queue::Ticket ticket;
  while (queue_.Pop(&m, &ticket)) SendOne(m, ticket);
}

void WorkerStore::SendOne(OutMsg& m, const Queue::Ticket& ticket) {
  const uint64_t id = next_req_++;
  m.h.req_id = id;
  Outstanding o;
  o.op = m.op;
  o.waiter = m.waiter;
  o.dest = m.dest;
  o.part = m.part;
  o.type = static_cast<MsgType>(m.h.type);
  o.ticket = ticket;
  double t = cfg_.timeout_sec > 0 ? cfg_.timeout_sec + cfg_.heartbeat_timeout_sec + 2 : 0;
  o.deadline = DeadlineAfter(t);
  {
    bool sched_dead;
    {
      std::lock_guard<std::mutex> lock(mu_);
      sched_dead = scheduler_dead_;
    }
    if (sched_dead) {
      CompletePart(o, KV_ERR_PEER_DEAD,
                   m.op ? std::string("the scheduler is dead; the job cannot go on")
                        : StrFormat("%s: the scheduler is dead", MsgTypeName(m.h.type)),
                   nullptr);
      return;
    }
  }
  if (m.dest >= 0) {
    bool dead;
    {
      std::lock_guard<std::mutex> lock(mu_);
      dead = server_dead_[static_cast<size_t>(m.dest)];
    }
    if (dead) {
      CompletePart(o, KV_ERR_PEER_DEAD, StrFormat("server %d is dead", m.dest), nullptr);
      return;
    }
  }
  const bool needs_reply = !(m.dest < 0 && m.h.type == static_cast<uint16_t>(MsgType::kHeartbeat));
  if (needs_reply) outstanding_.emplace(id, o);
  zmq::socket_t& sock = m.dest < 0 ? sched_ : servers_[static_cast<size_t>(m.dest)];
  if (cfg_.verbose >= 2) {
    Log("send %s%s%s to %s", MsgTypeName(m.h.type), m.op ? " of key " : "",
        m.op ? m.op->meta->display.c_str() : "",
        m.dest < 0 ? "the scheduler" : NodeName(Role::kServer, m.dest).c_str());
  }
  if (!SendMessage(sock, nullptr, m.h, m.str, m.payload) && needs_reply) {
    Outstanding failed = std::move(outstanding_[id]);
    outstanding_.erase(id);
    CompletePart(failed, KV_ERR_NETWORK, StrFormat("sending %s failed", MsgTypeName(m.h.type)), nullptr);
  }
}

void WorkerStore::HandleScheduler(Message& m) {
  const auto type = static_cast<MsgType>(m.h.type);
  switch (type) {
    case MsgType::kHeartbeatAck:
      return;
    case MsgType::kNodeDead: {
      Log("%s", m.str.c_str());
      const int rank = static_cast<int>(m.h.key);
      if (m.h.arg == static_cast<int32_t>(Role::kServer) && rank >= 0 && rank < num_servers_) {
        {
          std::lock_guard<std::mutex> lock(mu_);
          server_dead_[static_cast<size_t>(rank)] = true;
        }
        FailServer(rank, KV_ERR_PEER_DEAD, m.str);
      } else if (m.h.arg == static_cast<int32_t>(Role::kWorker) && rank >= 0 && rank < num_workers_) {
        std::lock_guard<std::mutex> lock(mu_);
        worker_dead_[static_cast<size_t>(rank)] = true;
      }
      return;
    }
    case MsgType::kAbort:
      Log("the scheduler aborted the job: %s", m.str.c_str());
      FailAll(KV_ERR_PEER_DEAD, "the scheduler aborted the job: " + m.str);
      return;
    case MsgType::kBarrierDone:
    case MsgType::kFinishAck:
    case MsgType::kQueryDeadReply: {
      auto it = outstanding_.find(m.h.req_id);
      if (it == outstanding_.end() || it->second.dest != -1) {
        LogDropped("dropped %s for unknown request %" PRIu64, MsgTypeName(m.h.type), m.h.req_id);
        return;
      }
      Outstanding o = std::move(it->second);
      outstanding_.erase(it);
      if (o.waiter) {
        o.waiter->Complete(m.h.status, m.str, type == MsgType::kQueryDeadReply ? m.h.key : 0);
      }
      return;
    }
    default:
      LogDropped("dropped unexpected %s from the scheduler", MsgTypeName(m.h.type));
  }
}

void WorkerStore::HandleReply(int server, Message& m) {
  if (m.h.type != static_cast<uint16_t>(MsgType::kReply)) {
    LogDropped("dropped unexpected %s from server %d", MsgTypeName(m.h.type), server);
    return;
  }
  auto it = outstanding_.find(m.h.req_id);
  if (it == outstanding_.end() || it->second.dest != server) {
    LogDropped("dropped a reply from server %d for unknown request %" PRIu64, server, m.h.req_id);
    return;
  }
  Outstanding o = std::move(it->second);
  outstanding_.erase(it);
  CompletePart(o, m.h.status, m.str, &m);
}

// A whole-value reply for a single CPU output becomes the output's storage instead of
// being copied into it, unless the output's data pointer was handed out (KVArrayGetData).
// On refusal the payload is left in `reply`.
bool WorkerStore::AdoptReply(Array* out, Message* reply) {
  if (!out->ctx().is_cpu()) return false;
  auto holder = std::make_shared<zmq::message_t>(std::move(reply->payload));
  if (out->AdoptStorage(std::shared_ptr<void>(holder, holder->data()))) return true;
  reply->payload = std::move(*holder);
  return false;
}

// Completes one part of an operation (or one control request). `reply` is the server's
// reply for successful pulls and pushpulls.

void WorkerStore::CompletePart(Outstanding& o, int status, const std::string& msg,
                               Message* reply) {
  queue_.Done(&o.ticket);
  if (!o.op) {
    if (o.waiter) o.waiter->Complete(status, msg);
    return;
  }
  Op& op = *o.op;
  const KeyMeta& km = *op.meta;
  if (status == 0 && (op.type == MsgType::kPull || op.type == MsgType::kPushPull)) {
    const size_t esize = DTypeSize(km.dtype);
    const size_t want = static_cast<size_t>(o.part.count) * esize;
    if (reply == nullptr || reply->payload.size() != want || reply->h.offset != o.part.offset ||
        reply->h.count != o.part.count || reply->h.dtype != km.dtype) {
      status = KV_ERR_PROTOCOL;
    } else if (want >= kZeroCopyMinBytes && km.parts.size() == 1 && op.outs.size() == 1 &&
               !op.staging && AdoptReply(op.outs[0], reply)) {
      // The received buffer became the output's storage.
    } else if (want > 0) {
      const size_t off = static_cast<size_t>(o.part.offset) * esize;
      if (op.staging) std::memcpy(static_cast<char*>(op.staging->data()) + off, reply->payload.data(), want);
      for (Array* out : op.outs) {
        if (out->ctx().is_cpu()) std::memcpy(static_cast<char*>(out->data()) + off, reply->payload.data(), want);
      }
    }
    if (status != 0) {
      op.status = status;
      op.msg = StrFormat("%s of key %s (server %d): malformed reply", OpVerb(op.type), km.display.c_str(),
                         o.dest);
    }
  } else if (status != 0 && op.status == 0) {
    op.status = status;
    op.msg = StrFormat("%s of key %s (server %d): %s", OpVerb(op.type), km.display.c_str(), o.dest,
                       msg.empty() ? "failed" : msg.c_str());
  }
  if (--op.remaining == 0) FinishOp(op);
}

void WorkerStore::FinishOp(Op& op) {
  if (op.status == 0 && op.staging) {
    for (Array* out : op.outs) {
      if (out->ctx().is_cpu()) continue;
      try {
        std::unique_ptr<Array> shaped = Array::Create(out->shape(), out->dtype(), Context{});
        std::memcpy(shaped->data(), op.staging->data(), op.staging->nbytes());
        CopyArray(out, *shaped);
      } catch (const Error& e) {
        op.status = e.code();
        op.msg = e.what();
      }
    }
  }
  {
    // The push ordering rule (file comment): every earlier push of the key has completed.
    std::lock_guard<std::mutex> lock(mu_);
    KeyMeta& km = *const_cast<KeyMeta*>(op.meta);
    if (op.push_seq != 0 && op.status != 0) {
      km.failed_push_seq = op.push_seq;
      km.failed_push_code = op.status;
      km.failed_push_msg = op.msg;
      push_failures_.push_back({&km, op.status, op.msg, op.type != MsgType::kPush});
    } else if (op.push_seq != 0 && op.push_seq > km.failed_push_seq) {
      km.failed_push_seq = 0;
    } else if (op.type == MsgType::kPull && op.status == 0 && km.failed_push_seq != 0 &&
               km.failed_push_seq <= op.after_pushes) {
      op.status = km.failed_push_code;
      op.msg = StrFormat("pull of key %s follows a failed push of the key: %s", km.display.c_str(),
                         km.failed_push_msg.c_str());
    }
  }
  for (Array* out : op.outs) out->EndPendingWrite(op.status, op.msg);
  if (op.payload) ReleaseOpRef(op.meta, *op.payload);
  if (op.waiter) op.waiter->Complete(op.status, op.msg);
  std::lock_guard<std::mutex> lock(mu_);
  --inflight_ops_;
  idle_cv_.notify_all();  // WaitAll, and pushes waiting for a send buffer
}

void WorkerStore::CheckDeadlines() {
  const double now = NowSec();
  std::vector<uint64_t> expired;
  for (const auto& e : outstanding_) {
    if (now > e.second.deadline) expired.push_back(e.first);
  }
  for (uint64_t id : expired) {
    Outstanding o = std::move(outstanding_[id]);
    outstanding_.erase(id);
    const std::string who = o.dest < 0 ? "the scheduler" : NodeName(Role::kServer, o.dest);
    const std::string what = o.op ? std::string() : StrFormat(" for %s", MsgTypeName(static_cast<uint16_t>(o.type)));
    CompletePart(o, KV_ERR_TIMEOUT,
                 StrFormat("worker %d: no reply from %s%s within %.0f s", rank_, who.c_str(), what.c_str(),
                           cfg_.timeout_sec + cfg_.heartbeat_timeout_sec + 2),
                 nullptr);
  }
}

void WorkerStore::FailServer(int server, int code, const std::string& why) {
  for (auto it = outstanding_.begin(); it != outstanding_.end();) {
    if (it->second.dest == server) {
      Outstanding o = std::move(it->second);
      it = outstanding_.erase(it);
      CompletePart(o, code, why, nullptr);
    } else {
      ++it;
    }
  }
}

void WorkerStore::FailAll(int code, const std::string& why) {
  // Queued but unsent requests first, then the outstanding ones.
  std::vector<OutMsg> queued = queue_.TakeAll();
  for (auto& m : queued) {
    Outstanding o;
    o.op = m.op;
    o.waiter = m.waiter;
    o.dest = m.dest;
    o.part = m.part;
    o.type = static_cast<MsgType>(m.h.type);
    CompletePart(o, code, why, nullptr);
  }
  std::unordered_map<uint64_t, Outstanding> all;
  all.swap(outstanding_);
  for (auto& e : all) CompletePart(e.second, code, why, nullptr);
}

}  // namespace

std::unique_ptr<Store> CreateWorkerStore(const std::string& type, const Config& cfg) {
  return std::make_unique<WorkerStore>(type, cfg);
}

}  // namespace dist
}  // namespace kvstore
