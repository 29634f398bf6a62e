// worker_io.cc - a worker's I/O loop (worker_io.h).
#include "ps/worker_io.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstring>

#include "core/dtype.h"
#include "core/error.h"
#include "ps/clock.h"
#include "ps/log.h"
#include "ps/node_table.h"
#include "ps/spin_poll.h"
#include "ps/transport.h"

namespace kvstore {
namespace dist {

WorkerIo::WorkerIo(const Config& cfg, OpTracker* tracker)
    : cfg_(cfg), tracker_(tracker), ctx_(cfg.IoThreads()), link_(ctx_, cfg_) {
  JoinResult j = link_.Join({});
  rank_ = j.rank;
  num_workers_ = j.num_workers;
  num_servers_ = j.num_servers;
  SetLogPrefix("worker " + std::to_string(rank_));
  server_dead_.assign(static_cast<size_t>(num_servers_), false);
  worker_dead_.assign(static_cast<size_t>(num_workers_), false);
  const int io_threads = cfg_.IoThreads();
  for (const auto& s : j.servers) {
    servers_.emplace_back(ctx_, zmq::socket_type::dealer);
    server_names_.push_back("server " + std::to_string(servers_.size() - 1));
    zmq::socket_t& sk = servers_.back();
    ConfigureSocket(sk, Link::kToServer);
    // Server s is served by I/O thread s mod IoThreads (ZeroMQ would otherwise put the
    // connections, made back to back, on whichever thread looked least loaded at the time);
    // on the server, this worker uses the port of the server's I/O thread for its rank.
    if (io_threads > 1) {
      sk.set(zmq::sockopt::affinity, uint64_t{1} << ((servers_.size() - 1) % static_cast<size_t>(io_threads)));
    }
    const int port = s.ports[static_cast<size_t>(rank_) % s.ports.size()];
    const std::string ep = "tcp://" + s.host + ":" + std::to_string(port);
    try {
      sk.connect(ep);
    } catch (const zmq::error_t& e) {
      KV_FAIL(KV_ERR_NETWORK, "worker %d cannot connect to server %d at %s: %s", rank_, s.rank,
              ep.c_str(), e.what());
    }
    if (cfg_.verbose >= 1) Log("connected to server %d at %s", s.rank, ep.c_str());
    shm_.emplace_back();
    held_.emplace_back();
    if (cfg_.shm) OfferShm(static_cast<int>(servers_.size()) - 1);
  }
  // Callers waiting for a pull's values look for them as long as this loop looks for replies.
  Array::SetWaitSpinUs(cfg_.spin_us);
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  KV_CHECK(wake_fd_ >= 0, KV_ERR_INTERNAL, "eventfd failed: %s", std::strerror(errno));
  thread_ = std::thread([this] { Loop(); });
}

// Handshake step 1 (shm.h), before the I/O thread starts: every server gets an offer; those
// on other hosts refuse it. Requests sent before the answer travel over TCP.
void WorkerIo::OfferShm(int server) {
  std::string why;
  std::unique_ptr<ShmLink> link = ShmLink::Create(static_cast<size_t>(cfg_.shm_ring_bytes), &why);
  if (!link) {
    if (cfg_.verbose >= 1) Log("no shared memory for server %d: %s", server, why.c_str());
    return;
  }
  WireHeader h = Header(MsgType::kShmOffer);
  h.req_id = 0;  // never a request's id (those start at 1): answered in ShmAnswered
  if (SendMessage(servers_[static_cast<size_t>(server)], nullptr, h, link->offer(), OutPayload{})) {
    shm_[static_cast<size_t>(server)].Add("", server, std::move(link));
  }
}

// Handshake step 3: the server mapped the segment (status 0), or payloads stay on TCP.
void WorkerIo::ShmAnswered(int server, const Message& m) {
  ShmPeers& peers = shm_[static_cast<size_t>(server)];
  ShmLink* link = peers.Find("");
  if (link == nullptr || link->sending()) {
    LogDropped("dropped an unexpected shared-memory answer from server %d", server);
    return;
  }
  link->Answered(m.h.status == 0);
  if (cfg_.verbose >= 1) {
    Log("server %d: payloads %s%s", server, m.h.status == 0 ? "through shared memory" : "over TCP: ",
        m.h.status == 0 ? "" : m.str.c_str());
  }
  if (m.h.status != 0) peers.Remove("");
}

double WorkerIo::RequestTimeout() const {
  return cfg_.timeout_sec > 0 ? cfg_.timeout_sec + cfg_.heartbeat_timeout_sec + 2 : 0;
}

void WorkerIo::Wake() {
  uint64_t one = 1;
  if (write(wake_fd_, &one, sizeof(one)) < 0) {
    // The counter cannot overflow in practice; a failed wake-up is caught by the poll
    // timeout of the I/O thread.
  }
}

void WorkerIo::Enqueue(std::vector<OutMsg>& msgs, int priority) {
  std::vector<SendQueue<OutMsg>::Entry> entries(msgs.size());
  for (size_t i = 0; i < msgs.size(); ++i) {
    OutMsg& m = msgs[i];
    SendQueue<OutMsg>::Entry& e = entries[i];
    e.key = m.order_key;
    if (m.op && m.op->type == MsgType::kPull) {
      e.kind = SendKind::kPull;
      // A row_sparse pull's reply holds its ids' rows (wire.h kFlagRowSparse), not the part.
      e.reply_bytes = (m.h.flags & kFlagRowSparse) != 0
                          ? m.payload.nbytes / sizeof(int64_t) * static_cast<size_t>(m.h.arg) * DTypeSize(m.op->key->dtype)
                          : static_cast<size_t>(m.part.count) * DTypeSize(m.op->key->dtype);
    } else if (m.op) {
      e.kind = SendKind::kPush;
    }
    e.item = std::move(m);
  }
  // Once woken, the I/O thread sends a slice per turn of its loop, without sleeping, until
  // nothing queued may leave, so only the request that finds the queue empty needs to wake
  // it.
  if (queue_.Push(entries, priority)) Wake();
}

void WorkerIo::Stop() {
  if (stopped_) return;
  stopped_ = true;
  stop_.store(true, std::memory_order_release);
  Wake();
  if (thread_.joinable()) thread_.join();
  for (auto& s : servers_) s.set(zmq::sockopt::linger, 200);
  link_.socket().set(zmq::sockopt::linger, 200);
  close(wake_fd_);
}

int WorkerIo::KnownDead(int node_group, bool* scheduler_dead) {
  std::lock_guard<std::mutex> lock(peers_mu_);
  *scheduler_dead = scheduler_dead_;
  int n = 0;
  if (node_group & KV_NODE_SERVERS) n += static_cast<int>(std::count(server_dead_.begin(), server_dead_.end(), true));
  if (node_group & KV_NODE_WORKERS) n += static_cast<int>(std::count(worker_dead_.begin(), worker_dead_.end(), true));
  return n;
}

std::string WorkerIo::DeadNodes() {
  std::lock_guard<std::mutex> lock(peers_mu_);
  std::string list = scheduler_dead_ ? "the scheduler" : "";
  for (int s = 0; s < num_servers_; ++s) {
    if (server_dead_[static_cast<size_t>(s)]) list += (list.empty() ? "" : ", ") + NodeName(Role::kServer, s);
  }
  for (int w = 0; w < num_workers_; ++w) {
    if (worker_dead_[static_cast<size_t>(w)]) list += (list.empty() ? "" : ", ") + NodeName(Role::kWorker, w);
  }
  return list;
}

// ---------------------------------------------------------------------------------------
// The I/O thread
// ---------------------------------------------------------------------------------------

// One turn sends at most kSendSlice held and kSendSlice queued requests and reads at most kRecvSlice replies per
// server, then sends a heartbeat if one is due and reads the scheduler: a call of 100,000
// keys is sent and answered over many turns, and the node's liveness never waits for more
// than one slice of data work. While requests may still leave, the turn's poll does not wait;
// otherwise it looks without sleeping for spin_us before it blocks (ps/spin_poll.h), so that
// a reply or a request that follows the last message closely finds the thread awake.
void WorkerIo::Loop() {
  double next_scan = NowSec() + 0.1;
  bool more = false;  // the last turn stopped at the send slice, not at an empty queue
  std::vector<zmq::pollitem_t> items;
  while (!stop_.load(std::memory_order_acquire)) {
    items.clear();
    items.push_back({nullptr, wake_fd_, ZMQ_POLLIN, 0});
    items.push_back({static_cast<void*>(link_.socket()), 0, ZMQ_POLLIN, 0});
    for (auto& s : servers_) items.push_back({static_cast<void*>(s), 0, ZMQ_POLLIN, 0});
    double wait =
        more ? 0.0 : std::max(0.0, std::min(link_.next_heartbeat(), next_scan) - NowSec());
    // A server reads held payloads' room free without answering at once (a sync push waits
    // for its round): look again soon.
    for (const auto& q : held_) {
      if (!q.empty()) wait = std::min(wait, 0.001);
    }
    try {
      SpinPoll(items.data(), items.size(), wait, cfg_.spin_us);
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) Log("poll failed: %s", e.what());
    }
    if (items[0].revents & ZMQ_POLLIN) {
      uint64_t v;
      if (read(wake_fd_, &v, sizeof(v)) < 0) {
      }
    }
    more = SendHeld();
    more = SendQueued() || more;
    link_.HeartbeatIfDue(NowSec());
    // Only sockets that zmq_poll found readable are read: an empty non-blocking receive
    // costs a poll of ZeroMQ's command mailbox (a system call), per socket and per loop.
    while (items[1].revents & ZMQ_POLLIN) {
      Message m;
      if (!link_.Recv(&m)) break;
      HandleScheduler(m);
    }
    for (int s = 0; s < num_servers_; ++s) {
      if (!(items[static_cast<size_t>(2 + s)].revents & ZMQ_POLLIN)) continue;
      for (int budget = 0; budget < kRecvSlice; ++budget) {
        Message m;
        if (!RecvValidMessage(servers_[static_cast<size_t>(s)], false,
                              server_names_[static_cast<size_t>(s)].c_str(), &m, &shm_[static_cast<size_t>(s)])) {
          break;
        }
        HandleReply(s, m);
      }
    }
    more = SendHeld() || more;  // replies mean the servers read their requests
    more = SendQueued() || more;  // replies may have opened the send window
    const double now = NowSec();
    link_.HeartbeatIfDue(now);
    if (now >= next_scan) {
      next_scan = now + 0.1;
      CheckScheduler(now);
      CheckDeadlines();
    }
  }
  // Stopping: whatever is still outstanding fails (the store is being destroyed).
  FailAll(KV_ERR_NETWORK, "the store was closed before the reply arrived");
  if (cfg_.verbose >= 1) {
    for (int s = 0; s < num_servers_; ++s) {
      uint64_t puts = 0, misses = 0;
      shm_[static_cast<size_t>(s)].Counts(&puts, &misses);
      Log("server %d: %" PRIu64 " payloads sent through shared memory, %" PRIu64 " inline for want of room",
          s, puts, misses);
    }
  }
}

// Without the scheduler the job cannot go on: nobody reports dead nodes any more, barriers
// cannot complete, and the servers stop when they notice it too. Everything queued or
// outstanding fails now, and every later request at once (SendOne).
void WorkerIo::CheckScheduler(double now) {
  {
    std::lock_guard<std::mutex> lock(peers_mu_);
    if (scheduler_dead_ || !link_.Silent(now)) return;
    scheduler_dead_ = true;
  }
  const std::string why = StrFormat("the scheduler sent nothing for %.1f s and is considered dead",
                                    link_.Silence(now));
  Log("%s", why.c_str());
  FailAll(KV_ERR_PEER_DEAD, why);
}

// Takes the slice from the queue under one lock, then sends it.
bool WorkerIo::SendQueued() {
  popped_.clear();
  const size_t n = queue_.PopSome(&popped_, kSendSlice, &done_);
  // One deadline for the slice: deadlines still grow with ids (CheckDeadlines).
  const double deadline = n > 0 ? DeadlineAfter(RequestTimeout()) : 0;
  for (auto& p : popped_) SendOne(p.first, p.second, deadline);
  popped_.clear();  // the requests' references (payloads, ops) end here, not at the next turn
  return n == kSendSlice;
}

void WorkerIo::SendOne(OutMsg& m, const SendQueue<OutMsg>::Ticket& ticket, double deadline) {
  const uint64_t id = next_req_++;
  m.h.req_id = id;
  Outstanding o = Outstanding::TakeFrom(m);
  o.ticket = ticket;
  o.deadline = deadline;
  // Liveness is written on this thread only: read without peers_mu_.
  if (scheduler_dead_) {
    Complete(o, KV_ERR_PEER_DEAD,
             o.op ? std::string("the scheduler is dead; the job cannot go on")
                  : StrFormat("%s: the scheduler is dead", MsgTypeName(m.h.type)),
             nullptr);
    return;
  }
  if (m.dest >= 0 && server_dead_[static_cast<size_t>(m.dest)]) {
    Complete(o, KV_ERR_PEER_DEAD, StrFormat("server %d is dead", m.dest), nullptr);
    return;
  }
  outstanding_.Insert(id, std::move(o));  // every queued request has a reply
  if (m.dest >= 0 && (!held_[static_cast<size_t>(m.dest)].empty() || MustHold(m))) {
    held_[static_cast<size_t>(m.dest)].push_back(Held{id, std::move(m)});
    return;
  }
  Transmit(m, id);
}

bool WorkerIo::MustHold(const OutMsg& m) {
  ShmLink* link = shm_[static_cast<size_t>(m.dest)].Find("");
  return link != nullptr && link->MustWait(m.payload.nbytes);
}

bool WorkerIo::SendHeld() {
  return SendHeldSlice(
      held_, &held_start_, kSendSlice,
      [this](const Held& f) { return outstanding_.Find(f.id) == nullptr; },  // timed out, dead server
      [this](const Held& f) { return MustHold(f.m); }, [this](Held& f) { Transmit(f.m, f.id); });
}

// Sends a request that is outstanding under `id`; a send that fails completes it.
bool WorkerIo::Transmit(OutMsg& m, uint64_t id) {
  zmq::socket_t& sock = m.dest < 0 ? link_.socket() : servers_[static_cast<size_t>(m.dest)];
  if (cfg_.verbose >= 2) {
    const Outstanding* o = outstanding_.Find(id);
    const Op* op = o != nullptr ? o->op.get() : nullptr;
    Log("send %s%s%s to %s, %zu bytes", MsgTypeName(m.h.type), op != nullptr ? " of key " : "",
        op != nullptr ? op->key->display.c_str() : "",
        m.dest < 0 ? "the scheduler" : NodeName(Role::kServer, m.dest).c_str(), m.payload.nbytes);
  }
  if (!SendMessage(sock, nullptr, m.h, m.str, m.payload, m.dest < 0 ? nullptr : &shm_[static_cast<size_t>(m.dest)])) {
    Outstanding failed = outstanding_.Take(id);
    Complete(failed, KV_ERR_NETWORK, StrFormat("sending %s failed", MsgTypeName(m.h.type)), nullptr);
    return false;
  }
  return true;
}

void WorkerIo::NodeDead(const Message& m) {
  Log("%s", m.str.c_str());
  const int rank = static_cast<int>(m.h.key);
  if (m.h.arg == static_cast<int32_t>(Role::kServer) && rank >= 0 && rank < num_servers_) {
    {
      std::lock_guard<std::mutex> lock(peers_mu_);
      server_dead_[static_cast<size_t>(rank)] = true;
    }
    FailServer(rank, KV_ERR_PEER_DEAD, m.str);
  } else if (m.h.arg == static_cast<int32_t>(Role::kWorker) && rank >= 0 && rank < num_workers_) {
    std::lock_guard<std::mutex> lock(peers_mu_);
    worker_dead_[static_cast<size_t>(rank)] = true;
  }
}

void WorkerIo::HandleScheduler(Message& m) {
  const auto type = static_cast<MsgType>(m.h.type);
  switch (type) {
    case MsgType::kHeartbeatAck:
      return;
    case MsgType::kNodeDead:
      NodeDead(m);
      return;
    case MsgType::kAbort:
      Log("the scheduler aborted the job: %s", m.str.c_str());
      FailAll(KV_ERR_PEER_DEAD, "the scheduler aborted the job: " + m.str);
      return;
    case MsgType::kBarrierDone:
    case MsgType::kFinishAck:
    case MsgType::kQueryDeadReply: {
      const Outstanding* found = outstanding_.Find(m.h.req_id);
      if (found == nullptr || found->dest != -1) {
        LogDropped("dropped %s for unknown request %" PRIu64, MsgTypeName(m.h.type), m.h.req_id);
        return;
      }
      Outstanding o = outstanding_.Take(m.h.req_id);
      queue_.Done(&o.ticket);
      if (o.waiter) {
        o.waiter->Complete(m.h.status, m.str, type == MsgType::kQueryDeadReply ? m.h.key : 0);
      }
      return;
    }
    default:
      LogDropped("dropped unexpected %s from the scheduler", MsgTypeName(m.h.type));
  }
}

void WorkerIo::HandleReply(int server, Message& m) {
  if (m.h.type != static_cast<uint16_t>(MsgType::kReply)) {
    LogDropped("dropped unexpected %s from server %d", MsgTypeName(m.h.type), server);
    return;
  }
  if (m.h.req_id == 0) return ShmAnswered(server, m);
  const Outstanding* found = outstanding_.Find(m.h.req_id);
  if (found == nullptr || found->dest != server) {
    LogDropped("dropped a reply from server %d for unknown request %" PRIu64, server, m.h.req_id);
    return;
  }
  Outstanding o = outstanding_.Take(m.h.req_id);
  Complete(o, m.h.status, m.str, &m);
}

// Completes one request: a part of an Op (`reply`: the server's reply, for successful
// pulls and pushpulls) or a control request.
void WorkerIo::Complete(Outstanding& o, int status, const std::string& msg, Message* reply) {
  if (SendQueue<OutMsg>::Holds(o.ticket)) done_.push_back(o.ticket);
  if (!o.op) {
    if (o.waiter) o.waiter->Complete(status, msg, 0, o.dest, reply);
    return;
  }
  if (o.op->CompletePart(o.part, o.dest, status, msg, reply)) tracker_->Finish(*o.op);
}

// Request ids grow in send order and every request gets the same timeout, so deadlines
// grow with ids: the scan looks at the oldest outstanding request and stops at the first
// whose deadline has not passed, so the scans cost O(1) per request however many are
// outstanding.
void WorkerIo::CheckDeadlines() {
  const double now = NowSec();
  for (uint64_t id; (id = outstanding_.Oldest()) != 0;) {
    if (!(now > outstanding_.Find(id)->deadline)) return;
    Outstanding o = outstanding_.Take(id);
    const std::string who = o.dest < 0 ? "the scheduler" : NodeName(Role::kServer, o.dest);
    const std::string what = o.op ? std::string() : StrFormat(" for %s", MsgTypeName(static_cast<uint16_t>(o.type)));
    Complete(o, KV_ERR_TIMEOUT,
             StrFormat("worker %d: no reply from %s%s within %.0f s", rank_, who.c_str(), what.c_str(),
                       cfg_.timeout_sec + cfg_.heartbeat_timeout_sec + 2),
             nullptr);
  }
}

void WorkerIo::FailServer(int server, int code, const std::string& why) {
  for (uint64_t id : outstanding_.Ids()) {
    Outstanding* found = outstanding_.Find(id);
    if (found == nullptr || found->dest != server) continue;
    Outstanding o = outstanding_.Take(id);
    Complete(o, code, why, nullptr);
  }
}

void WorkerIo::FailAll(int code, const std::string& why) {
  // Queued but unsent requests first, then the outstanding ones.
  for (OutMsg& m : queue_.TakeAll()) {
    Outstanding o = Outstanding::TakeFrom(m);
    Complete(o, code, why, nullptr);
  }
  for (uint64_t id : outstanding_.Ids()) {
    if (outstanding_.Find(id) == nullptr) continue;
    Outstanding o = outstanding_.Take(id);
    Complete(o, code, why, nullptr);
  }
}

}  // namespace dist
}  // namespace kvstore
