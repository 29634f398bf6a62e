// server.h - a parameter server: stores its parts of the keys, merges pushes, answers
// pulls, runs the updater and the controller. Internal to server.cc (the node: sockets,
// scheduler messages, requests) and server_values.cc (how stored values change: sync
// rounds, async pushes, round failures).
//
// One thread does everything (the one that called KVStoreRunServer): it polls the ROUTER
// that workers talk to and the DEALER to the scheduler. There is no hand-off between
// threads of ours on the request path, which matters on small machines where waking a
// thread costs ~50 us; ZeroMQ's I/O threads (one per worker, Config::IoThreads) receive
// the workers' streams in parallel.
//
// Sync rounds. Each key keeps one FIFO of requests per worker rank, in arrival order (a
// worker's requests on one connection arrive in the order it sent them). A pull at the
// head of a FIFO is answered at once; a pull behind a push waits for that push's round, so
// a worker always reads its own writes. When every FIFO has a push at its head, the round
// runs: the heads are summed in rank order 0..W-1 (bit-identical whatever the arrival
// order), the updater runs once (or the sum is assigned), and every push of the round is
// answered (a pushpull with the new value). A round that waits longer than the timeout,
// or that needs a worker the scheduler declared dead, fails every parked push with an
// error naming the missing ranks and the key.
//
// Async. Each push is merged on arrival: updater(key, pushed, &stored), or stored =
// pushed when no updater is set (documented default; the server never dies for it).
//
// Multi-precision. An updater whose RecvDType differs from the key's dtype (float16 keys
// under multi_precision=1) receives the pushes converted to float32 and summed in float32
// (optimizer/recv_sum.h), never a float16-rounded sum; its float32 master copy is optimizer
// state, and `stored`, which pulls return, is the master rounded to float16. A worker that
// pushes several values of such a key sends their float32 sum (ps/mp_push.h), which only
// such an updater accepts; a round adds float16 pushes and float32 sums in float32.
//
// Rows (ps/server_row_sparse.cc, wire.h kFlagRowSparse). A row_sparse push carries some
// rows of the key's part; a sync round of row_sparse pushes is summed by the union of their
// rows in rank order and applied as the in-process stores apply a row_sparse sum
// (store/row_sparse.h: assign, a callback updater's row_sparse recv, kDense, or the lazy
// kRows update whose cost scales with the pushed rows); a round that mixes dense and
// row_sparse pushes is summed dense, the row_sparse ones cast to dense. Async: each push
// on arrival. A row_sparse pull is answered with just its rows. Updaters see the part as
// a (rows, row length) array on these paths.
//
// Copies. Replies that carry values reference the stored buffer without copying; an update
// never writes a buffer that ZeroMQ may still be sending (copy-on-write through SharedBuf).
// Without an updater a round's sum accumulates in place in worker 0's received message,
// which becomes the stored value, so a push costs the transport's copies plus one summing
// pass over W inputs (none for one worker).
#pragma once

#include <zmq.hpp>

#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "compression/compression.h"
#include "ps/compressed_pull.h"
#include "ps/key_table.h"
#include "ps/node_pool.h"
#include "ps/ps.h"
#include "ps/req_fifo.h"
#include "ps/round_starts.h"
#include "ps/scheduler_link.h"
#include "ps/security.h"
#include "ps/wire.h"
#include "store/row_sparse.h"

namespace kvstore {
namespace dist {
namespace server {

// A request parked in a key's FIFO (sync mode), or being applied (async). Parked ones live
// in Server::req_pool_, linked through `next` (req_fifo.h).
struct Req {
  MsgType type;
  int rank;
  uint64_t req_id;
  std::string routing_id;
  zmq::message_t payload;
  double arrived;
  bool f32_sum = false;  // the payload is a float32 sum of a float16 key (kFlagFloat32Sum)
  // How the payload is packed (compressed_push.h), or std::nullopt: raw values.
  std::optional<compression::Compression> packing = std::nullopt;
  bool row_sparse = false;  // kFlagRowSparse: the payload is row ids (and rows), wire.h
  int64_t row_len = 0;      // its row length
  // A compressed pull (`packing` set on a PULL, compressed_pull.h) that asks for the exact
  // values (kFlagExactPull).
  bool exact_pull = false;
  // `payload` is a view of the worker's shared-memory ring (Message::payload_in_ring): it is
  // read by the round or update that the request's arrival runs, never kept; a request left
  // waiting in a FIFO gets a copy (Server::CopyQueuedOutOfRing).
  bool in_ring = false;
  Req* next = nullptr;  // the next request of the same FIFO
};

// One key's part on this server. `stored` is set by INIT and never null afterwards; `spare`
// is the previous value's array, reused for the next one once ZeroMQ has released it.
struct KeyState {
  std::string display;  // "3" or "\"weight\"" for messages
  bool is_str = false;
  int64_t int_key = 0;
  std::string name;
  int updater_id = 0;   // int key, or the server-local id of a string key
  int dtype = 0;
  int64_t total = 0, offset = 0, count = 0;
  std::shared_ptr<SharedBuf> stored, spare;
  std::unique_ptr<Array> merged;  // the round's sum when an updater runs, in its RecvDType
  // Sync mode: per worker rank, in Server::req_pool_ (req_fifo.h).
  FifoSet<Req> fifo;
  // Sync mode: the arrival of the oldest push at the head of a FIFO, filed in
  // Server::round_starts_; -1 when no push heads a FIFO (TrackRound keeps it). round_seq
  // and round_late are round_starts.h's.
  double round_since = -1;
  uint64_t round_seq = 0;
  bool round_late = false;
  // Row-sparse requests (server_row_sparse.cc): the row length they name (0 before the
  // first), and RowSparsePush's slots: a (rows, row_len) view of the value being changed,
  // its candidate and dense sum, and the lazy updates' scratch.
  int64_t row_len = 0;
  std::unique_ptr<Array> rows_view, rows_candidate, rows_merged;
  std::unique_ptr<RowScratch> grad_scratch, weight_scratch;
  // Compressed pulls (compressed_pull.h): each worker's view of the part, by rank. Mutable:
  // sending a value, which only reads the key otherwise, advances the view.
  mutable std::vector<PullView> pull_views;
};

// memcpy for values that may have no elements (their data pointers are then null).
void CopyBytes(void* dst, const void* src, size_t n);

// The first step of a worker's request (Server::HandleWorker), before anything reads its
// payload. A payload in the worker's shared-memory ring (Message::payload_in_ring) stays a
// view only for dense data requests: their bytes are values, read once each, so a sender
// rewriting its ring meanwhile changes only values. Every other payload gets its own copy
// here: a row_sparse request's row ids are checked (TakesRows) and then used again as
// offsets into the stored value, so they must not change between the two; the rest is rare
// and small, or kept (states files).
void CopyOutOfRingUnlessValues(Message* m);

class Server {
 public:
  Server(const Config& cfg, ServerHooks* hooks)
      : cfg_(cfg), hooks_(hooks), ctx_(cfg.IoThreads()), sock_(ctx_, zmq::socket_type::router),
        sched_(ctx_, cfg) {}

  // Joins the job and serves until the scheduler says SHUTDOWN; throws PEER_DEAD when the
  // scheduler went silent, or at the end of a job in which nodes died.
  void Run();

 private:
  // server.cc: the node.
  std::vector<int> Bind();
  void Poll();
  void HandleScheduler(Message& m);
  void NodeDied(const Message& m);
  void HandleWorker(Message& m);
  void HandleCommand(const Message& m);
  void HandleSetOptimizer(const Message& m);
  // server_states.cc: SAVE_STATES and LOAD_STATES (ps/dist_states.h).
  void HandleSaveStates(const Message& m);
  void HandleLoadStates(const Message& m);
  void HandleShmOffer(const Message& m, int rank);
  void HandleData(Message& m, int rank);
  void HandleInit(const Message& m, KeyState* k);
  bool SameMode(const Message& m, int rank);
  bool SamePart(const Message& m, const KeyState* k);
  bool TakesFloat32Sum(const Message& m, const KeyState& k);
  void Enqueue(KeyState* k, Req r);
  // Copies the payloads of k's queued requests that are still views of a ring.
  static void CopyQueuedOutOfRing(KeyState* k);
  void Reply(const std::string& rid, uint64_t req_id, int status, const std::string& msg,
             const KeyState* with_value = nullptr);
  void ReplyReq(const Req& r, int status, const std::string& msg, const KeyState* with_value) {
    if (r.row_sparse && status == 0 && with_value != nullptr) return ReplyRows(r, *with_value);
    if (r.type == MsgType::kPull && status == 0 && with_value != nullptr) return ReplyPull(r, *with_value);
    Reply(r.routing_id, r.req_id, status, msg, with_value);
  }
  // The part of the key `m` names, or nullptr; with `create`, a new part when there is none.
  KeyState* Lookup(const Message& m, bool create);

  // compressed_pull.cc: the answer to a dense pull, compressed when asked.
  void ReplyPull(const Req& r, const KeyState& k);

  // server_row_sparse.cc: row_sparse pushes and pulls.
  bool TakesRows(const Message& m, KeyState* k);
  void ReplyRows(const Req& r, const KeyState& k);
  bool RowSparseRound(KeyState* k);
  void ApplyRowsAsync(KeyState* k, Req& r);
  void ApplyRows(KeyState* k, const std::vector<const Req*>& pushes);

  // server_values.cc: how stored values change.
  void Progress(KeyState* k);
  void RunRound(KeyState* k);
  void ApplyAsync(KeyState* k, Req& r);
  template <typename Combine>
  void StoreNewValue(KeyState* k, zmq::message_t& incoming, bool incoming_in_ring, Combine&& combine);
  int UpdateFailure(const KeyState& k, const std::exception& e, bool keep_code,
                    std::string* msg) const;
  std::shared_ptr<SharedBuf> TakeTarget(KeyState* k);
  static bool Adoptable(const KeyState& k, const zmq::message_t& payload);
  // The updater that merges pushes of `k` (the string-key one for string keys when set),
  // or nullptr: assign.
  Updater* UpdaterOf(const KeyState& k) const;
  void Update(KeyState* k, Array* recv, Array* target);
  void FailQueuedPushes(KeyState* k, int code, const std::string& why);
  void FailRounds(int dead_worker, const std::string& reason);
  void CheckRoundTimeouts();
  void TrackRound(KeyState* k);
  std::string MissingRanks(const KeyState& k) const;

  Config cfg_;
  ServerHooks* hooks_;
  zmq::context_t ctx_;
  zmq::socket_t sock_;
  SchedulerLink sched_;
  AuthGuard guard_{ctx_, sock_, "server"};  // before sock_ binds; closed first
  int rank_ = -1;
  int num_workers_ = 0;
  int mode_ = -1;  // -1 unknown, 0 async, 1 sync (fixed by the first data message)
  // The parked requests of every key's FIFOs (declared before keys_, whose FIFOs own them).
  NodePool req_pool_;
  // By the key's identity (int key, or string key's text); a KeyState's address never
  // changes (key_table.h). Keys with parked requests are found by a pass over the table
  // (FailRounds, once per dead worker), not kept in a set per request.
  KeyTable<KeyState> keys_;
  // Keys with a round pending, by the arrival of its oldest push (KeyState::round_since):
  // CheckRoundTimeouts looks at the oldest only, so each turn of the loop costs O(1), and
  // so, amortised, does each round however many keys wait (round_starts.h).
  RoundStarts<KeyState> round_starts_;
  std::vector<bool> worker_dead_;
  ShmPeers shm_;  // segments of co-located workers, by routing id (shm.h)
  std::string dead_list_;
  int next_str_id_ = 0;
  bool stop_ = false;
};

}  // namespace server
}  // namespace dist
}  // namespace kvstore
