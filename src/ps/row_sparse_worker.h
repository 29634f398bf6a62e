// row_sparse_worker.h - the row_sparse values of a worker of the dist stores: their pushes
// (only the pushed rows leave) and row_sparse_pull (only the requested rows are asked for
// and come back). The wire is wire.h kFlagRowSparse; the server side is server.h "Rows".
//
// Protocol steps.
//  - Push of a key whose values in one call are all row_sparse: the values are summed by
//    the union of their rows (store/row_sparse.h SumRowsInto, the in-process stores' sum;
//    in float32 for float16 keys under a multi-precision optimizer when there are several,
//    as ps/mp_push.h); each part of the key (placement.h: whole rows) gets one PUSH with
//    the sum's rows inside it, also when there are none (a sync round needs every worker's
//    push on every server; assign then zeroes the part, as the reference's assign). One Op
//    (op.h) completes the push asynchronously, like a dense push. Not compressed.
//  - A key whose values mix dense and row_sparse ones is pushed dense, the row_sparse ones
//    cast to dense (as the in-process stores sum it).
//  - row_sparse_pull: the unique sorted ids (UniqueRowIds) of each output go, split by
//    part, to the servers that hold them (a part without a requested row gets a request of
//    no id, so that the pull's replies follow every earlier push of the key, op.h); each
//    reply carries just those rows. The call waits for its replies and then replaces
//    each output's rows (Array::ReplaceRows): replacing the row set of an array that other
//    threads may read (KVArrayGetNumRows, KVArrayGetRowIds do not wait for pending writes)
//    cannot be done safely from the I/O thread, so this call is blocking, unlike dense
//    pulls. Its requests are ordered after the caller's earlier pushes of the key (the send
//    queue's per-key order), so it reads this worker's own writes, and it fails when the
//    latest of those failed (op.h), as a dense pull does.
// Threading: application threads only; the I/O thread completes the requests.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/array.h"
#include "ps/op.h"
#include "store/store.h"

namespace kvstore {
namespace dist {

class WorkerIo;

// A push call's arrays grouped by key, as WorkerStore groups them.
using PushGroups = std::vector<std::pair<WorkerKey*, std::vector<const Array*>>>;

// Pushes the groups of `groups` whose values are all row_sparse and removes them; in a
// group that mixes dense and row_sparse values, replaces each row_sparse value by a dense
// copy owned by *dense. Checks everything before the first push leaves. `recv_f16` is the
// servers' optimizer's RecvDType of float16 keys (mp_push.h).
void PushRowSparse(WorkerIo& io, OpTracker& tracker, bool sync, int recv_f16, PushGroups* groups,
                   std::vector<std::unique_ptr<Array>>* dense, int priority);

// The arrays vals[0..n) with each row_sparse one replaced by a dense copy owned by *keep
// (init of a row_sparse value: the servers store it dense).
std::vector<const Array*> DenseValues(int n, const Array* const* vals,
                                      std::vector<std::unique_ptr<Array>>* keep);

// Throws NOT_SUPPORTED naming `store_type` when a pushpull value is row_sparse: the dist
// stores pushpull dense values only (as the reference's dist pushpull).
void CheckDensePushPull(const std::string& store_type, const KeyList& keys, const Array* const* vals);

// row_sparse_pull of keys[i] into the row_sparse outs[i] for the dense row_ids[i] (see
// above); blocking, until `deadline` (clock.h). Each key's requests form one Op (op.h), so
// a pull that follows a failed push of its key fails as a dense pull does. On error no
// output has changed.
void PullRows(WorkerIo& io, OpTracker& tracker, bool sync, const std::vector<WorkerKey*>& keys, Array* const* outs,
              const Array* const* row_ids, int priority, double deadline);

}  // namespace dist
}  // namespace kvstore
