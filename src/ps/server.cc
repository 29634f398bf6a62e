// server.cc - a parameter server: stores its parts of the keys, merges pushes, answers
// pulls, runs the updater and the controller.
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
// Copies. Replies that carry values reference the stored buffer without copying; an update
// never writes a buffer that ZeroMQ may still be sending (copy-on-write through SharedBuf).
// Without an updater a round's sum accumulates in place in worker 0's received message,
// which becomes the stored value, so a push costs the transport's copies plus one summing
// pass over W inputs (none for one worker).
#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <set>

#include "core/cpu/kernels.h"
#include "core/dtype.h"
#include "ps/clock.h"
#include "ps/log.h"
#include "ps/node_table.h"
#include "ps/ps.h"
#include "ps/security.h"
#include "ps/transport.h"
#include "ps/wire.h"
#include "optimizer/optimizer.h"

namespace kvstore {
namespace dist {

namespace {

// memcpy for values that may have no elements (their data pointers are then null).
void CopyBytes(void* dst, const void* src, size_t n) {
  if (n > 0) std::memcpy(dst, src, n);
}

struct Req {
  MsgType type;
  int rank;
  uint64_t req_id;
  std::string routing_id;
  zmq::message_t payload;
  double arrived;
};

struct KeyState {
  std::string display;  // "3" or "\"weight\"" for messages
  bool is_str = false;
  int64_t int_key = 0;
  std::string name;
  int updater_id = 0;   // int key, or the server-local id of a string key
  int dtype = 0;
  int64_t total = 0, offset = 0, count = 0;
  std::shared_ptr<SharedBuf> stored, spare;
  std::unique_ptr<Array> merged;  // the round's sum when an updater runs
  std::vector<std::deque<Req>> fifo;  // sync mode: per worker rank
};

class Server {
 public:
  Server(const Config& cfg, ServerHooks* hooks)
      : cfg_(cfg), hooks_(hooks), ctx_(cfg.IoThreads()), sock_(ctx_, zmq::socket_type::router),
        sched_(ctx_, cfg) {}

  void Run();

 private:
  void HandleWorker(Message& m);
  void HandleScheduler(Message& m);
  void Reply(const std::string& rid, uint64_t req_id, int status, const std::string& msg,
             const KeyState* with_value = nullptr);
  void ReplyReq(const Req& r, int status, const std::string& msg, const KeyState* with_value) {
    Reply(r.routing_id, r.req_id, status, msg, with_value);
  }
  KeyState* Lookup(const Message& m, bool create, std::string* key_id);
  void Progress(KeyState* k);
  void RunRound(KeyState* k);
  void ApplyAsync(KeyState* k, Req& r);
  std::shared_ptr<SharedBuf> TakeTarget(KeyState* k);
  static bool Adoptable(const KeyState& k, const zmq::message_t& payload);
  void Update(KeyState* k, Array* recv, Array* target);
  void FailQueuedPushes(KeyState* k, int code, const std::string& why);
  void CheckRoundTimeouts();
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
  std::map<std::string, KeyState> keys_;
  std::set<KeyState*> waiting_;  // keys with queued requests
  std::vector<bool> worker_dead_;
  std::string dead_list_;
  int next_str_id_ = 0;
  bool stop_ = false;
};

void Server::Run() {
  ConfigureSocket(sock_, Link::kServerListen);
  sock_.set(zmq::sockopt::router_mandatory, 0);
  // One listening port per I/O thread, bound with that thread's affinity (see NodeInfo);
  // the first is PORT when set, the others are chosen by the system.
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
  JoinResult j = sched_.Join(ports);
  rank_ = j.rank;
  num_workers_ = j.num_workers;
  worker_dead_.assign(static_cast<size_t>(num_workers_), false);
  SetLogPrefix("server " + std::to_string(rank_));
  if (cfg_.verbose >= 1) {
    Log("serving on %s:%s for %d workers", cfg_.host.c_str(), FormatPorts(ports).c_str(), num_workers_);
  }
  while (!stop_) {
    zmq::pollitem_t items[2] = {{static_cast<void*>(sock_), 0, ZMQ_POLLIN, 0},
                                {static_cast<void*>(sched_.socket()), 0, ZMQ_POLLIN, 0}};
    const double now0 = NowSec();
    double wait = std::min(sched_.next_heartbeat() - now0, 0.1);
    if (wait < 0) wait = 0;
    zmq::poll(items, 2, std::chrono::milliseconds(static_cast<long>(wait * 1000)));
    // Only readable sockets are read (an empty receive polls ZeroMQ's mailbox, a syscall).
    for (int budget = 0; budget < 256 && (items[0].revents & ZMQ_POLLIN); ++budget) {
      Message m;
      if (!RecvValidMessage(sock_, true, "a worker", &m)) break;
      HandleWorker(m);
      // Long bursts (or slow updaters) must not starve the heartbeat.
      sched_.HeartbeatIfDue(NowSec());
    }
    while (items[1].revents & ZMQ_POLLIN) {
      Message m;
      if (!sched_.Recv(&m)) break;
      HandleScheduler(m);
    }
    const double now = NowSec();
    sched_.HeartbeatIfDue(now);
    if (!stop_ && sched_.Silent(now)) {
      KV_FAIL(KV_ERR_PEER_DEAD, "server %d: the scheduler sent nothing for %.1f s", rank_,
              sched_.Silence(now));
    }
    CheckRoundTimeouts();
  }
  if (cfg_.verbose >= 1) Log("stopped");
  if (!dead_list_.empty()) {
    KV_FAIL(KV_ERR_PEER_DEAD, "server %d stopped after %s died", rank_, dead_list_.c_str());
  }
}

void Server::HandleScheduler(Message& m) {
  switch (static_cast<MsgType>(m.h.type)) {
    case MsgType::kHeartbeatAck:
      break;
    case MsgType::kNodeDead: {
      Log("%s", m.str.c_str());
      // Any death makes this server's exit fail (Run), naming the dead node.
      if (m.h.arg == static_cast<int32_t>(Role::kServer) && m.h.key >= 0 && m.h.key != rank_) {
        dead_list_ += (dead_list_.empty() ? "" : ", ") + NodeName(Role::kServer, static_cast<int>(m.h.key));
      }
      if (m.h.arg == static_cast<int32_t>(Role::kWorker) && m.h.key >= 0 &&
          m.h.key < num_workers_) {
        worker_dead_[static_cast<size_t>(m.h.key)] = true;
        dead_list_ += (dead_list_.empty() ? "" : ", ") + NodeName(Role::kWorker, static_cast<int>(m.h.key));
        if (mode_ == 1) {
          const std::string why = StrFormat(
              "worker %d died (%s); the sync round of key %%s cannot complete",
              static_cast<int>(m.h.key), m.str.c_str());
          std::vector<KeyState*> w(waiting_.begin(), waiting_.end());
          for (KeyState* k : w) {
            FailQueuedPushes(k, KV_ERR_PEER_DEAD, StrFormat(why.c_str(), k->display.c_str()));
          }
        }
      }
      break;
    }
    case MsgType::kShutdown: {
      SendMessage(sched_.socket(), nullptr, MakeHeader(MsgType::kShutdownAck, Role::kServer, rank_), "",
                  OutPayload{});
      stop_ = true;
      break;
    }
    default:
      LogDropped("dropped unexpected %s from the scheduler", MsgTypeName(m.h.type));
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
  SendMessage(sock_, &rid, h, status == 0 ? std::string() : msg, p);
}

KeyState* Server::Lookup(const Message& m, bool create, std::string* key_id) {
  const bool is_str = (m.h.flags & kFlagStrKey) != 0;
  if (is_str) {
    *key_id = "s" + m.str;
  } else {
    key_id->assign("i");
    key_id->append(reinterpret_cast<const char*>(&m.h.key), sizeof(m.h.key));
  }
  auto it = keys_.find(*key_id);
  if (it != keys_.end()) return &it->second;
  if (!create) return nullptr;
  KeyState& k = keys_[*key_id];
  k.is_str = is_str;
  k.int_key = m.h.key;
  k.name = is_str ? m.str : std::string();
  k.display = is_str ? "\"" + m.str + "\"" : std::to_string(m.h.key);
  k.updater_id = is_str ? next_str_id_++ : static_cast<int>(m.h.key);
  return &k;
}

void Server::HandleWorker(Message& m) {
  const auto type = static_cast<MsgType>(m.h.type);
  if (m.h.sender_role != static_cast<int32_t>(Role::kWorker) || m.h.sender_rank < 0 ||
      m.h.sender_rank >= num_workers_) {
    LogDropped("dropped %s from a sender that is not a worker of this job (role %d rank %d)",
        MsgTypeName(m.h.type), m.h.sender_role, m.h.sender_rank);
    return;
  }
  const int rank = m.h.sender_rank;
  if (cfg_.verbose >= 2) Log("%s from worker %d key %lld", MsgTypeName(m.h.type), rank,
                             static_cast<long long>(m.h.key));
  switch (type) {
    case MsgType::kCommand: {
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
      return;
    }
    case MsgType::kSetOptimizer: {
      int status = 0;
      std::string msg;
      if (m.str != hooks_->optimizer_spec) {
        try {
          hooks_->updater = CreateOptimizer(m.str);
          hooks_->str_updater.reset();
          hooks_->optimizer_spec = m.str;
          if (cfg_.verbose >= 1) Log("optimizer set to %s", m.str.c_str());
        } catch (const Error& e) {
          status = e.code();
          msg = e.what();
        } catch (const std::exception& e) {
          status = KV_ERR_INTERNAL;
          msg = e.what();
        }
      }
      Reply(m.routing_id, m.h.req_id, status, msg);
      return;
    }
    case MsgType::kInit:
    case MsgType::kPush:
    case MsgType::kPull:
    case MsgType::kPushPull:
      break;
    default:
      LogDropped("dropped unexpected %s from worker %d", MsgTypeName(m.h.type), rank);
      return;
  }
  const int mode = (m.h.flags & kFlagSync) ? 1 : 0;
  if (mode_ < 0) mode_ = mode;
  if (mode != mode_) {
    Reply(m.routing_id, m.h.req_id, KV_ERR_INVALID_ARGUMENT,
          StrFormat("worker %d uses a %s store but this job runs %s", rank,
                    mode ? "sync" : "async", mode_ ? "sync" : "async"));
    return;
  }
  std::string key_id;
  KeyState* k = Lookup(m, type == MsgType::kInit, &key_id);
  if (type == MsgType::kInit) {
    if (k->stored) {
      Reply(m.routing_id, m.h.req_id, KV_ERR_DUPLICATE_KEY,
            StrFormat("key %s is already initialised on server %d", k->display.c_str(), rank_));
      return;
    }
    k->dtype = m.h.dtype;
    k->total = m.h.total;
    k->offset = m.h.offset;
    k->count = m.h.count;
    k->stored = std::make_shared<SharedBuf>();
    try {
      k->stored->array = Array::Create({k->count}, k->dtype, Context{});
    } catch (const Error& e) {
      k->stored.reset();
      Reply(m.routing_id, m.h.req_id, e.code(), e.what());
      return;
    }
    CopyBytes(k->stored->array->data(), m.payload.data(), m.payload.size());
    k->fifo.resize(static_cast<size_t>(num_workers_));
    Reply(m.routing_id, m.h.req_id, 0, "");
    return;
  }
  if (k == nullptr || !k->stored) {
    Reply(m.routing_id, m.h.req_id, KV_ERR_UNKNOWN_KEY,
          StrFormat("key %s%s%s is not initialised on server %d (init it first)",
                    (m.h.flags & kFlagStrKey) ? "\"" : "",
                    (m.h.flags & kFlagStrKey) ? m.str.c_str() : std::to_string(m.h.key).c_str(),
                    (m.h.flags & kFlagStrKey) ? "\"" : "", rank_));
    return;
  }
  if (m.h.dtype != k->dtype || m.h.total != k->total || m.h.offset != k->offset ||
      m.h.count != k->count) {
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
    return;
  }
  Req r{type, rank, m.h.req_id, std::move(m.routing_id), std::move(m.payload), NowSec()};
  if (mode_ == 0) {
    if (type == MsgType::kPull) {
      ReplyReq(r, 0, "", k);
    } else {
      ApplyAsync(k, r);
    }
    return;
  }
  if (type != MsgType::kPull) {
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
  auto& q = k->fifo[static_cast<size_t>(rank)];
  if (type == MsgType::kPull && q.empty()) {
    ReplyReq(r, 0, "", k);
    return;
  }
  q.push_back(std::move(r));
  waiting_.insert(k);
  Progress(k);
}

// Answers pulls at the heads of the FIFOs and runs rounds while every FIFO has a push at
// its head.
void Server::Progress(KeyState* k) {
  for (;;) {
    bool all_push = true;
    bool any = false;
    for (auto& q : k->fifo) {
      while (!q.empty() && q.front().type == MsgType::kPull) {
        ReplyReq(q.front(), 0, "", k);
        q.pop_front();
      }
      if (q.empty()) all_push = false;
      else any = true;
    }
    if (!all_push) {
      if (!any) waiting_.erase(k);
      return;
    }
    RunRound(k);
  }
}

// Whether a received payload may become a stored value as it is. Small messages may live
// inside a ZeroMQ receive chunk shared with other messages (keeping one would pin the whole
// chunk) and at any byte offset; they are copied into an array of the key instead. (The
// same rule as Array::AdoptStorage: large, and aligned for the dtype.)
bool Server::Adoptable(const KeyState& k, const zmq::message_t& payload) {
  return payload.size() >= kZeroCopyMinBytes &&
         reinterpret_cast<uintptr_t>(payload.data()) % DTypeSize(k.dtype) == 0;
}

std::shared_ptr<SharedBuf> Server::TakeTarget(KeyState* k) {
  std::shared_ptr<SharedBuf> t;
  if (k->spare && k->spare->array && k->spare->Idle()) {
    t = std::move(k->spare);
  } else {
    t = std::make_shared<SharedBuf>();
    t->array = Array::Create({k->count}, k->dtype, Context{});
  }
  k->spare.reset();
  return t;
}

void Server::Update(KeyState* k, Array* recv, Array* target) {
  std::shared_ptr<Updater> u = (k->is_str && hooks_->str_updater) ? hooks_->str_updater
                                                                   : hooks_->updater;
  // The optimizer state is committed with the value: once Update returns, RunRound and
  // ApplyAsync only move `target` into place, which cannot fail. A throw discards it.
  UpdateTxn txn;
  u->Update(k->updater_id, k->is_str ? k->name.c_str() : nullptr, recv, target, &txn);
  txn.Commit();
}

void Server::RunRound(KeyState* k) {
  // Sources in rank order 0..W-1; CpuReduceSum adds them in exactly that order, so the
  // round's bits do not depend on arrival order. ZeroMQ may deliver small messages inside
  // its receive buffer at any byte offset; such payloads are copied to aligned scratch
  // before they are read as elements.
  std::vector<const void*> srcs;
  std::vector<std::vector<double>> aligned;
  aligned.reserve(k->fifo.size());
  srcs.reserve(k->fifo.size());
  const size_t esize = DTypeSize(k->dtype);
  for (auto& q : k->fifo) {
    const zmq::message_t& p = q.front().payload;
    if (reinterpret_cast<uintptr_t>(p.data()) % esize == 0) {
      srcs.push_back(p.data());
    } else {
      aligned.emplace_back((p.size() + sizeof(double) - 1) / sizeof(double));
      CopyBytes(aligned.back().data(), p.data(), p.size());
      srcs.push_back(aligned.back().data());
    }
  }
  zmq::message_t& first = k->fifo[0].front().payload;
  const int num_srcs = static_cast<int>(srcs.size());
  int status = 0;
  std::string msg;
  try {
    const bool has_updater = hooks_->updater || (k->is_str && hooks_->str_updater);
    std::shared_ptr<SharedBuf> target;
    if (!has_updater && Adoptable(*k, first)) {
      // Assign: the sum is accumulated into worker 0's received message, which becomes the
      // stored value (no copy; with one worker nothing is added).
      if (num_srcs > 1) CpuReduceSum(srcs.data(), num_srcs, first.data(), k->count, k->dtype);
      target = std::make_shared<SharedBuf>();
      target->msg = std::move(first);
    } else if (!has_updater) {
      target = TakeTarget(k);
      CpuReduceSum(srcs.data(), num_srcs, target->array->data(), k->count, k->dtype);
    } else {
      target = TakeTarget(k);
      if (!k->merged) k->merged = Array::Create({k->count}, k->dtype, Context{});
      CpuReduceSum(srcs.data(), num_srcs, k->merged->data(), k->count, k->dtype);
      CopyBytes(target->array->data(), k->stored->data(), k->stored->size());
      Update(k, k->merged.get(), target->array.get());
    }
    if (k->stored->array) k->spare = std::move(k->stored);
    k->stored = std::move(target);
  } catch (const Error& e) {
    status = e.code() == KV_ERR_INVALID_ARGUMENT ? KV_ERR_CALLBACK : e.code();
    msg = StrFormat("key %s: the updater on server %d failed: %s", k->display.c_str(), rank_, e.what());
  } catch (const std::exception& e) {
    status = KV_ERR_CALLBACK;
    msg = StrFormat("key %s: the updater on server %d failed: %s", k->display.c_str(), rank_, e.what());
  }
  for (auto& q : k->fifo) {
    const Req& r = q.front();
    ReplyReq(r, status, msg, r.type == MsgType::kPushPull ? k : nullptr);
    q.pop_front();
  }
}

void Server::ApplyAsync(KeyState* k, Req& r) {
  int status = 0;
  std::string msg;
  try {
    const bool has_updater = hooks_->updater || (k->is_str && hooks_->str_updater);
    std::shared_ptr<SharedBuf> target;
    if (!has_updater && Adoptable(*k, r.payload)) {
      // Documented default: with no updater an async server assigns the pushed value (the
      // received message is adopted, no copy).
      target = std::make_shared<SharedBuf>();
      target->msg = std::move(r.payload);
    } else if (!has_updater) {
      target = TakeTarget(k);
      CopyBytes(target->array->data(), r.payload.data(), r.payload.size());
    } else {
      target = TakeTarget(k);
      if (!k->merged) k->merged = Array::Create({k->count}, k->dtype, Context{});
      CopyBytes(k->merged->data(), r.payload.data(), r.payload.size());
      CopyBytes(target->array->data(), k->stored->data(), k->stored->size());
      Update(k, k->merged.get(), target->array.get());
    }
    if (k->stored->array) k->spare = std::move(k->stored);
    k->stored = std::move(target);
  } catch (const Error& e) {
    status = KV_ERR_CALLBACK;
    msg = StrFormat("key %s: the updater on server %d failed: %s", k->display.c_str(), rank_, e.what());
  } catch (const std::exception& e) {
    status = KV_ERR_CALLBACK;
    msg = StrFormat("key %s: the updater on server %d failed: %s", k->display.c_str(), rank_, e.what());
  }
  ReplyReq(r, status, msg, r.type == MsgType::kPushPull ? k : nullptr);
}

// "missing: worker 2, worker 3; pushed: worker 0, worker 1" for the current round.
std::string Server::MissingRanks(const KeyState& k) const {
  std::string missing, have;
  for (int w = 0; w < num_workers_; ++w) {
    const auto& q = k.fifo[static_cast<size_t>(w)];
    const bool pushed = !q.empty() && q.front().type != MsgType::kPull;
    std::string& l = pushed ? have : missing;
    l += (l.empty() ? "" : ", ") + NodeName(Role::kWorker, w);
  }
  return "missing: " + (missing.empty() ? std::string("none") : missing) +
         "; pushed: " + (have.empty() ? std::string("none") : have);
}

void Server::FailQueuedPushes(KeyState* k, int code, const std::string& why) {
  const std::string detail = why + " (" + MissingRanks(*k) + ")";
  // A pull queued behind a failed push fails too: it was ordered after that push and must
  // not return a value that silently lacks it.
  for (auto& q : k->fifo) {
    bool failed_before = false;
    for (auto& r : q) {
      if (r.type != MsgType::kPull) failed_before = true;
      ReplyReq(r, code,
               failed_before && r.type == MsgType::kPull
                   ? "pull ordered after a failed push: " + detail
                   : detail,
               nullptr);
    }
    q.clear();
  }
  Progress(k);
}

void Server::CheckRoundTimeouts() {
  if (cfg_.timeout_sec <= 0 || waiting_.empty()) return;
  const double now = NowSec();
  std::vector<KeyState*> expired;
  for (KeyState* k : waiting_) {
    double first = now;
    for (const auto& q : k->fifo) {
      if (!q.empty() && q.front().type != MsgType::kPull) first = std::min(first, q.front().arrived);
    }
    if (now - first > cfg_.timeout_sec) expired.push_back(k);
  }
  for (KeyState* k : expired) {
    Log("sync round of key %s timed out: %s", k->display.c_str(), MissingRanks(*k).c_str());
    FailQueuedPushes(k, KV_ERR_TIMEOUT,
                     StrFormat("the sync round of key %s on server %d timed out after %.0f s",
                               k->display.c_str(), rank_, cfg_.timeout_sec));
  }
}

}  // namespace

void RunServer(const Config& cfg, ServerHooks* hooks) {
  SetLogPrefix("server");
  Server s(cfg, hooks);
  s.Run();
}

}  // namespace dist
}  // namespace kvstore
