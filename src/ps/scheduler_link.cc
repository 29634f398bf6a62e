// scheduler_link.cc - the rendezvous, heartbeats and scheduler liveness (scheduler_link.h).
#include "ps/scheduler_link.h"

#include <unistd.h>

#include <algorithm>
#include <exception>
#include <random>

#include "ps/clock.h"
#include "ps/log.h"
#include "ps/transport.h"

namespace kvstore {
namespace dist {

namespace {

// A routing id unique to this process and this store, so the scheduler can tell
// registrations apart even when several nodes share a host.
std::string UniqueRoutingId(const Config& cfg) {
  std::random_device rd;
  return StrFormat("%c:%s:%d:%08x", RoleName(cfg.role)[0], cfg.host.c_str(),
                   static_cast<int>(getpid()), rd());
}

// Sends REGISTER: the requested rank, and the address workers reach this node at.
void SendRegister(zmq::socket_t& sched, const Config& cfg, const std::vector<int>& listen_ports) {
  WireHeader h = MakeHeader(MsgType::kRegister, cfg.role, -1);
  h.arg = cfg.requested_rank;
  const std::string addr =
      listen_ports.empty() ? cfg.host : cfg.host + ":" + FormatPorts(listen_ports);
  SendMessage(sched, nullptr, h, addr, OutPayload{});
}

// The node table of a NODE_TABLE message, checked against the configuration.
JoinResult ParseJoin(const Message& m, const Config& cfg) {
  JoinResult j;
  ParseTable(m.str, &j.num_workers, &j.num_servers, &j.servers);
  j.rank = m.h.arg;
  const int group = cfg.role == Role::kWorker ? j.num_workers : j.num_servers;
  KV_CHECK(j.rank >= 0 && j.rank < group && j.num_workers == cfg.num_workers &&
               j.num_servers == cfg.num_servers,
           KV_ERR_PROTOCOL,
           "the scheduler's node table (%d workers, %d servers, rank %d) does not match "
           "DMLC_NUM_WORKER=%d DMLC_NUM_SERVER=%d",
           j.num_workers, j.num_servers, j.rank, cfg.num_workers, cfg.num_servers);
  return j;
}

}  // namespace

JoinResult JoinJob(zmq::socket_t& sched, const Config& cfg, const std::vector<int>& listen_ports) {
  sched.set(zmq::sockopt::routing_id, UniqueRoutingId(cfg));
  const std::string ep = cfg.SchedulerEndpoint();
  try {
    sched.connect(ep);
  } catch (const zmq::error_t& e) {
    KV_FAIL(KV_ERR_NETWORK, "cannot connect to the scheduler at %s: %s", ep.c_str(), e.what());
  }
  SendRegister(sched, cfg, listen_ports);
  if (cfg.verbose >= 1) Log("registering with the scheduler at %s", ep.c_str());
  const double deadline = DeadlineAfter(cfg.timeout_sec);
  // On failure nothing queued for the scheduler is worth waiting for at close.
  struct NoLingerOnError {
    zmq::socket_t& s;
    int exceptions = std::uncaught_exceptions();
    ~NoLingerOnError() {
      if (std::uncaught_exceptions() > exceptions) s.set(zmq::sockopt::linger, 0);
    }
  } guard{sched};
  for (;;) {
    const double left = deadline - NowSec();
    if (left <= 0) {
      KV_FAIL(KV_ERR_TIMEOUT,
              "%s: no node table from the scheduler at %s within %.0f s (is the scheduler "
              "running, are DMLC_PS_ROOT_URI/DMLC_PS_ROOT_PORT right, and does this node have "
              "the job's KVSTORE_JOB_SECRET? the scheduler refuses nodes with another secret or "
              "none; the job needs %d workers and %d servers)",
              RoleName(cfg.role), ep.c_str(), cfg.timeout_sec, cfg.num_workers, cfg.num_servers);
    }
    zmq::pollitem_t item{static_cast<void*>(sched), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, std::chrono::milliseconds(static_cast<long>(std::min(left, 0.5) * 1000) + 1));
    Message m;
    while (RecvValidMessage(sched, false, "the scheduler", &m)) {
      if (m.h.type == static_cast<uint16_t>(MsgType::kAbort)) {
        KV_FAIL(m.h.status != 0 ? m.h.status : KV_ERR_NETWORK, "the scheduler refused this %s: %s",
                RoleName(cfg.role), m.str.c_str());
      }
      if (m.h.type == static_cast<uint16_t>(MsgType::kNodeTable)) return ParseJoin(m, cfg);
    }
  }
}

SchedulerLink::SchedulerLink(zmq::context_t& ctx, const Config& cfg)
    : cfg_(cfg), sock_(ctx, zmq::socket_type::dealer) {
  ConfigureSocket(sock_, Link::kToScheduler);
}

JoinResult SchedulerLink::Join(const std::vector<int>& listen_ports) {
  JoinResult j = JoinJob(sock_, cfg_, listen_ports);
  rank_ = j.rank;
  last_heard_ = NowSec();
  next_heartbeat_ = last_heard_;
  return j;
}

bool SchedulerLink::Recv(Message* m) {
  if (!RecvValidMessage(sock_, false, "the scheduler", m)) return false;
  last_heard_ = NowSec();
  return true;
}

void SchedulerLink::HeartbeatIfDue(double now) {
  if (now < next_heartbeat_) return;
  SendMessage(sock_, nullptr, MakeHeader(MsgType::kHeartbeat, cfg_.role, rank_), "", OutPayload{});
  next_heartbeat_ = now + cfg_.heartbeat_interval_sec;
}

}  // namespace dist
}  // namespace kvstore
