// dist_store.cc - CreateDistStore: a worker store that joins the job, or, in a server or
// scheduler process, a handle whose RunServer turns the process into that node.
#include <unistd.h>

#include <exception>
#include <random>

#include "ps/ps.h"
#include "optimizer/optimizer.h"

namespace kvstore {
namespace dist {

JoinResult JoinJob(zmq::socket_t& sched, const Config& cfg, const std::vector<int>& listen_ports) {
  // A routing id unique to this process and this store, so the scheduler can tell
  // registrations apart even when several nodes share a host.
  std::random_device rd;
  const std::string rid = StrFormat("%c:%s:%d:%08x", RoleName(cfg.role)[0], cfg.host.c_str(),
                                    static_cast<int>(getpid()), rd());
  sched.set(zmq::sockopt::routing_id, rid);
  const std::string ep = cfg.SchedulerEndpoint();
  try {
    sched.connect(ep);
  } catch (const zmq::error_t& e) {
    KV_FAIL(KV_ERR_NETWORK, "cannot connect to the scheduler at %s: %s", ep.c_str(), e.what());
  }
  WireHeader h = MakeHeader(MsgType::kRegister, cfg.role, -1);
  h.arg = cfg.requested_rank;
  const std::string addr = listen_ports.empty() ? cfg.host : cfg.host + ":" + FormatPorts(listen_ports);
  SendMessage(sched, nullptr, h, addr, OutPayload{});
  if (cfg.verbose >= 1) Log("registering with the scheduler at %s", ep.c_str());
  const double deadline = DeadlineAfter(cfg.timeout_sec);
  // On failure nothing queued for the scheduler is worth waiting for at close.
  struct NoLingerOnError {
    zmq::socket_t& s;
    int exceptions = std::uncaught_exceptions();
    ~NoLingerOnError() {
      if (std::uncaught_exceptions() > exceptions) s.set(zmq::sockopt::linger, 0);
    }
  } guard{sched};
  for (;;) {
    const double left = deadline - NowSec();
    if (left <= 0) {
      KV_FAIL(KV_ERR_TIMEOUT,
              "%s: no node table from the scheduler at %s within %.0f s (is the scheduler "
              "running, are DMLC_PS_ROOT_URI/DMLC_PS_ROOT_PORT right, and does this node have "
              "the job's KVSTORE_JOB_SECRET? the scheduler refuses nodes with another secret or "
              "none; the job needs %d workers and %d servers)",
              RoleName(cfg.role), ep.c_str(), cfg.timeout_sec, cfg.num_workers, cfg.num_servers);
    }
    zmq::pollitem_t item{static_cast<void*>(sched), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, std::chrono::milliseconds(static_cast<long>(std::min(left, 0.5) * 1000) + 1));
    Message m;
    while (RecvValidMessage(sched, false, "the scheduler", &m)) {
      if (m.h.type == static_cast<uint16_t>(MsgType::kAbort)) {
        KV_FAIL(m.h.status != 0 ? m.h.status : KV_ERR_NETWORK, "the scheduler refused this %s: %s",
                RoleName(cfg.role), m.str.c_str());
      }
      if (m.h.type != static_cast<uint16_t>(MsgType::kNodeTable)) continue;
      JoinResult j;
      ParseTable(m.str, &j.num_workers, &j.num_servers, &j.servers);
      j.rank = m.h.arg;
      const int group = cfg.role == Role::kWorker ? j.num_workers : j.num_servers;
      KV_CHECK(j.rank >= 0 && j.rank < group && j.num_workers == cfg.num_workers &&
                   j.num_servers == cfg.num_servers,
               KV_ERR_PROTOCOL,
               "the scheduler's node table (%d workers, %d servers, rank %d) does not match "
               "DMLC_NUM_WORKER=%d DMLC_NUM_SERVER=%d",
               j.num_workers, j.num_servers, j.rank, cfg.num_workers, cfg.num_servers);
      return j;
    }
  }
}

namespace {

// The store of a server or scheduler process: it collects the updater, optimizer and
// controller, and RunServer runs the node on the calling thread.
class RoleStore final : public Store, public Distributed {
 public:
  RoleStore(const std::string& type, Config cfg) : Store(type), cfg_(std::move(cfg)) {}

  void Init(const KeyList&, const Array* const*) override { NotWorker("init"); }
  void Push(const KeyList&, const Array* const*, int) override { NotWorker("push"); }
  void Pull(const KeyList&, Array* const*, int) override { NotWorker("pull"); }
  void PushPull(const KeyList&, const Array* const*, const KeyList&, Array* const*, int) override {
    NotWorker("pushpull");
  }
  void Broadcast(const KeyList&, const Array* const*, const KeyList&, Array* const*, int) override {
    NotWorker("broadcast");
  }
  void SetUpdater(std::shared_ptr<Updater> u) override {
    hooks_.updater = std::move(u);
    hooks_.optimizer_spec.clear();
  }
  void SetStrUpdater(std::shared_ptr<Updater> u) override { hooks_.str_updater = std::move(u); }
  void SetOptimizer(const std::string& spec) override {
    hooks_.updater = CreateOptimizer(spec);
    hooks_.optimizer_spec = spec;
  }
  Distributed* distributed() override { return this; }
  int Rank() const override { return 0; }
  int GroupSize() const override { return cfg_.num_workers; }
  void Barrier() override { NotWorker("barrier"); }
  int NumDeadNodes(int, int) override { return 0; }
  void SetBarrierBeforeExit(bool) override { NotWorker("set_barrier_before_exit"); }
  void SendCommandToServers(int, const std::string&) override { NotWorker("send_command_to_servers"); }
  void RunServer(KVController controller, void* user_data) override {
    KV_CHECK(!running_, KV_ERR_INVALID_ARGUMENT, "RunServer is already running on this store");
    running_ = true;
    hooks_.controller = controller;
    hooks_.controller_data = user_data;
    struct Reset {
      bool* r;
      ~Reset() { *r = false; }
    } reset{&running_};
    if (cfg_.role == Role::kScheduler) {
      RunScheduler(cfg_);
    } else {
      dist::RunServer(cfg_, &hooks_);
    }
  }

 private:
  [[noreturn]] void NotWorker(const char* what) {
    KV_FAIL(KV_ERR_NOT_SUPPORTED,
            "%s: this process is a %s (DMLC_ROLE=%s); only workers use the store's data "
            "functions, a %s calls KVStoreRunServer",
            what, RoleName(cfg_.role), RoleName(cfg_.role), RoleName(cfg_.role));
  }

  Config cfg_;
  ServerHooks hooks_;
  bool running_ = false;
};

}  // namespace
}  // namespace dist

std::unique_ptr<Store> CreateDistStore(const std::string& type) {
  dist::Config cfg = dist::Config::Load();
  if (cfg.role == dist::Role::kWorker) return dist::CreateWorkerStore(type, cfg);
  return std::make_unique<dist::RoleStore>(type, std::move(cfg));
}

}  // namespace kvstore
