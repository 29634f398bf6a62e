// nccl_store.cc - the `nccl` store: one process, several GPUs, sums and copies through NCCL.
//
// The store is a layer over the in-process store (CreateLocalStore with the CUDA device
// comm), which keeps the key registry, the updater, the locking and the all-or-nothing rules.
// This layer adds what NCCL is for:
//
//  - push: the values of each key are first summed on the GPUs themselves (several values on
//    one GPU with the fused kernel, CPU values copied onto the key's GPU), then the per-GPU
//    partial sums are reduced with ncclReduce onto the GPU that holds the stored value. All
//    keys of one call whose values span the same GPUs are launched in one NCCL group. The
//    inner store then receives one value per key and merges it (assign or updater); float16
//    keys under a multi-precision updater are the exception (see below).
//  - pull: the inner store copies the stored value into one output per key (on the stored
//    value's GPU when there is one), and ncclBroadcast fans it out to the outputs on the
//    other GPUs, again grouped per set of GPUs; outputs on the CPU or a second output on one
//    GPU are plain copies.
//  - pushpull without an updater, one value and one output per GPU of a set for every key
//    (the data-parallel case): ncclAllReduce from the values into the outputs, then the inner
//    store takes the sum from the output on the stored value's GPU.
//  - init: stored values are placed on the GPUs greedily by size (largest key of a call
//    first, each on the GPU with the fewest bytes so far), as the reference does.
//
// Everything is validated against the shapes and dtypes recorded at init before any NCCL
// work; a call on a key this layer does not know is passed to the inner store unchanged so
// that its error (unknown key, key kind) is the one reported.
//
// NCCL sums float16 in float16 (the CPU and CUDA kernels accumulate in float32), so float16
// results of more than two values can differ from the `local` store in the last bit. Under
// an updater that receives float16 keys in float32 (multi_precision), the values of such keys
// go to the inner store unsummed instead, which converts each and sums them in float32 in
// push order, as the `local` store does (SumsInner).
//
// Optimizer states: the inner store holds the optimizer, so save and load are its own.
#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "comm/comm.h"
#include "comm/nccl/collectives.h"
#include "comm/nccl/nccl_lib.h"
#include "core/array.h"
#include "core/cuda/cuda_kernels.h"
#include "core/cuda/cuda_util.h"
#include "core/error.h"
#include "store/callback_updater.h"
#include "store/store.h"
#include "optimizer/updater.h"

namespace kvstore {
namespace {

struct KeyMeta {
  Shape shape;
  int dtype = 0;
  int dev = 0;  // the GPU that holds the stored value
};

// The positions of one distinct key in a key list, in order of first appearance.
struct Group {
  std::string name;
  std::vector<int> idx;
};

std::vector<Group> GroupKeys(const KeyList& keys) {
  std::vector<Group> groups;
  std::unordered_map<std::string, size_t> where;
  for (int i = 0; i < keys.size; ++i) {
    std::string name = keys.Name(i);
    auto it = where.find(name);
    if (it == where.end()) {
      where.emplace(name, groups.size());
      groups.push_back(Group{std::move(name), {i}});
    } else {
      groups[it->second].idx.push_back(i);
    }
  }
  return groups;
}

// What the inner store is pushed: per group its sum (one entry), or for a group without a
// sum (the inner store sums it, see NcclStore::SumsInner) every value of the group in call
// order. Borrows the strings of `keys`.
struct InnerPush {
  std::vector<int> ints;
  std::vector<const char*> strs;
  std::vector<const Array*> vals;
  KeyList list;
  InnerPush(const KeyList& keys, const std::vector<Group>& groups,
            const std::vector<const Array*>& sums, const Array* const* values) {
    for (size_t g = 0; g < groups.size(); ++g) {
      for (int i : groups[g].idx) {
        if (keys.kind == KeyKind::kStr) strs.push_back(keys.strs[i]);
        else ints.push_back(keys.ints[i]);
        vals.push_back(sums[g] != nullptr ? sums[g] : values[i]);
        if (sums[g] != nullptr) break;
      }
    }
    const int n = static_cast<int>(vals.size());
    list = keys.kind == KeyKind::kStr ? KeyList::Strs(n, strs.data()) : KeyList::Ints(n, ints.data());
    list.kind = keys.kind;
  }
};

// A key list of one entry per group, borrowing the strings of `keys`.
struct DistinctKeys {
  std::vector<int> ints;
  std::vector<const char*> strs;
  KeyList list;
  DistinctKeys(const KeyList& keys, const std::vector<Group>& groups) {
    if (keys.kind == KeyKind::kStr) {
      for (const Group& g : groups) strs.push_back(keys.strs[g.idx[0]]);
      list = KeyList::Strs(static_cast<int>(strs.size()), strs.data());
    } else {
      for (const Group& g : groups) ints.push_back(keys.ints[g.idx[0]]);
      list = KeyList::Ints(static_cast<int>(ints.size()), ints.data());
    }
    list.kind = keys.kind;
  }
};

// Scratch arrays reused across calls, keyed by device, dtype and shape.
class ScratchPool {
 public:
  class Lease {
   public:
    Lease(ScratchPool* pool, std::unique_ptr<Array> a) : pool_(pool), array_(std::move(a)) {}
    Lease(Lease&&) = default;
    Lease& operator=(Lease&&) = default;
    ~Lease() {
      if (array_) pool_->Return(std::move(array_));
    }
    Array* get() const { return array_.get(); }

   private:
    ScratchPool* pool_;
    std::unique_ptr<Array> array_;
  };

  Lease Get(const Shape& shape, int dtype, int dev) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = free_.find(Key{dev, dtype, shape});
      if (it != free_.end() && !it->second.empty()) {
        std::unique_ptr<Array> a = std::move(it->second.back());
        it->second.pop_back();
        return Lease(this, std::move(a));
      }
    }
    return Lease(this, Array::Create(shape, dtype, Context{KV_GPU, dev}));
  }

 private:
  using Key = std::tuple<int, int, Shape>;
  void Return(std::unique_ptr<Array> a) {
    std::lock_guard<std::mutex> lock(mu_);
    free_[Key{a->ctx().dev_id, a->dtype(), a->shape()}].push_back(std::move(a));
  }

  std::mutex mu_;
  std::map<Key, std::vector<std::unique_ptr<Array>>> free_;
};

class NcclStore final : public Store {
 public:
  explicit NcclStore(const std::string& type) : Store(type) {
    KV_CHECK(cuda::DeviceCount() > 0, KV_ERR_DEVICE,
             "store type \"nccl\" needs at least one GPU: no GPU is usable here (%s)",
             cuda::NoDeviceReason().c_str());
    nccl::Lib();  // NCCL error when libnccl.so.2 is missing or unusable
    load_.assign(static_cast<size_t>(cuda::DeviceCount()), 0);
    inner_ = CreateLocalStore(type, CreateDeviceComm());
  }

  void Init(const KeyList& keys, const Array* const* vals) override {
    CheckNotInUpdater();
    // Place the largest values first, each on the GPU with the fewest bytes so far.
    std::vector<int> order(static_cast<size_t>(keys.size));
    for (int i = 0; i < keys.size; ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return vals[a]->nbytes() > vals[b]->nbytes(); });
    std::vector<int> dev(static_cast<size_t>(keys.size), 0);
    std::vector<long long> load;
    {
      std::lock_guard<std::mutex> lock(load_mu_);
      load = load_;
    }
    for (int i : order) {
      dev[i] = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
      load[dev[i]] += static_cast<long long>(vals[i]->nbytes());
    }
    // The inner store keeps its copy where the init value lives: hand it a value on the
    // chosen GPU.
    std::vector<std::unique_ptr<Array>> staged;
    std::vector<const Array*> placed(static_cast<size_t>(keys.size));
    for (int i = 0; i < keys.size; ++i) {
      const Array* v = vals[i];
      if (v->ctx() == Context{KV_GPU, dev[i]}) {
        placed[i] = v;
        continue;
      }
      staged.push_back(Array::Create(v->shape(), v->dtype(), Context{KV_GPU, dev[i]}));
      CopyArray(staged.back().get(), *v);
      placed[i] = staged.back().get();
    }
    inner_->Init(keys, placed.data());
    {
      std::lock_guard<std::mutex> lock(load_mu_);
      for (int i = 0; i < keys.size; ++i) load_[dev[i]] += static_cast<long long>(vals[i]->nbytes());
    }
    std::unique_lock<std::shared_mutex> lock(meta_mu_);
    for (int i = 0; i < keys.size; ++i) {
      meta_[keys.Name(i)] = KeyMeta{vals[i]->shape(), vals[i]->dtype(), dev[i]};
    }
  }

  void Push(const KeyList& keys, const Array* const* vals, int priority) override {
    CheckNotInUpdater();
    std::vector<Group> groups = GroupKeys(keys);
    std::vector<KeyMeta> metas;
    if (!LookupAll(groups, &metas)) return inner_->Push(keys, vals, priority);
    CheckValues(groups, metas, vals, "push to key ");
    std::vector<ScratchPool::Lease> leases;
    std::vector<const Array*> sums = ReduceGroups(groups, metas, vals, SumsInner(keys.kind, metas), &leases);
    InnerPush inner(keys, groups, sums, vals);
    inner_->Push(inner.list, inner.vals.data(), priority);
  }

  void Pull(const KeyList& keys, Array* const* outs, int priority) override {
    CheckNotInUpdater();
    std::vector<Group> groups = GroupKeys(keys);
    std::vector<KeyMeta> metas;
    if (!LookupAll(groups, &metas)) return inner_->Pull(keys, outs, priority);
    CheckValues(groups, metas, outs, "pull of key ");
    std::vector<Array*> primaries = Primaries(groups, metas, outs);
    DistinctKeys distinct(keys, groups);
    inner_->Pull(distinct.list, primaries.data(), priority);
    Distribute(groups, outs, primaries);
  }

  void PushPull(const KeyList& vkeys, const Array* const* vals, const KeyList& okeys,
                Array* const* outs, int priority) override {
    CheckNotInUpdater();
    std::vector<Group> vgroups = GroupKeys(vkeys);
    std::vector<Group> ogroups = GroupKeys(okeys);
    std::vector<KeyMeta> vmetas, ometas;
    if (vkeys.kind != okeys.kind || !LookupAll(vgroups, &vmetas) || !LookupAll(ogroups, &ometas)) {
      return inner_->PushPull(vkeys, vals, okeys, outs, priority);
    }
    CheckValues(vgroups, vmetas, vals, "push to key ");
    CheckValues(ogroups, ometas, outs, "pull of key ");
    std::vector<std::string> vnames, onames;
    for (const Group& g : vgroups) vnames.push_back(g.name);
    for (const Group& g : ogroups) onames.push_back(g.name);
    std::sort(vnames.begin(), vnames.end());
    std::sort(onames.begin(), onames.end());
    KV_CHECK(vnames == onames, KV_ERR_INVALID_ARGUMENT,
             "pushpull: the output keys must be the same set as the pushed keys");
    if (!HasUpdater(vkeys.kind) && TryAllReduce(vkeys, vgroups, vmetas, vals, ogroups, outs,
                                                priority)) {
      return;
    }
    std::vector<ScratchPool::Lease> leases;
    std::vector<const Array*> sums =
        ReduceGroups(vgroups, vmetas, vals, SumsInner(vkeys.kind, vmetas), &leases);
    std::vector<Array*> primaries = Primaries(ogroups, ometas, outs);
    InnerPush vinner(vkeys, vgroups, sums, vals);
    DistinctKeys odistinct(okeys, ogroups);
    inner_->PushPull(vinner.list, vinner.vals.data(), odistinct.list, primaries.data(), priority);
    Distribute(ogroups, outs, primaries);
  }

  void SetUpdater(std::shared_ptr<Updater> updater) override {
    const bool set = updater != nullptr;
    const bool f32 = set && updater->RecvDType(KV_FLOAT16) == KV_FLOAT32;
    inner_->SetUpdater(std::move(updater));
    has_updater_ = set;
    f32_sums_ = f32;
  }
  void SetStrUpdater(std::shared_ptr<Updater> updater) override {
    const bool set = updater != nullptr;
    const bool f32 = set && updater->RecvDType(KV_FLOAT16) == KV_FLOAT32;
    inner_->SetStrUpdater(std::move(updater));
    has_str_updater_ = set;
    str_f32_sums_ = f32;
  }

  // The built-in optimizer and its state live in the inner store (the state in host memory,
  // whatever GPU holds a weight), so saving and loading are the local store's, with its
  // checks and its file (docs/OPTIMIZER-STATES.md).
  void SaveOptimizerStates(const std::string& path) override {
    CheckNotInUpdater();
    inner_->SaveOptimizerStates(path);
  }
  void LoadOptimizerStates(const std::string& path) override {
    CheckNotInUpdater();
    inner_->LoadOptimizerStates(path);
  }

 private:
  // Whether pushes of this key kind run an updater (string keys fall back to the int one).
  bool HasUpdater(KeyKind kind) const {
    return has_updater_ || (kind == KeyKind::kStr && has_str_updater_);
  }

  // Per group, whether the inner store sums the values itself instead of NCCL: float16 keys
  // whose updater receives float32 (Updater::RecvDType: multi_precision), which must get
  // each value converted and the float32 sum in push order (optimizer/recv_sum.h), never a
  // float16 sum, nor a float32 sum in NCCL's order. The inner store forms it on the host,
  // where the updater runs anyway. (An updater set concurrently with the push may see
  // either rule; the inner store's sum is right under both.)
  std::vector<bool> SumsInner(KeyKind kind, const std::vector<KeyMeta>& metas) const {
    const bool f32 = (kind == KeyKind::kStr && has_str_updater_) ? str_f32_sums_.load() : f32_sums_.load();
    std::vector<bool> inner(metas.size());
    for (size_t g = 0; g < metas.size(); ++g) inner[g] = f32 && metas[g].dtype == KV_FLOAT16;
    return inner;
  }

  // PushPull without an updater where every key has one value and one output on each GPU
  // of the same set, which holds the stored value: one ncclAllReduce per key from the values
  // into the outputs (in place when they are the same arrays), then the inner store takes
  // the sum from the output on the stored value's GPU (a local copy). Returns false, having
  // done nothing, when a key does not fit; the general path then runs.
  bool TryAllReduce(const KeyList& vkeys, const std::vector<Group>& vgroups,
                    const std::vector<KeyMeta>& vmetas, const Array* const* vals,
                    const std::vector<Group>& ogroups, Array* const* outs, int priority) {
    std::unordered_map<std::string, size_t> out_group;
    for (size_t g = 0; g < ogroups.size(); ++g) out_group.emplace(ogroups[g].name, g);
    // The collectives of one group run concurrently: an output may only alias its own value.
    std::unordered_map<const void*, size_t> value_key;
    for (size_t g = 0; g < vgroups.size(); ++g) {
      for (int i : vgroups[g].idx) value_key.emplace(vals[i]->data(), g);
    }
    std::unordered_set<const void*> written;
    for (size_t g = 0; g < vgroups.size(); ++g) {
      for (int i : ogroups[out_group.at(vgroups[g].name)].idx) {
        const void* p = outs[i]->data();
        auto it = value_key.find(p);
        if ((it != value_key.end() && it->second != g) || !written.insert(p).second) return false;
      }
    }
    std::vector<nccl::Collective> ops;
    std::vector<const Array*> roots;
    for (size_t g = 0; g < vgroups.size(); ++g) {
      const KeyMeta& m = vmetas[g];
      const std::vector<int>& vidx = vgroups[g].idx;
      const std::vector<int>& oidx = ogroups[out_group.at(vgroups[g].name)].idx;
      if (vidx.size() < 2 || oidx.size() != vidx.size()) return false;
      std::map<int, std::pair<const Array*, Array*>> per_dev;  // GPU -> (value, output)
      for (int i : vidx) {
        const Context c = vals[i]->ctx();
        if (!c.is_gpu() || !per_dev.emplace(c.dev_id, std::make_pair(vals[i], nullptr)).second) {
          return false;
        }
      }
      for (int i : oidx) {
        const Context c = outs[i]->ctx();
        if (!c.is_gpu()) return false;
        auto it = per_dev.find(c.dev_id);
        if (it == per_dev.end() || it->second.second != nullptr) return false;
        it->second.second = outs[i];
      }
      auto root = per_dev.find(m.dev);
      if (root == per_dev.end()) return false;
      roots.push_back(root->second.second);
      nccl::Collective op;
      for (auto& [dev, pair] : per_dev) {
        op.devs.push_back(dev);
        op.bufs.push_back(const_cast<void*>(pair.first->data()));
        op.recv.push_back(pair.second->data());
      }
      op.count = static_cast<size_t>(root->second.second->size());
      op.dtype = m.dtype;
      if (op.count > 0) ops.push_back(std::move(op));
    }
    nccl::RunCollectives(cliques_, ops);
    DistinctKeys distinct(vkeys, vgroups);
    inner_->Push(distinct.list, roots.data(), priority);
    return true;
  }

  void CheckNotInUpdater() const {
    KV_CHECK(!UpdaterScope::Active(inner_.get()), KV_ERR_INVALID_ARGUMENT,
             "a data call on store \"%s\" was made from inside its own updater", type().c_str());
  }

  // False when a key is unknown here (the inner store then reports the error).
  bool LookupAll(const std::vector<Group>& groups, std::vector<KeyMeta>* metas) const {
    std::shared_lock<std::shared_mutex> lock(meta_mu_);
    metas->clear();
    for (const Group& g : groups) {
      auto it = meta_.find(g.name);
      if (it == meta_.end()) return false;
      metas->push_back(it->second);
    }
    return true;
  }

  template <typename ArrayPtr>
  static void CheckValues(const std::vector<Group>& groups, const std::vector<KeyMeta>& metas,
                          const ArrayPtr* arrays, const char* what) {
    for (size_t g = 0; g < groups.size(); ++g) {
      for (int i : groups[g].idx) {
        CheckShapeDType(metas[g].shape, metas[g].dtype, *arrays[i], what + groups[g].name);
      }
    }
  }

  // One array per group holding the sum of the group's values, on a GPU; nullptr for the
  // groups the inner store sums (`sums_inner`).
  std::vector<const Array*> ReduceGroups(const std::vector<Group>& groups,
                                         const std::vector<KeyMeta>& metas,
                                         const Array* const* vals,
                                         const std::vector<bool>& sums_inner,
                                         std::vector<ScratchPool::Lease>* leases) {
    std::vector<const Array*> sums(groups.size(), nullptr);
    std::vector<nccl::Collective> ops;
    for (size_t g = 0; g < groups.size(); ++g) {
      const KeyMeta& m = metas[g];
      if (sums_inner[g]) continue;
      if (groups[g].idx.size() == 1) {
        sums[g] = vals[groups[g].idx[0]];
        continue;
      }
      // Values per GPU; CPU values are copied onto the key's GPU first.
      std::map<int, std::vector<const Array*>> per_dev;
      for (int i : groups[g].idx) {
        const Array* v = vals[i];
        if (v->ctx().is_gpu()) {
          per_dev[v->ctx().dev_id].push_back(v);
          continue;
        }
        leases->push_back(scratch_.Get(m.shape, m.dtype, m.dev));
        CopyArray(leases->back().get(), *v);
        per_dev[m.dev].push_back(leases->back().get());
      }
      // One partial sum per GPU, with the fused kernel where a GPU has several values.
      std::vector<int> devs;
      std::vector<const Array*> partial;
      for (auto& [dev, list] : per_dev) {
        devs.push_back(dev);
        if (list.size() == 1) {
          partial.push_back(list[0]);
          continue;
        }
        leases->push_back(scratch_.Get(m.shape, m.dtype, dev));
        Array* out = leases->back().get();
        std::vector<const void*> ptrs;
        for (const Array* a : list) ptrs.push_back(a->data());
        cuda::DeviceGuard guard(dev);
        cuda::LaunchReduceSum(cuda::Stream(dev), m.dtype, ptrs.data(),
                              static_cast<int>(ptrs.size()), out->data(), out->size());
        cuda::SyncStream(dev);
        partial.push_back(out);
      }
      if (devs.size() == 1) {
        sums[g] = partial[0];
        continue;
      }
      // Reduce the partial sums onto the stored value's GPU (or the first one holding a
      // value), where the inner store's merge is then a local copy.
      const auto root_it = std::find(devs.begin(), devs.end(), m.dev);
      const int root = root_it != devs.end() ? static_cast<int>(root_it - devs.begin()) : 0;
      leases->push_back(scratch_.Get(m.shape, m.dtype, devs[root]));
      Array* out = leases->back().get();
      nccl::Collective op;
      op.devs = devs;
      for (const Array* p : partial) op.bufs.push_back(const_cast<void*>(p->data()));
      op.root_out = out->data();
      op.root = root;
      op.count = static_cast<size_t>(out->size());
      op.dtype = m.dtype;
      if (op.count > 0) ops.push_back(std::move(op));
      sums[g] = out;
    }
    nccl::RunCollectives(cliques_, ops);
    return sums;
  }

  // The output per group that the inner store fills: one on the stored value's GPU if the
  // caller gave one, else the first GPU output, else the first output.
  static std::vector<Array*> Primaries(const std::vector<Group>& groups,
                                       const std::vector<KeyMeta>& metas, Array* const* outs) {
    std::vector<Array*> primaries;
    for (size_t g = 0; g < groups.size(); ++g) {
      Array* pick = nullptr;
      for (int i : groups[g].idx) {
        if (outs[i]->ctx() == Context{KV_GPU, metas[g].dev}) {
          pick = outs[i];
          break;
        }
      }
      for (size_t k = 0; pick == nullptr && k < groups[g].idx.size(); ++k) {
        if (outs[groups[g].idx[k]]->ctx().is_gpu()) pick = outs[groups[g].idx[k]];
      }
      primaries.push_back(pick != nullptr ? pick : outs[groups[g].idx[0]]);
    }
    return primaries;
  }

  // Copies each group's primary output into the group's other outputs: one NCCL broadcast
  // per group to the first output on every other GPU, then plain copies for the rest.
  void Distribute(const std::vector<Group>& groups, Array* const* outs,
                         const std::vector<Array*>& primaries) {
    std::vector<nccl::Collective> ops;
    std::vector<std::pair<Array*, const Array*>> copies;  // (dst, src) after the broadcasts
    for (size_t g = 0; g < groups.size(); ++g) {
      Array* prim = primaries[g];
      const bool on_gpu = prim->ctx().is_gpu();
      std::map<int, Array*> first_on;  // GPU -> the output that receives the broadcast
      if (on_gpu) first_on[prim->ctx().dev_id] = prim;
      for (int i : groups[g].idx) {
        Array* out = outs[i];
        if (out == prim || out->data() == prim->data()) continue;
        if (on_gpu && out->ctx().is_gpu()) {
          auto [it, fresh] = first_on.emplace(out->ctx().dev_id, out);
          if (fresh || it->second->data() == out->data()) continue;
          copies.emplace_back(out, it->second);
        } else {
          copies.emplace_back(out, prim);
        }
      }
      if (first_on.size() > 1 && prim->size() > 0) {
        nccl::Collective op;
        op.broadcast = true;
        for (auto& [dev, out] : first_on) {
          if (out == prim) op.root = static_cast<int>(op.devs.size());
          op.devs.push_back(dev);
          op.bufs.push_back(out->data());
        }
        op.count = static_cast<size_t>(prim->size());
        op.dtype = prim->dtype();
        ops.push_back(std::move(op));
      }
    }
    nccl::RunCollectives(cliques_, ops);
    for (auto& [dst, src] : copies) CopyArray(dst, *src);
  }

  std::unique_ptr<Store> inner_;
  nccl::CliqueCache cliques_;  // destroyed before inner_: no collective is running then
  ScratchPool scratch_;

  std::mutex load_mu_;
  std::vector<long long> load_;  // bytes of stored values per GPU

  std::atomic<bool> has_updater_{false};
  std::atomic<bool> has_str_updater_{false};
  std::atomic<bool> f32_sums_{false};      // the updater receives float16 keys in float32
  std::atomic<bool> str_f32_sums_{false};  // the same for the string-key updater

  mutable std::shared_mutex meta_mu_;
  std::unordered_map<std::string, KeyMeta> meta_;
};

}  // namespace

std::unique_ptr<Store> CreateNcclStore(const std::string& type) {
  return std::make_unique<NcclStore>(type);
}

}  // namespace kvstore
