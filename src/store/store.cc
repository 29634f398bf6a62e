// store.cc - what every store shares: key naming for messages, broadcast as init + pull
// with its outputs checked first, and the optimizer installed as the store's updater.
#include "store/store.h"

#include <unordered_map>

#include "optimizer/optimizer.h"

namespace kvstore {

std::string KeyList::Name(int i) const {
  if (kind == KeyKind::kStr) return strs[i] ? StrFormat("\"%s\"", strs[i]) : std::string("(null)");
  return std::to_string(ints[i]);
}

}  // namespace kvstore

using kvstore::Array;
using kvstore::KeyList;

// Every output is checked against the value it will receive before anything is initialised,
// so a broadcast with a bad output changes nothing (every store type relies on this).
void KVStore_::Broadcast(const KeyList& vkeys, const Array* const* vals, const KeyList& okeys,
                         Array* const* outs, int priority) {
  KV_CHECK(vkeys.size == 0 || okeys.size == 0 || vkeys.kind == okeys.kind, KV_ERR_KEY_KIND_MISMATCH,
           "broadcast mixes int and string keys");
  std::unordered_map<std::string, int> source_of;  // first value given for each key name
  for (int v = 0; v < vkeys.size; ++v) source_of.emplace(vkeys.Name(v), v);
  for (int o = 0; o < okeys.size; ++o) {
    const std::string name = okeys.Name(o);
    auto it = source_of.find(name);
    KV_CHECK(it != source_of.end(), KV_ERR_INVALID_ARGUMENT,
             "broadcast: output key %s is not among the broadcast keys", name.c_str());
    kvstore::CheckSameShapeDType(*vals[it->second], *outs[o], "broadcast output of key " + name);
  }
  Init(vkeys, vals);
  Pull(okeys, outs, priority);
}

void KVStore_::SetOptimizer(const std::string& spec) { SetUpdater(kvstore::CreateOptimizer(spec)); }

void KVStore_::SaveOptimizerStates(const std::string&) {
  KV_FAIL(KV_ERR_NOT_SUPPORTED,
          "save_optimizer_states: store type \"%s\" cannot save optimizer states (the local, "
          "device, nccl and distributed stores can)", type().c_str());
}

void KVStore_::LoadOptimizerStates(const std::string&) {
  KV_FAIL(KV_ERR_NOT_SUPPORTED,
          "load_optimizer_states: store type \"%s\" cannot load optimizer states (the local, "
          "device, nccl and distributed stores can)", type().c_str());
}

void KVStore_::RowSparsePull(const KeyList&, Array* const*, const Array* const*, int) {
  KV_FAIL(KV_ERR_NOT_SUPPORTED,
          "row_sparse_pull: store type \"%s\" does not support row_sparse_pull yet (the local, device "
          "and dist_* stores do)", type().c_str());
}
