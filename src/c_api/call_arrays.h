// call_arrays.h - the array arguments of one C-ABI call: waited on and held in use (call
// gates) until the call returns, with the key lists checked beside them. Shared by the
// shims of c_api.cc and row_sparse.cc.
#pragma once

#include <vector>

#include "core/array.h"
#include "store/store.h"
#include "kvstore/kvstore.h"

namespace kvstore {
namespace capi {

// Waits for pending asynchronous writes into an array before it is read.
inline Array* Ready(KVArrayHandle a) {
  a->WaitPendingWrites();
  return a;
}

// Waits for pending asynchronous writes and reads (zero-copy pushes) before it is written.
inline Array* ReadyToWrite(KVArrayHandle a) {
  a->WaitToWrite();
  return a;
}

// The calling thread's spare array lists: a call's list goes back here with its capacity,
// so that steady calls of many keys allocate (and the allocator trims) nothing per call.
inline std::vector<std::vector<Array*>>& SpareArrayLists() {
  thread_local std::vector<std::vector<Array*>> spare;
  return spare;
}

// The arrays of one call, validated; arrays[0, entered) hold their call gates until the
// call returns (one vector, reused across calls: no allocation per array or per call on
// the push/pull path).
struct CallArrays {
  std::vector<Array*> arrays;
  size_t entered = 0;
  int first_row_sparse = -1;  // the first row_sparse array's index (CheckStorage), or -1

  CallArrays() = default;
  CallArrays(CallArrays&& o) noexcept
      : arrays(std::move(o.arrays)), entered(o.entered), first_row_sparse(o.first_row_sparse) {
    o.entered = 0;
  }
  CallArrays(const CallArrays&) = delete;
  CallArrays& operator=(const CallArrays&) = delete;
  CallArrays& operator=(CallArrays&&) = delete;
  ~CallArrays() {
    // The gates' atomic updates serialise the loop: prefetching the next arrays lets their
    // cache misses overlap (with many keys each array is one).
    for (size_t i = 0; i < entered; ++i) {
      if (i + 8 < entered) __builtin_prefetch(arrays[i + 8], 1);
      arrays[i]->call_gate().Leave();
    }
    constexpr size_t kKeep = size_t{1} << 17;  // longer lists go back to the allocator (as CallScratch)
    if (arrays.capacity() == 0 || arrays.capacity() > kKeep) return;
    arrays.clear();
    try {
      SpareArrayLists().push_back(std::move(arrays));
    } catch (...) {
    }
  }
  Array* const* data() { return arrays.data(); }
};

// Validates a key list and its parallel array list's pointers (counts, NULL lists, NULL
// keys and arrays) without reading the arrays: the part of CheckList a store that enters
// the arrays' gates itself (Store::enters_array_gates) leaves to c_api.
inline void CheckPointers(const KeyList& keys, const KVArrayHandle* arrays, const char* what) {
  KV_CHECK(keys.size >= 0, KV_ERR_INVALID_ARGUMENT, "negative %s count %d", what, keys.size);
  if (keys.size == 0) return;
  KV_CHECK((keys.kind == kvstore::KeyKind::kStr ? static_cast<const void*>(keys.strs)
                                                 : static_cast<const void*>(keys.ints)) != nullptr,
           KV_ERR_NULL_POINTER, "%s keys is NULL with count %d", what, keys.size);
  KV_CHECK(arrays != nullptr, KV_ERR_NULL_POINTER, "%s arrays is NULL with count %d", what, keys.size);
  for (int i = 0; i < keys.size; ++i) {
    if (keys.kind == kvstore::KeyKind::kStr) {
      KV_CHECK(keys.strs[i] != nullptr, KV_ERR_NULL_POINTER, "%s key %d is NULL", what, i);
    }
    KV_CHECK(arrays[i] != nullptr, KV_ERR_NULL_POINTER, "%s array %d (key %s) is NULL", what, i,
             keys.Name(i).c_str());
  }
}

// Validates a key list and its parallel array list (CheckPointers); returns the arrays,
// waited on (for writing when `outputs`), with the first row_sparse one noted for
// CheckStorage. One pass over the arrays: with many keys each array object is a cache miss
// per pass.
inline CallArrays CheckList(const KeyList& keys, const KVArrayHandle* arrays, const char* what, bool outputs = false) {
  CheckPointers(keys, arrays, what);
  CallArrays out;
  if (keys.size == 0) return out;
  std::vector<std::vector<Array*>>& spare = SpareArrayLists();
  if (!spare.empty()) {
    out.arrays.swap(spare.back());
    spare.pop_back();
  }
  out.arrays.resize(static_cast<size_t>(keys.size));
  for (int i = 0; i < keys.size; ++i) {
    if (i + 8 < keys.size) __builtin_prefetch(arrays[i + 8], 1);  // as ~CallArrays
    arrays[i]->call_gate().Enter("array");
    out.arrays[i] = arrays[i];  // left by ~CallArrays, also when the wait below throws
    ++out.entered;
    if (outputs) ReadyToWrite(arrays[i]);
    else Ready(arrays[i]);
    if (out.first_row_sparse < 0 && arrays[i]->is_row_sparse()) out.first_row_sparse = i;
  }
  return out;
}

// Row-sparse arrays reach a store only as values, and only a store that takes them;
// outputs of init/pull-like calls are written dense. `arrays` comes from CheckList, which
// found the first row_sparse array (the only one either refusal can name).
inline void CheckStorage(const Store& store, const KeyList& keys, CallArrays& arrays, const char* what,
                  bool outputs = false) {
  if (const int i = arrays.first_row_sparse; i >= 0) {
    KV_CHECK(!outputs, KV_ERR_NOT_SUPPORTED,
             "%s: output %d (key %s) is row_sparse; it writes dense outputs (KVStoreRowSparsePull "
             "writes row_sparse ones)", what, i, keys.Name(i).c_str());
    KV_CHECK(store.takes_row_sparse(), KV_ERR_NOT_SUPPORTED,
             "%s: value %d (key %s) is row_sparse, which store type \"%s\" does not take yet (the "
             "local, device and dist_* stores do)", what, i, keys.Name(i).c_str(), store.type().c_str());
  }
}

}  // namespace capi
}  // namespace kvstore
