// dist_store.cc - CreateDistStore: a worker store that joins the job, or, in a server or
// scheduler process, a handle whose RunServer turns the process into that node.
#include "ps/config.h"
#include "ps/ps.h"
#include "optimizer/optimizer.h"

namespace kvstore {
namespace dist {

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
  void SaveOptimizerStates(const std::string&) override { NotWorker("save_optimizer_states"); }
  void LoadOptimizerStates(const std::string&) override { NotWorker("load_optimizer_states"); }
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
