// worker_store.h - the worker store's class (worker.cc), shared by the two files that define
// its members: worker.cc (construction, the key registry, control requests, the exit
// protocol) and worker_calls.cc (the data calls: init, push, pull, pushpull,
// row_sparse_pull). Internal to ps/; other layers reach it through CreateWorkerStore (ps.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "comm/comm.h"
#include "optimizer/optimizer.h"
#include "ps/clock.h"
#include "ps/compressed_pull.h"
#include "ps/op.h"
#include "ps/ps.h"
#include "ps/worker_groups.h"
#include "ps/worker_io.h"
#include "ps/worker_keys.h"

namespace kvstore {
namespace dist {

// A dist_* store in a worker process. Members marked "under registry_mu_" and the fields it
// guards are touched only with it held; the rest is safe from any application thread.
class WorkerStore : public Store, public Distributed {
 public:
  WorkerStore(const std::string& type, const Config& cfg);
  ~WorkerStore() override { Shutdown(); }

  void Init(const KeyList& keys, const Array* const* vals) override;
  void Push(const KeyList& keys, const Array* const* vals, int priority) override;
  void Pull(const KeyList& keys, Array* const* outs, int priority) override;
  void PushPull(const KeyList& vkeys, const Array* const* vals, const KeyList& okeys,
                Array* const* outs, int priority) override;
  bool takes_row_sparse() const override { return true; }
  void RowSparsePull(const KeyList& keys, Array* const* outs, const Array* const* row_ids, int priority) override;
  void SetUpdater(std::shared_ptr<Updater>) override {
    KV_FAIL(KV_ERR_NOT_SUPPORTED, "store \"%s\": a worker cannot run updaters; use KVStoreSetOptimizer "
            "(shipped to the servers) or set the updater in the server program", type().c_str());
  }
  void SetStrUpdater(std::shared_ptr<Updater> u) override { SetUpdater(std::move(u)); }
  void SetOptimizer(const std::string& spec) override;
  void SetGradientCompression(const std::optional<compression::Compression>& c) override { compressors_.Set(c); }
  void SaveOptimizerStates(const std::string& path) override;
  void LoadOptimizerStates(const std::string& path) override;
  int Rank() const override { return io_->rank(); }
  int GroupSize() const override { return io_->num_workers(); }
  void Barrier() override;
  void WaitAll() override { tracker_.WaitAll(); }
  int NumDeadNodes(int node_group, int timeout_sec) override;
  void SetBarrierBeforeExit(bool enabled) override { barrier_before_exit_ = enabled; }
  void Close() override;
  void SendCommandToServers(int head, const std::string& body) override;
  void RunServer(KVController, void*) override {
    KV_FAIL(KV_ERR_NOT_SUPPORTED, "store \"%s\" cannot run a server: create a dist store in a process "
            "whose DMLC_ROLE is server or scheduler", type().c_str());
  }
  Distributed* distributed() override { return this; }

 private:
  // Key registry (under registry_mu_).
  WorkerKey* FindKey(const KeyList& keys, int i);
  void CheckKind(const KeyList& keys);
  std::vector<WorkerKey*> AddKeys(const KeyList& keys, const Array* const* vals);
  template <typename A>
  KeyGroups<A> GroupByKey(const KeyList& keys, A* const* arrays, const char* op, const char* noun,
                          bool* row_sparse = nullptr);
  template <typename Groups>
  void CheckPushable(const Groups& groups) const;

  // Payloads and operations.
  PayloadRef Gather(WorkerKey* k, const Array* const* vals, size_t n);
  template <typename Groups, typename KeyOf, typename ValsOf>
  std::vector<PayloadRef> GatherAll(const Groups& groups, KeyOf key_of, ValsOf vals_of);
  void PartMessages(const std::shared_ptr<Op>& op, std::vector<OutMsg>* msgs) const;
  void StartDataOp(MsgType type, WorkerKey* k, PayloadRef payload, ArrayList<Array> outs,
                   const std::shared_ptr<Waiter>& waiter, SendBatch* batch);
  template <typename Groups>
  void PushGroupsOf(Groups& groups, int priority);
  void PushWithRowSparse(KeyGroups<const Array>& groups, int priority);
  template <typename Groups, typename KeyOf, typename OutsOf>
  void StartAll(MsgType type, Groups& groups, std::vector<PayloadRef>& payloads,
                KeyOf key_of, OutsOf outs_of, int priority);

  // Control requests.
  void ControlToScheduler(MsgType type, int arg, int64_t key, const std::shared_ptr<Waiter>& w);
  void ToAllServers(MsgType type, int arg, const std::string& str, const std::shared_ptr<Waiter>& w);
  double ControlDeadline() const { return DeadlineAfter(io_->RequestTimeout()); }
  // Runs the exit protocol once; returns the first error of draining or of the exit barrier
  // (nullptr when both succeeded).
  std::exception_ptr Shutdown();

  const Config cfg_;
  const bool sync_;
  std::unique_ptr<Comm> comm_;
  bool barrier_before_exit_ = true;
  bool shut_down_ = false;  // Shutdown ran (from Close or the destructor)

  Compressors compressors_;      // their own locks
  OpTracker tracker_;            // its own lock; outlives io_
  std::unique_ptr<WorkerIo> io_;

  std::mutex registry_mu_;  // guards the four below
  KeyKind kind_ = KeyKind::kNone;
  WorkerKeys keys_;  // records never move (worker_keys.h)
  uint64_t next_order_id_ = 1;
  std::optional<OptimizerSpec> optimizer_;  // the servers' optimizer, to vet pushed dtypes
  std::atomic<int> recv_f16_{KV_FLOAT16};    // its RecvDType of float16 keys (mp_push.h)
};

}  // namespace dist
}  // namespace kvstore
