// server.cc - the server as a node: its sockets, the loop, the scheduler's messages, and
// the workers' requests up to the point where they change a value (server_values.cc).
// The design is in server.h.
#include "ps/server.h"

#include <algorithm>
#include <cinttypes>
#include <cstdlib>
#include <cstring>

#include "core/dtype.h"
#include "optimizer/optimizer.h"
#include "ps/clock.h"
#include "ps/compressed_push.h"
#include "ps/key.h"
#include "ps/log.h"
#include "ps/node_table.h"
#include "ps/spin_poll.h"
#include "ps/transport.h"

namespace kvstore {
namespace dist {
namespace server {

void CopyBytes(void* dst, const void* src, size_t n) {
  if (n > 0) std::memcpy(dst, src, n);
}

void CopyOutOfRingUnlessValues(Message* m) {
  const auto type = static_cast<MsgType>(m->h.type);
  const bool values = (type == MsgType::kInit || type == MsgType::kPush || type == MsgType::kPull ||
                       type == MsgType::kPushPull) &&
                      (m->h.flags & kFlagRowSparse) == 0;
  if (!values) CopyOutOfRing(&m->payload, &m->payload_in_ring);
}

void Server::Run() {
  ConfigureSocket(sock_, Link::kServerListen);
  sock_.set(zmq::sockopt::router_mandatory, 0);
  const std::vector<int> ports = Bind();
  JoinResult j = sched_.Join(ports);
  rank_ = j.rank;
  num_workers_ = j.num_workers;
  worker_dead_.assign(static_cast<size_t>(num_workers_), false);
  SetLogPrefix("server " + std::to_string(rank_));
  if (cfg_.verbose >= 1) {
    Log("serving on %s:%s for %d workers", cfg_.host.c_str(), FormatPorts(ports).c_str(), num_workers_);
  }
  while (!stop_) {
    Poll();
    const double now = NowSec();
    sched_.HeartbeatIfDue(now);
    if (!stop_ && sched_.Silent(now)) {
      KV_FAIL(KV_ERR_PEER_DEAD, "server %d: the scheduler sent nothing for %.1f s", rank_,
              sched_.Silence(now));
    }
    CheckRoundTimeouts();
  }
  if (cfg_.verbose >= 1) {
    uint64_t puts = 0, misses = 0;
    shm_.Counts(&puts, &misses);
    Log("stopped; %" PRIu64 " payloads sent through shared memory, %" PRIu64 " inline for want of room",
        puts, misses);
  }
  if (!dead_list_.empty()) {
    KV_FAIL(KV_ERR_PEER_DEAD, "server %d stopped after %s died", rank_, dead_list_.c_str());
  }
}

// One listening port per I/O thread, bound with that thread's affinity (see NodeInfo); the
// first is PORT when set, the others are chosen by the system. Returns the ports.
std::vector<int> Server::Bind() {
  const int num_ports = cfg_.IoThreads();
  std::vector<int> ports;
  for (int i = 0; i < num_ports; ++i) {
    const std::string ep = "tcp://" + cfg_.host + ":" +
                           (i == 0 && cfg_.port > 0 ? std::to_string(cfg_.port) : "*");
    try {
      if (num_ports > 1) sock_.set(zmq::sockopt::affinity, uint64_t{1} << i);
      sock_.bind(ep);
    } catch (const zmq::error_t& e) {
      KV_FAIL(KV_ERR_NETWORK, "server cannot bind %s: %s", ep.c_str(), e.what());
    }
    const std::string last = sock_.get(zmq::sockopt::last_endpoint);
    ports.push_back(std::atoi(last.c_str() + last.rfind(':') + 1));
  }
  return ports;
}

// One turn of the loop: waits for messages (at most until the next heartbeat is due, and
// 0.1 s so that round timeouts are noticed; looking without sleeping for the first
// spin_us, ps/spin_poll.h) and handles what arrived.
void Server::Poll() {
  zmq::pollitem_t items[2] = {{static_cast<void*>(sock_), 0, ZMQ_POLLIN, 0},
                              {static_cast<void*>(sched_.socket()), 0, ZMQ_POLLIN, 0}};
  double wait = std::min(sched_.next_heartbeat() - NowSec(), 0.1);
  if (wait < 0) wait = 0;
  SpinPoll(items, 2, wait, cfg_.spin_us);  // ps/spin_poll.h
  // Only readable sockets are read (an empty receive polls ZeroMQ's mailbox, a syscall).
  for (int budget = 0; budget < 256 && (items[0].revents & ZMQ_POLLIN); ++budget) {
    Message m;
    if (!RecvValidMessage(sock_, true, "a worker", &m, &shm_)) break;
    HandleWorker(m);
    // Long bursts (or slow updaters) must not starve the heartbeat.
    sched_.HeartbeatIfDue(NowSec());
  }
  while (items[1].revents & ZMQ_POLLIN) {
    Message m;
    if (!sched_.Recv(&m)) break;
    HandleScheduler(m);
  }
}

void Server::HandleScheduler(Message& m) {
  switch (static_cast<MsgType>(m.h.type)) {
    case MsgType::kHeartbeatAck:
      break;
    case MsgType::kNodeDead:
      NodeDied(m);
      break;
    case MsgType::kShutdown:
      SendMessage(sched_.socket(), nullptr, MakeHeader(MsgType::kShutdownAck, Role::kServer, rank_),
                  "", OutPayload{});
      stop_ = true;
      break;
    default:
      LogDropped("dropped unexpected %s from the scheduler", MsgTypeName(m.h.type));
  }
}

// NODE_DEAD: any death makes this server's exit fail (Run), naming the dead node; a dead
// worker also fails the sync rounds that wait for it.
void Server::NodeDied(const Message& m) {
  Log("%s", m.str.c_str());
  if (m.h.arg == static_cast<int32_t>(Role::kServer) && m.h.key >= 0 && m.h.key != rank_) {
    dead_list_ += (dead_list_.empty() ? "" : ", ") + NodeName(Role::kServer, static_cast<int>(m.h.key));
  }
  if (m.h.arg == static_cast<int32_t>(Role::kWorker) && m.h.key >= 0 && m.h.key < num_workers_) {
    const int worker = static_cast<int>(m.h.key);
    worker_dead_[static_cast<size_t>(worker)] = true;
    shm_.RemoveRank(worker);
    dead_list_ += (dead_list_.empty() ? "" : ", ") + NodeName(Role::kWorker, worker);
    FailRounds(worker, m.str);
  }
}

void Server::Reply(const std::string& rid, uint64_t req_id, int status, const std::string& msg,
                   const KeyState* with_value) {
  WireHeader h = MakeHeader(MsgType::kReply, Role::kServer, rank_);
  h.req_id = req_id;
  h.status = status;
  OutPayload p;
  if (status == 0 && with_value != nullptr) {
    p.buf = with_value->stored;
    p.nbytes = with_value->stored->size();
    h.dtype = with_value->dtype;
    h.offset = with_value->offset;
    h.count = with_value->count;
    h.total = with_value->total;
  }
  SendMessage(sock_, &rid, h, status == 0 ? std::string() : msg, p, &shm_);
}

KeyState* Server::Lookup(const Message& m, bool create) {
  const bool is_str = (m.h.flags & kFlagStrKey) != 0;
  KeyState* k = keys_.Find(is_str, m.h.key, m.str);
  if (k != nullptr || !create) return k;
  k = keys_.Insert(is_str, m.h.key, m.str);
  k->display = KeyId::FromWire(m.h, m.str).Display();
  k->updater_id = is_str ? next_str_id_++ : static_cast<int>(m.h.key);
  return k;
}

void Server::HandleWorker(Message& m) {
  if (m.h.sender_role != static_cast<int32_t>(Role::kWorker) || m.h.sender_rank < 0 ||
      m.h.sender_rank >= num_workers_) {
    LogDropped("dropped %s from a sender that is not a worker of this job (role %d rank %d)",
        MsgTypeName(m.h.type), m.h.sender_role, m.h.sender_rank);
    return;
  }
  const int rank = m.h.sender_rank;
  if (cfg_.verbose >= 2) Log("%s from worker %d key %lld, %zu bytes", MsgTypeName(m.h.type), rank,
                             static_cast<long long>(m.h.key), m.payload.size());
  const auto type = static_cast<MsgType>(m.h.type);
  CopyOutOfRingUnlessValues(&m);
  switch (type) {
    case MsgType::kCommand:
      HandleCommand(m);
      return;
    case MsgType::kSetOptimizer:
      HandleSetOptimizer(m);
      return;
    case MsgType::kSaveStates:
      HandleSaveStates(m);
      return;
    case MsgType::kLoadStates:
      HandleLoadStates(m);
      return;
    case MsgType::kShmOffer:
      HandleShmOffer(m, rank);
      return;
    case MsgType::kInit:
    case MsgType::kPush:
    case MsgType::kPull:
    case MsgType::kPushPull:
      HandleData(m, rank);
      return;
    default:
      LogDropped("dropped unexpected %s from worker %d", MsgTypeName(m.h.type), rank);
  }
}

// SHM_OFFER: maps a co-located worker's segment (shm.h handshake step 2); once per
// connection. A refusal leaves the connection on TCP.
void Server::HandleShmOffer(const Message& m, int rank) {
  std::string why;
  std::unique_ptr<ShmLink> link;
  if (!cfg_.shm) {
    why = "KVSTORE_SHM=0 on the server";
  } else if (shm_.Find(m.routing_id) != nullptr) {
    why = "this connection already has a segment";
  } else {
    link = ShmLink::Accept(m.str, &why);
  }
  if (link) {
    shm_.Add(m.routing_id, rank, std::move(link));
    if (cfg_.verbose >= 1) Log("worker %d: payloads through shared memory", rank);
  } else if (cfg_.verbose >= 1) {
    Log("worker %d: payloads over TCP (%s)", rank, why.c_str());
  }
  Reply(m.routing_id, m.h.req_id, why.empty() ? 0 : KV_ERR_INVALID_ARGUMENT, why);
}

// COMMAND: runs the server program's controller (negative heads are reserved).
void Server::HandleCommand(const Message& m) {
  int status = 0;
  std::string msg;
  if (m.h.arg < 0) {
    status = KV_ERR_INVALID_ARGUMENT;
    msg = StrFormat("command head %d is reserved", m.h.arg);
  } else if (hooks_->controller == nullptr) {
    status = KV_ERR_NOT_SUPPORTED;
    msg = StrFormat("server %d has no controller for command %d", rank_, m.h.arg);
  } else if (hooks_->controller(m.h.arg, m.str.c_str(), hooks_->controller_data) != 0) {
    status = KV_ERR_CALLBACK;
    msg = StrFormat("the controller of server %d failed command %d", rank_, m.h.arg);
  }
  Reply(m.routing_id, m.h.req_id, status, msg);
}

// SET_OPTIMIZER: every worker sends it; the first one that changes the spec replaces the
// updater (and drops a string-key updater), the others find it already set.
void Server::HandleSetOptimizer(const Message& m) {
  int status = 0;
  std::string msg;
  if (m.str != hooks_->optimizer_spec) {
    try {
      hooks_->updater = CreateOptimizer(m.str);
      hooks_->str_updater.reset();
      hooks_->optimizer_spec = m.str;
      if (cfg_.verbose >= 1) Log("optimizer set to %s", m.str.c_str());
    } catch (const std::exception& e) {
      status = ErrorCode(e);
      msg = e.what();
    }
  }
  Reply(m.routing_id, m.h.req_id, status, msg);
}

// INIT, PUSH, PULL, PUSHPULL: checked against the job's mode and the stored part, then
// answered (pulls, async), applied (async pushes) or queued for their round (sync).
void Server::HandleData(Message& m, int rank) {
  const auto type = static_cast<MsgType>(m.h.type);
  if (!SameMode(m, rank)) return;
  KeyState* k = Lookup(m, type == MsgType::kInit);
  if (type == MsgType::kInit) {
    HandleInit(m, k);
    return;
  }
  if (!SamePart(m, k) || !TakesFloat32Sum(m, *k) || !TakesRows(m, k)) return;
  Req r{type, rank, m.h.req_id, std::move(m.routing_id), std::move(m.payload), NowSec(),
        (m.h.flags & kFlagFloat32Sum) != 0, PackingOf(m.h), (m.h.flags & kFlagRowSparse) != 0, m.h.arg,
        (m.h.flags & kFlagExactPull) != 0};
  r.in_ring = m.payload_in_ring;
  if (mode_ == 1) {
    Enqueue(k, std::move(r));
    // The round this request completed has run: a view still queued waits for another
    // worker's push, and would keep this worker's ring from draining (its next payloads,
    // the ones that other round may need, wait for room: shm.h).
    CopyQueuedOutOfRing(k);
  } else if (type == MsgType::kPull) {
    ReplyReq(r, 0, "", k);
  } else {
    ApplyAsync(k, r);
  }
}

// The first data message fixes the job's mode; a worker of the other kind is refused.
bool Server::SameMode(const Message& m, int rank) {
  const int mode = (m.h.flags & kFlagSync) ? 1 : 0;
  if (mode_ < 0) mode_ = mode;
  if (mode == mode_) return true;
  Reply(m.routing_id, m.h.req_id, KV_ERR_INVALID_ARGUMENT,
        StrFormat("worker %d uses a %s store but this job runs %s", rank,
                  mode ? "sync" : "async", mode_ ? "sync" : "async"));
  return false;
}

void Server::HandleInit(const Message& m, KeyState* k) {
  if (k->stored) {
    Reply(m.routing_id, m.h.req_id, KV_ERR_DUPLICATE_KEY,
          StrFormat("key %s is already initialised on server %d", k->display.c_str(), rank_));
    return;
  }
  // Everything the key needs exists before `stored` says it is initialised.
  k->fifo.resize(static_cast<size_t>(num_workers_), &req_pool_);
  auto stored = std::make_shared<SharedBuf>();
  try {
    stored->array = Array::Create({m.h.count}, m.h.dtype, Context{});
  } catch (const Error& e) {
    Reply(m.routing_id, m.h.req_id, e.code(), e.what());
    return;
  }
  CopyBytes(stored->array->data(), m.payload.data(), m.payload.size());
  k->dtype = m.h.dtype;
  k->total = m.h.total;
  k->offset = m.h.offset;
  k->count = m.h.count;
  k->stored = std::move(stored);
  Reply(m.routing_id, m.h.req_id, 0, "");
}

void Server::CopyQueuedOutOfRing(KeyState* k) {
  for (auto& q : k->fifo) {
    for (Req& r : q) CopyOutOfRing(&r.payload, &r.in_ring);
  }
}

// Whether a request names the part this server stores of an initialised key; otherwise it
// is answered with UNKNOWN_KEY or the mismatch.
bool Server::SamePart(const Message& m, const KeyState* k) {
  if (k == nullptr || !k->stored) {
    const bool is_str = (m.h.flags & kFlagStrKey) != 0;
    Reply(m.routing_id, m.h.req_id, KV_ERR_UNKNOWN_KEY,
          StrFormat("key %s%s%s is not initialised on server %d (init it first)",
                    is_str ? "\"" : "", is_str ? m.str.c_str() : std::to_string(m.h.key).c_str(),
                    is_str ? "\"" : "", rank_));
    return false;
  }
  if (m.h.dtype == k->dtype && m.h.total == k->total && m.h.offset == k->offset &&
      m.h.count == k->count) {
    return true;
  }
  Reply(m.routing_id, m.h.req_id,
        m.h.dtype != k->dtype ? KV_ERR_DTYPE_MISMATCH : KV_ERR_SHAPE_MISMATCH,
        StrFormat("key %s: server %d stores %s elements [%lld, %lld) of %lld, the request "
                  "names %s [%lld, %lld) of %lld",
                  k->display.c_str(), rank_, DTypeName(k->dtype),
                  static_cast<long long>(k->offset), static_cast<long long>(k->offset + k->count),
                  static_cast<long long>(k->total), DTypeName(m.h.dtype),
                  static_cast<long long>(m.h.offset),
                  static_cast<long long>(m.h.offset + m.h.count),
                  static_cast<long long>(m.h.total)));
  return false;
}

// A float32 sum of a float16 key's values (ps/mp_push.h) is only for an updater that
// receives that key in float32 (multi_precision); otherwise it is answered DTYPE_MISMATCH.
bool Server::TakesFloat32Sum(const Message& m, const KeyState& k) {
  if ((m.h.flags & kFlagFloat32Sum) == 0) return true;
  const Updater* u = UpdaterOf(k);
  if (u != nullptr && u->RecvDType(k.dtype) == KV_FLOAT32) return true;
  Reply(m.routing_id, m.h.req_id, KV_ERR_DTYPE_MISMATCH,
        StrFormat("key %s: a float32 sum of float16 values was pushed, but the optimizer on "
                  "server %d keeps no float32 master copy (multi_precision=1)",
                  k.display.c_str(), rank_));
  return false;
}

// Sync mode: a push fails at once while a worker is dead (its round cannot complete); a
// pull with nothing queued before it is answered at once; the rest waits in the sender's
// FIFO for its round (Progress).
void Server::Enqueue(KeyState* k, Req r) {
  if (r.type != MsgType::kPull) {
    for (int w = 0; w < num_workers_; ++w) {
      if (worker_dead_[static_cast<size_t>(w)]) {
        ReplyReq(r, KV_ERR_PEER_DEAD,
                 StrFormat("key %s: the sync round cannot complete because worker %d died",
                           k->display.c_str(), w),
                 nullptr);
        return;
      }
    }
  }
  auto& q = k->fifo[static_cast<size_t>(r.rank)];
  if (r.type == MsgType::kPull && q.empty()) {
    ReplyReq(r, 0, "", k);
    return;
  }
  q.push_back(std::move(r));
  Progress(k);
}

}  // namespace server

void RunServer(const Config& cfg, ServerHooks* hooks) {
  SetLogPrefix("server");
  server::Server s(cfg, hooks);
  s.Run();
}

}  // namespace dist
}  // namespace kvstore
