// dist_states.h - optimizer states of a distributed job: how a worker's
// save_optimizer_states joins the servers' states into one file, and how its
// load_optimizer_states cuts a file into what each server gets.
//
// Protocol (docs/DISTRIBUTED.md, "Optimizer states"). The state of a key lives with its
// parts: a server's optimizer keeps, per key part it holds, the state arrays of that part's
// elements (they are elementwise) and the part's update count.
//   save: the worker waits for its own pending operations, sends SAVE_STATES to every
//         server; each replies with its records (the states-file encoding, state_file.h,
//         each record shaped {part count}); the worker joins the parts of every key in
//         offset order into records of the key's shape and writes one file.
//   load: the worker reads and checks the file against its keys, cuts every record into
//         its parts, and sends each server its records twice: LOAD_STATES arg 0 (each
//         server checks them against its keys and optimizer, changing nothing), then, once
//         every server accepted, arg 1 (each replaces its optimizer's state). So a refusal
//         changes no server's state.
#pragma once

#include <string>
#include <vector>

#include "optimizer/state_file.h"
#include "ps/op.h"
#include "ps/worker_io.h"
#include "ps/worker_keys.h"

namespace kvstore {
namespace dist {

// Joins the SAVE_STATES replies (payloads[s]: server s's) into one file of whole keys.
// Throws PROTOCOL for a reply that does not decode or names a part the worker does not
// know of, UNKNOWN_KEY for state of a key this worker never initialised, INVALID_ARGUMENT
// when the servers run different optimizers, INTERNAL when a key's parts disagree (state
// on some servers only, or different update counts).
optimizer::StatesFile JoinServerStates(const std::vector<std::string>& payloads,
                                       const WorkerKeys& keys);

// Checks every record of `file` against the worker's keys: initialised (UNKNOWN_KEY), of
// the store's kind (KEY_KIND_MISMATCH), the same dtype and shape (DTYPE_MISMATCH,
// SHAPE_MISMATCH), with state arrays of the weight's element count (INVALID_ARGUMENT).
void CheckStatesAgainstKeys(const optimizer::StatesFile& file, const WorkerKeys& keys,
                            const std::string& path);

// The LOAD_STATES payload of each of `num_servers` servers: its parts of every key of a
// checked `file`.
std::vector<std::string> SplitForServers(const optimizer::StatesFile& file, const WorkerKeys& keys,
                                         int num_servers);

// The LOAD_STATES requests carrying payloads[s] to server s (`apply`: arg 1), completing `w`.
std::vector<OutMsg> LoadMessages(const WorkerIo& io, const std::vector<std::string>& payloads,
                                 bool apply, const std::shared_ptr<Waiter>& w);

}  // namespace dist
}  // namespace kvstore
