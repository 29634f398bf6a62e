// compressed_pull.h - compression of the pull direction of the dist stores (the "pull"
// parameter of KVStoreSetGradientCompression, 2bit only): what a worker asks for and keeps
// (PullCompressor, PullPlan) and what a server keeps per worker (PullView, Server::ReplyPull
// in compressed_pull.cc).
//
// Quantising a weight to +-t would be meaningless, so a compressed pull sends the CHANGE of a
// part since what the worker last received. For each (key part, worker) both ends keep the
// same float32 "view" of the part: the values the worker has been sent so far.
//   - The server answers a compressed pull with q = quantise(w - view) (compression.h's 2bit
//     rules from a zero residual: +t, -t or 0 per value) and sets view += dequantise(q); the
//     worker sets its view += dequantise(q) and returns its view (rounded to the key's
//     dtype). So the error feedback is implicit: what a pull did not send is still in
//     w - view and goes out with the next pulls, and a view that is behind moves by up to t
//     per value and pull.
//   - An EXACT pull is answered with the raw values and resets both views to them
//     (float32(w)): the worker asks for it on the first pull of a part under a setting and
//     after any failed pull of the part (its view may then differ from the server's). The
//     server also answers raw (and resets) when it has no view for the worker or the view
//     was made under another threshold; the worker takes a raw answer as a reset always.
//   - Both views change only when a reply with values is sent and received; replies on
//     one worker-server connection keep their order, and each key part is pulled by a
//     worker through one connection, so both ends apply the same steps in the same order.
//
// Wire (wire.h). A compressed PULL carries kFlagTwoBit, the threshold's float32 bits in arg,
// and kFlagExactPull when it asks for an exact answer. Its reply is raw (count values of
// dtype) or carries kFlagTwoBit, the same threshold in arg and 4 * ceil(count / 16) bytes.
// A worker refuses (PROTOCOL) a packed reply to a pull that did not ask for one, to an exact
// pull, with another threshold, or for a part a pull of which failed since it was sent (a
// timed-out pull may have advanced the server's view but not the worker's). Pushpull replies, row_sparse pulls and other dtypes than
// float32/float16 are never compressed. A pull without the flag is answered raw and drops the
// server's view of that part for that worker: turning pull compression off frees the
// worker's replicas at once (Set), the servers' views at the next plain pull of each part.
//
// Threading (worker). PullCompressor::Set and Plan run on application threads; Receive on
// the I/O thread. Each key's replicas have their own mutex.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "compression/compression.h"
#include "ps/compressed_push.h"
#include "ps/op.h"
#include "ps/wire.h"
#include "ps/worker_io.h"

namespace kvstore {
namespace dist {

// The worker's views of the parts it pulled under one setting.
class PullReplicas {
 public:
  explicit PullReplicas(const compression::Compression& c) : c_(c) {}
  const compression::Compression& compression() const { return c_; }

  struct Key {
    std::mutex mu;
    std::vector<std::vector<float>> view;  // per part, empty until an exact reply
    std::vector<bool> valid;               // per part: view equals the server's
  };
  // The replicas of `k` (created on first use, all invalid).
  Key* Of(const WorkerKey& k);

 private:
  const compression::Compression c_;
  std::mutex mu_;  // guards the structure of keys_
  std::map<const WorkerKey*, std::unique_ptr<Key>> keys_;
};

// What one pull operation asked of each part, and where its replies go.
struct PullPlan {
  std::shared_ptr<PullReplicas> replicas;
  PullReplicas::Key* key = nullptr;
  std::vector<bool> exact;  // per part of the key

  // Marks the part messages of the op (one per part, in the key's part order).
  void Apply(std::vector<OutMsg>* msgs) const;
  // The reply of `part` (status st; reply null when none came): a raw reply resets the view,
  // a packed one advances it, and either leaves the part's count values of k.dtype in
  // reply->payload, unpacked. Returns "" or why the reply is refused; a failure (st != 0 or
  // a refusal) invalidates the part's view, so that its next pull asks for an exact answer.
  std::string Receive(const WorkerKey& k, const PartPlan& part, int st, Message* reply);
};

class PullCompressor {
 public:
  // c with pull() set: compress pulls from now on, with fresh (invalid) replicas; anything
  // else: stop, releasing the replicas once the pulls in flight finish.
  void Set(const std::optional<compression::Compression>& c) {
    std::shared_ptr<PullReplicas> fresh =
        c && c->pull() ? std::make_shared<PullReplicas>(*c) : nullptr;
    std::lock_guard<std::mutex> lock(mu_);
    state_.swap(fresh);
  }
  // The plan of a pull op under the current setting; nullptr for other ops, when pulls are
  // not compressed, or when the key's dtype is not compressed.
  std::shared_ptr<PullPlan> Plan(const Op& op) const;

 private:
  mutable std::mutex mu_;
  std::shared_ptr<PullReplicas> state_;
};

// A worker's compression of both directions under one setting.
struct Compressors {
  PushCompressor push;
  PullCompressor pull;

  void Set(const std::optional<compression::Compression>& c) {
    push.Set(c);
    pull.Set(c);
  }
  // An op about to be queued (payload gathered): its packed push and its pull plan.
  void Prepare(Op* op) const {
    op->packed = push.Pack(*op);
    op->pulled = pull.Plan(*op);
  }
  // Marks the op's part messages (in the key's part order) as Prepare decided.
  static void Apply(const Op& op, std::vector<OutMsg>* msgs) {
    if (op.packed) op.packed->Apply(msgs);
    if (op.pulled) op.pulled->Apply(msgs);
  }
};

// The server's view of one part for one worker.
struct PullView {
  std::vector<float> values;  // empty: none
  float threshold = 0;
};

// Server side: the packed answer to a compressed, non-exact pull of the part `stored`
// (count values of dtype) whose view is `view` (advanced here): 4 * ceil(count / 16) bytes.
std::unique_ptr<Array> PackPullReply(const compression::Compression& c, const void* stored,
                                     int dtype, int64_t count, PullView* view);
// Resets `view` to float32(stored) under threshold t.
void ResetPullView(const void* stored, int dtype, int64_t count, float t, PullView* view);

}  // namespace dist
}  // namespace kvstore
