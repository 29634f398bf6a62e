// worker_keys.h - a worker's key registry: its initialised keys (WorkerKey, op.h), found by
// the keys of a call without building a string per key (key_table.h: an open-addressing
// index per key kind over a deque of records).
//
// Invariants. A record is appended once, by the init that files its key, and never removed
// or moved: Ops, the compressors and the row_sparse paths keep WorkerKey pointers. An int key
// and a string key are different keys whatever their bytes. Guarded by the owner
// (WorkerStore::registry_mu_).
#pragma once

#include "ps/key_table.h"
#include "ps/op.h"

namespace kvstore {
namespace dist {

// Where a WorkerKey keeps its identity: its KeyId.
struct WorkerKeyId {
  static KeyId& Of(WorkerKey& k) { return k.id; }
  static const KeyId& Of(const WorkerKey& k) { return k.id; }
};

using WorkerKeys = KeyTable<WorkerKey, WorkerKeyId>;

}  // namespace dist
}  // namespace kvstore
