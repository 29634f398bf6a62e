// local_store.cc - the in-process stores (local, device): a key registry and per-key state.
//
// Invariants:
//  - Entries are created by Init and never removed before the store is destroyed, so an
//    Entry* found under the registry lock stays valid after the lock is released.
//  - Every operation on a key holds that entry's mutex for its whole duration; a call that
//    touches several keys locks their entries in ascending id order (no lock-order cycles).
//  - A call validates everything (keys, shapes, dtypes, outputs) before it writes anything.
//    After validation only the updater and device errors can fail; with an updater set the
//    new values are computed into per-key candidate buffers and committed (swapped in) only
//    when every key of the call succeeded, together with the optimizer state the updater
//    staged (UpdateTxn), so a failing call changes no stored value and no optimizer state.
//  - The values pushed for a key are summed in the dtype the updater receives
//    (Updater::RecvDType): the stored dtype, or float32 for float16 values under a
//    multi-precision optimizer, where each value is converted and the sum is never rounded
//    to float16. Without an updater the sum is the stored dtype's (assign). With gradient
//    compression on (device stores), dense float32 and float16 values are each quantised
//    and dequantised and summed in float32 instead (compressed_reduce.h); a push of only
//    row_sparse values of a key is not compressed (as in the reference).
//  - Stored values are dense. Row_sparse values (an init's are stored densified) and
//    row_sparse_pull go through store/row_sparse.h; a key whose values in one push mix
//    dense and row_sparse ones is summed dense (the row_sparse ones cast to dense first).
#include <algorithm>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "comm/comm.h"
#include "core/profile.h"
#include "optimizer/recv_sum.h"
#include "optimizer/states.h"
#include "core/row_sparse.h"
#include "store/callback_updater.h"
#include "store/compressed_reduce.h"
#include "store/row_sparse.h"
#include "store/store.h"

namespace kvstore {
namespace {

using compression::Compression;

struct Entry {
  int id = 0;               // the int key, or the internal id of a string key
  bool is_str = false;      // string key (str_key may then be empty) or int key
  std::string str_key;      // the string key
  Shape shape;              // fixed at init; readable without `mu`
  int dtype = 0;            // fixed at init; readable without `mu`
  std::mutex mu;            // serialises operations on this key
  std::unique_ptr<Array> value;
  std::unique_ptr<Array> merged;     // private copy of the pushed sum handed to the updater
  std::unique_ptr<Array> candidate;  // the updater's output, committed on success
  RowScratch rows_grad, rows_weight;  // lazy row_sparse pushes (store/row_sparse.h)
};

// Locks a set of entries in ascending id order; duplicates are locked once. The sort runs on
// (id, entry) pairs, so that its n log n comparisons read a contiguous array instead of
// dereferencing the entries (scattered over the heap: a cache miss each with many keys).
// The ids of one store's entries are distinct (a store has int keys or string keys).
class EntryLocks {
 public:
  explicit EntryLocks(const std::vector<Entry*>& entries) {
    std::vector<std::pair<int, Entry*>> order;
    order.reserve(entries.size());
    for (Entry* e : entries) order.emplace_back(e->id, e);
    std::sort(order.begin(), order.end());
    order.erase(std::unique(order.begin(), order.end()), order.end());
    locks_.reserve(order.size());
    for (const auto& o : order) locks_.emplace_back(o.second->mu);
  }

 private:
  std::vector<std::unique_lock<std::mutex>> locks_;
};

struct PushGroup {
  Entry* entry;
  std::vector<const Array*> vals;
  // Set by PlanPush: every value is row_sparse (pushed by RowSparsePush), or some are and
  // `vals` then points at their dense casts, which `densified` owns.
  bool row_sparse = false;
  std::vector<std::unique_ptr<Array>> densified;
};

struct PullItem {
  Entry* entry;
  Array* out;
};

class LocalStore final : public Store {
 public:
  LocalStore(std::string type, std::unique_ptr<Comm> comm) : Store(std::move(type)), comm_(std::move(comm)) {}

  void Init(const KeyList& keys, const Array* const* vals) override {
    CheckNotInUpdater();
    std::unique_lock<std::shared_mutex> registry(registry_mu_);
    CheckKind(keys);
    std::unordered_set<std::string> seen;
    for (int i = 0; i < keys.size; ++i) {
      KV_CHECK(seen.insert(keys.Name(i)).second, KV_ERR_INVALID_ARGUMENT,
               "key %s appears more than once in one init", keys.Name(i).c_str());
      KV_CHECK(FindLocked(keys, i) == nullptr, KV_ERR_DUPLICATE_KEY,
               "duplicate init of key %s: it is already initialised", keys.Name(i).c_str());
    }
    // Build every entry before publishing any, so a failed allocation changes nothing.
    std::vector<std::unique_ptr<Entry>> fresh;
    fresh.reserve(keys.size);
    int next_str_id = static_cast<int>(str_ids_.size());
    for (int i = 0; i < keys.size; ++i) {
      auto entry = std::make_unique<Entry>();
      if (keys.kind == KeyKind::kStr) {
        entry->is_str = true;
        entry->str_key = keys.strs[i];
        entry->id = next_str_id++;
      } else {
        entry->id = keys.ints[i];
      }
      entry->shape = vals[i]->shape();
      entry->dtype = vals[i]->dtype();
      const size_t nbytes = static_cast<size_t>(ShapeSize(vals[i]->shape())) * DTypeSize(vals[i]->dtype());
      entry->value = Array::Create(vals[i]->shape(), vals[i]->dtype(), comm_->MergeContext({vals[i]->ctx()}, nbytes));
      if (vals[i]->is_row_sparse()) DensifyInto(*vals[i], entry->value.get());
      else CopyArray(entry->value.get(), *vals[i]);
      fresh.push_back(std::move(entry));
    }
    for (auto& entry : fresh) {
      if (entry->is_str) str_ids_.emplace(entry->str_key, entry->id);
      const int id = entry->id;
      entries_.emplace(id, std::move(entry));
    }
    if (keys.size > 0) kind_ = keys.kind;
  }

  void Push(const KeyList& keys, const Array* const* vals, int) override {
    CheckNotInUpdater();
    std::vector<PushGroup> groups = PlanPush(keys, vals);
    EntryLocks locks(EntriesOf(groups));
    ExecutePush(keys.kind, groups);
  }

  void Pull(const KeyList& keys, Array* const* outs, int) override {
    CheckNotInUpdater();
    std::vector<PullItem> items = PlanPull(keys, outs);
    EntryLocks locks(EntriesOf(items));
    ExecutePull(items);
  }

  void PushPull(const KeyList& vkeys, const Array* const* vals, const KeyList& okeys, Array* const* outs,
                int) override {
    CheckNotInUpdater();
    std::vector<PushGroup> groups = PlanPush(vkeys, vals);
    std::vector<PullItem> items = PlanPull(okeys, outs);
    std::vector<Entry*> pushed = EntriesOf(groups);
    std::vector<Entry*> pulled = EntriesOf(items);
    std::sort(pushed.begin(), pushed.end());
    std::sort(pulled.begin(), pulled.end());
    pulled.erase(std::unique(pulled.begin(), pulled.end()), pulled.end());
    KV_CHECK(pushed == pulled, KV_ERR_INVALID_ARGUMENT,
             "pushpull: the output keys must be the same set as the pushed keys");
    EntryLocks locks(pushed);
    ExecutePush(vkeys.kind, groups);
    ExecutePull(items);
  }

  bool takes_row_sparse() const override { return true; }

  // Outputs get exactly the requested rows. Everything is checked and every block the call
  // needs is allocated before any output changes; an output whose storage can hold its new
  // rows keeps it (steady-state pulls allocate nothing).
  void RowSparsePull(const KeyList& keys, Array* const* outs, const Array* const* row_ids, int) override {
    CheckNotInUpdater();
    std::vector<PullItem> items = PlanPull(keys, outs, "row_sparse_pull");
    std::vector<std::vector<int64_t>> rows(items.size());
    for (size_t i = 0; i < items.size(); ++i) {
      rows[i] = UniqueRowIds(*row_ids[i], items[i].entry->shape[0], "row_sparse_pull of key " + KeyName(*items[i].entry));
    }
    EntryLocks locks(EntriesOf(items));
    std::vector<std::pair<std::shared_ptr<void>, size_t>> blocks(items.size());
    for (size_t i = 0; i < items.size(); ++i) {
      const Array& value = *items[i].entry->value;
      RequireHost(value, ("row_sparse_pull of key " + KeyName(*items[i].entry)).c_str());
      const size_t bytes = rows[i].size() * static_cast<size_t>(value.row_len()) * DTypeSize(value.dtype());
      Array* out = items[i].out;
      if (out->storage_bytes() >= bytes) {
        blocks[i] = {out->storage(), out->storage_bytes()};
      } else {
        blocks[i] = {Array::Create({static_cast<int64_t>(bytes)}, KV_UINT8, Context{})->storage(), bytes};
      }
    }
    for (size_t i = 0; i < items.size(); ++i) {
      GatherRows(*items[i].entry->value, rows[i].data(), static_cast<int64_t>(rows[i].size()), blocks[i].first.get());
      items[i].out->ReplaceRows(std::move(rows[i]), std::move(blocks[i].first), blocks[i].second);
    }
  }

  void SetUpdater(std::shared_ptr<Updater> updater) override {
    std::shared_ptr<Updater> old;
    {
      std::lock_guard<std::mutex> lock(updater_mu_);
      old = std::move(updater_);
      updater_ = std::move(updater);
    }
    // `old` is released here or by the last push still running it.
  }

  void SetStrUpdater(std::shared_ptr<Updater> updater) override {
    std::shared_ptr<Updater> old;
    {
      std::lock_guard<std::mutex> lock(updater_mu_);
      old = std::move(str_updater_);
      str_updater_ = std::move(updater);
    }
  }

  // Only the device stores compress (compressed_reduce.h); the others refuse (store.h).
  void SetGradientCompression(const std::optional<compression::Compression>& c) override {
    if (type().find("device") == std::string::npos) return Store::SetGradientCompression(c);
    compression_.Set(c);
  }

  // The state file's keys are the optimizer's; their weights' shapes are the entries'.
  void SaveOptimizerStates(const std::string& path) override {
    CheckNotInUpdater();
    optimizer::StatesFile file;
    {
      std::shared_lock<std::shared_mutex> registry(registry_mu_);
      std::shared_ptr<Updater> updater = CurrentUpdater(kind_);
      optimizer::StateHolder* holder = HolderOf(updater.get(), "save_optimizer_states");
      EntryLocks locks(AllEntriesLocked());  // no update runs until the copy is taken
      file.optimizer = holder->OptimizerName();
      file.spec = holder->Spec();
      file.keys = holder->SaveStates();
      for (optimizer::KeyRecord& r : file.keys) {
        const Entry* e = FindRecordLocked(r);
        KV_CHECK(e != nullptr, KV_ERR_INTERNAL, "the optimizer holds state for key %s, which store \"%s\" does not have",
                 r.Name().c_str(), type().c_str());
        r.shape = e->shape;
        for (optimizer::StateArray& a : r.arrays) a.shape = e->shape;
      }
    }
    optimizer::WriteStatesFile(path, file);
  }

  // Everything is checked (file, optimizer, keys, dtypes, shapes) before any state changes.
  void LoadOptimizerStates(const std::string& path) override {
    CheckNotInUpdater();
    {
      std::shared_lock<std::shared_mutex> registry(registry_mu_);
      std::shared_ptr<Updater> updater = CurrentUpdater(kind_);
      HolderOf(updater.get(), "load_optimizer_states");  // NOT_SUPPORTED before the file is read
    }
    optimizer::StatesFile file = optimizer::ReadStatesFile(path);
    std::shared_lock<std::shared_mutex> registry(registry_mu_);
    std::shared_ptr<Updater> updater = CurrentUpdater(kind_);
    optimizer::StateHolder* holder = HolderOf(updater.get(), "load_optimizer_states");
    for (const optimizer::KeyRecord& r : file.keys) {
      const Entry* e = FindRecordLocked(r);
      KV_CHECK(kind_ == KeyKind::kNone || (r.is_str == (kind_ == KeyKind::kStr)), KV_ERR_KEY_KIND_MISMATCH,
               "optimizer states file '%s' has %s keys but store \"%s\" uses %s keys", path.c_str(),
               r.is_str ? "string" : "int", type().c_str(), kind_ == KeyKind::kStr ? "string" : "int");
      KV_CHECK(e != nullptr, KV_ERR_UNKNOWN_KEY,
               "optimizer states file '%s' has state for key %s, which is not initialised in store \"%s\"",
               path.c_str(), r.Name().c_str(), type().c_str());
      KV_CHECK(r.dtype == e->dtype, KV_ERR_DTYPE_MISMATCH,
               "optimizer states file '%s': key %s was saved for a %s weight but the stored value is %s",
               path.c_str(), r.Name().c_str(), DTypeName(r.dtype), DTypeName(e->dtype));
      KV_CHECK(r.shape == e->shape, KV_ERR_SHAPE_MISMATCH,
               "optimizer states file '%s': key %s was saved for a weight of shape %s but the stored value has shape %s",
               path.c_str(), r.Name().c_str(), ShapeToString(r.shape).c_str(), ShapeToString(e->shape).c_str());
    }
    EntryLocks locks(AllEntriesLocked());  // no update runs while the state is replaced
    holder->LoadStates(&file, path, true);
  }

  ~LocalStore() override {
    // Release callback registrations before the entries (free hooks may inspect nothing of
    // ours, but keep the order deterministic: callbacks first, then data).
    updater_.reset();
    str_updater_.reset();
  }

 private:
  void CheckNotInUpdater() const {
    KV_CHECK(!UpdaterScope::Active(this), KV_ERR_INVALID_ARGUMENT,
             "a data call on store \"%s\" was made from inside its own updater", type().c_str());
  }

  // Requires registry_mu_ (either mode).
  void CheckKind(const KeyList& keys) const {
    if (kind_ == KeyKind::kNone || keys.size == 0 || keys.kind == kind_) return;
    KV_FAIL(KV_ERR_KEY_KIND_MISMATCH, "key %s is a%s key but this store uses %s keys; mixed key kinds are not allowed",
            keys.Name(0).c_str(), keys.kind == KeyKind::kStr ? " string" : "n int",
            kind_ == KeyKind::kStr ? "string" : "int");
  }

  // The updater a push of `kind` keys runs.
  std::shared_ptr<Updater> CurrentUpdater(KeyKind kind) {
    std::lock_guard<std::mutex> lock(updater_mu_);
    return (kind == KeyKind::kStr && str_updater_) ? str_updater_ : updater_;
  }

  // The built-in optimizer behind `updater`; NOT_SUPPORTED for none or a callback updater.
  optimizer::StateHolder* HolderOf(Updater* updater, const char* what) const {
    auto* holder = dynamic_cast<optimizer::StateHolder*>(updater);
    KV_CHECK(holder != nullptr, KV_ERR_NOT_SUPPORTED,
             "%s: store \"%s\" has %s; only a built-in optimizer (set_optimizer) keeps state the "
             "store can save (a callback updater's state is its own)", what, type().c_str(),
             updater ? "a callback updater" : "no optimizer");
    return holder;
  }

  // Requires registry_mu_ (either mode).
  std::vector<Entry*> AllEntriesLocked() const {
    std::vector<Entry*> all;
    all.reserve(entries_.size());
    for (const auto& entry : entries_) all.push_back(entry.second.get());
    return all;
  }

  // Requires registry_mu_ (either mode). The entry of a states-file key, or nullptr.
  Entry* FindRecordLocked(const optimizer::KeyRecord& r) const {
    if (r.is_str != (kind_ == KeyKind::kStr)) return nullptr;
    int id = r.key;
    if (r.is_str) {
      auto it = str_ids_.find(r.str_key);
      if (it == str_ids_.end()) return nullptr;
      id = it->second;
    }
    auto it = entries_.find(id);
    return it == entries_.end() ? nullptr : it->second.get();
  }

  // Requires registry_mu_ (either mode). nullptr when the key is not initialised.
  Entry* FindLocked(const KeyList& keys, int i) const {
    int id;
    if (keys.kind == KeyKind::kStr) {
      auto it = str_ids_.find(keys.strs[i]);
      if (it == str_ids_.end()) return nullptr;
      id = it->second;
    } else {
      id = keys.ints[i];
    }
    auto it = entries_.find(id);
    return it == entries_.end() ? nullptr : it->second.get();
  }

  std::vector<Entry*> Lookup(const KeyList& keys) const {
    std::shared_lock<std::shared_mutex> registry(registry_mu_);
    CheckKind(keys);
    std::vector<Entry*> found(static_cast<size_t>(keys.size));
    for (int i = 0; i < keys.size; ++i) {
      found[i] = FindLocked(keys, i);
      KV_CHECK(found[i] != nullptr, KV_ERR_UNKNOWN_KEY, "key %s is not initialised in store \"%s\" (call init first)",
               keys.Name(i).c_str(), type().c_str());
    }
    return found;
  }

  static std::string KeyName(const Entry& e) {
    return e.is_str ? "\"" + e.str_key + "\"" : std::to_string(e.id);
  }

  // Groups the values by key (first-appearance order) and checks them against the stored
  // shape and dtype, which never change after init.
  std::vector<PushGroup> PlanPush(const KeyList& keys, const Array* const* vals) const {
    std::vector<Entry*> entries = Lookup(keys);
    std::vector<PushGroup> groups;
    // Group position by entry; a linear scan is cheapest for the usual few keys, an index
    // keeps pushes of many keys (one per model parameter) linear.
    constexpr size_t kScanLimit = 16;
    std::unordered_map<Entry*, size_t> index;
    for (int i = 0; i < keys.size; ++i) {
      Entry* e = entries[i];
      if (e->shape != vals[i]->shape() || e->dtype != vals[i]->dtype()) {  // message built on failure only
        CheckShapeDType(e->shape, e->dtype, *vals[i], "push to key " + KeyName(*e));
      }
      size_t pos = groups.size();
      if (groups.size() <= kScanLimit) {
        for (size_t g = 0; g < groups.size(); ++g) {
          if (groups[g].entry == e) pos = g;
        }
      } else {
        if (index.empty()) {
          for (size_t g = 0; g < groups.size(); ++g) index.emplace(groups[g].entry, g);
        }
        pos = index.emplace(e, groups.size()).first->second;
      }
      if (pos == groups.size()) groups.push_back(PushGroup{e, {vals[i]}, false, {}});
      else groups[pos].vals.push_back(vals[i]);
    }
    for (PushGroup& g : groups) PlanStorage(&g);
    return groups;
  }

  // Marks row_sparse groups (RowSparsePush checks their value is in host memory, under the
  // key's lock); a mixed group is summed from dense casts.
  void PlanStorage(PushGroup* g) const {
    size_t sparse = 0;
    for (const Array* v : g->vals) sparse += v->is_row_sparse() ? 1 : 0;
    if (sparse == 0) return;
    if (sparse == g->vals.size()) {
      g->row_sparse = true;
      return;
    }
    for (const Array*& v : g->vals) {
      if (!v->is_row_sparse()) continue;
      g->densified.push_back(CastStorage(*v, KV_STYPE_DEFAULT));
      v = g->densified.back().get();
    }
  }

  std::vector<PullItem> PlanPull(const KeyList& keys, Array* const* outs, const char* what = "pull") const {
    std::vector<Entry*> entries = Lookup(keys);
    std::vector<PullItem> items;
    items.reserve(entries.size());
    for (int i = 0; i < keys.size; ++i) {
      Entry* e = entries[i];
      if (e->shape != outs[i]->shape() || e->dtype != outs[i]->dtype()) {
        CheckShapeDType(e->shape, e->dtype, *outs[i], std::string(what) + " of key " + KeyName(*e));
      }
      items.push_back(PullItem{e, outs[i]});
    }
    return items;
  }

  template <typename T>
  static std::vector<Entry*> EntriesOf(const std::vector<T>& list) {
    std::vector<Entry*> out;
    out.reserve(list.size());
    for (const T& item : list) out.push_back(item.entry);
    return out;
  }

  // Entries of `groups` are locked by the caller. Row-sparse keys are prepared first (they
  // may fail), then the dense keys run; values and state are committed only at the end.
  void ExecutePush(KeyKind kind, std::vector<PushGroup>& groups) {
    std::shared_ptr<Updater> updater = CurrentUpdater(kind);
    std::shared_ptr<GradientCompression::State> gc = compression_.Current();
    // Declared after `updater`: the staged state lives in the updater.
    UpdateTxn txn;
    std::vector<RowSparsePush> sparse;
    for (PushGroup& g : groups) {
      if (!g.row_sparse) continue;
      Entry* e = g.entry;
      CheckHostValue(*e->value, KeyName(*e));
      sparse.emplace_back(g.vals, &e->value, &e->candidate, &e->merged, &e->rows_grad, &e->rows_weight);
      sparse.back().Prepare(this, updater.get(), e->id, e->is_str ? e->str_key.c_str() : nullptr, &txn);
    }
    if (!updater) {  // assign: nothing after the row_sparse sums can fail, write in place
      for (PushGroup& g : groups) {
        if (!g.row_sparse) Sum(gc.get(), g, g.entry->value.get());
      }
    } else {
      UpdateDense(*updater, groups, gc.get(), &txn);
    }
    // Every key succeeded: the values and the optimizer state are committed together.
    for (PushGroup& g : groups) {
      if (updater && !g.row_sparse) std::swap(g.entry->value, g.entry->candidate);
    }
    for (RowSparsePush& p : sparse) p.Commit();
    txn.Commit();
  }

  // Runs `updater` on a scratch copy of each dense key's value (its `candidate`).
  void UpdateDense(Updater& updater, std::vector<PushGroup>& groups, GradientCompression::State* gc,
                   UpdateTxn* txn) {
    for (PushGroup& g : groups) {
      if (g.row_sparse) continue;
      Entry* e = g.entry;
      const Array& v = *e->value;
      // The updater may want the sum in another dtype (RecvDType: float32 for float16 values
      // under multi_precision); that sum is formed on the host, so its buffer lives there.
      const int recv_dtype = updater.RecvDType(v.dtype());
      KV_CHECK(recv_dtype == v.dtype() || (recv_dtype == KV_FLOAT32 && v.dtype() == KV_FLOAT16),
               KV_ERR_INTERNAL, "key %s: the updater asks for %s sums of %s values", KeyName(*e).c_str(),
               DTypeName(recv_dtype), DTypeName(v.dtype()));
      if (!e->merged || e->merged->dtype() != recv_dtype) {
        e->merged = Array::Create(v.shape(), recv_dtype, recv_dtype == v.dtype() ? v.ctx() : Context{});
      }
      if (!e->candidate) e->candidate = Array::Create(v.shape(), v.dtype(), v.ctx());
    }
    for (PushGroup& g : groups) {
      if (g.row_sparse) continue;
      Entry* e = g.entry;
      if (e->merged->dtype() == e->dtype || (gc && Compression::Compresses(e->dtype))) {
        Sum(gc, g, e->merged.get());
      } else {  // each value converted, then summed in the updater's dtype (updater.h)
        std::vector<std::unique_ptr<Array>> staged;
        const std::vector<const void*> srcs = HostAddresses(g.vals, &staged);
        optimizer::SumToFloat32(srcs.data(), static_cast<int>(srcs.size()), e->dtype,
                                static_cast<float*>(e->merged->data()), e->merged->size());
      }
      CopyArray(e->candidate.get(), *e->value);
      UpdaterScope scope(this);
      KV_PROFILE_SCOPE("apply", KeyName(*e), static_cast<int64_t>(e->merged->nbytes()), profile::Stat::kApply);
      updater.Update(e->id, e->is_str ? e->str_key.c_str() : nullptr, e->merged.get(), e->candidate.get(), txn);
    }
  }

  // dst <- the sum of g's values: compressed (in float32, compressed_reduce.h) when `gc` is
  // set and compresses the key's dtype, else by the comm in dst's dtype (the key's).
  void Sum(GradientCompression::State* gc, const PushGroup& g, Array* dst) {
    KV_PROFILE_SCOPE("reduce", KeyName(*g.entry), static_cast<int64_t>(dst->nbytes()), profile::Stat::kReduce);
    if (gc && Compression::Compresses(g.entry->dtype)) gc->Reduce(g.entry, g.vals, dst);
    else comm_->Reduce(g.vals, dst);
  }

  void ExecutePull(const std::vector<PullItem>& items) {
    for (const PullItem& item : items) {
      KV_PROFILE_SCOPE("copy out", KeyName(*item.entry), static_cast<int64_t>(item.out->nbytes()));
      CopyArray(item.out, *item.entry->value);
    }
  }

  std::unique_ptr<Comm> comm_;
  GradientCompression compression_;

  mutable std::shared_mutex registry_mu_;  // guards kind_, entries_ and str_ids_
  KeyKind kind_ = KeyKind::kNone;
  std::unordered_map<int, std::unique_ptr<Entry>> entries_;
  std::unordered_map<std::string, int> str_ids_;

  std::mutex updater_mu_;  // guards the two registrations
  std::shared_ptr<Updater> updater_;
  std::shared_ptr<Updater> str_updater_;
};

}  // namespace

std::unique_ptr<Store> CreateLocalStore(const std::string& type, std::unique_ptr<Comm> comm) {
  return std::make_unique<LocalStore>(type, std::move(comm));
}

}  // namespace kvstore
