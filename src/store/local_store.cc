// local_store.cc - the in-process stores (local, device): a key registry and per-key state.
//
// Invariants:
//  - Entries are created by Init and never removed before the store is destroyed, so an
//    Entry* found under the registry lock stays valid after the lock is released.
//  - Entries live in one EntryTable in init order (slot i is the i-th key initialised):
//    stable addresses, contiguous in chunks of 256. Int keys in the IntIndex's direct range
//    find their slot by direct index, the others through a hash map; string keys through
//    a StrIndex (open addressing, hashes stored), and a string key's internal id is its slot.
//  - Every operation on a key holds the lock of its slot's stripe (KeyStripes) for its whole
//    duration; a call that touches several keys takes their stripes in ascending order (no
//    lock-order cycles).
//  - A data call's per-key lists live in a CallScratch leased from the calling thread's pool
//    and returned with its capacity, so a steady stream of calls allocates nothing per key.
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
#include <array>
#include <cstring>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "comm/comm.h"
#include "core/profile.h"
#include "optimizer/recv_sum.h"
#include "optimizer/states.h"
#include "store/arg_gates.h"
#include "core/row_sparse.h"
#include "store/callback_updater.h"
#include "store/compressed_reduce.h"
#include "store/local_keys.h"
#include "store/row_sparse.h"
#include "store/store.h"

namespace kvstore {
namespace {

using compression::Compression;

// Entry, KeyStripes, CallScratch, ScratchLease, EntryTable: store/local_keys.h.
using namespace local_store;

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
    // Build every value before publishing any entry, so a failed allocation changes nothing.
    std::vector<std::unique_ptr<Array>> values;
    values.reserve(keys.size);
    for (int i = 0; i < keys.size; ++i) {
      const size_t nbytes = static_cast<size_t>(ShapeSize(vals[i]->shape())) * DTypeSize(vals[i]->dtype());
      values.push_back(Array::Create(vals[i]->shape(), vals[i]->dtype(), comm_->MergeContext({vals[i]->ctx()}, nbytes)));
      if (vals[i]->is_row_sparse()) DensifyInto(*vals[i], values.back().get());
      else CopyArray(values.back().get(), *vals[i]);
    }
    const size_t first = entries_.size();
    try {
      if (keys.kind == KeyKind::kInt) int_index_.Grow(keys, entries_.size());
      else str_index_.Reserve(static_cast<size_t>(keys.size));
      for (int i = 0; i < keys.size; ++i) {
        Entry& e = entries_.emplace_back();
        e.slot = static_cast<int>(entries_.size() - 1);
        if (keys.kind == KeyKind::kStr) {
          e.is_str = true;
          e.str_key = keys.strs[i];
          e.id = e.slot;
        } else {
          e.id = keys.ints[i];
        }
        e.dtype = vals[i]->dtype();
        e.shape = vals[i]->shape();
        e.ndim = static_cast<int>(e.shape.size());
        for (int j = 0; j < e.ndim && j < static_cast<int>(e.dims.size()); ++j) e.dims[j] = e.shape[j];
        e.value = std::move(values[i]);
        e.CacheValue();
        if (e.is_str) str_index_.Insert(StrIndex::Hash(e.str_key.data(), e.str_key.size()), e.slot);
        else int_index_.Insert(e.id, e.slot);
      }
    } catch (...) {  // out of memory: unpublish this call's entries
      while (entries_.size() > first) {
        Entry& e = entries_.back();
        if (e.is_str) str_index_.Erase(StrIndex::Hash(e.str_key.data(), e.str_key.size()), e.slot);
        else int_index_.Erase(e.id);
        entries_.pop_back();
      }
      throw;
    }
    if (keys.size > 0) kind_ = keys.kind;
  }

  // Push, Pull and PushPull hold their arguments' gates (arg_gates.h): entered by Lookup,
  // left when the call returns or throws.
  void Push(const KeyList& keys, const Array* const* vals, int) override {
    CheckNotInUpdater();
    ArgGates gates(vals, false, "push");
    ScratchLease s;
    PlanPush(keys, vals, &*s, nullptr, &gates);
    KeyStripes::Hold locks(stripes_, s->stripes);
    ExecutePush(keys.kind, s->groups.data(), s->groups.size());
  }

  void Pull(const KeyList& keys, Array* const* outs, int) override {
    CheckNotInUpdater();
    ArgGates gates(outs, true, "pull");
    ScratchLease s;
    PlanPull(keys, outs, &*s, nullptr, "pull", &gates);
    KeyStripes::Hold locks(stripes_, s->stripes);
    ExecutePull(s->items);
  }

  void PushPull(const KeyList& vkeys, const Array* const* vals, const KeyList& okeys, Array* const* outs,
                int) override {
    CheckNotInUpdater();
    ArgGates vgates(vals, false, "pushpull"), ogates(outs, true, "pushpull");
    ScratchLease s;
    PlanPush(vkeys, vals, &*s, &s->locks, &vgates);
    PlanPull(okeys, outs, &*s, &s->other_locks, "pull", &ogates);
    KV_CHECK(s->locks == s->other_locks, KV_ERR_INVALID_ARGUMENT,
             "pushpull: the output keys must be the same set as the pushed keys");
    KeyStripes::Hold locks(stripes_, s->stripes);  // the pulled keys are the pushed ones
    ExecutePush(vkeys.kind, s->groups.data(), s->groups.size());
    ExecutePull(s->items);
  }

  bool takes_row_sparse() const override { return true; }
  bool enters_array_gates() const override { return true; }

  // Outputs get exactly the requested rows. Everything is checked and every block the call
  // needs is allocated before any output changes; an output whose storage can hold its new
  // rows keeps it (steady-state pulls allocate nothing).
  void RowSparsePull(const KeyList& keys, Array* const* outs, const Array* const* row_ids, int) override {
    CheckNotInUpdater();
    ScratchLease s;
    PlanPull(keys, outs, &*s, nullptr, "row_sparse_pull");
    const std::vector<PullItem>& items = s->items;
    std::vector<std::vector<int64_t>> rows(items.size());
    for (size_t i = 0; i < items.size(); ++i) {
      rows[i] = UniqueRowIds(*row_ids[i], items[i].entry->shape[0], "row_sparse_pull of key " + KeyName(*items[i].entry));
    }
    KeyStripes::Hold locks(stripes_, s->stripes);
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
      KeyStripes::Set all;
      all.AddAll();
      KeyStripes::Hold locks(stripes_, all);  // no update runs until the copy is taken
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
    KeyStripes::Set all;
    all.AddAll();
    KeyStripes::Hold locks(stripes_, all);  // no update runs while the state is replaced
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

  // Requires registry_mu_ (either mode). The slot of the string key `key` (`len` bytes,
  // hash `hash`), or -1.
  int StrSlot(const char* key, size_t len, uint64_t hash) const {
    return str_index_.Find(hash, [&](int slot) {
      const std::string& k = entries_[static_cast<size_t>(slot)].str_key;
      return k.size() == len && std::memcmp(k.data(), key, len) == 0;
    });
  }

  // Requires registry_mu_ (either mode). The entry of a states-file key, or nullptr.
  Entry* FindRecordLocked(const optimizer::KeyRecord& r) {
    if (r.is_str != (kind_ == KeyKind::kStr)) return nullptr;
    int slot;
    if (r.is_str) {
      slot = StrSlot(r.str_key.data(), r.str_key.size(), StrIndex::Hash(r.str_key.data(), r.str_key.size()));
    } else {
      slot = int_index_.Find(r.key);
    }
    return slot < 0 ? nullptr : &entries_[slot];
  }

  // Requires registry_mu_ (either mode). nullptr when the key is not initialised.
  Entry* FindLocked(const KeyList& keys, int i) {
    int slot;
    if (keys.kind == KeyKind::kStr) {
      const size_t len = std::strlen(keys.strs[i]);
      slot = StrSlot(keys.strs[i], len, StrIndex::Hash(keys.strs[i], len));
    } else {
      slot = int_index_.Find(keys.ints[i]);
    }
    return slot < 0 ? nullptr : &entries_[slot];
  }

  // The entries of `keys` into s->entries and their slots into s->slots, each checked
  // (UNKNOWN_KEY) and against its array (args[i]: a value or an output) by `check`, which
  // throws on a mismatch. Returns whether the slots are strictly ascending (keys in init
  // order, each once: the lock order as it is). Prefetches the next keys' arrays and
  // entries, so that with many keys the misses overlap; everything a later pass needs of an
  // entry or array is read here, while its line is loaded.
  // With `gates`, each array's gate is entered (ArgGates::EnterNext) before it is read.
  template <typename Check>
  bool Lookup(const KeyList& keys, const Array* const* args, CallScratch* s, ArgGates* gates, Check&& check) {
    std::shared_lock<std::shared_mutex> registry(registry_mu_);
    CheckKind(keys);
    s->entries.resize(static_cast<size_t>(keys.size));
    s->slots.resize(static_cast<size_t>(keys.size));
    const bool direct = keys.kind == KeyKind::kInt;
    StrHashAhead hashes(keys, str_index_);
    bool ascending = true;
    int prev = -1;
    for (int i = 0; i < keys.size; ++i) {
      if (i + 2 * kAhead < keys.size) PrefetchW(args[i + 2 * kAhead]);  // its gate is written
      if (i + kAhead < keys.size) {
        Prefetch(args[i + kAhead]->shape().data());
        if (direct) {
          const int slot = int_index_.DirectSlot(keys.ints[i + kAhead]);
          if (slot >= 0) Prefetch(&entries_[static_cast<size_t>(slot)]);
        } else {
          const int slot = str_index_.HomeSlot(hashes[i + kAhead].hash);
          if (slot >= 0) {
            Prefetch(&entries_[static_cast<size_t>(slot)]);
            Prefetch(&entries_[static_cast<size_t>(slot)].str_key);
          }
        }
      }
      if (gates) gates->EnterNext(keys);
      Entry* e;
      if (direct) {
        e = FindLocked(keys, i);
      } else {
        hashes.Advance(i);
        const StrHashAhead::Hashed& h = hashes[i];
        const int slot = StrSlot(keys.strs[i], h.len, h.hash);
        e = slot < 0 ? nullptr : &entries_[static_cast<size_t>(slot)];
      }
      KV_CHECK(e != nullptr, KV_ERR_UNKNOWN_KEY, "key %s is not initialised in store \"%s\" (call init first)",
               keys.Name(i).c_str(), type().c_str());
      check(*e, *args[i]);
      s->entries[i] = e;
      s->slots[i] = e->slot;
      ascending &= e->slot > prev;
      prev = e->slot;
    }
    return ascending;
  }

  // Groups the values by key (first-appearance order) into s->groups, checks them against
  // the stored shape and dtype (which never change after init), and adds the keys' stripes
  // to s->stripes; the distinct entries in ascending slot go into `locks` when given
  // (PushPull compares the pushed and pulled sets). Keys that each appear once (the usual
  // call) make one group per value without any lookup structure. The values' gates are
  // entered by the lookup and waited on before anything reads their data (arg_gates.h).
  void PlanPush(const KeyList& keys, const Array* const* vals, CallScratch* s, std::vector<Entry*>* locks,
                ArgGates* gates) {
    bool any_sparse = false;
    const bool ascending = Lookup(keys, vals, s, gates, [&any_sparse](const Entry& e, const Array& v) {
      if (!e.Matches(v)) CheckShapeDType(e.shape, e.dtype, v, "push to key " + KeyName(e));  // message built on failure only
      any_sparse |= v.is_row_sparse();
    });
    gates->Wait();
    const std::vector<Entry*>& entries = s->entries;
    const size_t n = entries.size();
    if (!ascending && Repeats(s)) {
      GroupRepeats(entries, vals, s);
    } else {  // one group per value
      const Array* const* run = vals;
      if (any_sparse) {  // PlanStorage may replace values: the groups' runs are the scratch's
        s->grouped.assign(vals, vals + n);
        run = s->grouped.data();
      }
      s->groups.resize(n);
      for (size_t i = 0; i < n; ++i) s->groups[i] = PushGroup{entries[i], run + i, 1, false};
    }
    if (any_sparse) {
      for (PushGroup& g : s->groups) PlanStorage(&g, s);
    }
    if (locks != nullptr) {
      if (ascending) *locks = entries;
      else LockOrder(s->groups.data(), s->groups.size(), locks);
    }
    for (int slot : s->slots) s->stripes.Add(slot);
  }

  // The (entry, output) pairs of a pull into s->items, checked, their stripes into
  // s->stripes and, when given, the distinct entries into `locks` (LockOrder). (PushPull
  // plans its push first: s->entries is reused, the push's groups keep their entries.)
  void PlanPull(const KeyList& keys, Array* const* outs, CallScratch* s, std::vector<Entry*>* locks,
                const char* what = "pull", ArgGates* gates = nullptr) {
    const bool ascending = Lookup(keys, outs, s, gates, [what](const Entry& e, const Array& out) {
      if (!e.Matches(out)) CheckShapeDType(e.shape, e.dtype, out, std::string(what) + " of key " + KeyName(e));
    });
    if (gates) gates->Wait();
    s->items.resize(s->entries.size());
    for (int i = 0; i < keys.size; ++i) s->items[i] = PullItem{s->entries[i], outs[i]};
    if (locks != nullptr) {
      if (ascending) *locks = s->entries;
      else LockOrder(s->items.data(), s->items.size(), locks);
    }
    for (int slot : s->slots) s->stripes.Add(slot);
  }

  // Entries of `groups` are locked by the caller. Row-sparse keys are prepared first (they
  // may fail), then the dense keys run; values and state are committed only at the end.
  void ExecutePush(KeyKind kind, PushGroup* first, size_t n) {
    const Span<PushGroup> groups{first, n};
    std::shared_ptr<Updater> updater = CurrentUpdater(kind);
    std::shared_ptr<GradientCompression::State> gc = compression_.Current();
    // Declared after `updater`: the staged state lives in the updater.
    UpdateTxn txn;
    std::vector<RowSparsePush> sparse;
    for (PushGroup& g : groups) {
      if (!g.row_sparse) continue;
      Entry* e = g.entry;
      CheckHostValue(*e->value, KeyName(*e));
      sparse.emplace_back(g.List(), &e->value, &e->candidate, &e->merged, &e->rows_grad, &e->rows_weight);
      sparse.back().Prepare(this, updater.get(), e->id, e->is_str ? e->str_key.c_str() : nullptr, &txn);
    }
    if (!updater) {  // assign: nothing after the row_sparse sums can fail, write in place
      // A single small host value is copied straight into the value's data (Entry::data),
      // unless compression or the profiler (its per-key reduce counts) needs the full path.
      const bool direct = !gc && !profile::On();
      for (size_t i = 0; i < n; ++i) {
        PrefetchAhead(first, n, i);
        const PushGroup& g = first[i];
        if (!g.row_sparse && !(direct && g.n == 1 && SmallCopyIn(g.entry, *g.vals[0]))) {
          Sum(gc.get(), g, g.entry->value.get());
        }
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
    if (updater || !sparse.empty()) {
      for (PushGroup& g : groups) g.entry->CacheValue();
    }
  }

  // Runs `updater` on a scratch copy of each dense key's value (its `candidate`).
  void UpdateDense(Updater& updater, Span<PushGroup> groups, GradientCompression::State* gc,
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
        const std::vector<const void*> srcs = HostAddresses(g.List(), &staged);
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
    if (gc && Compression::Compresses(g.entry->dtype)) gc->Reduce(g.entry, g.List(), dst);
    else if (g.n != 1 || !SmallHostCopy(dst, *g.vals[0])) comm_->Reduce(g.List(), dst);
  }

  // A small host value is copied straight from its data (Entry::data) unless the profiler
  // records each key's copy.
  void ExecutePull(const std::vector<PullItem>& items) {
    const bool direct = !profile::On();
    for (size_t i = 0; i < items.size(); ++i) {
      PrefetchAhead(items.data(), items.size(), i);
      const PullItem& item = items[i];
      if (!direct || !SmallCopyOut(*item.entry, item.out)) {
        KV_PROFILE_SCOPE("copy out", KeyName(*item.entry), static_cast<int64_t>(item.out->nbytes()));
        if (!SmallHostCopy(item.out, *item.entry->value)) CopyArray(item.out, *item.entry->value);
      }
    }
  }

  std::unique_ptr<Comm> comm_;
  GradientCompression compression_;

  // Guards kind_, entries_ (the table: its elements' fields say what guards them) and the
  // three key -> slot indexes.
  mutable std::shared_mutex registry_mu_;
  KeyKind kind_ = KeyKind::kNone;
  EntryTable entries_;                         // by slot
  IntIndex int_index_;                         // int key -> slot
  StrIndex str_index_;                         // string key -> slot

  KeyStripes stripes_;     // the keys' locks

  std::mutex updater_mu_;  // guards the two registrations
  std::shared_ptr<Updater> updater_;
  std::shared_ptr<Updater> str_updater_;
};

}  // namespace

std::unique_ptr<Store> CreateLocalStore(const std::string& type, std::unique_ptr<Comm> comm) {
  return std::make_unique<LocalStore>(type, std::move(comm));
}

}  // namespace kvstore
