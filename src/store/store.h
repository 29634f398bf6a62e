// store.h - the abstract store behind KVStoreHandle, the key list passed to it, the calls
// only a distributed store answers, and the factory that knows every store type.
//
// src/c_api validates handles and pointers, then calls these methods; every method throws
// kvstore::Error on failure and must leave stored values unchanged when it does. Before a
// call, the caller has waited for the pending writes (and, for outputs, pending reads) of
// every array it passes and holds each one's call gate (c_api's CheckList), so a store
// never waits for them itself; code that drives a Store directly (tests/inprocess) must do
// the same. The exception: Push, Pull and PushPull of a store that enters_array_gates().
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compression/compression.h"
#include "core/array.h"
#include "core/call_gate.h"
#include "core/error.h"
#include "kvstore_features.h"
#include "optimizer/updater.h"

namespace kvstore { class Comm; }

namespace kvstore {

enum class KeyKind { kNone, kInt, kStr };

// The calls of a store that is part of a distributed job (a worker, or the handle of a
// server or scheduler process). c_api answers them for every other store: rank 0, group
// size 1, no-op barrier, no dead nodes, NOT_SUPPORTED for the rest.
class Distributed {
 public:
  virtual int Rank() const = 0;
  virtual int GroupSize() const = 0;
  virtual void Barrier() = 0;
  // Arguments were validated by c_api (a non-empty KV_NODE_* sum, timeout >= 0).
  virtual int NumDeadNodes(int node_group, int timeout_sec) = 0;
  virtual void SetBarrierBeforeExit(bool enabled) = 0;
  virtual void SendCommandToServers(int head, const std::string& body) = 0;
  // Turns the calling thread into the server or scheduler of the job, until it ends.
  virtual void RunServer(KVController controller, void* user_data) = 0;

 protected:
  ~Distributed() = default;
};

// A borrowed list of int or string keys.
struct KeyList {
  KeyKind kind = KeyKind::kInt;
  int size = 0;
  const int* ints = nullptr;
  const char* const* strs = nullptr;

  static KeyList Ints(int n, const int* k) { return {KeyKind::kInt, n, k, nullptr}; }
  static KeyList Strs(int n, const char* const* k) { return {KeyKind::kStr, n, nullptr, k}; }
  // "3" or "\"weight\"" for messages.
  std::string Name(int i) const;
};

}  // namespace kvstore

struct KVStore_ {
 public:
  explicit KVStore_(std::string type) : type_(std::move(type)) {}
  virtual ~KVStore_() = default;
  KVStore_(const KVStore_&) = delete;
  KVStore_& operator=(const KVStore_&) = delete;

  const std::string& type() const { return type_; }
  // The C-ABI calls running on this store (see call_gate.h).
  kvstore::CallGate& call_gate() { return call_gate_; }

  virtual void Init(const kvstore::KeyList& keys, const kvstore::Array* const* vals) = 0;
  virtual void Push(const kvstore::KeyList& keys, const kvstore::Array* const* vals,
                    int priority) = 0;
  virtual void Pull(const kvstore::KeyList& keys, kvstore::Array* const* outs, int priority) = 0;
  virtual void PushPull(const kvstore::KeyList& vkeys, const kvstore::Array* const* vals,
                        const kvstore::KeyList& okeys, kvstore::Array* const* outs,
                        int priority) = 0;
  // Init then Pull (the reference semantics).
  virtual void Broadcast(const kvstore::KeyList& vkeys, const kvstore::Array* const* vals,
                         const kvstore::KeyList& okeys, kvstore::Array* const* outs,
                         int priority);

  // Whether Init, Push, PushPull and Broadcast take row_sparse values (c_api refuses them
  // with NOT_SUPPORTED before calling a store that does not).
  virtual bool takes_row_sparse() const { return false; }

  // Whether Push, Pull and PushPull take their arrays as the caller passes them (non-null,
  // nothing else checked): they enter each array's call gate, wait for its pending writes
  // (and, for outputs, reads) and refuse a row_sparse output (NOT_SUPPORTED, the message
  // c_api's CheckStorage gives) themselves, inside their own passes over the arrays, and
  // leave every gate they entered before they return or throw (store/arg_gates.h). c_api
  // then skips its own pass over the arrays; a caller that did enter and wait (the profiled
  // path) may still call them. Such a store takes row_sparse values (takes_row_sparse).
  virtual bool enters_array_gates() const { return false; }

  // Replaces the rows of each row_sparse output outs[i] by exactly the rows of keys[i]'s
  // value named by the dense array row_ids[i] (validated here: any order, duplicates
  // allowed; kvstore.h KVStoreRowSparsePull). c_api has checked that every output is
  // row_sparse and every row_ids dense. The default throws NOT_SUPPORTED naming the store
  // type.
  virtual void RowSparsePull(const kvstore::KeyList& keys, kvstore::Array* const* outs,
                             const kvstore::Array* const* row_ids, int priority);

  // nullptr restores the default (assign).
  virtual void SetUpdater(std::shared_ptr<kvstore::Updater> updater) = 0;
  virtual void SetStrUpdater(std::shared_ptr<kvstore::Updater> updater) = 0;
  virtual void SetOptimizer(const std::string& spec);
  // Writes the state of the store's built-in optimizer to `path` / replaces it with the
  // state in `path` (docs/OPTIMIZER-STATES.md; kvstore.h says what is checked). Load checks
  // everything before it changes anything. The default throws NOT_SUPPORTED naming the
  // store type: only stores that hold their optimizer's state in this process override it.
  virtual void SaveOptimizerStates(const std::string& path);
  virtual void LoadOptimizerStates(const std::string& path);

  // Compresses this store's later pushes with `c` (std::nullopt: no compression again; the
  // residuals of the previous setting are dropped either way). Pushes already running finish
  // with the setting they started with. The default refuses with NOT_SUPPORTED naming the
  // store type: only the device and dist_* stores compress (kvstore.h says what).
  virtual void SetGradientCompression(const std::optional<kvstore::compression::Compression>&) {
    KV_FAIL(KV_ERR_NOT_SUPPORTED,
            "set_gradient_compression: store \"%s\" does not support gradient compression; the "
            "device, local_allreduce_device and dist_* stores do",
            type_.c_str());
  }

  // Returns when every operation this store has queued has finished; throws the first
  // error of those not yet reported.
  virtual void WaitAll() {}
  // The distributed calls, or nullptr for a store that is not part of a job.
  virtual kvstore::Distributed* distributed() { return nullptr; }
  // Finishes the store before KVStoreFree destroys it (a distributed worker drains pending
  // operations and runs its exit barrier here) and throws the first error of doing so. The
  // store is destroyed whether or not Close throws; the destructor must not repeat work
  // Close has done.
  virtual void Close() {}

 private:
  std::string type_;
  kvstore::CallGate call_gate_;
};

namespace kvstore {
using Store = ::KVStore_;

// Creates a store from a type name (case-insensitive). Throws INVALID_ARGUMENT listing the
// valid names, NOT_SUPPORTED for types this build lacks.
std::unique_ptr<Store> CreateStore(const std::string& type);

// In-process stores (src/store/local_store.cc). `comm` decides where sums happen.
std::unique_ptr<Store> CreateLocalStore(const std::string& type, std::unique_ptr<Comm> comm);

#if KVSTORE_USE_DIST
// src/ps: a worker that joins the job described by the DMLC_* environment, or a
// server/scheduler handle for KVStoreRunServer when DMLC_ROLE says so.
std::unique_ptr<Store> CreateDistStore(const std::string& type);
#endif
#if KVSTORE_USE_NCCL
// src/store/nccl_store.cc: the nccl store.
std::unique_ptr<Store> CreateNcclStore(const std::string& type);
#endif
}  // namespace kvstore
