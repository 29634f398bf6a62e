// common.h - configuration, wire format and transport helpers shared by the scheduler,
// server and worker of the distributed stores.
//
// Topology. One scheduler, S servers, W workers. Every node keeps one DEALER socket to the
// scheduler's ROUTER (rendezvous, barriers, heartbeats, shutdown). Each server binds a
// ROUTER of its own; each worker keeps one DEALER per server. Workers never talk to workers
// and servers never talk to servers.
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
//
// Security. With a job secret every socket runs ZeroMQ's CURVE mechanism and only job
// members get past the handshake (security.h); every socket bounds the frames it accepts
// (Link), so that no peer can make a node buffer more than the job's largest value part.
#pragma once

#include <zmq.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/array.h"
#include "core/error.h"

namespace kvstore {
namespace dist {

// ---------------------------------------------------------------------------------------
// Roles and configuration
// ---------------------------------------------------------------------------------------

enum class Role : int32_t { kScheduler = 0, kServer = 1, kWorker = 2 };
const char* RoleName(Role r);

// Role of this process from DMLC_ROLE (worker when unset). Throws INVALID_ARGUMENT for an
// unknown value.
Role RoleFromEnv();

// Numeric environment variables; every one a node reads goes through these. A value is a
// plain decimal number (no '+', no hex, no unit) with nothing around it but blanks: " 80",
// "80 " and "80\n" all mean 80 (values pasted from files and YAML often end in a newline),
// whatever the C locale. An empty or blank value counts as unset: `dflt` (or, for a required
// variable, an error saying it is not set). Anything else, or a number outside [lo, hi], is
// INVALID_ARGUMENT naming the variable, the start of its value and the accepted range.
int64_t EnvInt(const char* name, int64_t dflt, int64_t lo, int64_t hi, bool required = false);
// Durations in seconds (fractions allowed): a number in [lo, hi], or 0 when `zero_means` is
// not null (it says what 0 means, and the error message repeats it). Keep `hi` small enough
// that a conversion to milliseconds cannot overflow.
double EnvSeconds(const char* name, double dflt, double lo, double hi,
                  const char* zero_means = nullptr);

// Everything a node reads from the environment. Load() validates; missing required
// variables are an INVALID_ARGUMENT error naming the variable.
struct Config {
  Role role = Role::kWorker;
  std::string root_uri;       // DMLC_PS_ROOT_URI
  int root_port = 0;          // DMLC_PS_ROOT_PORT
  int num_workers = 0;        // DMLC_NUM_WORKER
  int num_servers = 0;        // DMLC_NUM_SERVER
  std::string host;           // address this node advertises (DMLC_NODE_HOST/DMLC_INTERFACE)
  int port = 0;               // PORT: the server's listening port, 0 = any free port
  int requested_rank = -1;    // DMLC_WORKER_ID / DMLC_SERVER_ID, -1 = let the scheduler pick
  int verbose = 0;            // PS_VERBOSE: 1 connections, 2 every message
  int64_t bigarray_bound = 1000000;  // MXNET_KVSTORE_BIGARRAY_BOUND / KVSTORE_BIGARRAY_BOUND
  double timeout_sec = 60;           // KVSTORE_TIMEOUT_SEC; 0 = wait forever
  double heartbeat_interval_sec = 1; // KVSTORE_HEARTBEAT_INTERVAL_SEC / PS_HEARTBEAT_INTERVAL
  double heartbeat_timeout_sec = 10; // KVSTORE_HEARTBEAT_TIMEOUT_SEC / PS_HEARTBEAT_TIMEOUT
  int io_threads = 0;                // KVSTORE_IO_THREADS; 0 = IoThreads() decides
  std::string scheduler_bind;        // KVSTORE_SCHEDULER_BIND; "" = DMLC_PS_ROOT_URI

  static Config Load();
  std::string SchedulerEndpoint() const;
  // ZeroMQ I/O threads of this node: KVSTORE_IO_THREADS when set, else one per peer stream
  // (servers: workers; workers: servers) up to 4. ZeroMQ spreads a socket's connections over
  // its I/O threads, so a server receives several workers' pushes in parallel.
  int IoThreads() const;
};

// ---------------------------------------------------------------------------------------
// Logging (stderr, one line per call, prefixed with the node name)
// ---------------------------------------------------------------------------------------

void SetLogPrefix(const std::string& prefix);
void Log(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// A log of one kind of event that a peer can repeat at will (dropped messages, refused
// connections): the first kFirst events are logged in full; later ones are counted, and one
// line per kPeriodSec (written at the next event) and one at exit give the count since the
// last line, with the latest event's text. Thread-safe.
class RateLimitedLog {
 public:
  static constexpr uint64_t kFirst = 5;
  static constexpr double kPeriodSec = 10;
  explicit RateLimitedLog(const char* what) : what_(what) {}
  ~RateLimitedLog();  // the unreported count, if any
  void Event(const char* fmt, ...) __attribute__((format(printf, 2, 3), nonnull(2)));

 private:
  const char* what_;  // "dropped messages"
  std::mutex mu_;
  uint64_t total_ = 0, unreported_ = 0;
  double last_line_ = 0;
  std::string latest_;
};

// ---------------------------------------------------------------------------------------
// Time
// ---------------------------------------------------------------------------------------

using Clock = std::chrono::steady_clock;
inline double NowSec() {
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}
// A deadline `sec` from now; +inf when sec <= 0 (wait forever).
double DeadlineAfter(double sec);

// ---------------------------------------------------------------------------------------
// Wire format
// ---------------------------------------------------------------------------------------

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
  kReply = 26,       // status; payload = values for pull/pushpull; str = error message
  kMaxType = 27
};
const char* MsgTypeName(uint16_t t);

// Flags of data messages.
constexpr uint32_t kFlagStrKey = 1u << 0;  // the key is the string frame, not header.key
constexpr uint32_t kFlagSync = 1u << 1;    // the sending store is a sync store
constexpr uint32_t kFlagKnownFlags = kFlagStrKey | kFlagSync;

// Fixed-size header; all integers in host byte order (the magic rejects a peer of the
// other endianness). Data messages carry one part of one key: elements
// [offset, offset + count) of a value of `total` elements of `dtype`.
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
};

// Receives one multipart message from `sock` (non-blocking; the caller polled). Returns
// false when nothing was pending. Returns true with *ok false when a message arrived but
// failed validation (it has been consumed and logged as `*why`).
bool RecvMessage(zmq::socket_t& sock, bool router, Message* out, bool* ok, std::string* why);

// Logs a message that a node dropped (malformed, unexpected, from an unknown sender), at
// most RateLimitedLog's rate: a flood of bad messages writes a few lines, not one per message.
void LogDropped(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// Receives the next valid message from `sock` (non-blocking; the caller polled). Malformed
// messages are consumed and logged (LogDropped) as coming from `peer` ("the scheduler", ...).
// Returns false when no valid message is pending, also after 64 malformed ones in one call,
// so that a flood of garbage cannot keep the caller from its heartbeats and deadlines.
bool RecvValidMessage(zmq::socket_t& sock, bool router, const char* peer, Message* out);

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
  Array* lender = nullptr;  // borrowed: the array whose pending read the worker op ends
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
// transport error (logged), e.g. an unroutable peer.
bool SendMessage(zmq::socket_t& sock, const std::string* routing_id, WireHeader h,
                 const std::string& str, const OutPayload& payload);

// The four kinds of socket of a job. Listening sockets are CURVE servers, connecting ones
// CURVE clients (when the job has a secret). Links to and from the scheduler carry no values:
// their frames are bounded by kMaxStringFrame; links between workers and servers by
// MaxMessageBytes() (plus CURVE's per-frame overhead), so every worker must refuse to init
// a key whose part exceeds it (CheckPartsFit).
enum class Link {
  kSchedulerListen,  // the scheduler's ROUTER
  kServerListen,     // a server's ROUTER
  kToScheduler,      // a server's or worker's DEALER to the scheduler
  kToServer,         // a worker's DEALER to a server
};

// Socket setup shared by every node, before bind/connect: unlimited HWM, bounded linger, the
// link's frame bound, and its CURVE role and keys (ProcessJobKeys()). Throws what
// ProcessJobKeys / MaxMessageBytes throw.
void ConfigureSocket(zmq::socket_t& sock, Link link);

// ---------------------------------------------------------------------------------------
// Node table and key placement
// ---------------------------------------------------------------------------------------

// A server listens on one port per ZeroMQ I/O thread (Config::IoThreads), each bound with
// that thread's affinity, and worker r connects to ports[r mod ports.size()]. ZeroMQ
// otherwise gives each accepted connection to the least loaded I/O thread, and connections
// that arrive together (workers start together) all see the same loads and land on one
// thread, which then receives every worker's stream alone.
struct NodeInfo {
  Role role = Role::kWorker;
  int rank = -1;
  std::string host;
  std::vector<int> ports;  // servers: at least one
};

// "P0,P1,..." <-> ports; parsing fails (false) on anything but 1 to 64 ports in 1..65535.
std::string FormatPorts(const std::vector<int>& ports);
bool ParsePorts(const std::string& text, std::vector<int>* ports);

// "W S\nserver RANK HOST P0[,P1...]\n..." - what workers need to reach the servers.
std::string FormatTable(int num_workers, int num_servers, const std::vector<NodeInfo>& servers);
// Throws PROTOCOL on a malformed table.
void ParseTable(const std::string& text, int* num_workers, int* num_servers,
                std::vector<NodeInfo>* servers);

// Stable 64-bit FNV-1a of a string key: the same on every host and every run.
uint64_t StableHash(const std::string& s);

// Where the parts of a key live. Keys with fewer than `bound` elements go whole to one
// server (int keys: key mod S; string keys: StableHash mod S); larger keys are cut into S
// parts, part i = [floor(n*i/S), floor(n*(i+1)/S)) on server i.
struct PartPlan {
  int server;
  int64_t offset;
  int64_t count;
};
std::vector<PartPlan> PlanParts(bool str_key, int64_t int_key, const std::string& str_key_name,
                                int64_t total, int num_servers, int64_t bound);

// Throws INVALID_ARGUMENT naming `key` when one of its parts (elements of `esize` bytes)
// exceeds MaxMessageBytes(): its server would refuse the message that carries it.
void CheckPartsFit(const std::vector<PartPlan>& parts, size_t esize, const std::string& key);

// Node names for messages: "worker 2", "server 0", "scheduler".
std::string NodeName(Role role, int rank);

// The advertised host of this node (DMLC_NODE_HOST, then the address of DMLC_INTERFACE,
// then 127.0.0.1 for a loopback root URI, then the first non-loopback IPv4 address).
std::string DetectHost(const std::string& root_uri);

}  // namespace dist
}  // namespace kvstore
