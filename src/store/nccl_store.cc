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
//    inner store then receives exactly one value per key and merges it (assign or updater).
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
// results of more than two values can differ from the `local` store in the last bit.
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

// One collective of a call: per rank of `devs` a buffer (send for reduce and all-reduce,
// receive for broadcast), the root rank and the element count.
struct Collective {
  std::vector<int> devs;  // sorted GPU ids: the clique
  std::vector<void*> bufs;
  void* root_out = nullptr;  // reduce: where the root receives the sum
  int root = 0;
  size_t count = 0;
  int dtype = 0;
  bool broadcast = false;
  std::vector<void*> recv;  // all-reduce only: per rank, where the sum lands
};

constexpr size_t kMaxGroupCalls = 1024;

// Launches the collectives, one NCCL group per clique, then waits for them.
void RunCollectives(nccl::CliqueCache& cliques, std::vector<Collective>& ops) {
  if (ops.empty()) return;
  const nccl::Api& api = nccl::Lib();
  std::stable_sort(ops.begin(), ops.end(),
                   [](const Collective& a, const Collective& b) { return a.devs < b.devs; });
  std::lock_guard<std::mutex> lock(cuda::DeviceSyncMutex());  // until the streams are idle
  std::vector<int> touched;
  // On failure, wait for the groups already launched: they may still write caller arrays.
  struct DrainOnError {
    std::vector<int>* devs;
    bool armed = true;
    ~DrainOnError() {
      if (!armed) return;
      for (int d : *devs) {
        int previous = -1;
        (void)cudaGetDevice(&previous);
        (void)cudaSetDevice(d);
        (void)cudaDeviceSynchronize();
        if (previous >= 0) (void)cudaSetDevice(previous);
      }
      (void)cudaGetLastError();
    }
  } drain{&touched};
  for (size_t begin = 0; begin < ops.size();) {
    // One group per clique, and at most kMaxGroupCalls NCCL calls per group (older NCCL
    // versions reject more than 2048).
    const size_t per_group = std::max<size_t>(1, kMaxGroupCalls / ops[begin].devs.size());
    size_t end = begin;
    while (end < ops.size() && end - begin < per_group && ops[end].devs == ops[begin].devs) ++end;
    const nccl::Clique& clique = cliques.Get(ops[begin].devs);
    touched.insert(touched.end(), clique.devs.begin(), clique.devs.end());
    std::vector<cudaStream_t> streams;
    for (int d : clique.devs) streams.push_back(cuda::Stream(d));
    nccl::Check(api.GroupStart(), "ncclGroupStart");
    ncclResult_t launched = ncclSuccess;
    for (size_t o = begin; o < end && launched == ncclSuccess; ++o) {
      const Collective& op = ops[o];
      const ncclDataType_t type = nccl::DataType(op.dtype);
      for (size_t r = 0; r < clique.devs.size() && launched == ncclSuccess; ++r) {
        const int rank = static_cast<int>(r);
        if (op.broadcast) {
          launched = api.Broadcast(op.bufs[r], op.bufs[r], op.count, type, op.root,
                                   clique.comms[r], streams[r]);
        } else if (!op.recv.empty()) {
          launched = api.AllReduce(op.bufs[r], op.recv[r], op.count, type, ncclSum,
                                   clique.comms[r], streams[r]);
        } else {
          launched = api.Reduce(op.bufs[r], rank == op.root ? op.root_out : nullptr, op.count,
                                type, ncclSum, op.root, clique.comms[r], streams[r]);
        }
      }
    }
    const ncclResult_t ended = api.GroupEnd();
    nccl::Check(launched, ops[begin].broadcast        ? "ncclBroadcast"
                          : !ops[begin].recv.empty() ? "ncclAllReduce"
                                                     : "ncclReduce");
    nccl::Check(ended, "ncclGroupEnd");
    begin = end;
  }
  std::sort(touched.begin(), touched.end());
  touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
  drain.armed = false;
  for (int d : touched) cuda::SyncStream(d);
}

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
    std::vector<const Array*> sums = ReduceGroups(groups, metas, vals, &leases);
    DistinctKeys distinct(keys, groups);
    inner_->Push(distinct.list, sums.data(), priority);
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
    std::vector<const Array*> sums = ReduceGroups(vgroups, vmetas, vals, &leases);
    std::vector<Array*> primaries = Primaries(ogroups, ometas, outs);
    DistinctKeys vdistinct(vkeys, vgroups), odistinct(okeys, ogroups);
    inner_->PushPull(vdistinct.list, sums.data(), odistinct.list, primaries.data(), priority);
    Distribute(ogroups, outs, primaries);
  }

  void SetUpdater(std::shared_ptr<Updater> updater) override {
    const bool set = updater != nullptr;
    inner_->SetUpdater(std::move(updater));
    has_updater_ = set;
  }
  void SetStrUpdater(std::shared_ptr<Updater> updater) override {
    const bool set = updater != nullptr;
    inner_->SetStrUpdater(std::move(updater));
    has_str_updater_ = set;
  }

 private:
  // Whether pushes of this key kind run an updater (string keys fall back to the int one).
  bool HasUpdater(KeyKind kind) const {
    return has_updater_ || (kind == KeyKind::kStr && has_str_updater_);
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
    std::vector<Collective> ops;
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
      Collective op;
      for (auto& [dev, pair] : per_dev) {
        op.devs.push_back(dev);
        op.bufs.push_back(const_cast<void*>(pair.first->data()));
        op.recv.push_back(pair.second->data());
      }
      op.count = static_cast<size_t>(root->second.second->size());
      op.dtype = m.dtype;
      if (op.count > 0) ops.push_back(std::move(op));
    }
    RunCollectives(cliques_, ops);
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

  // One array per group holding the sum of the group's values, on a GPU.
  std::vector<const Array*> ReduceGroups(const std::vector<Group>& groups,
                                         const std::vector<KeyMeta>& metas,
                                         const Array* const* vals,
                                         std::vector<ScratchPool::Lease>* leases) {
    std::vector<const Array*> sums(groups.size(), nullptr);
    std::vector<Collective> ops;
    std::vector<size_t> op_group;
    for (size_t g = 0; g < groups.size(); ++g) {
      const KeyMeta& m = metas[g];
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
      Collective op;
      op.devs = devs;
      for (const Array* p : partial) op.bufs.push_back(const_cast<void*>(p->data()));
      op.root_out = out->data();
      op.root = root;
      op.count = static_cast<size_t>(out->size());
      op.dtype = m.dtype;
      if (op.count > 0) ops.push_back(std::move(op));
      sums[g] = out;
    }
    RunCollectives(cliques_, ops);
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
    std::vector<Collective> ops;
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
        Collective op;
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
    RunCollectives(cliques_, ops);
    for (auto& [dst, src] : copies) CopyArray(dst, *src);
  }

  std::unique_ptr<Store> inner_;
  nccl::CliqueCache cliques_;  // destroyed before inner_: no collective is running then
  ScratchPool scratch_;

  std::mutex load_mu_;
  std::vector<long long> load_;  // bytes of stored values per GPU

  std::atomic<bool> has_updater_{false};
  std::atomic<bool> has_str_updater_{false};

  mutable std::shared_mutex meta_mu_;
  std::unordered_map<std::string, KeyMeta> meta_;
};

}  // namespace

std::unique_ptr<Store> CreateNcclStore(const std::string& type) {
  return std::make_unique<NcclStore>(type);
}

}  // namespace kvstore
