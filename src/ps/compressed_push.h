// compressed_push.h - gradient compression on the dist stores' push path: the worker's
// setting and residuals (PushCompressor), the packed payload an operation sends
// (PackedPush), and how a message says that its payload is packed.
//
// Protocol. A compressed PUSH or PUSHPULL part carries flag kFlagTwoBit or kFlagOneBit, the
// threshold's float32 bits in header.arg, and the part's count values quantised by
// compression.h's rules: 4 * CompressedSize(count) bytes. Every part of a key is packed on
// its own (its own residual, its values starting at bit 0), so a server dequantises its part
// without knowing the others. The server validates all of this with the header
// (wire.cc: ValidateHeader) and learns nothing from any other message: each push says how
// it is packed, so a job needs no configuration message and a worker may turn compression
// on or off between pushes. INIT and PULL are never packed.
//
// Invariants (worker).
//  - A residual belongs to one (key, part) pair, starts at zero and lives until the setting
//    is replaced: Set installs a fresh State, so the new setting never sees the old
//    residuals, and an operation that took the old State finishes with it.
//  - The pushes of one key are quantised one at a time (a per-key mutex), in the order their
//    operations are queued by one thread.
//
// Threading. PushCompressor::Set and Current run on any thread; Pack on application
// threads; a PackedPush is immutable once built and shared by the I/O thread's messages.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "compression/compression.h"
#include "ps/op.h"
#include "ps/wire.h"
#include "ps/worker_io.h"

namespace kvstore {
namespace dist {

// The compression a validated data header names (flags kFlagTwoBit/kFlagOneBit and the
// threshold's bits in arg), or std::nullopt for a raw payload.
std::optional<compression::Compression> PackingOf(const WireHeader& h);

// An operation's packed payload: every part of its key, part i at offsets[i].
struct PackedPush {
  std::shared_ptr<SharedBuf> buf;
  std::vector<size_t> offsets, nbytes;
  uint32_t flag = 0;       // kFlagTwoBit or kFlagOneBit
  int32_t threshold = 0;   // the threshold's float32 bits

  // Points the part messages of an operation (one per part, in the key's part order) at
  // the packed bytes and marks them.
  void Apply(std::vector<OutMsg>* msgs) const;
};

class PushCompressor {
 public:
  class State {
   public:
    explicit State(const compression::Compression& c) : c_(c) {}
    // The packed payload of a push of `k` whose summed values (k.size elements of `dtype`:
    // k.dtype, or float32 for a multi-precision sum of float16 values) are at host address
    // `values`, advancing the key's residuals. nullptr when k.dtype is not compressed (the
    // push then goes raw).
    std::shared_ptr<const PackedPush> Pack(const WorkerKey& k, const void* values, int dtype);

   private:
    struct KeyResiduals {
      std::mutex mu;                            // one push of the key at a time
      std::vector<std::vector<float>> by_part;  // the key's parts, in order
    };
    const compression::Compression c_;
    std::mutex mu_;  // guards the structure of keys_
    std::map<const WorkerKey*, std::unique_ptr<KeyResiduals>> keys_;
  };

  void Set(const std::optional<compression::Compression>& c) {
    std::shared_ptr<State> fresh = c ? std::make_shared<State>(*c) : nullptr;
    std::lock_guard<std::mutex> lock(mu_);
    state_.swap(fresh);
  }

  // Pack for a push or pushpull op (its payload gathered) under the current setting; nullptr
  // when compression is off, for other ops, or when the key's dtype is not compressed.
  std::shared_ptr<const PackedPush> Pack(const Op& op) const;

 private:
  mutable std::mutex mu_;
  std::shared_ptr<State> state_;
};

}  // namespace dist
}  // namespace kvstore
