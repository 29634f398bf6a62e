// wire.h - the wire format of the distributed stores: message types, the fixed header, and
// sending and receiving whole messages.
//
// Message. A message is a multipart ZeroMQ message:
//     [routing id]   added/consumed by ROUTER sockets only
//     [header]       exactly sizeof(WireHeader) bytes, see below
//     [string]       present iff header.str_len > 0: key name, command body, node table,
//                    or the error message of a failed reply
//     [payload]      present iff header.payload_len > 0: raw array bytes (zero-copy)
// The receiver validates the header (magic, version, type, frame count, every length and
// the element arithmetic) before it reads any other frame; a message that fails is dropped
// and logged (rate-limited: RateLimitedLog). Nothing a peer sends can make a node abort.
#pragma once

#include <zmq.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "core/array.h"
#include "ps/config.h"
#include "ps/shm.h"

namespace kvstore {
namespace dist {

constexpr uint32_t kWireMagic = 0x3153564Bu;  // bytes "KVS1" on a little-endian host
constexpr uint16_t kWireVersion = 1;
constexpr uint32_t kMaxStringFrame = 1u << 20;  // names, bodies, tables, messages

enum class MsgType : uint16_t {
  // node <-> scheduler
  kRegister = 1,     // node -> sched; arg = requested rank; str = "host:port"
  kNodeTable = 2,    // sched -> node; arg = assigned rank; str = table (see FormatTable)
  kBarrier = 3,      // node -> sched; arg = group mask (KV_NODE_*)
  kBarrierDone = 4,  // sched -> node; status
  kHeartbeat = 5,    // node -> sched
  kHeartbeatAck = 6, // sched -> node
  kNodeDead = 7,     // sched -> node; arg = role, key = rank; str = reason
  kFinish = 8,       // worker -> sched: this worker is done
  kFinishAck = 9,    // sched -> worker
  kShutdown = 10,    // sched -> server: every worker is done; exit
  kShutdownAck = 11, // server -> sched
  kQueryDead = 12,   // worker -> sched; arg = group mask, key = timeout in ms
  kQueryDeadReply = 13,  // sched -> worker; key = count
  kAbort = 14,       // sched -> node: the job failed before it started; str = reason
  // worker <-> server
  kInit = 20,        // str = key name (string keys); payload = this part's values
  kPush = 21,
  kPull = 22,
  kPushPull = 23,
  kCommand = 24,     // arg = head; str = body
  kSetOptimizer = 25,  // str = spec
  kReply = 26,       // status; payload = values for pull/pushpull, a states file for
                     // SAVE_STATES; str = error message
  kSaveStates = 27,  // worker -> server: reply with this server's optimizer states (payload:
                     // its parts' records in the states-file format, dist_states.h)
  kLoadStates = 28,  // worker -> server; payload = this server's records; arg = 0: check
                     // only, 1: check and replace the optimizer's state
  kShmOffer = 29,    // worker -> server, req_id 0: str = a shared-memory segment (shm.h);
                     // answered by REPLY with req_id 0
  kMaxType = 30
};
const char* MsgTypeName(uint16_t t);

// Flags of data messages.
constexpr uint32_t kFlagStrKey = 1u << 0;  // the key is the string frame, not header.key
constexpr uint32_t kFlagSync = 1u << 1;    // the sending store is a sync store
// PUSH or PUSHPULL of a float16 key whose payload holds `count` float32 elements: the
// float32 sum of several of the worker's values under a multi-precision optimizer
// (ps/mp_push.h). Only a server whose updater receives float16 keys in float32 takes it.
constexpr uint32_t kFlagFloat32Sum = 1u << 2;
// A PUSH or PUSHPULL whose values are packed by the 2-bit or 1-bit rules of compression.h
// (4 * ceil(count / 16 or 32) bytes, float32 or float16 keys; never with kFlagFloat32Sum:
// a packed float32 sum travels packed like any push); header.arg holds the threshold's
// float32 bits (ps/compressed_push.h).
constexpr uint32_t kFlagTwoBit = 1u << 3;
constexpr uint32_t kFlagOneBit = 1u << 4;
// A PUSH or PULL of some rows of a key (ps/row_sparse_worker.h): header.arg holds the
// key's row length L > 0 (offset, count and total are multiples of it: parts hold whole
// rows, placement.h). A push's payload is n int64 row ids (the key's global row numbers,
// strictly increasing, all inside the part's rows) followed by those n rows' elements
// (n * L of dtype, float32 with kFlagFloat32Sum). A pull's payload is the n ids and its
// reply's payload those rows. n may be 0 (every part of the key gets each push and pull,
// so that their replies keep the per-key order of op.h). Never compressed.
constexpr uint32_t kFlagRowSparse = 1u << 5;
// Compressed pulls (ps/compressed_pull.h): a PULL with kFlagTwoBit (threshold bits in arg)
// may be answered by a REPLY with kFlagTwoBit, the same arg and the part's change packed
// (4 * ceil(count / 16) bytes); with kFlagExactPull too it asks for the raw values.
constexpr uint32_t kFlagExactPull = 1u << 6;
// The payload is in the sender's shared-memory ring (shm.h): the payload frame is a
// ShmDesc naming payload_len bytes there. Only between peers that completed the SHM_OFFER
// handshake; RecvMessage replaces the descriptor by a view of the bytes (no copy,
// Message::payload_in_ring) and clears the flag, so no handler ever sees it.
constexpr uint32_t kFlagShm = 1u << 8;
constexpr uint32_t kFlagKnownFlags = kFlagStrKey | kFlagSync | kFlagFloat32Sum | kFlagTwoBit |
                                     kFlagOneBit | kFlagRowSparse | kFlagExactPull | kFlagShm;

// Fixed-size header; all integers in host byte order (the magic rejects a peer of the
// other endianness). Data messages carry one part of one key: elements
// [offset, offset + count) of a value of `total` elements of `dtype` (the payload's
// elements are float32 instead with kFlagFloat32Sum).
struct WireHeader {
  uint32_t magic;
  uint16_t version;
  uint16_t type;
  int32_t sender_role;
  int32_t sender_rank;
  uint64_t req_id;   // chosen by the requester, echoed in the reply
  int32_t status;    // 0 or a KV_ERR_* code (replies)
  uint32_t flags;
  int64_t key;
  int64_t offset;
  int64_t total;
  int64_t count;
  int32_t dtype;
  int32_t arg;
  uint32_t str_len;
  uint32_t num_frames;  // header + string + payload frames (routing id not counted)
  uint64_t payload_len;
};
static_assert(sizeof(WireHeader) == 88, "the wire header is 88 bytes");

WireHeader MakeHeader(MsgType type, Role role, int rank);

// A received message after validation: the header copy plus the frames it names.
struct Message {
  WireHeader h{};
  std::string routing_id;  // ROUTER sockets only
  std::string str;
  zmq::message_t payload;  // empty when payload_len == 0
  // `payload` is a view of the sender's shared-memory ring (ShmLink::View): read it while
  // handling the message; whatever is kept beyond that (a queued request, a stored value, an
  // output's storage) is copied out first (CopyOutOfRing), never adopted, so that the ring
  // drains as messages are handled.
  bool payload_in_ring = false;
};

// Replaces a payload that is a view of a ring by a copy of its own (ends the view).
void CopyOutOfRing(zmq::message_t* payload, bool* in_ring);

// Receives one multipart message from `sock` (non-blocking; the caller polled). Returns
// false when nothing was pending. Returns true with *ok false when a message arrived but
// failed validation (it has been consumed and logged as `*why`). A payload in shared memory
// (kFlagShm) is a view of the sender's link in `shm` (refused when it has none).
bool RecvMessage(zmq::socket_t& sock, bool router, Message* out, bool* ok, std::string* why,
                 ShmPeers* shm = nullptr);

// Receives the next valid message from `sock` (non-blocking; the caller polled). Malformed
// messages are consumed and logged (LogDropped) as coming from `peer` ("the scheduler", ...).
// Returns false when no valid message is pending, also after 64 malformed ones in one call,
// so that a flood of garbage cannot keep the caller from its heartbeats and deadlines.
bool RecvValidMessage(zmq::socket_t& sock, bool router, const char* peer, Message* out,
                      ShmPeers* shm = nullptr);

// Checks the header's own consistency (also run by RecvMessage against the actual frames).
// Returns "" when valid, or the reason.
std::string ValidateHeader(const WireHeader& h, size_t frames_after_header,
                           size_t str_frame_size, size_t payload_frame_size);

// Payloads of at least this many bytes travel without a copy on the sending side (below it,
// copying is cheaper than ZeroMQ's release round trip); received payloads this large may
// be kept as they are: as an output's storage on workers (pulls) and as the stored value on
// servers (assigned pushes).
constexpr size_t kZeroCopyMinBytes = 64u << 10;

// Payload of an outgoing message: either a copy or a zero-copy reference to a buffer that
// stays alive (and unwritten) until ZeroMQ calls the release hook.
// The bytes live in an Array (send buffers, server values), in a received message adopted
// without copying (servers' no-updater paths), or in the storage of a caller's array
// (workers' zero-copy pushes; the array's pending-read count keeps writers out).
struct SharedBuf {
  std::unique_ptr<Array> array;
  zmq::message_t msg;
  std::shared_ptr<void> borrowed;
  size_t borrowed_bytes = 0;
  std::atomic<int> in_flight{0};  // messages (and worker ops) that still reference the bytes
  bool Idle() const { return in_flight.load(std::memory_order_acquire) == 0; }
  void* data() { return array ? array->data() : borrowed ? borrowed.get() : msg.data(); }
  size_t size() const { return array ? array->nbytes() : borrowed ? borrowed_bytes : msg.size(); }
};

struct OutPayload {
  std::shared_ptr<SharedBuf> buf;  // zero-copy source (may be null)
  size_t offset_bytes = 0;
  size_t nbytes = 0;
};

// Sends [routing id][header][str][payload]; sets str_len, payload_len and num_frames in
// the header. Never blocks (sockets are created with unlimited HWM). Returns false on a
// transport error (logged), e.g. an unroutable peer. A payload of at least kShmMinBytes to
// a peer with a sending link in `shm` goes through its ring when it has room (kFlagShm).
bool SendMessage(zmq::socket_t& sock, const std::string* routing_id, WireHeader h,
                 const std::string& str, const OutPayload& payload, ShmPeers* shm = nullptr);

}  // namespace dist
}  // namespace kvstore
